package openai

import (
	"unicode/utf8"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// CompletionStreamOptions are the options of a completions stream.
type CompletionStreamOptions struct {
	// IncludeUsage and ContinuousUsage: as in ChatStreamOptions.
	IncludeUsage    bool
	ContinuousUsage bool
	// Echo puts EchoPrompt (with the prompt's logprobs, when the engine
	// gives them in Start) in a first chunk of every choice.
	Echo bool
	// EchoPrompt is the prompt text; for a token-id prompt, the caller
	// detokenizes it (engine.Engine.Detokenize).
	EchoPrompt string
	// TokenIDs (vLLM's return_token_ids) adds each chunk's generated ids
	// to its choice ("token_ids") and the prompt's ids to the first chunk
	// of every choice ("prompt_token_ids").
	TokenIDs bool
	Framing  codegen.Framing
	// ChoiceOffset is added to every choice "index" written: the stream of
	// prompt k of a batch, whose choices are k*n … k*n+n-1 of the response.
	ChoiceOffset int
}

// CompletionFormatter writes a completions stream (engine.Formatter):
//
//	data: {"id":ID,"object":"text_completion","created":T,"model":M,
//	       "choices":[{"index":i,"text":…,"logprobs":…,"finish_reason":…}]}
//
// then an optional usage chunk and data: [DONE]. Like ChatFormatter it is
// used by one goroutine at a time, may be pooled with Reset, and does not
// allocate after Reset.
type CompletionFormatter struct {
	head []byte
	opts CompletionStreamOptions
	// offset is each choice's text_offset so far, in characters (code
	// points), as OpenAI and vLLM count them.
	offset [MaxChoices]int
	// spare stands in for offset[i] of a choice out of range (see offsetOf).
	spare int
}

var _ engine.Formatter = (*CompletionFormatter)(nil)

// NewCompletionFormatter returns a formatter for one stream; id is the full
// id ("cmpl-…").
func NewCompletionFormatter(id, model string, created int64, opts CompletionStreamOptions) *CompletionFormatter {
	f := &CompletionFormatter{}
	f.Reset(id, model, created, opts)
	return f
}

// Reset prepares f for a new stream, keeping its buffer.
func (f *CompletionFormatter) Reset(id, model string, created int64, opts CompletionStreamOptions) {
	if !opts.IncludeUsage {
		opts.ContinuousUsage = false
	}
	f.opts = opts
	f.offset = [MaxChoices]int{}
	f.head = appendChunkHead(f.head[:0], "text_completion", id, model, created)
}

// offsetOf returns where choice's text_offset is kept. A choice out of range
// (which the engine never sends) gets f.spare, zeroed on each call: its
// offsets count from 0 and are not kept, and no call allocates.
func (f *CompletionFormatter) offsetOf(choice int) *int {
	if choice < 0 || choice >= MaxChoices {
		f.spare = 0
		return &f.spare
	}
	return &f.offset[choice]
}

// AppendStart writes, with Echo, one chunk per choice holding the prompt
// text and, when s carries them, the prompt's logprobs (the first token's
// logprob is null, as OpenAI renders it). With TokenIDs each choice's
// first chunk (the echo, else an empty one) carries the prompt's ids.
// Otherwise it writes nothing.
func (f *CompletionFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	if !f.opts.Echo && !f.opts.TokenIDs || s == nil {
		return dst
	}
	n := max(s.N, 1)
	for i := range n {
		var mark int
		dst, mark = codegen.BeginFrame(dst, f.opts.Framing)
		dst = append(dst, f.head...)
		dst = append(dst, `{"index":`...)
		dst = codegen.AppendInt(dst, int64(f.opts.ChoiceOffset+i))
		dst = append(dst, `,"text":`...)
		if !f.opts.Echo {
			dst = append(dst, `"","logprobs":null`...)
		} else {
			dst = codegen.AppendJSONStringS(dst, f.opts.EchoPrompt)
			dst = append(dst, `,"logprobs":`...)
			if len(s.PromptLogprobs) > 0 {
				dst = appendCompletionLogprobs(dst, s.PromptLogprobs, nil, f.offsetOf(i))
			} else {
				dst = append(dst, "null"...)
			}
			*f.offsetOf(i) = utf8.RuneCountInString(f.opts.EchoPrompt)
		}
		dst = append(dst, `,"finish_reason":null`...)
		if f.opts.TokenIDs {
			dst = append(dst, `,"prompt_token_ids":`...)
			dst = codegen.AppendIntArray(dst, s.PromptTokenIDs)
			dst = append(dst, `,"token_ids":[]`...)
		}
		dst = append(dst, "}]}\n\n"...)
		dst = codegen.EndFrame(dst, f.opts.Framing, mark)
	}
	return dst
}

// AppendDelta appends one chunk with d's text. Reasoning and tool-call
// deltas have no completions form and write nothing.
func (f *CompletionFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if d.Kind != engine.DeltaText {
		return dst
	}
	dst, mark := codegen.BeginFrame(dst, f.opts.Framing)
	dst = append(dst, f.head...)
	dst = append(dst, `{"index":`...)
	dst = codegen.AppendInt(dst, int64(f.opts.ChoiceOffset+d.Choice))
	dst = append(dst, `,"text":`...)
	dst = codegen.AppendJSONString(dst, d.Text)
	dst = append(dst, `,"logprobs":`...)
	if len(d.Logprobs) > 0 {
		dst = appendCompletionLogprobs(dst, nil, d.Logprobs, f.offsetOf(d.Choice))
	} else {
		*f.offsetOf(d.Choice) += utf8.RuneCount(d.Text)
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":null`...)
	dst = f.appendTokenIDs(dst, d.TokenIDs)
	dst = append(dst, "}]"...)
	dst = f.appendContinuousUsage(dst, d.Usage)
	dst = append(dst, "}\n\n"...)
	return codegen.EndFrame(dst, f.opts.Framing, mark)
}

// AppendChoiceEnd appends the chunk with the choice's finish_reason (and
// vLLM's stop_reason).
func (f *CompletionFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	dst, mark := codegen.BeginFrame(dst, f.opts.Framing)
	dst = append(dst, f.head...)
	dst = append(dst, `{"index":`...)
	dst = codegen.AppendInt(dst, int64(f.opts.ChoiceOffset+e.Choice))
	dst = append(dst, `,"text":"","logprobs":null,"finish_reason":`...)
	dst = appendFinishReason(dst, e.FinishReason)
	dst = append(dst, `,"stop_reason":`...)
	dst = appendStopReason(dst, e.StopString, e.StopTokenID)
	dst = f.appendTokenIDs(dst, e.TokenIDs)
	dst = append(dst, "}]"...)
	dst = f.appendContinuousUsage(dst, e.Usage)
	dst = append(dst, "}\n\n"...)
	return codegen.EndFrame(dst, f.opts.Framing, mark)
}

// AppendEnd appends the usage chunk (with IncludeUsage), data: [DONE] and
// the end of the chunked body.
func (f *CompletionFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	return appendChunkStreamEnd(dst, f.head, f.opts.IncludeUsage, f.opts.Framing, res)
}

// AppendError appends data: {"error":{...}}, data: [DONE] and the end of
// the body.
func (f *CompletionFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	e := FromEngineError(err, "prompt")
	return e.AppendStreamError(dst, f.opts.Framing)
}

// appendTokenIDs appends a chunk's "token_ids" when asked.
func (f *CompletionFormatter) appendTokenIDs(dst []byte, ids []int) []byte {
	if !f.opts.TokenIDs {
		return dst
	}
	dst = append(dst, `,"token_ids":`...)
	return codegen.AppendIntArray(dst, ids)
}

func (f *CompletionFormatter) appendContinuousUsage(dst []byte, u *engine.Usage) []byte {
	return appendContinuousUsage(dst, f.opts.ContinuousUsage, u)
}

// appendCompletionLogprobs appends the legacy logprobs object
//
//	{"tokens":[…],"token_logprobs":[…],"top_logprobs":[{tok:lp,…}],"text_offset":[…]}
//
// for the prompt tokens (the first of which gets null: nothing precedes it)
// followed by the generated tokens. *offset is the text offset of the first
// token and is advanced past the last.
func appendCompletionLogprobs(dst []byte, prompt, gen []engine.TokenLogprob, offset *int) []byte {
	n := len(prompt) + len(gen)
	at := func(i int) *engine.TokenLogprob {
		if i < len(prompt) {
			return &prompt[i]
		}
		return &gen[i-len(prompt)]
	}
	dst = append(dst, `{"tokens":[`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codegen.AppendJSONStringS(dst, at(i).Token)
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		if i == 0 && len(prompt) > 0 {
			dst = append(dst, "null"...)
			continue
		}
		dst = codegen.AppendFloat(dst, at(i).Logprob)
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		if i == 0 && len(prompt) > 0 {
			dst = append(dst, "null"...)
			continue
		}
		lp := at(i)
		dst = append(dst, '{')
		if len(lp.Top) == 0 {
			// logprobs=0: the sampled token alone.
			dst = codegen.AppendJSONStringS(dst, lp.Token)
			dst = append(dst, ':')
			dst = codegen.AppendFloat(dst, lp.Logprob)
		}
		for j := range lp.Top {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = codegen.AppendJSONStringS(dst, lp.Top[j].Token)
			dst = append(dst, ':')
			dst = codegen.AppendFloat(dst, lp.Top[j].Logprob)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"text_offset":[`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codegen.AppendInt(dst, int64(*offset))
		*offset += utf8.RuneCountInString(at(i).Token)
	}
	return append(dst, "]}"...)
}

// CompletionMeta holds what a completions body says besides the result.
type CompletionMeta struct {
	ID      string // "cmpl-…"
	Model   string
	Created int64
	// Logprobs is true when the request set logprobs: choices then carry
	// the logprobs object rather than null.
	Logprobs bool
	// Echo prepends EchoPrompt to each choice's text (and the choice's
	// PromptLogprobs to its logprobs).
	Echo       bool
	EchoPrompt string
	// EchoPrompts, when set, is the echo of each choice by index (a batch
	// of prompts, each echoing its own); it overrides EchoPrompt.
	EchoPrompts []string
	// TokenIDs (vLLM's return_token_ids) adds each choice's prompt ids
	// ("prompt_token_ids") and generated ids ("token_ids"). The prompt's
	// are PromptTokenIDs[choice index] when set (a batch), else the
	// Result's.
	TokenIDs       bool
	PromptTokenIDs [][]int32
}

// AppendCompletion appends the non-streaming body of a completion:
//
//	{"id","object":"text_completion","created","model","choices":[{"index",
//	 "text","logprobs","finish_reason","stop_reason"}],"usage":{...}}
func AppendCompletion(dst []byte, m *CompletionMeta, res *engine.Result) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, m.ID)
	dst = append(dst, `,"object":"text_completion","created":`...)
	dst = codegen.AppendInt(dst, m.Created)
	dst = append(dst, `,"model":`...)
	dst = codegen.AppendJSONStringS(dst, m.Model)
	dst = append(dst, `,"choices":[`...)
	for i := range res.Choices {
		c := &res.Choices[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		echo := m.EchoPrompt
		if c.Index >= 0 && c.Index < len(m.EchoPrompts) {
			echo = m.EchoPrompts[c.Index]
		}
		dst = append(dst, `{"index":`...)
		dst = codegen.AppendInt(dst, int64(c.Index))
		dst = append(dst, `,"text":`...)
		dst = append(dst, '"')
		if m.Echo {
			dst = codegen.AppendJSONEscapedS(dst, echo)
		}
		dst = codegen.AppendJSONEscapedS(dst, c.Text)
		dst = append(dst, '"')
		dst = append(dst, `,"logprobs":`...)
		var prompt []engine.TokenLogprob
		if m.Echo {
			prompt = c.PromptLogprobs
		}
		if m.Logprobs || len(c.Logprobs) > 0 || len(prompt) > 0 {
			off := 0
			if m.Echo && len(prompt) == 0 {
				off = utf8.RuneCountInString(echo)
			}
			dst = appendCompletionLogprobs(dst, prompt, c.Logprobs, &off)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"finish_reason":`...)
		dst = appendFinishReason(dst, c.FinishReason)
		dst = append(dst, `,"stop_reason":`...)
		dst = appendStopReason(dst, c.StopString, c.StopTokenID)
		if m.TokenIDs {
			prompt := res.PromptTokens
			if c.Index >= 0 && c.Index < len(m.PromptTokenIDs) {
				prompt = m.PromptTokenIDs[c.Index]
			}
			dst = append(dst, `,"prompt_token_ids":`...)
			dst = codegen.AppendIntArray(dst, prompt)
			dst = append(dst, `,"token_ids":`...)
			dst = codegen.AppendIntArray(dst, c.TokenIDs)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"usage":`...)
	dst = appendUsage(dst, &res.Usage, true)
	return append(dst, '}')
}
