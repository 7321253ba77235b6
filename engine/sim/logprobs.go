package sim

import (
	"math"
	"slices"

	"github.com/vajra-go/vajra/engine"
)

// The simulated distributions. At a word boundary of the corpus walk the
// candidates are the successor pieces, weighted by softmax of their logits
// (the same logits the token was sampled from) and sharing candMass of the
// probability; filler tokens share part of the rest. Inside a word, and for
// scripted output (echo, JSON, tool arguments), the emitted token is near
// certain. The alternatives' probabilities therefore sum to less than 1.
const (
	candMass    = 0.9
	fillerHead  = 0.4 // first filler's share of what is left
	fillerDecay = 0.6 // each next filler's share relative to the previous
)

// appendLogprob appends the logprob entry of token id, just produced by s,
// with up to TopLogprobs alternatives sorted descending and the token itself
// among them. boundary and ncand describe the corpus walk's decision (see
// markov); the logits are still in e.logits. Loop-only; allocates only by
// growing s.lps and s.slab.
func (e *Engine) appendLogprob(s *seq, id int, boundary bool, ncand int) {
	k := s.g.req.Sampling.TopLogprobs
	tops := e.tops[:0]
	rest := 1.0
	if boundary && ncand > 0 {
		l := e.logits[:ncand]
		m := l[0]
		for _, v := range l[1:] {
			m = max(m, v)
		}
		var z float64
		for _, v := range l {
			z += math.Exp(v - m)
		}
		cands := e.corpus.pieces[s.walk.prev].succ
	next:
		for i := range ncand {
			tok := e.corpus.pieces[e.candPiece(cands, i)].toks[0]
			p := candMass * math.Exp(l[i]-m) / z
			for j := range tops {
				if tops[j].TokenID == tok {
					tops[j].Logprob += float32(p) // summed as probability, converted below
					continue next
				}
			}
			tops = append(tops, engine.TopLogprob{TokenID: tok, Logprob: float32(p)})
		}
		rest = 1 - candMass
	} else {
		// Near certain: 0.90 .. 0.99, varied per position by the content.
		u := float64(mix(s.ctx, uint64(len(s.ids)))>>11) / (1 << 53)
		p := 0.9 + 0.09*u
		tops = append(tops, engine.TopLogprob{TokenID: id, Logprob: float32(p)})
		rest = 1 - p
	}
	tops = e.addFillers(tops, rest, k+1)
	var pc float32 // the emitted token's probability
	for i := range tops {
		if tops[i].TokenID == id {
			pc = tops[i].Logprob
			break
		}
	}
	if pc == 0 { // cannot happen: the emitted token is always a candidate
		pc = float32(rest * fillerHead)
	}
	lp := engine.TokenLogprob{TokenID: id, Token: e.vocab.text(id), Logprob: float32(math.Log(float64(pc)))}
	if keep := min(k, len(tops)); keep > 0 {
		selectTop(tops, keep)
		tops = tops[:keep]
		if !slices.ContainsFunc(tops, func(t engine.TopLogprob) bool { return t.TokenID == id }) {
			tops[keep-1] = engine.TopLogprob{TokenID: id, Logprob: pc} // the lowest kept: still sorted
		}
		for i := range tops {
			tops[i].Logprob = float32(math.Log(float64(tops[i].Logprob)))
			tops[i].Token = e.vocab.text(tops[i].TokenID)
		}
		// The slab grows by whole chunks, never by copying: earlier Top
		// slices keep pointing into earlier chunks.
		if cap(s.slab)-len(s.slab) < keep {
			s.slab = make([]engine.TopLogprob, 0, slabChunk*k)
		}
		start := len(s.slab)
		s.slab = append(s.slab, tops...)
		lp.Top = s.slab[start:len(s.slab):len(s.slab)]
	}
	s.lps = append(s.lps, lp)
}

// addFillers appends filler tokens not yet in tops, sharing part of the
// probability rest, until tops has want entries. Probabilities, not logs.
func (e *Engine) addFillers(tops []engine.TopLogprob, rest float64, want int) []engine.TopLogprob {
	p := rest * fillerHead
outer:
	for _, f := range e.corpus.fillers {
		if len(tops) >= want {
			break
		}
		for j := range tops {
			if tops[j].TokenID == f {
				continue outer
			}
		}
		tops = append(tops, engine.TopLogprob{TokenID: f, Logprob: float32(p)})
		p *= fillerDecay
	}
	return tops
}

// slabChunk is the number of tokens whose top logprobs share one slab chunk.
const slabChunk = 64

// selectTop moves the keep most likely entries to the front of t, sorted by
// probability descending then token id: a partial selection sort, O(n*keep)
// for n of a few dozen.
func selectTop(t []engine.TopLogprob, keep int) {
	for i := range keep {
		best := i
		for j := i + 1; j < len(t); j++ {
			if t[j].Logprob > t[best].Logprob || t[j].Logprob == t[best].Logprob && t[j].TokenID < t[best].TokenID {
				best = j
			}
		}
		t[i], t[best] = t[best], t[i]
	}
}

// promptLogprobs computes the prompt's logprobs in one batch when the
// request asked for them (completions with echo): each prompt token gets a
// probability drawn from the content hash, and PromptLogprobs alternatives
// (fillers) when positive. Unlike vLLM, the first token gets a value too
// rather than null.
func (e *Engine) promptLogprobs(g *group) []engine.TokenLogprob {
	k := g.req.PromptLogprobs
	ids := g.req.PromptTokens
	out := make([]engine.TokenLogprob, len(ids))
	var slab []engine.TopLogprob
	if k > 0 {
		slab = make([]engine.TopLogprob, 0, len(ids)*k)
	}
	for i, id := range ids {
		u := float64(mix(g.prep.ctx^0x5bd1e995, uint64(i))>>11) / (1 << 53)
		p := 0.02 + 0.9*u
		out[i] = engine.TokenLogprob{TokenID: int(id), Token: e.vocab.text(int(id)), Logprob: float32(math.Log(p))}
		if k <= 0 {
			continue
		}
		tops := append(e.tops[:0], engine.TopLogprob{TokenID: int(id), Logprob: float32(p)})
		tops = e.addFillers(tops, 1-p, k)
		for j := range tops {
			tops[j].Logprob = float32(math.Log(float64(tops[j].Logprob)))
			tops[j].Token = e.vocab.text(tops[j].TokenID)
		}
		selectTop(tops, len(tops)) // sorts them all
		start := len(slab)
		slab = append(slab, tops...)
		out[i].Top = slab[start:len(slab):len(slab)]
	}
	return out
}
