package sim

import (
	"slices"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
)

// run is the scheduler loop, the engine's only goroutine. Each pass takes
// new requests and aborts, admits waiting requests while sequence slots and
// KV blocks allow, hands first tokens to requests whose prefill is over,
// runs a decode step over every decoding sequence when one is due, and
// publishes the stats. Then it sleeps on its one timer until the next
// prefill end or step, or until Start, Abort or Close wakes it.
func (e *Engine) run() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var inbox, aborts []*group
	for {
		e.mu.Lock()
		inbox, e.inbox = e.inbox, inbox[:0]
		aborts, e.aborts = e.aborts, aborts[:0]
		closing := e.closing
		e.mu.Unlock()

		now := e.cfg.now()
		for i, g := range inbox {
			e.waiting = append(e.waiting, g)
			inbox[i] = nil
		}
		for i, g := range aborts {
			e.abort(g, now)
			aborts[i] = nil
		}
		if closing {
			e.shutdown(now)
			return
		}
		e.admit(now)
		e.pass(now)
		// The pass may have freed slots and blocks (finished or preempted
		// requests); admit again, or a queue behind a now-empty batch would
		// sleep until the next Start.
		e.admit(now)
		e.publish()

		next, ok := e.nextWake()
		if !ok {
			<-e.wakeCh
			continue
		}
		wait := next.Sub(e.cfg.now())
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-e.wakeCh:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// wake makes the loop run a pass now. Safe for concurrent use.
func (e *Engine) wake() {
	select {
	case e.wakeCh <- struct{}{}:
	default:
	}
}

// nextWake is when the loop has work without being woken: the next decode
// step when any sequence decodes, else the earliest prefill end.
func (e *Engine) nextWake() (time.Time, bool) {
	var next time.Time
	ok := false
	for _, g := range e.running {
		var t time.Time
		switch g.state {
		case statePrefill:
			t = g.readyAt
		case stateDecode:
			t = e.nextStep
		default:
			continue
		}
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	return next, ok
}

// stepDur is the duration of one decode step at the current batch size.
func (e *Engine) stepDur() time.Duration {
	d := e.cfg.ITL
	if e.cfg.LoadFactor > 0 {
		d += time.Duration(float64(d) * e.cfg.LoadFactor * float64(e.runningSeqs) / float64(e.cfg.MaxNumSeqs))
	}
	return d
}

// admit moves waiting requests to running, first come first served, while
// sequence slots and KV blocks allow; a request that does not fit blocks the
// ones behind it (no overtaking, as in vLLM's FCFS policy).
func (e *Engine) admit(now time.Time) {
	for len(e.waiting) > 0 {
		g := e.waiting[0]
		if e.runningSeqs+g.live > e.cfg.MaxNumSeqs && len(e.running) > 0 {
			return
		}
		if !e.allocGroup(g, now) {
			if len(e.running) > 0 {
				return
			}
			// Alone in an empty cache and still too big: it can never run.
			e.popWaiting()
			e.finishGroup(g, pipeline.Failed, &engine.Error{Kind: engine.KindInvalid, Param: "max_tokens",
				Message: "request needs more KV cache blocks than the engine has (--kv-cache-tokens)"}, now)
			continue
		}
		e.popWaiting()
		e.running = append(e.running, g)
		e.runningSeqs += g.live
	}
}

// popWaiting drops the head of the waiting queue. The last one leaves the
// slice where it is, so that a queue that empties and refills one request at
// a time (the common case) reuses its array instead of sliding off its end
// and reallocating per request.
func (e *Engine) popWaiting() {
	e.waiting[0] = nil
	if len(e.waiting) == 1 {
		e.waiting = e.waiting[:0]
	} else {
		e.waiting = e.waiting[1:]
	}
	e.waitingN.Add(-1)
}

// allocGroup takes the KV blocks g needs to (re)start: its prompt's full
// blocks, reusing cached ones, and for each live choice the blocks of its
// partial prompt block, its output so far and the next token. On success g
// is in statePrefill with readyAt set by the prefill lane.
func (e *Engine) allocGroup(g *group, now time.Time) bool {
	p, kv := g.prep, e.kv
	e.hashes = appendBlockHashes(e.hashes[:0], g.req.PromptTokens)
	hashes := e.hashes
	hits, freeHits := kv.lookup(hashes)
	if hits > 0 && hits == len(hashes) && p.promptLen%BlockSize == 0 {
		// The last prompt token is always computed, to produce the first
		// output token (vLLM does the same).
		hits--
		_, freeHits = kv.lookup(hashes[:hits])
	}
	need := len(hashes) - hits
	recompute := 0
	for i := range g.seqs {
		if s := &g.seqs[i]; !s.done {
			need += blocksFor(s.kvTokens() + 1)
			recompute += len(s.ids)
		}
	}
	avail := kv.free() - freeHits
	if len(e.running) > 0 {
		avail -= kv.total() / 100 // vLLM's 1% watermark against thrashing
	}
	if need > avail {
		return false
	}
	if !g.admitted {
		e.takeBuffers(g)
	}
	g.promptBlocks = g.promptBlocks[:0]
	for i, h := range hashes {
		if i < hits {
			id := kv.table[h]
			kv.acquire(id)
			g.promptBlocks = append(g.promptBlocks, id)
			continue
		}
		id := kv.alloc()
		kv.register(id, h)
		g.promptBlocks = append(g.promptBlocks, id)
	}
	for i := range g.seqs {
		s := &g.seqs[i]
		if s.done {
			continue
		}
		for range blocksFor(s.kvTokens() + 1) {
			s.blocks = append(s.blocks, kv.alloc())
		}
	}
	cached := hits * BlockSize
	e.prefixQueries += uint64(p.promptLen)
	e.prefixHits += uint64(cached)
	if !g.admitted {
		g.admitted, g.admit = true, now.Sub(g.arrival)
		g.usage.CachedTokens = cached
		e.promptTokens += uint64(p.promptLen)
	}
	// Prefill: one lane shared by all requests, at PrefillTPS.
	ready := now
	if tps := e.cfg.PrefillTPS; tps > 0 {
		if e.prefillFree.After(ready) {
			ready = e.prefillFree
		}
		work := p.promptLen - cached + recompute
		ready = ready.Add(time.Duration(float64(work) / tps * float64(time.Second)))
		e.prefillFree = ready
	}
	if floor := g.arrival.Add(e.cfg.TTFT); !g.started && e.cfg.TTFT > 0 && ready.Before(floor) {
		ready = floor
	}
	g.state, g.readyAt = statePrefill, ready
	return true
}

// releaseSeq frees the blocks a choice holds.
func (e *Engine) releaseSeq(s *seq) {
	for _, id := range s.blocks {
		e.kv.release(id)
	}
	s.blocks = s.blocks[:0]
}

// releaseGroup frees every block of g and its sequence slots, if it runs.
func (e *Engine) releaseGroup(g *group) {
	if !g.active() {
		return
	}
	for i := range g.seqs {
		e.releaseSeq(&g.seqs[i])
	}
	for _, id := range g.promptBlocks {
		e.kv.release(id)
	}
	g.promptBlocks = g.promptBlocks[:0]
	e.runningSeqs -= g.live
}

// lendFrames lends the engine's step buffer to the request being stepped.
func (e *Engine) lendFrames() []byte {
	if e.frames == nil {
		e.frames = make([]byte, 0, frameBufSize)
	}
	return e.frames[:0]
}

// returnFrames takes the step buffer back (it may have grown) once the
// request's frames were delivered.
func (e *Engine) returnFrames(g *group) {
	if g.buf != nil {
		e.frames = g.buf[:0]
		g.buf = nil
	}
}

// pass runs one scheduler pass over the running requests, in admission
// order: first tokens for finished prefills, and a decode step for the rest
// when one is due. Each request that produced output gets one Deliver.
func (e *Engine) pass(now time.Time) {
	decoding := false
	for _, g := range e.running {
		if g.state == stateDecode {
			decoding = true
			break
		}
	}
	due := decoding && !now.Before(e.nextStep)
	started := false
	for i := 0; i < len(e.running); i++ {
		if g := e.running[i]; g.active() && e.step(g, now, due) {
			started = true
		}
	}
	if due {
		d := e.stepDur()
		e.nextStep = e.nextStep.Add(d)
		if e.nextStep.Before(now) {
			e.nextStep = now.Add(d)
		}
	} else if started && !decoding {
		e.nextStep = now.Add(e.stepDur())
	}
	e.dropInactive()
}

// step runs g's part of a pass, in the engine's step buffer: its first
// token when its prefill is over, or a decode step when one is due, then
// one delivery of what it produced. It reports whether g's prefill ended.
// The request's own code (its Formatter, its Sink) runs here; a panic in
// it ends g alone (failed). The guard is one open-coded defer per request
// per step, nothing per token.
func (e *Engine) step(g *group, now time.Time, due bool) (started bool) {
	g.buf = e.lendFrames()
	defer func() {
		if r := recover(); r != nil {
			e.failed(g, r, now)
		}
		e.returnFrames(g)
	}()
	produced := g.usage.CompletionTokens
	switch g.state {
	case statePrefill:
		if now.Before(g.readyAt) {
			return false
		}
		e.firstToken(g, now)
		started = true
	case stateDecode:
		if !due {
			return false
		}
		e.decode(g)
	}
	if g.usage.CompletionTokens != produced {
		g.gaps.Step(now) // one inter-token gap per step with output
	}
	if g.live == 0 {
		e.finishGroup(g, pipeline.Done, nil, now)
	} else if g.req.Stream && len(g.buf) > 0 {
		g.sink.Deliver(g.buf, nil)
	}
	return started
}

// firstToken ends g's prefill: the stream opens (once) and every live choice
// gets its first token (after a preemption: its next one).
func (e *Engine) firstToken(g *group, now time.Time) {
	if !g.started {
		g.started = true
		g.first = now.Sub(g.arrival)
		if g.req.PromptLogprobs != 0 {
			g.promptLP = e.promptLogprobs(g)
		}
		if g.req.Stream {
			st := &e.start
			*st = engine.Start{
				PromptTokens:   g.prep.promptLen,
				CachedTokens:   g.usage.CachedTokens,
				N:              len(g.seqs),
				PromptLogprobs: g.promptLP,
				PromptTokenIDs: g.req.PromptTokens,
			}
			g.buf = g.req.Formatter.AppendStart(g.buf, st)
		}
	}
	g.state = stateDecode
	for i := range g.seqs {
		if s := &g.seqs[i]; !s.done {
			e.produce(s)
		}
	}
}

// decode runs one decode step for g's live choices, growing their KV blocks
// and preempting the latest-admitted requests when blocks run out.
func (e *Engine) decode(g *group) {
	for i := range g.seqs {
		s := &g.seqs[i]
		if s.done {
			continue
		}
		if need := blocksFor(s.kvTokens() + 1); need > len(s.blocks) {
			for e.kv.free() == 0 {
				if !e.preemptLast(g) {
					return // g itself was preempted
				}
			}
			s.blocks = append(s.blocks, e.kv.alloc())
		}
		e.produce(s)
	}
}

// preemptLast preempts the latest-admitted running request (recompute
// policy: its blocks are freed; it goes to the head of the waiting queue
// and, once readmitted, recomputes its prompt and output, then continues;
// its stream just pauses). It reports false when the victim was g itself.
func (e *Engine) preemptLast(g *group) bool {
	for i := len(e.running) - 1; i >= 0; i-- {
		v := e.running[i]
		if !v.active() {
			continue
		}
		e.releaseGroup(v)
		v.state = stateWaiting
		e.waiting = slices.Insert(e.waiting, 0, v)
		e.waitingN.Add(1)
		e.preemptions++
		return v != g
	}
	return false
}

// produce generates one token for choice s and applies the stop rules,
// writing a Delta when the stream interval is reached.
func (e *Engine) produce(s *seq) {
	g := s.g
	sp := &g.req.Sampling
	var id, ncand int
	boundary := false
	if s.phase == phaseReason || s.script == nil {
		id, boundary, ncand = e.markov(s)
	} else {
		id = s.script[s.spos]
		s.spos++
		if s.loop && s.spos == len(s.script) {
			s.spos, s.passed = 0, true
		}
	}
	s.ids = append(s.ids, id)
	if s.counts != nil {
		e.countToken(s, id)
	}
	g.usage.CompletionTokens++
	e.genTokens++
	if sp.Logprobs {
		e.appendLogprob(s, id, boundary, ncand)
	}
	txt := e.vocab.text(id)
	switch s.phase {
	case phaseReason:
		g.usage.ReasoningTokens++
		if s.stop != nil {
			s.stop.Count(1) // for min_tokens: the answer's stop strings count every token
		}
		s.reasoning = append(s.reasoning, txt...)
		s.reasonLeft--
		if s.reasonLeft <= 0 {
			e.flush(s, true)
			s.phase = s.after
			s.walk = walk{}
		}
	case phaseTool:
		s.args = append(s.args, txt...)
		if s.spos >= len(s.script) {
			s.end(engine.FinishToolCalls)
		}
	default:
		s.answerToks++
		// min_tokens: within the first MinTokens tokens no stop token,
		// stop string or natural end ends the choice (vLLM bans the stop
		// tokens there and looks for stop strings only after).
		armed := len(s.ids) > sp.MinTokens
		if armed && slices.Contains(sp.StopTokenIDs, id) {
			s.stopTokenID = id
			s.end(engine.FinishStop)
			break
		}
		if s.feedAnswer(txt) {
			s.end(engine.FinishStop)
			break
		}
		if sp.IgnoreEOS || g.prep.exact > 0 {
			break
		}
		switch {
		case s.script == nil:
			if s.answerToks >= s.target && len(s.ids) >= sp.MinTokens && e.atSentenceEnd(&s.walk) {
				s.end(engine.FinishStop)
			}
		case !s.loop && s.spos >= len(s.script):
			// A script's end (a schema's complete value) is final.
			s.end(engine.FinishStop)
		case s.passed && len(s.ids) >= sp.MinTokens:
			s.end(engine.FinishStop) // echo, repeated up to min_tokens
		}
	}
	if !s.done && len(s.ids) >= g.prep.maxTokens {
		if g.prep.exact > 0 && len(s.ids) >= g.prep.exact {
			s.end(engine.FinishStop) // the transcript is complete
		} else {
			s.end(engine.FinishLength)
		}
	}
	if s.done {
		s.releaseHeld()
		// The slot goes first: endChoice runs the request's Formatter,
		// and a panic there must find the books straight (failed).
		e.releaseSeq(s)
		e.runningSeqs--
		e.endChoice(s)
		return
	}
	if len(s.ids)-s.pend >= g.interval {
		e.flush(s, false)
	}
}

// abort ends g on Session.Abort, wherever it is.
func (e *Engine) abort(g *group, now time.Time) {
	switch g.state {
	case stateDone:
		return
	case stateWaiting:
		if i := slices.Index(e.waiting, g); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1) // clears the vacated slot
			e.waitingN.Add(-1)
		}
	}
	e.finishGroup(g, pipeline.Aborted, nil, now)
	// Out of e.running now, not at the next pass: admit, which runs first,
	// counts e.running.
	e.dropInactive()
}

