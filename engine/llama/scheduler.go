package llama

import (
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
)

// scheduler is the loop-only state of the continuous-batching scheduler.
//
// One step: every decoding sequence contributes its one new token, then
// prefilling sequences contribute prompt chunks while the step's token
// budget (--max-num-batched-tokens) lasts; one llama_decode runs the whole
// batch; each sequence whose chunk reached its end samples its next token.
// Admission is first come first served while sequence ids and KV room
// allow. When llama.cpp finds no KV room for a step, cached prefixes are
// dropped first, then the most recently admitted request is preempted
// (its KV freed, recomputed when it is admitted again).
type scheduler struct {
	e       *Engine
	batch   *capi.Batch
	cand    *capi.Candidates
	waiting []*group
	running []*group
	freeIDs []int
	// cache holds finished sequences whose KV is kept for prefix reuse,
	// least recently used first.
	cache []cached
	// stepSeqs are the sequences in this step's batch.
	stepSeqs []*seq
	// kvUsed estimates the KV cells running sequences hold (shared
	// prefixes counted once per sequence, so it errs high).
	kvUsed int
	tick   uint64

	delta                                                           engine.Delta
	start                                                           engine.Start
	choiceEnd                                                       engine.ChoiceEnd
	logits                                                          []float32 // scratch for log-softmax
	tops                                                            []engine.TopLogprob
	prefixQueries, prefixHits, preemptions, promptTokens, genTokens uint64
	// compute is the scheduler thread's CPU time in llama_decode and in
	// llama.cpp's samplers.
	compute time.Duration
	// stepAt is when this step's llama_decode returned: every token of the
	// step is stamped with it, for the requests' inter-token gaps (one
	// clock read per step).
	stepAt time.Time
}

// cached is a finished sequence kept in the KV cache for its prefix.
type cached struct {
	id   int
	toks []int32
	used uint64
}

func (s *scheduler) init(e *Engine, seqMax int) {
	s.e = e
	// llama.cpp clamps n_batch to the context size and asserts (aborting
	// the process) on a larger batch: the batch holds what it accepts.
	s.batch = capi.NewBatch(min(e.cfg.MaxNumBatchedTokens, e.ctx.BatchSize()))
	s.cand = capi.NewCandidates(e.model)
	for id := seqMax - 1; id >= 0; id-- {
		s.freeIDs = append(s.freeIDs, id)
	}
}

// run is the scheduler goroutine.
func (e *Engine) run() {
	s := &e.sched
	// The scheduler keeps its thread: llama.cpp's compute (with one
	// thread, on this one) is measured by the thread's CPU clock.
	runtime.LockOSThread()
	defer close(e.done)
	defer s.batch.Free()
	defer s.cand.Free()
	for {
		e.mu.Lock()
		inbox, aborts, closing := e.inbox, e.aborts, e.closing
		e.inbox, e.aborts = nil, nil
		e.mu.Unlock()
		s.waiting = append(s.waiting, inbox...)
		for _, g := range aborts {
			s.finishGroup(g, &engine.Error{Kind: engine.KindAborted, Message: abortedByClient})
		}
		if closing {
			for _, g := range slices.Concat(s.running, s.waiting) {
				s.finishGroup(g, &engine.Error{Kind: engine.KindAborted, Message: "engine is shut down"})
			}
			s.publish()
			return
		}
		if len(s.running) == 0 && len(s.waiting) == 0 {
			s.publish()
			<-e.wakeCh
			continue
		}
		s.admit()
		if len(s.running) > 0 {
			s.step()
		}
		s.publish()
	}
}

// abortedByClient is the message of a session ended by Session.Abort; its
// stream gets no error event (the client is gone).
const abortedByClient = "request aborted"

