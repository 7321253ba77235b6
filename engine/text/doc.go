// Package text turns the bytes a model generates into what the API
// dialects stream: content, reasoning and tool calls. Every engine that
// produces tokens shares it (llama.cpp now; token-in/token-out cores such
// as vLLM's or SGLang's later), so it knows no engine's types.
//
// It behaves like vLLM's OpenAI-compatible server and uses its names:
//
//   - UTF8Stream assembles token byte pieces into valid UTF-8, holding a
//     character split across tokens and replacing bytes that can never be
//     valid with U+FFFD (vLLM's incremental detokenizer).
//   - Stop strings are matched on the detokenized text, before any parsing,
//     and never appear in the output, not even in part: a tail that may be
//     the start of a stop string is held back until it is decided
//     (include_stop_str_in_output false).
//   - Reasoning parsers (--reasoning-parser deepseek_r1, qwen3) split the
//     text into reasoning and content at the think tags, which appear in
//     neither.
//   - Tool-call parsers (--tool-call-parser hermes, llama3_json,
//     llama4_json, mistral) find calls in the content.
//
// Parser chains them in vLLM's order for one choice: bytes, UTF-8, stop
// strings, reasoning, tool calls, events. Every stage keeps only the bytes
// it has not decided on, so the output does not depend on how the text is
// split into tokens: the tests feed each script at every split.
//
// An engine drives one Parser per choice, on its own goroutine:
//
//	p, err := text.NewParser(text.Options{Stop: stops, Reasoning: "qwen3", Tools: "hermes"})
//	...
//	for each generated token {
//		evs, stopped := p.Feed(evs[:0], tokenBytes)
//		for _, ev := range evs { /* build an engine.Delta from ev, format it */ }
//		if stopped { break } // finish_reason stop, StopString p.StopString()
//	}
//	evs = p.Finish(evs[:0]) // always, whatever ended the choice
//	choice.Text, choice.Reasoning, choice.ToolCalls = p.Content(), p.Reasoning(), p.ToolCalls()
//	if p.ToolCalled() { /* finish_reason tool_calls */ }
//
// Tool calls are emitted whole by default: a DeltaToolCallStart event and
// one DeltaToolCallArgs event with the arguments' complete JSON text when
// the call's JSON closes, so that a malformed call can come out as content
// instead. With Options.Stream (a streamed request) they stream as vLLM
// streams them: the start as soon as the name is known and the arguments
// object has begun, then each new piece of the arguments as it is
// generated; the pieces concatenate to the call's Arguments. Forced does
// the same for tool_choice required and named.
package text
