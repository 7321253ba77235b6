package openai

import (
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// ChatCompletionMeta holds what a chat completion body says besides the
// engine's result.
type ChatCompletionMeta struct {
	ID      string // "chatcmpl-…"
	Model   string
	Created int64 // unix seconds
	// SystemFingerprint is rendered when not empty.
	SystemFingerprint string
	// Logprobs is true when the request asked for logprobs: choices then
	// carry {"content":[...]} (possibly empty) rather than null.
	Logprobs bool
	// TokenIDs (vLLM's return_token_ids) adds each choice's generated ids
	// ("token_ids") and the prompt's ("prompt_token_ids", beside
	// "choices").
	TokenIDs bool
	// NoReasoning (vLLM's include_reasoning false) leaves out the
	// reasoning_content.
	NoReasoning bool
	// NoTokenData leaves out the generated tokens' ids and logprobs
	// (ChatStreamOptions.NoTokenData): "logprobs" is null, "token_ids"
	// absent; "prompt_token_ids" stays.
	NoTokenData bool
}

// AppendChatCompletion appends the non-streaming body of a chat completion:
//
//	{"id","object":"chat.completion","created","model","choices":[{"index",
//	 "message":{"role":"assistant","content","reasoning_content"?,"tool_calls"?},
//	 "logprobs","finish_reason","stop_reason"}],"usage":{...}}
//
// content is null when the choice has no text (a tool-call-only answer);
// finish_reason is "tool_calls" when the choice made calls and stopped.
// It appends to dst (no reflection, no allocation beyond growing dst).
func AppendChatCompletion(dst []byte, m *ChatCompletionMeta, res *engine.Result) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, m.ID)
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = codegen.AppendInt(dst, m.Created)
	dst = append(dst, `,"model":`...)
	dst = codegen.AppendJSONStringS(dst, m.Model)
	if m.SystemFingerprint != "" {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = codegen.AppendJSONStringS(dst, m.SystemFingerprint)
	}
	dst = append(dst, `,"choices":[`...)
	for i := range res.Choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendChatChoice(dst, &res.Choices[i], m)
	}
	dst = append(dst, ']')
	if m.TokenIDs {
		dst = append(dst, `,"prompt_token_ids":`...)
		dst = codegen.AppendIntArray(dst, res.PromptTokens)
	}
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, &res.Usage, true)
	return append(dst, '}')
}

func appendChatChoice(dst []byte, c *engine.Choice, m *ChatCompletionMeta) []byte {
	dst = append(dst, `{"index":`...)
	dst = codegen.AppendInt(dst, int64(c.Index))
	dst = append(dst, `,"message":{"role":"assistant","content":`...)
	if c.Text == "" && len(c.ToolCalls) > 0 {
		dst = append(dst, "null"...)
	} else {
		dst = codegen.AppendJSONStringS(dst, c.Text)
	}
	if c.Reasoning != "" && !m.NoReasoning {
		dst = append(dst, `,"reasoning_content":`...)
		dst = codegen.AppendJSONStringS(dst, c.Reasoning)
	}
	if len(c.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for j := range c.ToolCalls {
			if j > 0 {
				dst = append(dst, ',')
			}
			tc := &c.ToolCalls[j]
			dst = append(dst, `{"id":`...)
			dst = codegen.AppendJSONStringS(dst, tc.ID)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = codegen.AppendJSONStringS(dst, tc.Name)
			dst = append(dst, `,"arguments":`...)
			dst = codegen.AppendJSONStringS(dst, tc.Arguments)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":`...)
	if (m.Logprobs || len(c.Logprobs) > 0) && !m.NoTokenData {
		dst = appendChatLogprobs(dst, c.Logprobs)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	fr := c.FinishReason
	if len(c.ToolCalls) > 0 && (fr == "" || fr == engine.FinishStop) {
		fr = engine.FinishToolCalls
	}
	dst = appendFinishReason(dst, fr)
	dst = append(dst, `,"stop_reason":`...)
	dst = appendStopReason(dst, c.StopString, c.StopTokenID)
	if m.TokenIDs && !m.NoTokenData {
		dst = append(dst, `,"token_ids":`...)
		dst = codegen.AppendIntArray(dst, c.TokenIDs)
	}
	return append(dst, '}')
}