// admit moves waiting requests to running, first come first served, while
// sequence ids and KV room allow.
func (s *scheduler) admit() {
	e := s.e
	total := e.ctx.Size()
	for len(s.waiting) > 0 {
		g := s.waiting[0]
		n := 0
		need := 0
		for i := range g.seqs {
			if !g.seqs[i].done {
				n++
				need += len(g.seqs[i].hist) + 1
			}
		}
		if fresh(g) {
			need = g.promptLen() + n
		}
		running := s.runningSeqs()
		if running+n > e.cfg.MaxNumSeqs {
			return
		}
		if len(s.running) > 0 && s.kvUsed+need > total-total/100 {
			return
		}
		for len(s.freeIDs) < n && len(s.cache) > 0 {
			s.evict()
		}
		if len(s.freeIDs) < n {
			return
		}
		s.waiting = s.waiting[1:]
		e.waitingN.Add(-1)
		s.place(g)
	}
}

// fresh reports whether no choice of g has generated a token.
func fresh(g *group) bool {
	for i := range g.seqs {
		if len(g.seqs[i].gen) > 0 {
			return false
		}
	}
	return true
}

func (s *scheduler) runningSeqs() int {
	n := 0
	for _, g := range s.running {
		for i := range g.seqs {
			if g.seqs[i].id >= 0 {
				n++
			}
		}
	}
	return n
}

// place gives g's live choices sequence ids and their longest cached
// prefix, and makes g running.
func (s *scheduler) place(g *group) {
	now := time.Now()
	if !g.admitted {
		g.admitted, g.admit = true, now
	}
	g.state = stateRunning
	isFresh := fresh(g)
	for i := range g.seqs {
		q := &g.seqs[i]
		if q.done {
			continue
		}
		q.id = s.freeIDs[len(s.freeIDs)-1]
		s.freeIDs = s.freeIDs[:len(s.freeIDs)-1]
		q.kv = 0
		q.shadow = isFresh && i > 0
		if q.shadow {
			continue
		}
		// Prompt logprobs need the logits of every prompt token: no reuse.
		if s.e.cfg.PrefixCaching && g.promptLP == nil {
			s.reuse(q, i == 0)
		}
		s.kvUsed += q.kv
	}
	s.running = append(s.running, g)
}

