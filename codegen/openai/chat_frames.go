package openai

import (
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// ChatStreamOptions are the options of a chat completions stream.
type ChatStreamOptions struct {
	// IncludeUsage adds a last chunk with "choices":[] and the usage before
	// data: [DONE] (stream_options.include_usage).
	IncludeUsage bool
	// ContinuousUsage adds the running usage to every chunk (vLLM's
	// stream_options.continuous_usage_stats); honoured only with IncludeUsage.
	ContinuousUsage bool
	// TokenIDs (vLLM's return_token_ids) adds each chunk's generated ids
	// to its choice ("token_ids") and the prompt's ids to the first chunk
	// of every choice ("prompt_token_ids", beside "choices").
	TokenIDs bool
	// NoReasoning (vLLM's include_reasoning false) writes no reasoning
	// delta.
	NoReasoning bool
	// NoTokenData writes no generated token's ids or logprobs (every
	// chunk's "logprobs" null, no "token_ids"; the prompt's ids stay): what
	// vLLM does with include_reasoning false when the server parses its
	// model's output (engine.ParsesOutput), so that the hidden reasoning's
	// tokens do not show through them.
	NoTokenData bool
	// Framing wraps each SSE event (one HTTP chunk per event by default).
	Framing codegen.Framing
}

// ChatFormatter writes a chat completions stream (engine.Formatter). Each
// chunk is one SSE event "data: {...}\n\n" in its own frame:
//
//	{"id":ID,"object":"chat.completion.chunk","created":T,"model":M,
//	 "choices":[{"index":i,"delta":{...},"logprobs":...,"finish_reason":...}]}
//
// The constant head up to "choices":[ is rendered once by Reset. A
// ChatFormatter is used by one goroutine at a time and may be pooled: Reset
// it for the next stream. It never allocates after Reset.
type ChatFormatter struct {
	// head is `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[`.
	head []byte
	opts ChatStreamOptions
	// roleSent marks the choices whose "role":"assistant" went out, one
	// bit each: a held stream keeps its formatter, so 16 bytes rather than
	// 128 of bools.
	roleSent [(MaxChoices + 63) / 64]uint64
}

var _ engine.Formatter = (*ChatFormatter)(nil)

// NewChatFormatter returns a formatter for one stream. id is the full
// completion id ("chatcmpl-…"), the same in every chunk (openai-go's
// accumulator rejects a stream whose ids differ).
func NewChatFormatter(id, model string, created int64, opts ChatStreamOptions) *ChatFormatter {
	f := &ChatFormatter{}
	f.Reset(id, model, created, opts)
	return f
}

// Reset prepares f for a new stream, keeping its buffer.
func (f *ChatFormatter) Reset(id, model string, created int64, opts ChatStreamOptions) {
	if !opts.IncludeUsage {
		opts.ContinuousUsage = false
	}
	f.opts = opts
	f.roleSent = [(MaxChoices + 63) / 64]uint64{}
	f.head = appendChunkHead(f.head[:0], "chat.completion.chunk", id, model, created)
}

// appendChunkHead renders the constant start of every chunk of a chat or
// completions stream, once per stream:
// data: {"id":ID,"object":OBJECT,"created":T,"model":M,"choices":[
func appendChunkHead(dst []byte, object, id, model string, created int64) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = codegen.AppendJSONStringS(dst, id)
	dst = append(dst, `,"object":"`...)
	dst = append(dst, object...)
	dst = append(dst, `","created":`...)
	dst = codegen.AppendInt(dst, created)
	dst = append(dst, `,"model":`...)
	dst = codegen.AppendJSONStringS(dst, model)
	return append(dst, `,"choices":[`...)
}

