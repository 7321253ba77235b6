package sim

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// shapePrompt is the prompt of the shaping tests; its greedy answer repeats
// " the", " and" and "," many times.
const shapePrompt = "Tell me about the village and the river."

// genShaped runs shapePrompt for 150 tokens (ignore_eos) with the sampling
// parameters mod sets, and returns the choice.
func genShaped(t *testing.T, e *Engine, mod func(*engine.Sampling)) engine.Choice {
	t.Helper()
	req := chatReq(shapePrompt, 150)
	req.Sampling.IgnoreEOS = true
	mod(&req.Sampling)
	res, _, _ := run(t, e, req, false)
	if res.Err != nil || len(res.Choices[0].TokenIDs) != 150 {
		t.Fatalf("err %v, %d tokens", res.Err, len(res.Choices[0].TokenIDs))
	}
	return res.Choices[0]
}

// repeats counts the tokens of ids that repeat an earlier one.
func repeats(ids []int) int {
	seen := map[int]bool{}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
		seen[id] = true
	}
	return n
}

func greedy(*engine.Sampling) {}

// TestPenaltiesAtGreedy: at temperature 0, a positive presence, frequency
// or repetition penalty makes the answer repeat fewer tokens, and a
// negative one (or a repetition penalty below 1) more; a penalty of 0 (or
// 1) changes nothing.
func TestPenaltiesAtGreedy(t *testing.T) {
	e := newEngine(t, nil)
	base := genShaped(t, e, greedy)
	rb := repeats(base.TokenIDs)
	f := func(name string, mod func(*engine.Sampling), fewer bool) {
		t.Helper()
		c := genShaped(t, e, mod)
		r := repeats(c.TokenIDs)
		if fewer && !(r < rb*3/4) || !fewer && !(r > rb*5/4) {
			t.Errorf("%s: %d repeated tokens, plain greedy %d (want %s by a quarter)\n%q", name, r, rb,
				map[bool]string{true: "fewer", false: "more"}[fewer], c.Text)
		}
	}
	f("presence_penalty 2", func(s *engine.Sampling) { s.PresencePenalty = 2 }, true)
	f("frequency_penalty 2", func(s *engine.Sampling) { s.FrequencyPenalty = 2 }, true)
	f("repetition_penalty 2", func(s *engine.Sampling) { s.RepetitionPenalty = 2 }, true)
	f("presence_penalty -2", func(s *engine.Sampling) { s.PresencePenalty = -2 }, false)
	f("frequency_penalty -1", func(s *engine.Sampling) { s.FrequencyPenalty = -1 }, false)
	f("repetition_penalty 0.5", func(s *engine.Sampling) { s.RepetitionPenalty = 0.5 }, false)

	for _, mod := range []func(*engine.Sampling){
		func(s *engine.Sampling) { s.RepetitionPenalty = 1 },
		func(s *engine.Sampling) { s.MinP = 0.5 }, // greedy ignores min_p
	} {
		if c := genShaped(t, e, mod); c.Text != base.Text {
			t.Errorf("a no-op parameter changed greedy output:\n%q\n%q", c.Text, base.Text)
		}
	}
}

