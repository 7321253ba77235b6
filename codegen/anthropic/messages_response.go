package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// ThinkingSignature is the signature Vajra puts on every thinking block.
// Anthropic signs thinking so it can verify blocks sent back; Vajra keeps no
// secret and accepts any signature, but clients (and Accumulate) expect a
// non-empty one, so this constant stands in.
const ThinkingSignature = "dmFqcmEtdW5zaWduZWQ="

// AppendMessage appends the non-streamed body of POST /v1/messages for
// res's first choice (n is always 1 in this dialect):
//
//	{"id","type":"message","role":"assistant","model","content":[thinking?,
//	text?, tool_use*],"stop_reason","stop_sequence","usage":{…}}
//
// id is the message id ("msg_…"); model echoes the request. content is never
// empty: a choice with no output gets one empty text block, since clients
// read content[0].
func AppendMessage(dst []byte, id, model string, res *engine.Result) []byte {
	var c *engine.Choice
	if len(res.Choices) > 0 {
		c = &res.Choices[0]
	} else {
		c = &engine.Choice{FinishReason: engine.FinishStop}
	}
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, id)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = codegen.AppendJSONStringS(dst, model)
	dst = append(dst, `,"content":[`...)
	n := 0
	if c.Reasoning != "" {
		dst = append(dst, `{"type":"thinking","thinking":`...)
		dst = codegen.AppendJSONStringS(dst, c.Reasoning)
		dst = append(dst, `,"signature":"`+ThinkingSignature+`"}`...)
		n++
	}
	if c.Text != "" || (n == 0 && len(c.ToolCalls) == 0) {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"text","text":`...)
		dst = codegen.AppendJSONStringS(dst, c.Text)
		dst = append(dst, '}')
		n++
	}
	for i := range c.ToolCalls {
		tc := &c.ToolCalls[i]
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"tool_use","id":`...)
		dst = appendToolUseID(dst, tc.ID, id, i)
		dst = append(dst, `,"name":`...)
		dst = codegen.AppendJSONStringS(dst, tc.Name)
		dst = append(dst, `,"input":`...)
		dst = appendInput(dst, tc.Arguments)
		dst = append(dst, '}')
		n++
	}
	dst = append(dst, `],"stop_reason":"`...)
	dst = append(dst, stopReason(c.FinishReason, c.StopString)...)
	dst = append(dst, `","stop_sequence":`...)
	dst = appendStopSequence(dst, c.FinishReason, c.StopString)
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, &res.Usage)
	return append(dst, '}')
}

// stopReason maps an engine finish reason onto Anthropic's stop_reason.
// An aborted choice has no Anthropic word; end_turn is the least surprising.
func stopReason(fr engine.FinishReason, stopString string) string {
	switch fr {
	case engine.FinishLength:
		return "max_tokens"
	case engine.FinishToolCalls:
		return "tool_use"
	case engine.FinishStop:
		if stopString != "" {
			return "stop_sequence"
		}
	}
	return "end_turn"
}

// appendStopSequence appends the matched stop sequence, or null.
func appendStopSequence(dst []byte, fr engine.FinishReason, stopString string) []byte {
	if fr != engine.FinishStop || stopString == "" {
		return append(dst, "null"...)
	}
	return codegen.AppendJSONStringS(dst, stopString)
}

// appendUsage appends Anthropic's usage object. Anthropic counts input as
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens, so
// tokens served from the prefix cache are moved out of input_tokens; Vajra
// never writes a cache entry on request, so creation is always 0.
func appendUsage(dst []byte, u *engine.Usage) []byte {
	return appendUsageCounts(dst, u.PromptTokens, u.CachedTokens, u.CompletionTokens)
}

func appendUsageCounts(dst []byte, prompt, cached, output int) []byte {
	if cached > prompt {
		cached = prompt
	}
	dst = append(dst, `{"input_tokens":`...)
	dst = codegen.AppendInt(dst, int64(prompt-cached))
	dst = append(dst, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	dst = codegen.AppendInt(dst, int64(cached))
	dst = append(dst, `,"output_tokens":`...)
	dst = codegen.AppendInt(dst, int64(output))
	return append(dst, '}')
}

// appendToolUseID appends a tool_use id as a JSON string. Anthropic ids look
// like "toolu_…"; an engine id in OpenAI's "call_…" form is re-prefixed, and
// a missing one is derived from the message id and the call's position so it
// is stable between the stream and the stored message.
func appendToolUseID(dst []byte, id, msgID string, i int) []byte {
	const prefix = "toolu_"
	if strings.HasPrefix(id, prefix) {
		return codegen.AppendJSONStringS(dst, id)
	}
	dst = append(dst, `"`+prefix...)
	if id != "" {
		dst = codegen.AppendJSONEscapedS(dst, strings.TrimPrefix(id, "call_"))
	} else {
		dst = codegen.AppendJSONEscapedS(dst, strings.TrimPrefix(msgID, "msg_"))
		dst = append(dst, '_')
		dst = codegen.AppendInt(dst, int64(i))
	}
	return append(dst, '"')
}

// appendInput appends a tool call's arguments as the tool_use input object.
// Arguments the engine cut off (max_tokens mid-call) are not JSON; they
// become {} as the SDK's Accumulate does, so the body stays parseable.
func appendInput(dst []byte, args string) []byte {
	if args == "" || !json.Valid([]byte(args)) {
		return append(dst, "{}"...)
	}
	return append(dst, args...)
}
