package llama

import (
	"math"
	"slices"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
	"github.com/vajra-go/vajra/engine/text"
)

// accept takes choice q's sampled token tok (from the batch output idx):
// its logprob, then the request's output (pipeline.Out: the end checks,
// the text through the choice's parser, the frames). A choice that ends
// frees its sequence; the request ends with its last choice.
func (s *pool) accept(q *seq, tok int32, idx int) {
	g := q.g
	o := &g.out
	sp := &g.req.Sampling
	if tok < 0 || int(tok) >= s.e.vocabN {
		// Nothing could be drawn (a grammar that allows no token): the
		// choice ends as if at its end-of-sequence token.
		o.EndChoice(q.index, engine.FinishStop, -1)
		s.endSeq(q)
		return
	}
	o.Step(s.stepAt) // once per step: the request's other choices share stepAt
	s.genTokens++
	var lp *engine.TokenLogprob
	if sp.Logprobs {
		// The token's and its alternatives' strings go into the choice's
		// arenas (pipeline.Out.Logprob): nothing allocated per token once
		// they have grown.
		l := s.ctx.Logits(idx)
		lse := logSumExp(l)
		s.lp = o.Logprob(q.index, tok, l[tok]-lse, s.topTokens(l, lse, sp.TopLogprobs), sp.TopLogprobs)
		lp = &s.lp
	}
	q.hist = append(q.hist, tok)
	end := o.Token(q.index, tok, lp)
	if o.Generated(q.index) == sp.MinTokens {
		q.sampler.Unban() // min_tokens reached: the stop tokens may come
	}
	if end != pipeline.Going {
		s.endSeq(q)
	}
}

// endSeq frees the sequence of q, whose choice ended (its KV stays in
// the prefix cache); the request ends with its last choice.
func (s *pool) endSeq(q *seq) {
	q.done = true
	s.release(q, true)
	if q.g.out.Live() == 0 {
		s.finishGroup(q.g, pipeline.Done, nil)
	}
}

// finishGroup ends g for cause (err: the failure when cause is
// pipeline.Failed): choices still running end as aborted and free their
// sequences, and the final Result is delivered with the stream's closing
// frames (pipeline.Out.Finish).
func (s *scheduler) finishGroup(g *group, cause pipeline.Cause, err *engine.Error) {
	if g.state == stateDone {
		return
	}
	if g.state == stateWaiting {
		if i := slices.Index(s.waiting, g); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
			s.e.waitingN.Add(-1)
		}
	}
	p := g.pool
	if p != nil {
		if i := slices.Index(p.running, g); i >= 0 {
			p.running = slices.Delete(p.running, i, i+1)
		}
	}
	g.state = stateDone
	frames, res := g.out.Finish(cause, err)
	for i := range g.seqs {
		if q := &g.seqs[i]; !q.done {
			q.done = true
			if p != nil {
				p.release(q, false)
			}
		}
	}
	g.free()
	s.publish()
	g.out.DeliverFinal(frames, res)
}

// topTokens returns the n most likely tokens of logits l (log-sum-exp
// lse) with their logprobs, under the raw logits (before any sampling
// transform, as vLLM reports them), best first, in the scheduler's
// scratch: valid until the next call.
func (s *scheduler) topTokens(l []float32, lse float32, n int) []pipeline.TopLogprob {
	n = min(n, len(l))
	if n <= 0 {
		return nil
	}
	best := s.topIdx[:0]
	for t := range l {
		v := l[t]
		if len(best) == n && v <= l[best[n-1]] {
			continue
		}
		at := len(best)
		for at > 0 && l[best[at-1]] < v {
			at--
		}
		if len(best) < n {
			best = append(best, 0)
		}
		copy(best[at+1:], best[at:len(best)-1])
		best[at] = int32(t)
	}
	s.topIdx = best
	tops := s.tops[:0]
	for _, t := range best {
		tops = append(tops, pipeline.TopLogprob{TokenID: t, Logprob: l[t] - lse})
	}
	s.tops = tops
	return tops
}

// topLogprobs returns the n most likely tokens of logits l, named, in a
// new slice (a prompt token's alternatives: kept by the Result).
func (s *scheduler) topLogprobs(l []float32, lse float32, n int) []engine.TopLogprob {
	tops := s.topTokens(l, lse, n)
	out := make([]engine.TopLogprob, len(tops))
	for i, t := range tops {
		out[i] = engine.TopLogprob{TokenID: int(t.TokenID), Token: s.e.tokenString(t.TokenID), Logprob: t.Logprob}
	}
	return out
}

func logSumExp(l []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range l {
		m = max(m, v)
	}
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(sum))
}

// promptLogprobs records, for the prompt positions [start, start+n) just
// run from batch index at, the logprob of each next prompt token.
func (s *pool) promptLogprobs(g *group, at, start, n int) {
	e := s.e
	prompt := g.prep.prompt
	top := max(g.req.PromptLogprobs, 0)
	if start == 0 {
		g.promptLP[0] = engine.TokenLogprob{TokenID: int(prompt[0]), Token: e.tokenString(prompt[0])}
	}
	for j := 0; j < n; j++ {
		p := start + j + 1
		if p >= len(prompt) {
			break
		}
		l := s.ctx.Logits(at + j)
		lse := logSumExp(l)
		t := prompt[p]
		lp := engine.TokenLogprob{TokenID: int(t), Token: e.tokenString(t), Logprob: l[t] - lse}
		if top > 0 {
			lp.Top = s.topLogprobs(l, lse, top)
		}
		g.promptLP[p] = lp
	}
}

// vocab is the model's vocabulary as pipeline.Out reads it: the engine's
// tables, read-only after load. Per token: no allocation beyond dst.
type vocab struct{ e *Engine }

func (v vocab) VocabSize() int           { return v.e.vocabN }
func (v vocab) EOG(id int32) bool        { return v.e.eog[id] }
func (v vocab) TokenKind(id int32) uint8 { return v.e.kind[id] }

// AppendText appends a control token's own text with keep (see
// text.KeepToken), else the token's piece.
func (v vocab) AppendText(dst []byte, id int32, keep bool) []byte {
	e := v.e
	if keep && e.kind[id] != text.TokenText {
		sp := e.ctrl[id]
		return append(dst, e.ctrlText[sp[0]:sp[1]]...)
	}
	return append(dst, e.piece(id)...)
}
