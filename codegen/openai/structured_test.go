package openai

import (
	"slices"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestStructuredOutputsAndVLLMSampling: vLLM's structured_outputs,
// bad_words, allowed_token_ids and priority reach the engine request
// from chat and from completions; response_format overrides
// structured_outputs as in vLLM; the bad combinations are 400s naming
// the parameter.
func TestStructuredOutputsAndVLLMSampling(t *testing.T) {
	const msgs = `"model":"m","messages":[{"role":"user","content":"x"}]`
	chat := func(body string) (*engine.Request, *ParamError) {
		var q engine.Request
		return &q, decodeChat(t, body).ToEngine(&q)
	}
	comp := func(body string) (*engine.Request, *ParamError) {
		var q engine.Request
		return &q, decodeCompletion(t, body).ToEngine(&q)
	}
	for _, dialect := range []struct {
		name string
		head string
		to   func(string) (*engine.Request, *ParamError)
	}{{"chat", msgs, chat}, {"completions", `"model":"m","prompt":"x"`, comp}} {
		ok := func(extra string, want func(*engine.Request) bool) {
			t.Helper()
			q, err := dialect.to(`{` + dialect.head + `,` + extra + `}`)
			if err != nil || !want(q) {
				t.Errorf("%s %s: %v %+v", dialect.name, extra, err, q.ResponseFormat)
			}
		}
		bad := func(extra, param string) {
			t.Helper()
			if _, err := dialect.to(`{` + dialect.head + `,` + extra + `}`); err == nil || err.Param != param {
				t.Errorf("%s %s: %v, want an error naming %s", dialect.name, extra, err, param)
			}
		}
		ok(`"structured_outputs":{"regex":"\\d+"}`, func(q *engine.Request) bool {
			return q.ResponseFormat.Type == engine.FormatRegex && q.VLLM.Pattern == `\d+`
		})
		ok(`"structured_outputs":{"choice":["yes","no"]}`, func(q *engine.Request) bool {
			return q.ResponseFormat.Type == engine.FormatChoice && slices.Equal(q.VLLM.Choices, []string{"yes", "no"})
		})
		ok(`"structured_outputs":{"grammar":"root ::= \"a\""}`, func(q *engine.Request) bool {
			return q.ResponseFormat.Type == engine.FormatGrammar && q.VLLM.Pattern == `root ::= "a"`
		})
		ok(`"structured_outputs":{"json":{"type":"object"},"disable_any_whitespace":true}`, func(q *engine.Request) bool {
			return q.ResponseFormat.Type == engine.FormatJSONSchema && string(q.ResponseFormat.Schema) == `{"type":"object"}`
		})
		ok(`"structured_outputs":{"json":"{\"type\":\"integer\"}"}`, func(q *engine.Request) bool {
			return q.ResponseFormat.Type == engine.FormatJSONSchema && string(q.ResponseFormat.Schema) == `{"type":"integer"}`
		})
		ok(`"structured_outputs":{"json_object":true}`, func(q *engine.Request) bool { return q.ResponseFormat.Type == engine.FormatJSONObject })
		ok(`"structured_outputs":null`, func(q *engine.Request) bool { return q.ResponseFormat.Type == engine.FormatText && q.VLLM == nil })
		ok(`"bad_words":["Paris"," London"],"allowed_token_ids":[1,2,3],"priority":-5`, func(q *engine.Request) bool {
			return slices.Equal(q.VLLM.BadWords, []string{"Paris", " London"}) &&
				slices.Equal(q.VLLM.AllowedTokenIDs, []int{1, 2, 3}) && q.VLLM.Priority == -5
		})
		ok(`"allowed_token_ids":[]`, func(q *engine.Request) bool {
			return q.VLLM != nil && q.VLLM.AllowedTokenIDs != nil && len(q.VLLM.AllowedTokenIDs) == 0
		})
		// A request without the extensions allocates nothing for them.
		ok(`"allowed_token_ids":null,"bad_words":null,"priority":0,"structured_outputs":{"json_object":true}`, func(q *engine.Request) bool { return q.VLLM == nil })
		bad(`"structured_outputs":{"regex":"a","choice":["a"]}`, "structured_outputs")
		bad(`"structured_outputs":{"regex":""}`, "structured_outputs.regex")
		bad(`"structured_outputs":{"choice":[]}`, "structured_outputs.choice")
		bad(`"structured_outputs":{"json":"not json"}`, "structured_outputs.json")
		bad(`"structured_outputs":{"json":[1]}`, "structured_outputs.json")
		bad(`"structured_outputs":{"structural_tag":"{}"}`, "structured_outputs.structural_tag")
		ok(`"cache_salt":"tenant-7"`, func(q *engine.Request) bool { return q.VLLM != nil && q.VLLM.CacheSalt == "tenant-7" })
		ok(`"cache_salt":null`, func(q *engine.Request) bool { return q.VLLM == nil })
		bad(`"cache_salt":""`, "cache_salt")
		bad(`"cache_salt":"a/b"`, "cache_salt")
		bad(`"cache_salt":"`+strings.Repeat("s", 129)+`"`, "cache_salt")
		ok(`"session_id":"conv-42"`, func(q *engine.Request) bool { return q.VLLM != nil && q.VLLM.SessionID == "conv-42" })
		ok(`"session_id":""`, func(q *engine.Request) bool { return q.VLLM == nil }) // vLLM's: none
		ok(`"session_id":null`, func(q *engine.Request) bool { return q.VLLM == nil })
		// What this server does not do is refused, not ignored.
		bad(`"use_beam_search":true`, "use_beam_search")
		ok(`"return_token_ids":true`, func(q *engine.Request) bool { return q.ReturnTokenIDs })
		ok(`"stream_interval":4`, func(q *engine.Request) bool { return q.StreamInterval == 4 })
		ok(`"stream_interval":null`, func(q *engine.Request) bool { return q.StreamInterval == 0 })
		bad(`"stream_interval":0`, "stream_interval")
		ok(`"request_id":"`+strings.Repeat("r", 256)+`"`, func(q *engine.Request) bool { return true })
		bad(`"request_id":"`+strings.Repeat("r", 257)+`"`, "request_id")
		ok(`"add_special_tokens":true`, func(q *engine.Request) bool { return q.SpecialTokens == engine.SpecialTokensAdd })
		ok(`"add_special_tokens":false`, func(q *engine.Request) bool { return q.SpecialTokens == engine.SpecialTokensNone })
		ok(`"add_special_tokens":null`, func(q *engine.Request) bool { return q.SpecialTokens == engine.SpecialTokensDefault })
		bad(`"truncate_prompt_tokens":8`, "truncate_prompt_tokens")
		// vLLM's vllm_xargs: an object of strings, numbers and lists of
		// them, passed on as the engine's extra_args; its session_id is the
		// request's session when none is given otherwise.
		ok(`"vllm_xargs":{"mode":"strict","k":3,"ids":[1,"two",2.5]}`, func(q *engine.Request) bool {
			return q.VLLM != nil && string(q.VLLM.ExtraArgs) == `{"mode":"strict","k":3,"ids":[1,"two",2.5]}` && q.VLLM.SessionID == ""
		})
		ok(`"vllm_xargs":{"session_id":"conv-7"}`, func(q *engine.Request) bool {
			return q.VLLM != nil && q.VLLM.SessionID == "conv-7"
		})
		ok(`"session_id":"given","vllm_xargs":{"session_id":"conv-7"}`, func(q *engine.Request) bool {
			return q.VLLM != nil && q.VLLM.SessionID == "given"
		})
		ok(`"vllm_xargs":{}`, func(q *engine.Request) bool { return q.VLLM == nil || q.VLLM.ExtraArgs == nil })
		ok(`"vllm_xargs":{ }`, func(q *engine.Request) bool { return q.VLLM == nil || q.VLLM.ExtraArgs == nil })
		ok(`"vllm_xargs":null`, func(q *engine.Request) bool { return q.VLLM == nil || q.VLLM.ExtraArgs == nil })
		for _, x := range []string{`[1]`, `"a"`, `{"a":true}`, `{"a":null}`, `{"a":{"b":1}}`, `{"a":[[1]]}`, `{"a":[null]}`} {
			bad(`"vllm_xargs":`+x, "vllm_xargs")
		}
		for _, c := range []struct{ set, unset string }{
			{`"thinking_token_budget":64`, `"thinking_token_budget":null`},
			{`"prompt_logprobs":1`, `"prompt_logprobs":null`},
			{`"logprob_token_ids":[3]`, `"logprob_token_ids":null`},
			{`"repetition_detection":{"max_pattern_size":8}`, `"repetition_detection":null`},
			{`"kv_transfer_params":{"do_remote_decode":true}`, `"kv_transfer_params":null`},
			{`"ec_transfer_params":{}`, `"ec_transfer_params":null`},
			{`"watermarking":true`, `"watermarking":false`},
			{`"return_tokens_as_token_ids":true`, `"return_tokens_as_token_ids":false`},
			{`"return_token_offsets":true`, `"return_token_offsets":null`},
		} {
			param := c.set[1 : strings.Index(c.set[1:], `"`)+1]
			bad(c.set, param)
			ok(c.unset, func(q *engine.Request) bool { return true })
		}
		ok(`"truncate_prompt_tokens":null`, func(q *engine.Request) bool { return true })
		ok(`"use_beam_search":false,"return_token_ids":false`, func(q *engine.Request) bool { return !q.ReturnTokenIDs })
	}
	bad := func(body, param, msg string) {
		t.Helper()
		_, err := chat(`{` + msgs + `,` + body + `}`)
		if strings.HasPrefix(body, `"prompt_embeds"`) { // completions
			_, err = comp(`{"model":"m","prompt":"x",` + body + `}`)
		}
		if err == nil || err.Param != param || !strings.Contains(err.Message, msg) {
			t.Errorf("%s: %v, want an error naming %s", body, err, param)
		}
	}
	bad(`"chat_template":"{{ messages }}"`, "chat_template", "--trust-request-chat-template is not set")
	bad(`"chat_template_kwargs":{"chat_template":"x"}`, "chat_template", "untrusted chat template")
	bad(`"prompt_embeds":"AAAA"`, "prompt_embeds", "not supported")
	bad(`"echo":true`, "echo", "not supported")
	bad(`"documents":[{"title":"a","text":"b"}]`, "documents", "not supported")
	bad(`"return_prompt_text":true`, "return_prompt_text", "not supported")
	if _, err := chat(`{` + msgs + `,"echo":false,"documents":null,"return_prompt_text":false}`); err != nil {
		t.Errorf("chat options set to their defaults: %v", err)
	}
	if _, err := chat(`{` + msgs + `,"chat_template":null,"chat_template_kwargs":{"chat_template":null,"enable_thinking":false}}`); err != nil {
		t.Errorf("null chat templates: %v", err)
	}
	// response_format wins over structured_outputs, as vLLM's replace.
	q, err := chat(`{` + msgs + `,"structured_outputs":{"regex":"a"},"response_format":{"type":"json_object"}}`)
	if err != nil || q.ResponseFormat.Type != engine.FormatJSONObject {
		t.Errorf("response_format over structured_outputs: %v %+v", err, q.ResponseFormat)
	}
	q, err = chat(`{` + msgs + `,"structured_outputs":{"regex":"a"},"response_format":{"type":"text"}}`)
	if err != nil || q.ResponseFormat.Type != engine.FormatRegex {
		t.Errorf("response_format text dropped structured_outputs: %v %+v", err, q.ResponseFormat)
	}
	const tools = `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	if _, err := chat(`{` + msgs + tools + `,"tool_choice":{"type":"function","function":{"name":"f"}},"structured_outputs":{"choice":["a"]}}`); err == nil || err.Param != "structured_outputs" {
		t.Errorf("named tool_choice with structured_outputs: %v", err)
	}
	if _, err := chat(`{` + msgs + tools + `,"tool_choice":"auto","structured_outputs":{"choice":["a"]}}`); err != nil {
		t.Errorf("tool_choice auto with structured_outputs: %v", err)
	}
}
