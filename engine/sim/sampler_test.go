package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

func TestDeterministicReplay(t *testing.T) {
	e := newEngine(t, nil)
	gen := func(text string, temp float64, seed int64, hasSeed bool) string {
		req := chatReq(text, 60)
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = temp, seed, hasSeed
		res, _, _ := run(t, e, req, false)
		return res.Choices[0].Text
	}
	if a, b := gen("one", 0, 0, false), gen("one", 0, 0, false); a != b {
		t.Fatalf("greedy replay differs:\n%q\n%q", a, b)
	}
	if a, b := gen("one", 0, 0, false), gen("two", 0, 0, false); a == b {
		t.Fatalf("different prompts gave the same greedy text %q", a)
	}
	if a, b := gen("one", 0.8, 42, true), gen("one", 0.8, 42, true); a != b {
		t.Fatalf("seeded replay differs:\n%q\n%q", a, b)
	}
	if a, b := gen("one", 0.8, 42, true), gen("one", 0.8, 43, true); a == b {
		t.Fatalf("seeds 42 and 43 gave the same text %q", a)
	}
	if a, b := gen("one", 1, 0, false), gen("one", 1, 0, false); a == b {
		t.Fatalf("unseeded sampling replayed identically %q", a)
	}
	// The engine seed changes everything.
	e2 := newEngine(t, func(c *Config) { c.Seed = 7 })
	req := chatReq("one", 60)
	res, _, _ := run(t, e2, req, false)
	if res.Choices[0].Text == gen("one", 0, 0, false) {
		t.Fatal("engine seed ignored")
	}
}

func TestNChoices(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("Tell me a story.", 30)
	req.Sampling.N, req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 3, 1, 5, true
	req.Sampling.IgnoreEOS = true
	res, f, _ := run(t, e, req, true)
	if len(res.Choices) != 3 {
		t.Fatalf("%d choices", len(res.Choices))
	}
	seen := map[string]bool{}
	for i, c := range res.Choices {
		if c.Index != i || len(c.TokenIDs) != 30 {
			t.Fatalf("choice %d: index %d, %d tokens", i, c.Index, len(c.TokenIDs))
		}
		if got := f.text(i, engine.DeltaText); got != c.Text {
			t.Fatalf("choice %d streamed %q, final %q", i, got, c.Text)
		}
		seen[c.Text] = true
	}
	if len(seen) != 3 {
		t.Fatal("choices are not independent")
	}
	if res.Usage.CompletionTokens != 90 || len(f.ends) != 3 {
		t.Fatalf("usage %+v, %d choice ends", res.Usage, len(f.ends))
	}
	// Choice 1 replays identically in a new request.
	req2 := chatReq("Tell me a story.", 30)
	req2.Sampling = req.Sampling
	res2, _, _ := run(t, e, req2, false)
	for i := range res.Choices {
		if res.Choices[i].Text != res2.Choices[i].Text {
			t.Fatalf("choice %d does not replay", i)
		}
	}
}

func TestStopStringHoldBack(t *testing.T) {
	e := newEngine(t, nil)
	base, _, _ := run(t, e, chatReq("Stop test.", 80), false)
	ids := base.Choices[0].TokenIDs
	// A stop string made of the end of token 10 and the start of token 11,
	// so that it spans two tokens.
	t10, t11 := e.vocab.text(ids[10]), e.vocab.text(ids[11])
	if len(t10) < 2 || len(t11) < 2 {
		// The simulator is deterministic: this is its output, not luck.
		t.Fatalf("tokens 10 and 11 (%q, %q) are too short for the test: pick another prompt", t10, t11)
	}
	stop := t10[len(t10)-2:] + t11[:2]
	prefix := e.Detokenize(ids[:10]) + t10[:len(t10)-2]
	if i := strings.Index(prefix+stop, stop); i < len(prefix) {
		stop = t10 + t11 // occurs earlier: use whole tokens
		prefix = e.Detokenize(ids[:10])
	}
	req := chatReq("Stop test.", 80)
	req.Sampling.Stop = []string{"zzz-never", stop}
	res, f, _ := run(t, e, req, true)
	c := res.Choices[0]
	if !strings.HasPrefix(prefix, c.Text) || c.FinishReason != engine.FinishStop || c.StopString != stop {
		t.Fatalf("text %q finish %q stop %q; want prefix of %q stopped by %q", c.Text, c.FinishReason, c.StopString, prefix, stop)
	}
	streamed := f.text(0, engine.DeltaText)
	if streamed != c.Text || strings.Contains(streamed, stop) {
		t.Fatalf("streamed %q, final %q", streamed, c.Text)
	}
	// Never a partial stop string in a delta that was not later confirmed.
	for _, d := range f.deltas {
		if strings.Contains(d.text, stop[:2]) && !strings.Contains(c.Text, d.text) {
			t.Fatalf("delta %q leaks part of the stop string", d.text)
		}
	}
	if f.ends[0].StopString != stop {
		t.Fatalf("ChoiceEnd stop string %q", f.ends[0].StopString)
	}
}

