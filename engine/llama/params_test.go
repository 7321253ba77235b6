package llama

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestMinTokens: with the end-of-generation token forced by logit_bias,
// the choice ends at its first token; min_tokens N bans it (and the stop
// token ids) for the first N, so the forced token comes N+1st.
func TestMinTokens(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	f := func(minTokens int, stopIDs []int, force int, wantTokens int, wantStopID int) {
		t.Helper()
		req := chatReq("Tell me about the sea.", 30)
		req.Sampling.MinTokens = minTokens
		req.Sampling.StopTokenIDs = stopIDs
		req.Sampling.LogitBias = []engine.TokenBias{{TokenID: force, Bias: 100}}
		res, _ := run(t, e, req)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		c := res.Choices[0]
		if c.FinishReason != engine.FinishStop || len(c.TokenIDs) != wantTokens || res.Usage.CompletionTokens != wantTokens ||
			c.StopTokenID != wantStopID || c.TokenIDs[wantTokens-1] != force {
			t.Fatalf("min_tokens %d: finish %s, tokens %v, stop id %d, usage %+v; want %d tokens ending in %d",
				minTokens, c.FinishReason, c.TokenIDs, c.StopTokenID, res.Usage, wantTokens, force)
		}
		for _, id := range c.TokenIDs[:wantTokens-1] {
			if id == force {
				t.Fatalf("min_tokens %d: forced token %d among the first tokens %v", minTokens, force, c.TokenIDs)
			}
		}
	}
	f(0, nil, tinymodel.TokenIMEnd, 1, -1)
	f(5, nil, tinymodel.TokenIMEnd, 6, -1)
	f(3, []int{'z'}, 'z', 4, 'z')

	bad := chatReq("Hi", 4)
	bad.Sampling.MinTokens = 5
	if err := e.Prepare(bad); err == nil || err.(*engine.Error).Param != "min_tokens" {
		t.Fatalf("min_tokens above max_tokens: %v", err)
	}
	bad = chatReq("Hi", 0) // max_tokens: the room the prompt leaves
	bad.Sampling.MinTokens = e.cfg.MaxModelLen
	if err := e.Prepare(bad); err == nil || err.(*engine.Error).Param != "min_tokens" {
		t.Fatalf("min_tokens above the context: %v", err)
	}
}

// TestIncludeStopStr: the matched stop string stays at the end of the
// text, streamed and not; without the flag it is cut.
func TestIncludeStopStr(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	base := chatReq("Tell me about the sea.", 24)
	base.Sampling.IgnoreEOS = true
	res, _ := run(t, e, base)
	full := res.Choices[0].Text
	if len(full) < 12 {
		t.Fatalf("greedy text %q too short to cut", full)
	}
	stop := full[6:9]
	at := strings.Index(full, stop)
	for _, stream := range []bool{false, true} {
		for _, include := range []bool{false, true} {
			req := chatReq("Tell me about the sea.", 24)
			req.Sampling.IgnoreEOS = true
			req.Sampling.Stop = []string{stop}
			req.Sampling.IncludeStopStr = include
			req.Stream = stream
			res, rec := run(t, e, req)
			want := full[:at]
			if include {
				want = full[:at+len(stop)]
			}
			c := res.Choices[0]
			if c.Text != want || c.StopString != stop || c.FinishReason != engine.FinishStop {
				t.Fatalf("stream %v include %v: text %q stop %q, want %q", stream, include, c.Text, c.StopString, want)
			}
			if got := rec.text(0, engine.DeltaText); stream && got != want {
				t.Fatalf("include %v: streamed %q, want %q", include, got, want)
			}
		}
	}
}

// TestContinueFinalMessage: the prompt ends in the open assistant turn.
func TestContinueFinalMessage(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	req := chatReq("Count", 4)
	req.Messages = append(req.Messages, engine.Message{Role: "assistant", Content: "1, 2,"})
	req.NoGenerationPrompt, req.ContinueFinalMessage = true, true
	req.Sampling.IgnoreEOS = true
	res, _ := run(t, e, req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := tinymodel.DefaultVocab().Encode("<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,", true)
	if fmt.Sprint(res.PromptTokens) != fmt.Sprint(want) {
		t.Fatalf("prompt %v, want %v", res.PromptTokens, want)
	}
}
