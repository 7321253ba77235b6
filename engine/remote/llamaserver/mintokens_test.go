package llamaserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

// TestMinTokensMissingIDs: when llama-server names not every token of the
// first part (a character split across two tokens), the continuation
// gives the first part as text after the prompt's ids (a mixed prompt).
func TestMinTokensMissingIDs(t *testing.T) {
	var b []byte
	chunk := func(s string) {
		b = append(b, strconv.FormatInt(int64(len(s)), 16)...)
		b = append(b, "\r\n"+s+"\r\n"...)
	}
	chunk("data: {\"index\":0,\"content\":\"a\",\"tokens\":[100],\"stop\":false,\"tokens_predicted\":1,\"tokens_evaluated\":3}\n\n")
	chunk("data: {\"index\":0,\"content\":\"\\u00e9\",\"tokens\":[102],\"stop\":false,\"tokens_predicted\":3,\"tokens_evaluated\":3}\n\n")
	chunk("data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"stop\":true,\"tokens_predicted\":3,\"tokens_evaluated\":3,\"stop_type\":\"limit\"}\n\n")
	b = append(b, "0\r\n\r\n"...)
	s := startBodyServer(t, 3, b)
	c, err := Dial("llama-server://"+s.l.Addr().String(), remote.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rx := &countRx{end: make(chan *remote.End, 1)}
	g := &remote.Generate{ID: "x", Prompt: []int32{1, 2, 3}, Sampling: &engine.Sampling{}, MaxTokens: 6, MinTokens: 3, CachePrompt: true}
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-rx.end:
		if e.Err != nil || rx.tokens != 6 || e.Choices[0].CompletionTokens != 6 {
			t.Fatalf("end %+v, %d tokens", e, rx.tokens)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no End within 10 s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var second struct {
		Prompt []any `json:"prompt"`
	}
	if len(s.bodies) != 2 || json.Unmarshal([]byte(s.bodies[1]), &second) != nil {
		t.Fatalf("bodies %q", s.bodies)
	}
	if fmt.Sprint(second.Prompt) != "[1 2 3 aé]" {
		t.Fatalf("continuation prompt %v, want the ids then the text", second.Prompt)
	}
}
