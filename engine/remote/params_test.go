package remote

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestMinTokensAndIncludeStop: min_tokens reaches the worker's Generate
// (capped by the resolved max_tokens); a stop string counts only once a
// token after the first min_tokens completes it, and with
// include_stop_str_in_output it stays in the text.
func TestMinTokensAndIncludeStop(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 20)
	req.Sampling.Stop = []string{"b"}
	req.Sampling.MinTokens = 3
	req.Sampling.IncludeStopStr = true
	rec, _, c := start(t, e, f, req)
	if c.g.MinTokens != 3 || c.g.MaxTokens != 20 {
		t.Fatalf("Generate min %d max %d, want 3 and 20", c.g.MinTokens, c.g.MaxTokens)
	}
	c.tokens(0, ids("abcbd")...)
	res := rec.wait(t)
	ch := res.Choices[0]
	if ch.Text != "abcb" || ch.StopString != "b" || ch.FinishReason != engine.FinishStop || rec.text[0].String() != "abcb" {
		t.Fatalf("choice %+v, streamed %q; want abcb", ch, rec.text[0].String())
	}
}

// TestMinTokensAboveContext: without max_tokens, min_tokens above the room
// the prompt leaves on the worker is a 400 naming min_tokens.
func TestMinTokensAboveContext(t *testing.T) {
	e, _ := newFake(t, Config{}, false)
	req := chat("hi", 0)
	req.Sampling.MinTokens = 1 << 30
	if err := e.Prepare(req); err == nil || err.(*engine.Error).Param != "min_tokens" {
		t.Fatalf("min_tokens above the context: %v", err)
	}
}