// reuse copies the longest prefix of q.hist found in a running or cached
// sequence into q's sequence (cells are shared, not copied). At least one
// token is left to run, so that there are logits to sample from.
func (s *scheduler) reuse(q *seq, count bool) {
	want := len(q.hist) - 1
	best, src, ci := 0, -1, -1
	for _, g := range s.running {
		for i := range g.seqs {
			o := &g.seqs[i]
			if o == q || o.id < 0 || o.shadow {
				continue
			}
			if l := commonPrefix(q.hist[:want], o.hist[:o.kv]); l > best {
				best, src, ci = l, o.id, -1
			}
		}
	}
	for i := range s.cache {
		if l := commonPrefix(q.hist[:want], s.cache[i].toks); l > best {
			best, src, ci = l, s.cache[i].id, i
		}
	}
	if count {
		s.prefixQueries += uint64(q.g.promptLen())
	}
	if best == 0 {
		return
	}
	s.e.ctx.SeqCopy(src, q.id, 0, best)
	q.kv = best
	if ci >= 0 {
		s.tick++
		s.cache[ci].used = s.tick
	}
	if count && len(q.gen) == 0 {
		hit := min(best, q.g.promptLen())
		s.prefixHits += uint64(hit)
		q.g.usage.CachedTokens = hit
	}
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// evict drops the least recently used cached prefix.
func (s *scheduler) evict() {
	i := 0
	for j := range s.cache {
		if s.cache[j].used < s.cache[i].used {
			i = j
		}
	}
	c := s.cache[i]
	s.e.ctx.SeqRemove(c.id, -1, -1)
	s.freeIDs = append(s.freeIDs, c.id)
	s.cache = slices.Delete(s.cache, i, i+1)
}

// release frees q's sequence id; a sequence that finished normally stays
// in the cache for its prefix when prefix caching is on.
func (s *scheduler) release(q *seq, keep bool) {
	if q.id < 0 {
		return
	}
	s.kvUsed -= q.kv
	if keep && s.e.cfg.PrefixCaching && q.kv > 0 {
		for len(s.cache) >= s.e.cfg.MaxNumSeqs {
			s.evict()
		}
		s.tick++
		s.cache = append(s.cache, cached{id: q.id, toks: q.hist[:q.kv], used: s.tick})
		q.hist = nil // the cache owns it now
	} else {
		s.e.ctx.SeqRemove(q.id, -1, -1)
		s.freeIDs = append(s.freeIDs, q.id)
	}
	q.id, q.kv = -1, 0
}

// preempt frees the KV of the most recently admitted running request and
// puts it at the head of the queue, to be recomputed. It reports whether
// there was one to preempt.
func (s *scheduler) preempt() bool {
	if len(s.running) <= 1 {
		return false
	}
	g := s.running[len(s.running)-1]
	s.running = s.running[:len(s.running)-1]
	for i := range g.seqs {
		q := &g.seqs[i]
		s.release(q, false)
		q.shadow = false
	}
	g.state = stateWaiting
	s.waiting = slices.Insert(s.waiting, 0, g)
	s.e.waitingN.Add(1)
	s.preemptions++
	return true
}

// step runs one batch: decode tokens first, then prefill chunks.
func (s *scheduler) step() {
	e := s.e
	for {
		s.build()
		if s.batch.Len() == 0 {
			return
		}
		t0 := threadCPU()
		rc := e.ctx.Decode(s.batch)
		s.compute += threadCPU() - t0
		if rc == 0 {
			break
		}
		if rc == 1 {
			// No KV room: drop a cached prefix, else preempt, and retry.
			if len(s.cache) > 0 {
				s.evict()
				continue
			}
			if s.preempt() {
				continue
			}
		}
		// Nothing left to free, or a failure: the batch's requests fail.
		err := &engine.Error{Kind: engine.KindInternal, Message: "llama_decode failed (code " + itoa(rc) + ")"}
		if rc == 1 {
			err.Message = "the KV cache cannot hold this request; raise --kv-cache-tokens or lower --max-model-len"
		}
		for _, q := range s.stepSeqs {
			if q.g.state == stateRunning {
				s.finishGroup(q.g, err)
			}
		}
		return
	}
	s.afterDecode()
}

// build fills the batch for this step and records each sequence's part.
func (s *scheduler) build() {
	b := s.batch
	b.Reset()
	s.stepSeqs = s.stepSeqs[:0]
	budget := b.Cap()
	// Decode tokens first: one per sequence that has only its last
	// sampled token to run.
	for _, g := range s.running {
		for i := range g.seqs {
			q := &g.seqs[i]
			q.out = -1
			if q.id < 0 || q.shadow || q.done || len(q.hist)-q.kv != 1 || budget == 0 {
				continue
			}
			q.at, q.fed = b.Len(), 1
			q.out = b.Add(q.hist[q.kv], q.kv, q.id, true)
			budget--
			s.stepSeqs = append(s.stepSeqs, q)
		}
	}
	// Then prefill chunks, in admission order.
	for _, g := range s.running {
		for i := range g.seqs {
			q := &g.seqs[i]
			rem := len(q.hist) - q.kv
			if q.id < 0 || q.shadow || q.done || rem <= 1 || budget == 0 {
				continue
			}
			n := min(rem, budget)
			q.at, q.fed = b.Len(), n
			all := g.promptLP != nil && i == 0
			for j := 0; j < n; j++ {
				p := q.kv + j
				last := p == len(q.hist)-1
				idx := b.Add(q.hist[p], p, q.id, last || (all && p < g.promptLen()))
				if last {
					q.out = idx
				}
			}
			budget -= n
			s.stepSeqs = append(s.stepSeqs, q)
		}
	}
}

// afterDecode advances every sequence of the batch: its KV count, the
// prompt logprobs, and a sampled token where its chunk reached the end.
func (s *scheduler) afterDecode() {
	s.stepAt = time.Now()
	for _, q := range s.stepSeqs {
		if q.g.state == stateRunning && !q.g.broken {
			s.advance(q)
		}
	}
	// Deliver each request's frames of this step.
	for _, g := range s.running {
		if g.state == stateRunning && !g.broken && len(g.buf) > 0 {
			s.deliver(g)
		}
	}
	// End the requests whose own code panicked in this step (from the
	// back: finishGroup takes each out of s.running).
	for i := len(s.running) - 1; i >= 0; i-- {
		if g := s.running[i]; g.broken && g.state == stateRunning {
			s.finishGroup(g, engine.PanicError())
		}
	}
	s.running = slices.DeleteFunc(s.running, func(g *group) bool { return g.state != stateRunning })
}

// advance takes q's part of the step just decoded: its KV count, the
// prompt logprobs, and a sampled token when its chunk reached its end. The
// request's own code (its Formatter) runs here; a panic in it marks the
// request broken (failed), for afterDecode to end it. The guard is one
// open-coded defer per sequence per step, nothing per token.
func (s *scheduler) advance(q *seq) {
	e := s.e
	g := q.g
	defer func() {
		if r := recover(); r != nil {
			s.failed(g, r)
		}
	}()
	start, n := q.kv, q.fed
	if g.promptLP != nil && q.index == 0 {
		s.promptLogprobs(g, q.at, start, n)
	}
	q.kv += n
	s.kvUsed += n
	if start < g.promptLen() {
		s.promptTokens += uint64(min(q.kv, g.promptLen()) - start)
	}
	if q.out < 0 {
		return
	}
	tok := s.sample(q, q.out)
	if q.index == 0 && len(q.gen) == 0 && len(g.seqs) > 1 {
		// A fresh request's other choices share this prompt's KV and
		// draw their first token from the same logits, before choice
		// 0's token is taken (it may end choice 0 and free its
		// sequence).
		for i := 1; i < len(g.seqs); i++ {
			o := &g.seqs[i]
			if !o.shadow || o.id < 0 {
				continue
			}
			e.ctx.SeqCopy(q.id, o.id, 0, g.promptLen())
			o.shadow, o.kv = false, g.promptLen()
			s.kvUsed += o.kv
			o.first0, o.drawn = s.sample(o, q.out), true
		}
		s.accept(q, tok, q.out)
		for i := 1; i < len(g.seqs); i++ {
			if o := &g.seqs[i]; o.drawn {
				o.drawn = false
				s.accept(o, o.first0, q.out)
			}
		}
		return
	}
	s.accept(q, tok, q.out)
}

// deliver hands g's sink the frames of this step. A panic in the sink
// marks g broken (failed), for afterDecode to end it.
func (s *scheduler) deliver(g *group) {
	defer func() {
		if r := recover(); r != nil {
			s.failed(g, r)
		}
	}()
	g.sink.Deliver(g.buf, nil)
	g.buf = g.buf[:0]
}

// failed marks g broken after a panic in its own code, logged once with
// the request id and the stack. The step's frames so far are dropped (the
// stream stays after its last whole event delivered); afterDecode ends g
// with engine.PanicError, which frees its sequences.
func (s *scheduler) failed(g *group, r any) {
	s.e.logPanic(g, r)
	g.broken = true
	g.buf = g.buf[:0]
}

// publish makes the loop's figures visible to Stats.
func (s *scheduler) publish() {
	st := &s.e.st
	st.running.Store(int64(s.runningSeqs()))
	st.kvUsed.Store(int64(s.kvUsed))
	st.prefixQueries.Store(s.prefixQueries)
	st.prefixHits.Store(s.prefixHits)
	st.preemptions.Store(s.preemptions)
	st.promptTokens.Store(s.promptTokens)
	st.genTokens.Store(s.genTokens)
	st.compute.Store(int64(s.compute))
}

// sample draws q's next token from batch output idx.
func (s *scheduler) sample(q *seq, idx int) int32 {
	t0 := threadCPU()
	tok := q.sampler.Sample(s.e.ctx, idx, s.cand)
	s.compute += threadCPU() - t0
	return tok
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