func TestStopTokenID(t *testing.T) {
	e := newEngine(t, nil)
	base, _, _ := run(t, e, chatReq("Stop token test.", 50), false)
	ids := base.Choices[0].TokenIDs
	stopID := ids[5]
	first := 5
	for i, id := range ids {
		if id == stopID {
			first = i
			break
		}
	}
	req := chatReq("Stop token test.", 50)
	req.Sampling.StopTokenIDs = []int{stopID}
	res, _, _ := run(t, e, req, false)
	c := res.Choices[0]
	if c.StopTokenID != stopID || c.FinishReason != engine.FinishStop || len(c.TokenIDs) != first+1 ||
		c.Text != e.Detokenize(ids[:first]) {
		t.Fatalf("stop token: %+v", c)
	}
}

func TestLogprobsShape(t *testing.T) {
	e := newEngine(t, nil)
	for _, temp := range []float64{0, 1} {
		req := chatReq("Logprobs please.", 40)
		req.Sampling.Logprobs, req.Sampling.TopLogprobs, req.Sampling.Temperature = true, 5, temp
		res, f, _ := run(t, e, req, true)
		c := res.Choices[0]
		if len(c.Logprobs) != len(c.TokenIDs) {
			t.Fatalf("%d logprobs for %d tokens", len(c.Logprobs), len(c.TokenIDs))
		}
		nstream := 0
		for _, d := range f.deltas {
			nstream += len(d.lps)
			if len(d.lps) != len(d.ids) {
				t.Fatal("delta logprobs do not match its tokens")
			}
		}
		if nstream != len(c.TokenIDs) {
			t.Fatalf("streamed %d logprobs", nstream)
		}
		for i, lp := range c.Logprobs {
			if lp.TokenID != c.TokenIDs[i] || lp.Token != e.vocab.text(lp.TokenID) || lp.Logprob > 0 || len(lp.Top) != 5 {
				t.Fatalf("token %d: %+v", i, lp)
			}
			var sum float64
			found := false
			for j, tp := range lp.Top {
				if tp.Logprob > 0 || j > 0 && tp.Logprob > lp.Top[j-1].Logprob || tp.Token != e.vocab.text(tp.TokenID) {
					t.Fatalf("token %d: bad top list %+v", i, lp.Top)
				}
				if tp.TokenID == lp.TokenID {
					found = found || tp.Logprob == lp.Logprob
				}
				sum += math.Exp(float64(tp.Logprob))
			}
			if !found || sum > 1.0001 {
				t.Fatalf("token %d: sampled token missing or mass %g > 1: %+v", i, sum, lp)
			}
		}
	}
}

func TestPromptLogprobs(t *testing.T) {
	e := newEngine(t, nil)
	req := &engine.Request{Prompt: "The quick brown fox", Echo: true, PromptLogprobs: 3,
		Sampling: engine.Sampling{MaxTokens: 5, Logprobs: true, TopLogprobs: 3}}
	res, f, _ := run(t, e, req, true)
	pl := res.Choices[0].PromptLogprobs
	if len(pl) != len(req.PromptTokens) || len(f.start.PromptLogprobs) != len(pl) || len(f.start.PromptTokenIDs) != len(pl) {
		t.Fatalf("prompt logprobs %d for %d tokens", len(pl), len(req.PromptTokens))
	}
	for i, lp := range pl {
		if lp.TokenID != int(req.PromptTokens[i]) || lp.Logprob > 0 || len(lp.Top) != 3 {
			t.Fatalf("prompt token %d: %+v", i, lp)
		}
	}
}

