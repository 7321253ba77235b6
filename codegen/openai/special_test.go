package openai

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestSpecialTokenOptions: skip_special_tokens and
// spaces_between_special_tokens default to true (vLLM) on chat
// completions and completions; false reaches the engine.
func TestSpecialTokenOptions(t *testing.T) {
	for _, c := range []struct {
		extra       string
		keep, nospc bool
	}{
		{"", false, false},
		{`,"skip_special_tokens":true,"spaces_between_special_tokens":true`, false, false},
		{`,"skip_special_tokens":false`, true, false},
		{`,"spaces_between_special_tokens":false`, false, true},
		{`,"skip_special_tokens":false,"spaces_between_special_tokens":false`, true, true},
	} {
		var q engine.Request
		if err := decodeChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]`+c.extra+`}`).ToEngine(&q); err != nil {
			t.Fatal(err)
		}
		if q.Sampling.KeepSpecialTokens != c.keep || q.Sampling.NoSpecialTokenSpaces != c.nospc {
			t.Errorf("chat %s: %+v", c.extra, q.Sampling)
		}
		q = engine.Request{}
		if err := decodeCompletion(t, `{"model":"m","prompt":"x"`+c.extra+`}`).ToEngine(&q); err != nil {
			t.Fatal(err)
		}
		if q.Sampling.KeepSpecialTokens != c.keep || q.Sampling.NoSpecialTokenSpaces != c.nospc {
			t.Errorf("completions %s: %+v", c.extra, q.Sampling)
		}
	}
}
