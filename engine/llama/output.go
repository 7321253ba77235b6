package llama

import (
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
)

// accept takes choice q's sampled token tok (from the batch output idx):
// its logprob, the end-of-generation and stop-token checks, its text
// through the choice's parser, and the frames of the events that yields.
func (s *scheduler) accept(q *seq, tok int32, idx int) {
	e := s.e
	g := q.g
	sp := &g.req.Sampling
	if tok < 0 || int(tok) >= e.vocabN {
		// Nothing could be drawn (a grammar that allows no token): the
		// choice ends as if at its end-of-sequence token.
		q.finish = engine.FinishStop
		s.endChoice(q)
		return
	}
	if g.first.IsZero() {
		g.first = time.Now()
	}
	g.gaps.Step(s.stepAt) // once per step: the request's other choices share stepAt
	if !g.started {
		s.appendStart(g)
	}
	s.genTokens++
	g.usage.CompletionTokens++
	if sp.Logprobs {
		q.lps = append(q.lps, s.logprob(idx, tok, sp.TopLogprobs))
	}
	q.gen = append(q.gen, int(tok))
	q.hist = append(q.hist, tok)
	if len(q.gen) == sp.MinTokens {
		q.sampler.Unban() // min_tokens reached: the stop tokens may come
	}
	switch {
	case e.eog[tok] && !sp.IgnoreEOS:
		q.finish = engine.FinishStop
	case slices.Contains(sp.StopTokenIDs, int(tok)):
		q.finish, q.stopTokenID = engine.FinishStop, int(tok)
	case q.forced != nil:
		s.feedForced(q, e.piece(tok))
	default:
		var stopped bool
		q.events, stopped = q.parser.Feed(q.events[:0], e.outPiece(tok, &g.prep.parse, sp.KeepSpecialTokens))
		if hasReasoning(q.events) {
			g.usage.ReasoningTokens++
		}
		s.emit(q, q.events)
		if stopped {
			q.finish, q.stopString = engine.FinishStop, q.parser.StopString()
		}
	}
	if q.finish == "" && (len(q.gen) >= g.prep.maxTokens || len(q.hist) >= e.cfg.MaxModelLen) {
		q.finish = engine.FinishLength
	}
	if q.finish != "" {
		s.endChoice(q)
	}
}

// appendStart writes the stream's opening frames, once, at the request's
// first token (the prompt's logprobs are complete by then).
func (s *scheduler) appendStart(g *group) {
	g.started = true
	if !g.req.Stream {
		return
	}
	st := &s.start
	*st = engine.Start{
		PromptTokens:   g.usage.PromptTokens,
		CachedTokens:   g.usage.CachedTokens,
		N:              len(g.seqs),
		PromptLogprobs: g.promptLP,
		PromptTokenIDs: g.req.PromptTokens,
	}
	g.buf = g.req.Formatter.AppendStart(g.buf, st)
}

// emit writes the frames of q's parser events. Text events carry the
// tokens generated since the last one (and their logprobs). With a stream
// interval above 1 (vLLM's --stream-interval), text is held until that
// many tokens are due, or its kind changes, or the choice ends.
func (s *scheduler) emit(q *seq, events []text.Event) {
	g := q.g
	if !g.req.Stream {
		return
	}
	for i := range events {
		ev := &events[i]
		text := ev.Kind == engine.DeltaText || ev.Kind == engine.DeltaReasoning
		if g.interval > 1 && text {
			if len(q.hold) > 0 && q.holdKind != ev.Kind {
				s.flushHeld(q)
			}
			q.hold, q.holdKind = append(q.hold, ev.Text...), ev.Kind
			continue
		}
		s.flushHeld(q)
		s.writeDelta(q, ev.Kind, ev.Text, ev)
	}
	if len(q.hold) > 0 && len(q.gen)-q.pend >= g.interval {
		s.flushHeld(q)
	}
}

// flushHeld writes the text held for the stream interval.
func (s *scheduler) flushHeld(q *seq) {
	if len(q.hold) == 0 {
		return
	}
	s.writeDelta(q, q.holdKind, q.hold, nil)
	q.hold = q.hold[:0]
}