// TestShapeFormula checks each parameter's arithmetic on one decision:
// the bias is added, the repetition penalty divides a positive logit (or
// multiplies a negative one) of a token seen in the prompt or the output,
// and frequency and presence subtract count*frequency + presence for a
// token the output holds; the filler alternatives follow the successors.
func TestShapeFormula(t *testing.T) {
	e, err := newEngineNoLoop(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := e.corpus
	// A piece with four successors whose first tokens differ.
	var cands []succ
	var tok [4]int
	for i := range c.pieces {
		sc := c.pieces[i].succ
		if len(sc) < 4 {
			continue
		}
		for k := range tok {
			tok[k] = c.pieces[sc[k].next].toks[0]
		}
		if tok[0] != tok[1] && tok[0] != tok[2] && tok[0] != tok[3] && tok[1] != tok[2] && tok[1] != tok[3] && tok[2] != tok[3] {
			cands = sc
			break
		}
	}
	if cands == nil {
		t.Fatal("no piece with four distinct successors")
	}
	// tok[0] is in the prompt, tok[1] emitted twice, tok[2] biased,
	// tok[3] untouched.
	req := &engine.Request{PromptTokens: []int32{int32(tok[0])}, Sampling: engine.Sampling{MaxTokens: 4,
		RepetitionPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 0.25,
		LogitBias: []engine.TokenBias{{TokenID: tok[2], Bias: -3}}}}
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	g := e.newGroup(req, req.Prepared.(*prepared), nil)
	s := &g.seqs[0]
	e.countToken(s, tok[1])
	e.countToken(s, tok[1])
	raw := []float64{2, -1, 1.5, 0.7}
	for i := range cands {
		e.logits[i] = 0
		if i < len(raw) {
			e.logits[i] = raw[i]
		}
	}
	n := e.shape(s, cands)
	want := []float64{2.0 / 2, -1*2 - (2*0.5 + 0.25), 1.5 - 3, 0.7}
	for k, w := range want {
		if got := e.logits[k]; math.Abs(got-w) > 1e-12 {
			t.Errorf("candidate %d (%q): logit %v, want %v", k, e.vocab.text(tok[k]), got, w)
		}
	}
	fillers := 0
	for _, fp := range c.fillerPieces {
		if !slices.ContainsFunc(cands, func(sc succ) bool { return sc.next == fp }) {
			fillers++
		}
	}
	if n != len(cands)+fillers || fillers == 0 {
		t.Fatalf("%d candidates, want %d successors + %d fillers", n, len(cands), fillers)
	}
	// Filler j's logit is the successors' raw log-sum-exp plus
	// log(share_j/candMass), its share of the logprobs' mass.
	var z float64
	for i := range cands {
		r := 0.0
		if i < len(raw) {
			r = raw[i]
		}
		z += math.Exp(r)
	}
	i := len(cands)
	for j, fp := range c.fillerPieces {
		if e.candPiece(cands, i) != fp {
			continue // a successor already
		}
		share := (1 - candMass) * fillerHead * math.Pow(fillerDecay, float64(j))
		if w := math.Log(z) + math.Log(share/candMass); math.Abs(e.logits[i]-w) > 1e-9 {
			t.Errorf("filler %q: logit %v, want %v", c.pieces[fp].text, e.logits[i], w)
		}
		i++
	}
}

// TestLogitBias: -100 on the token greedy emits most removes it from the
// answer, whose length is unchanged; +100 on a token that is a candidate at
// every decision (",", a filler) makes every decision emit it.
func TestLogitBias(t *testing.T) {
	e := newEngine(t, nil)
	base := genShaped(t, e, greedy)
	counts := map[int]int{}
	for _, id := range base.TokenIDs {
		counts[id]++
	}
	top := -1
	for id, n := range counts {
		if strings.HasPrefix(e.vocab.text(id), " ") && (top < 0 || n > counts[top] || n == counts[top] && id < top) {
			top = id
		}
	}
	if counts[top] < 3 {
		t.Fatalf("greedy answer repeats no word: %q", base.Text)
	}
	banned := genShaped(t, e, func(s *engine.Sampling) {
		s.LogitBias = []engine.TokenBias{{TokenID: top, Bias: -100}}
	})
	if slices.Contains(banned.TokenIDs, top) {
		t.Errorf("logit_bias -100 on %q (%d times without): still emitted\n%q", e.vocab.text(top), counts[top], banned.Text)
	}
	// A bias on a token the walk never meets changes nothing.
	same := genShaped(t, e, func(s *engine.Sampling) {
		s.LogitBias = []engine.TokenBias{{TokenID: vocabSize - 1, Bias: 100}}
	})
	if same.Text != base.Text {
		t.Errorf("a bias on an unused token changed the answer:\n%q\n%q", same.Text, base.Text)
	}

	comma := e.Tokenize(",")[0]
	forced := genShaped(t, e, func(s *engine.Sampling) {
		s.LogitBias = []engine.TokenBias{{TokenID: comma, Bias: 100}}
	})
	// The first piece is drawn without a decision (its few tokens are
	// skipped here); every token after it is a decision's.
	tail := forced.TokenIDs[len(forced.TokenIDs)-140:]
	for i, id := range tail {
		if id != comma {
			t.Fatalf("logit_bias +100 on \",\": token %d is %q\n%q", i, e.vocab.text(id), forced.Text)
		}
	}
}

// TestMinP drives decisions at temperature 1.5 over every piece with a
// choice to make: with min_p 1 each picks a most likely candidate (greedy's
// pick, ties aside), with min_p 0.5 one at least half as likely as the most
// likely; without min_p some pick less likely ones.
func TestMinP(t *testing.T) {
	e, err := newEngineNoLoop(Config{})
	if err != nil {
		t.Fatal(err)
	}
	const temp = 1.5
	// picks returns, over all decisions, how many chose a candidate whose
	// probability is below minP times the most likely one's (below the
	// most likely for minP 1) with the min_p of the request set to set.
	picks := func(set, minP float64) (below int) {
		req := &engine.Request{PromptTokens: []int32{1, 2, 3}, Sampling: engine.Sampling{MaxTokens: 4,
			Temperature: temp, Seed: 3, HasSeed: true, MinP: set}}
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		s := &e.newGroup(req, req.Prepared.(*prepared), nil).seqs[0]
		for range 3 {
			for i := range e.corpus.pieces {
				cands := e.corpus.pieces[i].succ
				if len(cands) < 2 {
					continue
				}
				k, n := e.pickSucc(s, cands)
				l := e.logits[:n]
				if l[k] < slices.Max(l)+temp*math.Log(minP) {
					below++
				}
			}
		}
		return below
	}
	if n := picks(1, 1); n != 0 {
		t.Errorf("min_p 1: %d decisions picked below the most likely", n)
	}
	if n := picks(0.5, 0.5); n != 0 {
		t.Errorf("min_p 0.5: %d decisions picked below half the most likely", n)
	}
	if n := picks(0, 1); n < 10 {
		t.Errorf("no min_p: only %d decisions picked below the most likely; the test shows nothing", n)
	}
}

// TestShapeLogprobs: with a shaped request the logprobs cover the filler
// alternatives it sampled from, and the emitted token is always among the
// top entries.
func TestShapeLogprobs(t *testing.T) {
	e := newEngine(t, nil)
	c := genShaped(t, e, func(s *engine.Sampling) {
		s.PresencePenalty, s.Logprobs, s.TopLogprobs = 2, true, 3
	})
	for i, lp := range c.Logprobs {
		if lp.TokenID != c.TokenIDs[i] || math.IsNaN(float64(lp.Logprob)) || lp.Logprob > 0 {
			t.Fatalf("token %d: logprob %+v", i, lp)
		}
		if !slices.ContainsFunc(lp.Top, func(tl engine.TopLogprob) bool { return tl.TokenID == lp.TokenID }) {
			t.Fatalf("token %d: %q not among its top logprobs %+v", i, lp.Token, lp.Top)
		}
	}
}

// TestShapeValidation: Prepare refuses out-of-range penalties and a
// logit_bias outside the vocabulary or not sorted, naming the parameter.
func TestShapeValidation(t *testing.T) {
	e := newEngine(t, nil)
	f := func(param string, mod func(*engine.Sampling)) {
		t.Helper()
		req := chatReq("x", 4)
		mod(&req.Sampling)
		err := e.Prepare(req)
		ee := engine.AsError(err)
		if err == nil || ee.Kind != engine.KindInvalid || ee.Param != param {
			t.Errorf("%s: got %v", param, err)
		}
	}
	f("frequency_penalty", func(s *engine.Sampling) { s.FrequencyPenalty = 2.5 })
	f("presence_penalty", func(s *engine.Sampling) { s.PresencePenalty = math.NaN() })
	f("repetition_penalty", func(s *engine.Sampling) { s.RepetitionPenalty = -1 })
	f("repetition_penalty", func(s *engine.Sampling) { s.RepetitionPenalty = math.Inf(1) })
	f("min_p", func(s *engine.Sampling) { s.MinP = 1.5 })
	f("logit_bias", func(s *engine.Sampling) { s.LogitBias = []engine.TokenBias{{TokenID: vocabSize, Bias: 1}} })
	f("logit_bias", func(s *engine.Sampling) { s.LogitBias = []engine.TokenBias{{TokenID: -1, Bias: 1}} })
	f("logit_bias", func(s *engine.Sampling) { s.LogitBias = []engine.TokenBias{{TokenID: 5, Bias: 101}} })
	f("logit_bias", func(s *engine.Sampling) {
		s.LogitBias = []engine.TokenBias{{TokenID: 5, Bias: 1}, {TokenID: 5, Bias: 2}}
	})
	f("logit_bias", func(s *engine.Sampling) {
		s.LogitBias = []engine.TokenBias{{TokenID: 6, Bias: 1}, {TokenID: 5, Bias: 2}}
	})

	req := chatReq("x", 4)
	req.Sampling.RepetitionPenalty = 0 // unset
	req.Sampling.LogitBias = []engine.TokenBias{{TokenID: 0, Bias: -100}, {TokenID: vocabSize - 1, Bias: 100}}
	if err := e.Prepare(req); err != nil {
		t.Errorf("valid parameters refused: %v", err)
	}
}
