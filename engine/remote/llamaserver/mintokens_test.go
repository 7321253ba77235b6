package llamaserver

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
)

// TestMinTokensTwoRequests: min_tokens becomes a first /completion of
// exactly min_tokens tokens with ignore_eos and the stop token ids banned,
// then a continuation from the prompt and those tokens with the request's
// own settings; the End counts both parts' tokens and the first part's
// prompt.
func TestMinTokensTwoRequests(t *testing.T) {
	s := startStreamServer(t, 3) // every request streams 3 tokens, then "limit"
	c, err := Dial("llama-server://"+s.l.Addr().String(), remote.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rx := &countRx{end: make(chan *remote.End, 1)}
	sp := &engine.Sampling{StopTokenIDs: []int{7}, LogitBias: []engine.TokenBias{{TokenID: 9, Bias: 2}}}
	g := &remote.Generate{ID: "x", Prompt: []int32{1, 2, 3}, Sampling: sp, MaxTokens: 6, MinTokens: 3, CachePrompt: true}
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	var e *remote.End
	select {
	case e = <-rx.end:
	case <-time.After(10 * time.Second):
		t.Fatal("no End within 10 s")
	}
	if e.Err != nil || rx.tokens != 6 || e.Choices[0].CompletionTokens != 6 || e.Choices[0].FinishReason != "length" || e.PromptTokens != 5 {
		t.Fatalf("end %+v, %d tokens", e, rx.tokens)
	}
	s.mu.Lock()
	bodies := s.bodies
	s.mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	type body struct {
		Prompt    []int32 `json:"prompt"`
		NPredict  int     `json:"n_predict"`
		IgnoreEOS bool    `json:"ignore_eos"`
		LogitBias [][]any `json:"logit_bias"`
	}
	var b [2]body
	for i := range b {
		if err := json.Unmarshal([]byte(bodies[i]), &b[i]); err != nil {
			t.Fatalf("body %d %s: %v", i, bodies[i], err)
		}
	}
	if fmt.Sprint(b[0].Prompt) != "[1 2 3]" || b[0].NPredict != 3 || !b[0].IgnoreEOS ||
		fmt.Sprint(b[0].LogitBias) != "[[9 2] [7 false]]" {
		t.Fatalf("first part %+v", b[0])
	}
	// streamBytes' tokens are 100, 101, 102.
	if fmt.Sprint(b[1].Prompt) != "[1 2 3 100 101 102]" || b[1].NPredict != 3 || b[1].IgnoreEOS ||
		fmt.Sprint(b[1].LogitBias) != "[[9 2]]" {
		t.Fatalf("continuation %+v", b[1])
	}

	// min_tokens equal to max_tokens is the first part alone.
	rx = &countRx{end: make(chan *remote.End, 1)}
	g.MaxTokens = 3
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	select {
	case e = <-rx.end:
	case <-time.After(10 * time.Second):
		t.Fatal("no End within 10 s")
	}
	s.mu.Lock()
	n := len(s.bodies)
	s.mu.Unlock()
	if e.Err != nil || rx.tokens != 3 || n != 3 {
		t.Fatalf("min = max: end %+v, %d tokens, %d requests", e, rx.tokens, n)
	}

	// A constraint cannot be continued: refused.
	g.MaxTokens, g.Constraint = 6, remote.Constraint{Kind: remote.ConstraintJSONObject}
	if _, err := c.Generate(context.Background(), g, rx); err == nil {
		t.Fatal("min_tokens with a constraint accepted")
	}
}