// writeDelta appends one Delta's frames; ev carries a tool call's fields.
func (s *scheduler) writeDelta(q *seq, kind engine.DeltaKind, txt []byte, ev *text.Event) {
	g := q.g
	d := &s.delta
	*d = engine.Delta{Choice: q.index, Kind: kind, Text: txt, Usage: &g.usage}
	switch kind {
	case engine.DeltaToolCallStart:
		d.ToolCallIndex, d.ToolCallID, d.ToolName = ev.ToolIndex, ev.ToolID, ev.ToolName
	case engine.DeltaToolCallArgs:
		d.ToolCallIndex = ev.ToolIndex
	default:
		d.TokenIDs = q.gen[q.pend:]
		if q.lps != nil {
			d.Logprobs = q.lps[q.pend:]
		}
		q.pend = len(q.gen)
	}
	d.First, q.first = !q.first, true
	g.buf = g.req.Formatter.AppendDelta(g.buf, d)
}

// endChoice flushes q's parser, writes its closing frame and frees its
// sequence; the request ends with its last choice.
func (s *scheduler) endChoice(q *seq) {
	g := q.g
	if q.forced != nil {
		s.finishForced(q)
	}
	q.events = q.parser.Finish(q.events[:0])
	s.emit(q, q.events)
	if g.req.Stream {
		s.flushHeld(q)
		if q.lps != nil && q.pend < len(q.gen) {
			// Tokens whose text was held back (a stop string, a tag)
			// still carry their logprobs.
			s.writeDelta(q, engine.DeltaText, nil, nil)
		}
	}
	if q.finish == engine.FinishStop && (q.parser.ToolCalled() || q.forced != nil && len(q.forced.Calls()) > 0) {
		q.finish = engine.FinishToolCalls
	}
	q.done = true
	g.live--
	s.release(q, q.finish != engine.FinishAbort)
	if g.req.Stream {
		ce := &s.choiceEnd
		*ce = engine.ChoiceEnd{Choice: q.index, FinishReason: q.finish, StopString: q.stopString,
			StopTokenID: q.stopTokenID, Usage: &g.usage}
		g.buf = g.req.Formatter.AppendChoiceEnd(g.buf, ce)
	}
	if g.live == 0 {
		s.finishGroup(g, nil)
	}
}

// finishGroup builds g's Result, appends the closing frames and delivers
// them; err is nil on success. Choices still running end as aborted.
func (s *scheduler) finishGroup(g *group, err *engine.Error) {
	if g.state == stateDone {
		return
	}
	if g.state == stateWaiting {
		if i := slices.Index(s.waiting, g); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
			s.e.waitingN.Add(-1)
		}
	}
	if i := slices.Index(s.running, g); i >= 0 {
		s.running = slices.Delete(s.running, i, i+1)
	}
	g.state = stateDone
	now := time.Now()
	res := &engine.Result{
		Choices:      make([]engine.Choice, len(g.seqs)),
		Usage:        g.usage,
		Err:          err,
		PromptTokens: g.req.PromptTokens,
		Gaps:         g.gaps,
	}
	var admitted time.Time
	if g.admitted {
		admitted = g.admit
	}
	res.SetTimes(g.arrival, admitted, g.first, now)
	for i := range g.seqs {
		q := &g.seqs[i]
		if !q.done {
			q.done, q.finish = true, engine.FinishAbort
			if !g.broken {
				q.parser.Finish(q.events[:0])
			}
			s.release(q, false)
		}
		c := &res.Choices[i]
		if g.broken {
			// The parser may be what panicked: the Result keeps what the
			// engine itself holds.
			*c = engine.Choice{Index: i, TokenIDs: q.gen, FinishReason: q.finish, StopTokenID: q.stopTokenID}
			continue
		}
		*c = engine.Choice{
			Index:          i,
			Text:           q.parser.Content(),
			Reasoning:      q.parser.Reasoning(),
			TokenIDs:       q.gen,
			FinishReason:   q.finish,
			StopString:     q.stopString,
			StopTokenID:    q.stopTokenID,
			Logprobs:       q.lps,
			PromptLogprobs: g.promptLP,
		}
		if calls := q.parser.ToolCalls(); len(calls) > 0 {
			c.ToolCalls = slices.Clone(calls)
		}
		if f := q.forced; f != nil {
			c.ToolCalls, c.Text = f.Calls(), f.Content()
		}
	}
	g.free()
	res.Panicked = g.broken
	var frames []byte
	if g.req.Stream {
		frames = s.endFrames(g, res)
	}
	s.publish()
	s.deliverFinal(g, frames, res)
	g.buf = nil
}