// AppendStart writes nothing: a chat stream has no opening event; each
// choice's first chunk carries the role. With TokenIDs it writes what vLLM
// writes then: a first chunk per choice with the role, empty content and
// the prompt's ids beside "choices".
func (f *ChatFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	if !f.opts.TokenIDs || s == nil {
		return dst
	}
	for i := range max(s.N, 1) {
		f.needRole(i, true)
		var mark int
		dst, mark = codegen.BeginFrame(dst, f.opts.Framing)
		dst = append(dst, f.head...)
		dst = append(dst, `{"index":`...)
		dst = codegen.AppendInt(dst, int64(i))
		dst = append(dst, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}],"prompt_token_ids":`...)
		dst = codegen.AppendIntArray(dst, s.PromptTokenIDs)
		dst = append(dst, "}\n\n"...)
		dst = codegen.EndFrame(dst, f.opts.Framing, mark)
	}
	return dst
}

// needRole reports whether choice i's next chunk must carry the role, and
// marks it sent.
func (f *ChatFormatter) needRole(i int, first bool) bool {
	if i < 0 || i >= MaxChoices {
		return first
	}
	w, bit := &f.roleSent[i/64], uint64(1)<<(i%64)
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}

// AppendDelta appends one chunk with d's text, reasoning or tool-call piece.
func (f *ChatFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if d.Kind == engine.DeltaReasoning && f.opts.NoReasoning {
		return dst
	}
	dst, mark := codegen.BeginFrame(dst, f.opts.Framing)
	dst = append(dst, f.head...)
	dst = append(dst, `{"index":`...)
	dst = codegen.AppendInt(dst, int64(d.Choice))
	dst = append(dst, `,"delta":{`...)
	if f.needRole(d.Choice, d.First) {
		dst = append(dst, `"role":"assistant",`...)
	}
	switch d.Kind {
	case engine.DeltaReasoning:
		dst = append(dst, `"reasoning_content":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
	case engine.DeltaToolCallStart:
		dst = append(dst, `"tool_calls":[{"index":`...)
		dst = codegen.AppendInt(dst, int64(d.ToolCallIndex))
		dst = append(dst, `,"id":`...)
		dst = codegen.AppendJSONStringS(dst, d.ToolCallID)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = codegen.AppendJSONStringS(dst, d.ToolName)
		dst = append(dst, `,"arguments":""}}]`...)
	case engine.DeltaToolCallArgs:
		dst = append(dst, `"tool_calls":[{"index":`...)
		dst = codegen.AppendInt(dst, int64(d.ToolCallIndex))
		dst = append(dst, `,"function":{"arguments":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
		dst = append(dst, `}}]`...)
	default:
		dst = append(dst, `"content":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
	}
	dst = append(dst, `},"logprobs":`...)
	if len(d.Logprobs) > 0 && !f.opts.NoTokenData {
		dst = appendChatLogprobs(dst, d.Logprobs)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":null`...)
	dst = f.appendTokenIDs(dst, d.TokenIDs)
	dst = f.appendContinuousUsage(dst, d.Usage)
	dst = append(dst, "}\n\n"...)
	return codegen.EndFrame(dst, f.opts.Framing, mark)
}

