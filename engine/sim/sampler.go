package sim

import (
	"math"
)

// rng is splitmix64: tiny, fast, allocation-free and good enough to drive a
// simulation. The zero value is a valid generator.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return fmix(r.s)
}

// float returns a number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a number in [0, n); n > 0.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// fmix is the splitmix64 finalizer.
func fmix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// mix combines a hash with a value.
func mix(h, v uint64) uint64 { return fmix(h ^ (v + 0x9e3779b97f4a7c15 + h<<6 + h>>2)) }

// gumbelTable holds Gumbel(0,1) quantiles at 4096 evenly spaced points, so
// that noise costs a table lookup instead of two logarithms.
var gumbelTable = func() (t [4096]float64) {
	for i := range t {
		u := (float64(i) + 0.5) / float64(len(t))
		t[i] = -math.Log(-math.Log(u))
	}
	return t
}()

func gumbel(h uint64) float64 { return gumbelTable[h>>52] }

// modelNoise scales the per-context noise added to the corpus bigram
// log-weights: it plays the role of the prompt's influence on the "model",
// so that different prompts give different text even at temperature 0.
const modelNoise = 0.8

// pickSucc chooses the successor of the current piece of s. The model
// logits are the bigram log-counts plus noise drawn from the request's
// content hash (so they depend on the prompt, not on the sampling seed); a
// shaped request's are then extended and reshaped (shape.go). Temperature 0
// takes the argmax (greedy), else the Gumbel-max trick samples
// softmax(logits/T) restricted by min-p, top-k and top-p, with the choice's
// rng. It returns the index of the choice among the candidates (see
// candPiece) and their number; the logits stay in e.logits for the logprobs
// of the token.
func (e *Engine) pickSucc(s *seq, cands []succ) (k, ncand int) {
	n := len(cands)
	l := e.logits[:n]
	for i, c := range cands {
		l[i] = float64(c.logw) + modelNoise*gumbel(mix(s.ctx, uint64(s.decisions)<<8|uint64(i)))
	}
	s.decisions++
	if s.g.prep.shaped {
		n = e.shape(s, cands)
		l = e.logits[:n]
	}
	best := 0
	sp := &s.g.req.Sampling
	if sp.Temperature <= 0 {
		for i := 1; i < n; i++ {
			if l[i] > l[best] {
				best = i
			}
		}
		return best, n
	}
	allowed := n
	ord := e.order[:n]
	for i := range ord {
		ord[i] = i
	}
	if (sp.TopK > 0 && sp.TopK < n) || (sp.TopP > 0 && sp.TopP < 1) || sp.MinP > 0 {
		for i := 1; i < n; i++ { // insertion sort by logit, descending; n <= maxCand
			for j := i; j > 0 && l[ord[j]] > l[ord[j-1]]; j-- {
				ord[j], ord[j-1] = ord[j-1], ord[j]
			}
		}
		if sp.MinP > 0 {
			// vLLM's min-p: p_i < MinP*p_max at this temperature, that
			// is l_i/T < l_max/T + ln(MinP), drops candidate i.
			cut := l[ord[0]] + sp.Temperature*math.Log(sp.MinP)
			for allowed > 1 && l[ord[allowed-1]] < cut {
				allowed--
			}
		}
		kept := allowed // top-p's mass is of what min-p kept
		if sp.TopK > 0 && sp.TopK < allowed {
			allowed = sp.TopK
		}
		if sp.TopP > 0 && sp.TopP < 1 {
			var z float64
			for _, i := range ord[:kept] {
				z += math.Exp((l[i] - l[ord[0]]) / sp.Temperature)
			}
			var cum float64
			for k, i := range ord[:allowed] {
				cum += math.Exp((l[i]-l[ord[0]])/sp.Temperature) / z
				if cum >= sp.TopP {
					allowed = k + 1
					break
				}
			}
		}
	}
	bestScore := math.Inf(-1)
	for _, i := range ord[:allowed] {
		if sc := l[i]/sp.Temperature + gumbel(s.rng.next()); sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best, n
}

// markov produces the next token of the corpus walk of s. boundary reports
// that the token starts a new piece (its alternatives are other pieces);
// ncand is then the number of candidates whose logits are in e.logits.
func (e *Engine) markov(s *seq) (id int, boundary bool, ncand int) {
	c := e.corpus
	m := &s.walk
	if !m.started || int(m.pos) >= len(m.toks) {
		var next int32
		if !m.started {
			next = c.starts[s.rng.intn(len(c.starts))]
			if s.g.req.Sampling.Temperature <= 0 {
				next = c.starts[mix(s.ctx, uint64(s.decisions))%uint64(len(c.starts))]
			}
			s.decisions++
			m.toks = c.pieces[next].bare
			m.started = true
		} else {
			cands := c.pieces[m.cur].succ
			var k int
			k, ncand = e.pickSucc(s, cands)
			next = e.candPiece(cands, k)
			m.toks = c.pieces[next].toks
			m.prev = m.cur
		}
		m.cur, m.pos = next, 0
		boundary = true
	}
	id = m.toks[m.pos]
	m.pos++
	return id, boundary, ncand
}

// walk is the state of a corpus walk.
type walk struct {
	started bool
	cur     int32 // current piece
	prev    int32 // piece before cur, whose successors cur was picked from
	pos     int32 // next token of toks
	toks    []int // tokens of cur as emitted (bare at the start)
}

// atSentenceEnd reports whether the walk just finished a sentence.
func (e *Engine) atSentenceEnd(m *walk) bool {
	return m.started && int(m.pos) >= len(m.toks) && e.corpus.pieces[m.cur].end
}

// naturalLength draws the answer length after which a text-mode choice ends
// at the next sentence end: 16 tokens plus an exponential tail of mean 120,
// capped at 1024, roughly the shape of chat answer lengths.
func naturalLength(r *rng) int {
	n := 16 + int(-math.Log(1-r.float())*120)
	return min(n, 1024)
}

// reasoningLength is the number of reasoning tokens for an effort, varied
// by ±25% with r, capped by budget (when positive) and by 3/4 of maxTokens so
// that an answer follows.
func reasoningLength(effort string, budget, maxTokens int, r *rng) int {
	base := 384
	switch effort {
	case "minimal":
		base = 32
	case "low":
		base = 128
	case "high":
		base = 1024
	}
	n := base*3/4 + r.intn(base/2+1)
	if budget > 0 && n > budget {
		n = budget
	}
	if lim := maxTokens * 3 / 4; n > lim {
		n = lim
	}
	return max(n, 1)
}
