package openai

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestVLLMParams: min_tokens, include_stop_str_in_output,
// add_generation_prompt and continue_final_message decode into the engine
// request, and the bad combinations are 400s naming the parameter, in
// vLLM's words.
func TestVLLMParams(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Count"},{"role":"assistant","content":"1, 2,"}]`
	ok := func(body string, want func(*engine.Request) bool) {
		t.Helper()
		var q engine.Request
		if err := decodeChat(t, body).ToEngine(&q); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if !want(&q) {
			t.Fatalf("%s: got %+v", body, q)
		}
	}
	bad := func(body, param string) {
		t.Helper()
		var q engine.Request
		err := decodeChat(t, body).ToEngine(&q)
		if err == nil || err.Param != param {
			t.Fatalf("%s: got %v, want an error naming %s", body, err, param)
		}
	}
	ok(`{"model":"m",`+msgs+`}`, func(q *engine.Request) bool {
		return !q.NoGenerationPrompt && !q.ContinueFinalMessage && q.Sampling.MinTokens == 0 && !q.Sampling.IncludeStopStr
	})
	ok(`{"model":"m",`+msgs+`,"min_tokens":3,"max_tokens":3,"include_stop_str_in_output":true}`, func(q *engine.Request) bool {
		return q.Sampling.MinTokens == 3 && q.Sampling.IncludeStopStr
	})
	ok(`{"model":"m",`+msgs+`,"min_tokens":300}`, func(q *engine.Request) bool { return q.Sampling.MinTokens == 300 })
	ok(`{"model":"m",`+msgs+`,"add_generation_prompt":false}`, func(q *engine.Request) bool {
		return q.NoGenerationPrompt && !q.ContinueFinalMessage
	})
	ok(`{"model":"m",`+msgs+`,"add_generation_prompt":false,"continue_final_message":true}`, func(q *engine.Request) bool {
		return q.NoGenerationPrompt && q.ContinueFinalMessage
	})
	bad(`{"model":"m",`+msgs+`,"min_tokens":-1}`, "min_tokens")
	bad(`{"model":"m",`+msgs+`,"min_tokens":4,"max_tokens":3}`, "min_tokens")
	bad(`{"model":"m",`+msgs+`,"min_tokens":4,"max_completion_tokens":3}`, "min_tokens")
	bad(`{"model":"m",`+msgs+`,"continue_final_message":true}`, "continue_final_message")
	bad(`{"model":"m",`+msgs+`,"add_generation_prompt":true,"continue_final_message":true}`, "continue_final_message")
	bad(`{"model":"m","messages":[{"role":"user","content":"x"}],"add_generation_prompt":false,"continue_final_message":true}`, "continue_final_message")

	// Completions: max_tokens defaults to 16.
	comp := func(body string) (*engine.Request, *ParamError) {
		r := decodeCompletion(t, body)
		var q engine.Request
		return &q, r.ToEngine(&q)
	}
	if q, err := comp(`{"model":"m","prompt":"a","min_tokens":16,"include_stop_str_in_output":true}`); err != nil ||
		q.Sampling.MinTokens != 16 || !q.Sampling.IncludeStopStr {
		t.Fatalf("completions: %+v, %v", q.Sampling, err)
	}
	if _, err := comp(`{"model":"m","prompt":"a","min_tokens":17}`); err == nil || err.Param != "min_tokens" {
		t.Fatalf("completions min_tokens 17 > 16: %v", err)
	}
}