// endFrames appends the frames that end g's stream for its final Result
// res: the end, or the error event of a failure the engine detected; none
// after the client's abort or once g is broken. A panic in the Formatter
// here leaves the stream open, after its last whole event, and makes res a
// panicked Result (see engine.Result.Panicked).
func (s *scheduler) endFrames(g *group, res *engine.Result) (frames []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.e.logPanic(g, r)
			res.Err, res.Panicked, frames = engine.PanicError(), true, nil
		}
	}()
	switch {
	case g.broken:
		return nil
	case res.Err == nil:
		return g.req.Formatter.AppendEnd(g.buf, res)
	case res.Err.Message != abortedByClient:
		return g.req.Formatter.AppendError(g.buf, res.Err)
	}
	return nil
}

// deliverFinal hands g's sink its final Result. A panic in the sink ends
// nothing more (g is done): it is logged, and the engine goes on.
func (s *scheduler) deliverFinal(g *group, frames []byte, res *engine.Result) {
	defer func() {
		if r := recover(); r != nil {
			s.e.logPanic(g, r)
		}
	}()
	g.sink.Deliver(frames, res)
}

// logPanic logs a panic of g's own code once, with its request id and the
// stack. Called in the deferred function that recovered it, so the stack
// still holds the panicking frames.
func (e *Engine) logPanic(g *group, r any) {
	e.cfg.Logger.Error("panic in a request's output; the request is ended, the engine goes on",
		zap.String("request_id", g.req.ID), zap.Any("panic", r), zap.Stack("stack"))
}

// logprob returns the logprob of tok under the raw logits of batch output
// idx (before any sampling transform, as vLLM reports them), with the top
// alternatives.
func (s *scheduler) logprob(idx int, tok int32, top int) engine.TokenLogprob {
	e := s.e
	l := e.ctx.Logits(idx)
	lse := logSumExp(l)
	lp := engine.TokenLogprob{TokenID: int(tok), Token: e.tokenString(tok), Logprob: l[tok] - lse}
	if top > 0 {
		lp.Top = s.topLogprobs(l, lse, top)
	}
	return lp
}

// topLogprobs returns the n most likely tokens of logits l.
func (s *scheduler) topLogprobs(l []float32, lse float32, n int) []engine.TopLogprob {
	e := s.e
	n = min(n, len(l))
	best := s.topIdx[:0] // reused: only the result is kept
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
	out := make([]engine.TopLogprob, len(best))
	for i, t := range best {
		out[i] = engine.TopLogprob{TokenID: int(t), Token: e.tokenString(t), Logprob: l[t] - lse}
	}
	s.topIdx = best
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
func (s *scheduler) promptLogprobs(g *group, at, start, n int) {
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
		l := e.ctx.Logits(at + j)
		lse := logSumExp(l)
		t := prompt[p]
		lp := engine.TokenLogprob{TokenID: int(t), Token: e.tokenString(t), Logprob: l[t] - lse}
		if top > 0 {
			lp.Top = s.topLogprobs(l, lse, top)
		}
		g.promptLP[p] = lp
	}
}

// hasReasoning reports whether a token's events hold reasoning text: the
// token counts as a reasoning token.
func hasReasoning(events []text.Event) bool {
	for i := range events {
		if events[i].Kind == engine.DeltaReasoning {
			return true
		}
	}
	return false
}