// dropInactive removes finished and preempted requests from e.running.
func (e *Engine) dropInactive() {
	k := 0
	for _, g := range e.running {
		if g.active() {
			e.running[k] = g
			k++
		}
	}
	clear(e.running[k:])
	e.running = e.running[:k]
}

// shutdown ends every request on Close.
func (e *Engine) shutdown(now time.Time) {
	err := &engine.Error{Kind: engine.KindAborted, Message: "engine shut down"}
	for _, g := range e.running {
		e.finishGroup(g, pipeline.Failed, err, now)
	}
	for _, g := range e.waiting {
		e.finishGroup(g, pipeline.Failed, err, now)
		e.waitingN.Add(-1)
	}
	e.running, e.waiting = nil, nil
	e.publish()
}

// publish stores the load figures for Stats, once per pass.
func (e *Engine) publish() {
	// Requests, not sequences: a group counts once whatever its n.
	running := 0
	for _, g := range e.running {
		if g.live > 0 {
			running++
		}
	}
	e.st.running.Store(int64(running))
	e.st.kvUsed.Store(int64(e.kv.used))
	e.st.prefixQueries.Store(e.prefixQueries)
	e.st.prefixHits.Store(e.prefixHits)
	e.st.preemptions.Store(e.preemptions)
	e.st.promptTokens.Store(e.promptTokens)
	e.st.genTokens.Store(e.genTokens)
}
