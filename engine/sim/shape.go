package sim

import (
	"math"
	"slices"
	"strconv"

	"github.com/vajra-go/vajra/engine"
)

// This file applies the sampling parameters that reshape the logits before
// sampling: logit_bias, repetition_penalty, frequency_penalty and
// presence_penalty, in vLLM's order (bias first, then the repetition
// penalty, then frequency and presence). min_p is applied with top-k and
// top-p in pickSucc.
//
// They act on the walk's decisions: a candidate piece stands for its first
// token (the token a decision emits; the rest of a word follows without a
// choice), so a bias or a count is looked up by that token. A request that
// asks for any of them is "shaped": its decisions weigh, besides the
// bigram successors, the filler pieces (" the", ",", " and", ...) that the
// logprobs already show as the model's low-probability alternatives, so that
// a bias of -100 or a strong penalty on every successor leaves something
// else to emit, as a real model's vocabulary does. An unshaped request walks
// exactly as before and pays nothing.

// shapeLimits are the engine's own checks of the parameters (the dialects
// check them first; a Go caller may not).
const (
	maxPenalty = 2   // |frequency_penalty|, |presence_penalty| (OpenAI)
	maxBias    = 100 // |logit_bias value| (OpenAI)
)

// validateShape checks the penalty and bias parameters: ranges, logit_bias
// ids inside the vocabulary (vLLM refuses out-of-vocabulary ids too) and
// sorted without repeats, as engine.Sampling promises.
func validateShape(sp *engine.Sampling) error {
	fmtF := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	switch {
	case !(sp.FrequencyPenalty >= -maxPenalty && sp.FrequencyPenalty <= maxPenalty):
		return invalid("frequency_penalty", "frequency_penalty must be in [-2, 2], got "+fmtF(sp.FrequencyPenalty))
	case !(sp.PresencePenalty >= -maxPenalty && sp.PresencePenalty <= maxPenalty):
		return invalid("presence_penalty", "presence_penalty must be in [-2, 2], got "+fmtF(sp.PresencePenalty))
	case !(sp.RepetitionPenalty >= 0) || math.IsInf(sp.RepetitionPenalty, 1):
		return invalid("repetition_penalty", "repetition_penalty must be greater than zero, got "+fmtF(sp.RepetitionPenalty))
	case !(sp.MinP >= 0 && sp.MinP <= 1):
		return invalid("min_p", "min_p must be in [0, 1], got "+fmtF(sp.MinP))
	}
	for i, b := range sp.LogitBias {
		switch {
		case b.TokenID < 0 || b.TokenID >= vocabSize:
			return invalid("logit_bias", "token id "+strconv.Itoa(b.TokenID)+
				" in logit_bias is outside the vocabulary (0.."+strconv.Itoa(vocabSize-1)+")")
		case !(b.Bias >= -maxBias && b.Bias <= maxBias):
			return invalid("logit_bias", "the bias of token "+strconv.Itoa(b.TokenID)+" must be in [-100, 100], got "+fmtF(b.Bias))
		case i > 0 && b.TokenID <= sp.LogitBias[i-1].TokenID:
			return invalid("logit_bias", "logit_bias must be sorted by token id, each id once")
		}
	}
	return nil
}

// repetitionOn reports whether the repetition penalty changes anything (0
// means unset, 1 is off).
func repetitionOn(sp *engine.Sampling) bool {
	return sp.RepetitionPenalty != 0 && sp.RepetitionPenalty != 1
}

// countsOn reports whether the request's choices count their output tokens.
func countsOn(sp *engine.Sampling) bool {
	return sp.FrequencyPenalty != 0 || sp.PresencePenalty != 0 || repetitionOn(sp)
}

// prepareShape sets p.shaped, and p.promptSeen for the repetition penalty:
// which candidate tokens the prompt holds.
func (e *Engine) prepareShape(req *engine.Request, p *prepared) {
	sp := &req.Sampling
	p.shaped = countsOn(sp) || len(sp.LogitBias) > 0
	if !repetitionOn(sp) {
		return
	}
	c := e.corpus
	p.promptSeen = make([]bool, c.ncandTok)
	for _, id := range req.PromptTokens {
		if k := c.candIdx[id]; k > 0 {
			p.promptSeen[k-1] = true
		}
	}
}

// newCounts returns the output-token counts of n choices, one allocation:
// counts[i*ncandTok+k] is how often choice i emitted candidate token k.
func (e *Engine) newCounts(n int) []int32 {
	return make([]int32, n*e.corpus.ncandTok)
}

// countToken records that s emitted token id. Loop-only.
func (e *Engine) countToken(s *seq, id int) {
	if k := e.corpus.candIdx[id]; k > 0 {
		s.counts[k-1]++
	}
}

// shape extends the n successor logits in e.logits with the filler
// alternatives (their pieces go to e.extra) and applies the bias and the
// penalties to every candidate. It returns the number of candidates.
// Loop-only.
func (e *Engine) shape(s *seq, cands []succ) int {
	c := e.corpus
	n := len(cands)
	l := e.logits[:]
	// The fillers' logits follow their share of the probability in the
	// logprobs (logprobs.go): filler j has (1-candMass)*fillerHead*
	// fillerDecay^j of it, the successors together candMass, so its logit
	// is the successors' log-sum-exp plus log(share/candMass).
	m := l[0]
	for _, v := range l[1:n] {
		m = max(m, v)
	}
	var z float64
	for _, v := range l[:n] {
		z += math.Exp(v - m)
	}
	lse := m + math.Log(z)
	share := (1 - candMass) * fillerHead
	e.nextra = 0
next:
	for _, fp := range c.fillerPieces {
		sh := share
		share *= fillerDecay
		for _, cd := range cands {
			if cd.next == fp {
				continue next
			}
		}
		e.extra[e.nextra] = fp
		e.nextra++
		l[n] = lse + math.Log(sh/candMass)
		n++
	}

	sp := &s.g.req.Sampling
	rep := repetitionOn(sp)
	for i := range n {
		p := e.candPiece(cands, i)
		k := c.pieceCand[p]
		x := l[i]
		if len(sp.LogitBias) > 0 {
			tok := c.pieces[p].toks[0]
			if j, ok := slices.BinarySearchFunc(sp.LogitBias, tok, func(b engine.TokenBias, t int) int { return b.TokenID - t }); ok {
				x += sp.LogitBias[j].Bias
			}
		}
		if s.counts != nil {
			cnt := s.counts[k]
			// Hugging Face's (and vLLM's) repetition penalty: a seen
			// token's logit moves toward "less likely" whatever its sign.
			if rep && (cnt > 0 || s.g.prep.promptSeen[k]) {
				if x > 0 {
					x /= sp.RepetitionPenalty
				} else {
					x *= sp.RepetitionPenalty
				}
			}
			// OpenAI's formula: logit -= count*frequency + (count > 0)*presence.
			if cnt > 0 {
				x -= float64(cnt)*sp.FrequencyPenalty + sp.PresencePenalty
			}
		}
		l[i] = x
	}
	return n
}

// candPiece returns the piece of candidate i of the decision in progress:
// a successor in cands, then the fillers shape added. Loop-only.
func (e *Engine) candPiece(cands []succ, i int) int32 {
	if i < len(cands) {
		return cands[i].next
	}
	return e.extra[i-len(cands)]
}