func TestReasoning(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("Think first.", 400)
	req.Reasoning = engine.Reasoning{Enabled: true, Effort: "low"}
	res, f, _ := run(t, e, req, true)
	c := res.Choices[0]
	u := res.Usage
	if c.Reasoning == "" || c.Text == "" || u.ReasoningTokens < 96 || u.ReasoningTokens > 160 ||
		u.CompletionTokens != len(c.TokenIDs) || u.CompletionTokens <= u.ReasoningTokens {
		t.Fatalf("usage %+v reasoning %q", u, c.Reasoning)
	}
	if f.text(0, engine.DeltaReasoning) != c.Reasoning || f.text(0, engine.DeltaText) != c.Text {
		t.Fatal("streamed reasoning or text differs from the final")
	}
	sawText := false
	for _, d := range f.deltas {
		sawText = sawText || d.kind == engine.DeltaText
		if sawText && d.kind == engine.DeltaReasoning {
			t.Fatal("reasoning after the answer")
		}
	}
	// A budget caps it.
	req = chatReq("Think first.", 400)
	req.Reasoning = engine.Reasoning{Enabled: true, BudgetTokens: 20}
	res, _, _ = run(t, e, req, false)
	if res.Usage.ReasoningTokens != 20 {
		t.Fatalf("budget 20: %d reasoning tokens", res.Usage.ReasoningTokens)
	}
}

func TestStreamInterval(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("Coalesce.", 42)
	req.Sampling.IgnoreEOS = true
	req.StreamInterval = 4
	res, f, _ := run(t, e, req, true)
	n := 0
	for i, d := range f.deltas {
		n += len(d.ids)
		if len(d.ids) > 4 || len(d.ids) < 4 && i != len(f.deltas)-1 {
			t.Fatalf("delta %d carries %d tokens", i, len(d.ids))
		}
	}
	if n != 42 || f.text(0, engine.DeltaText) != res.Choices[0].Text {
		t.Fatalf("streamed %d tokens", n)
	}
}

func TestUTF8Complete(t *testing.T) {
	f := func(in string, want int) {
		t.Helper()
		if got := utf8Complete([]byte(in), false); got != want {
			t.Errorf("utf8Complete(%q) = %d, want %d", in, got, want)
		}
	}
	f("abc", 3)
	f("ab\xc3", 2)
	f("ab\xc3\xa9", 4)
	f("a\xe2\x82", 1)
	f("a\xe2\x82\xac", 4)
	f("\xf0\x9f\x98", 0)
}

// TestHeldTokenStreamsEmpty: a token whose whole text is held back (the
// start of a stop string) still gets its own Delta, with empty text and
// its id, as every engine streams it (one chunk per token, as vLLM does),
// unless a tool-call parser may read the output.
func TestHeldTokenStreamsEmpty(t *testing.T) {
	tools := []engine.Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	for _, tc := range []struct {
		name  string
		tools []engine.Tool
		mode  engine.ToolChoiceMode
		empty bool // the held token gets a Delta with empty text
	}{
		{"no tools", nil, engine.ToolChoiceAuto, true},
		// A tool-call parser would read the text: nothing for a token
		// with no text (engine/pipeline's rule).
		{"tools", tools, engine.ToolChoiceAuto, false},
		{"tools off", tools, engine.ToolChoiceNone, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, nil)
			newReq := func() *engine.Request {
				req := chatReq("Stop test.", 80)
				req.Tools, req.ToolChoice.Mode = tc.tools, tc.mode
				return req
			}
			base, _, _ := run(t, e, newReq(), false)
			if len(base.Choices[0].ToolCalls) != 0 {
				t.Fatalf("the simulator called a tool: %+v", base.Choices[0].ToolCalls)
			}
			ids := base.Choices[0].TokenIDs
			t10, t11 := e.vocab.text(ids[10]), e.vocab.text(ids[11])
			stop := t10 + t11
			if strings.Contains(e.Detokenize(ids[:10])+t10, stop) || t10 == "" {
				t.Fatalf("tokens 10 and 11 (%q, %q) do not make a first stop string: pick another prompt", t10, t11)
			}
			req := newReq()
			req.Sampling.Stop = []string{stop}
			res, f, _ := run(t, e, req, true)
			if c := res.Choices[0]; c.StopString != stop || len(c.TokenIDs) != 12 {
				t.Fatalf("stop %q after %d tokens, want %q after 12", c.StopString, len(c.TokenIDs), stop)
			}
			want := 10
			if tc.empty {
				want = 11
			}
			if len(f.deltas) != want {
				t.Fatalf("%d deltas, want %d", len(f.deltas), want)
			}
			for i, d := range f.deltas {
				if len(d.ids) != 1 || d.ids[0] != ids[i] || d.kind != engine.DeltaText {
					t.Fatalf("delta %d: ids %v kind %v, want [%d]", i, d.ids, d.kind, ids[i])
				}
				if held := i == 10; held != (d.text == "") {
					t.Fatalf("delta %d text %q", i, d.text)
				}
			}
		})
	}
}