// AppendChoiceEnd appends the chunk that closes choice e.Choice: an empty
// delta (or the role, if the choice produced nothing) and its finish_reason,
// plus vLLM's stop_reason (the stop string or stop token id, else null).
func (f *ChatFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	dst, mark := codegen.BeginFrame(dst, f.opts.Framing)
	dst = append(dst, f.head...)
	dst = append(dst, `{"index":`...)
	dst = codegen.AppendInt(dst, int64(e.Choice))
	if f.needRole(e.Choice, false) {
		dst = append(dst, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":`...)
	} else {
		dst = append(dst, `,"delta":{},"logprobs":null,"finish_reason":`...)
	}
	dst = appendFinishReason(dst, e.FinishReason)
	dst = append(dst, `,"stop_reason":`...)
	dst = appendStopReason(dst, e.StopString, e.StopTokenID)
	dst = f.appendTokenIDs(dst, e.TokenIDs)
	dst = f.appendContinuousUsage(dst, e.Usage)
	dst = append(dst, "}\n\n"...)
	return codegen.EndFrame(dst, f.opts.Framing, mark)
}

// AppendEnd appends the usage chunk (with IncludeUsage), data: [DONE] and
// the end of the chunked body.
func (f *ChatFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	return appendChunkStreamEnd(dst, f.head, f.opts.IncludeUsage, f.opts.Framing, res)
}

// AppendError appends data: {"error":{...}}, data: [DONE] and the end of
// the body: the stream ends cleanly after an error past the 200.
func (f *ChatFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	e := FromEngineError(err, "messages")
	return e.AppendStreamError(dst, f.opts.Framing)
}

// appendTokenIDs ends a chunk's choice, with its "token_ids" when asked.
func (f *ChatFormatter) appendTokenIDs(dst []byte, ids []int) []byte {
	if f.opts.TokenIDs && !f.opts.NoTokenData {
		dst = append(dst, `,"token_ids":`...)
		dst = codegen.AppendIntArray(dst, ids)
	}
	return append(dst, "}]"...)
}

func (f *ChatFormatter) appendContinuousUsage(dst []byte, u *engine.Usage) []byte {
	return appendContinuousUsage(dst, f.opts.ContinuousUsage, u)
}

// appendChunkStreamEnd ends a chat or completions stream: the usage chunk
// (head + "],"usage":{...}}") when asked for, data: [DONE], and the end of
// the chunked body.
func appendChunkStreamEnd(dst, head []byte, includeUsage bool, framing codegen.Framing, res *engine.Result) []byte {
	if includeUsage && res != nil {
		var mark int
		dst, mark = codegen.BeginFrame(dst, framing)
		dst = append(dst, head...)
		dst = append(dst, `],"usage":`...)
		dst = appendUsage(dst, &res.Usage, true)
		dst = append(dst, "}\n\n"...)
		dst = codegen.EndFrame(dst, framing, mark)
	}
	return appendDone(dst, framing)
}

// appendContinuousUsage appends the running usage to a chunk (vLLM's
// continuous_usage_stats), when on.
func appendContinuousUsage(dst []byte, on bool, u *engine.Usage) []byte {
	if !on || u == nil {
		return dst
	}
	dst = append(dst, `,"usage":`...)
	return appendUsage(dst, u, false)
}

// appendFinishReason appends the reason as a JSON string; empty means stop.
func appendFinishReason(dst []byte, r engine.FinishReason) []byte {
	if r == "" {
		r = engine.FinishStop
	}
	return codegen.AppendJSONStringS(dst, string(r))
}

// appendStopReason appends vLLM's stop_reason: the stop string, else the
// stop token id, else null.
func appendStopReason(dst []byte, s string, id int) []byte {
	switch {
	case s != "":
		return codegen.AppendJSONStringS(dst, s)
	case id >= 0:
		return codegen.AppendInt(dst, int64(id))
	}
	return append(dst, "null"...)
}

// appendUsage appends an OpenAI usage object; details adds
// prompt_tokens_details and completion_tokens_details.
func appendUsage(dst []byte, u *engine.Usage, details bool) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `,"completion_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CompletionTokens))
	dst = append(dst, `,"total_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.TotalTokens()))
	if details {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = codegen.AppendInt(dst, int64(u.CachedTokens))
		dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
		dst = codegen.AppendInt(dst, int64(u.ReasoningTokens))
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendChatLogprobs appends {"content":[{"token","logprob","bytes",
// "top_logprobs":[...]}...]}.
func appendChatLogprobs(dst []byte, lps []engine.TokenLogprob) []byte {
	dst = append(dst, `{"content":[`...)
	for i := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendLogprobEntry(dst, &lps[i])
	}
	return append(dst, "]}"...)
}

// appendLogprobEntry appends one token's {"token","logprob","bytes",
// "top_logprobs":[...]} (chat's and the Responses API's shape).
func appendLogprobEntry(dst []byte, lp *engine.TokenLogprob) []byte {
	dst = appendTokenLogprob(dst, lp.Token, lp.Logprob)
	dst = append(dst, `,"top_logprobs":[`...)
	for j := range lp.Top {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = appendTokenLogprob(dst, lp.Top[j].Token, lp.Top[j].Logprob)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendTokenLogprob appends `{"token":…,"logprob":…,"bytes":[…]` (open).
func appendTokenLogprob(dst []byte, tok string, lp float32) []byte {
	dst = append(dst, `{"token":`...)
	dst = codegen.AppendJSONStringS(dst, tok)
	dst = append(dst, `,"logprob":`...)
	dst = codegen.AppendFloat(dst, lp)
	dst = append(dst, `,"bytes":[`...)
	for i := 0; i < len(tok); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codegen.AppendInt(dst, int64(tok[i]))
	}
	return append(dst, ']')
}
