package llama

import (
	"encoding/binary"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/pipeline"
)

// scheduler is the loop-only state of the continuous-batching scheduler.
//
// One step: every decoding sequence contributes its one new token, then
// prefilling sequences contribute prompt chunks while the step's prefill
// budget lasts (see tuneChunk: sized from the measured step cost so that
// a prompt arriving stretches the running streams' step by a bounded
// time); one llama_decode runs the whole batch, its tokens in sequence id
// order (with a KV stream per sequence llama.cpp splits a batch into
// micro-batches of consecutive sequence ids); each sequence whose chunk
// reached its end samples its next token.
//
// The KV cache is one pool, or two (Config.shortLen; each a llama.cpp
// context of its own over the one model, stepped one after the other in a
// loop pass): streams of a short length for the sequences that fit one,
// and a unified pool for the longer ones, so that many short sequences
// run together without a whole context each, and long prompts still run.
// A sequence that outgrows its short stream moves to the long pool, its
// KV copied (or, when the long pool has no room, recomputed there as a
// preempted request's).
//
// Admission is first come first served per pool while sequence ids and
// KV room allow. A sequence takes the idle id (llama-server's slot) whose
// kept KV shares the longest prefix with its prompt, trimmed to that
// prefix; a running sequence sharing more is copied instead where the
// copy is cheaper than the prefill it saves. When llama.cpp finds no KV
// room for a step (a unified pool only: a stream holds a whole sequence),
// cached prefixes are dropped first, then the most recently admitted
// request is preempted (its KV freed, recomputed when it is admitted
// again).
type scheduler struct {
	e    *Engine
	cand *capi.Candidates
	// dec runs llama_decode on its own thread (capi.Decoder); nil when
	// it could not start: decode on the scheduler's thread.
	dec *capi.Decoder
	// pools are the KV caches: the short streams first when there are two.
	pools   []*pool
	waiting []*group

	lp                                                              engine.TokenLogprob // accept's scratch
	prefixQueries, prefixHits, preemptions, promptTokens, genTokens uint64
	// moves counts the requests moved from a short stream to the long
	// pool; state is transfer's scratch.
	moves uint64
	// wholeCopies counts the prefix copies across streams that llama.cpp
	// refused as a state and that copied a whole stream instead.
	wholeCopies uint64
	state       []byte
	topIdx      []int32 // topTokens' scratch
	tops        []pipeline.TopLogprob
	// threads follows the free cores (nil with --threads given).
	threads *threadTuner
	// compute is the scheduler thread's CPU time in llama_decode and in
	// llama.cpp's samplers.
	compute time.Duration
	// stepAt is when this step's llama_decode returned: every token of the
	// step is stamped with it, for the requests' inter-token gaps (one
	// clock read per step).
	stepAt time.Time

	// The chunk tuner's state (see tuneChunk), over a loop pass (every
	// pool's step): the pass's decode and prefill tokens and its decode
	// time; the decode-only pass time and the prefill time per token
	// (moving averages); the prefill budget of a pass that also decodes,
	// and what is left of it for the pools still to step. decoding says a
	// pool of the pass has a sequence to decode: a prefill in another
	// pool holds it up as much as one in its own.
	passDecodes, passPrefill int
	passTime                 time.Duration
	decodeCost, tokenCost    time.Duration
	chunk, chunkLeft         int
	decoding                 bool
}

// pool is one KV cache (a llama.cpp context) and the sequences running in
// it. Loop-only.
type pool struct {
	*scheduler
	ctx     *capi.Context
	batch   *capi.Batch
	running []*group
	freeIDs []int
	// slots[id] is the running sequence holding id, or nil.
	slots []*seq
	// cache holds finished sequences whose KV is kept for prefix reuse
	// (with a stream per sequence: the idle slots that hold KV).
	cache []cached
	// stepSeqs are the sequences in this step's batch.
	stepSeqs []*seq
	// kvUsed estimates the KV cells running sequences hold (shared
	// prefixes counted once per sequence, so it errs high).
	kvUsed int
	tick   uint64
	// maxLen is the longest sequence (prompt and output) the pool holds:
	// a stream's cells, at most MaxModelLen.
	maxLen int

	// stepDecodes and stepPrefill are the decode and prefill tokens of
	// the pool's step being built.
	stepDecodes, stepPrefill int
	// cellCost is the time a KV copy across streams is taken to cost
	// per cell the source holds (see capi.Context.CopyPrefix).
	cellCost time.Duration
	// stepAdapter is the LoRA adapter (0: the base model) of the step
	// being built: llama.cpp applies adapters per context, to a whole
	// llama_decode, so a step holds one adapter's requests only, and the
	// adapters of the running requests take the steps in turn (as
	// llama-server batches only slots of the same LoRA).
	stepAdapter int
}

// cached is a finished sequence kept in the KV cache for its prefix.
type cached struct {
	id   int
	toks []int32
	used uint64
	// adapter is the LoRA adapter its KV was computed with (0: the base
	// model): a prefix is reused only by requests of the same adapter.
	adapter int
}

func (s *scheduler) init(e *Engine) {
	s.e = e
	s.chunk = initialChunk
	s.cand = capi.NewCandidates(e.model)
	if d, err := capi.NewDecoder(); err == nil {
		s.dec = d
	}
	for _, c := range e.ctxs {
		p := &pool{scheduler: s}
		p.init(c)
		s.pools = append(s.pools, p)
	}
	e.st.threads.Store(int64(e.cfg.Threads))
	if e.cfg.autoThreads {
		if s.threads = newThreadTuner(e.cfg.Threads); s.threads != nil {
			s.setThreads(1)
		}
	}
}

// setThreads gives every context n compute threads.
func (s *scheduler) setThreads(n int) {
	for _, p := range s.pools {
		p.ctx.SetThreads(n, s.e.cfg.threadsBatch(n))
	}
	s.e.st.threads.Store(int64(n))
}

func (s *pool) init(c *capi.Context) {
	e := s.e
	s.ctx = c
	// llama.cpp clamps n_batch to the context size and asserts (aborting
	// the process) on a larger batch: the batch holds what it accepts.
	s.batch = capi.NewBatch(min(e.cfg.MaxNumBatchedTokens, c.BatchSize()))
	seqMax := c.SeqMax()
	for id := seqMax - 1; id >= 0; id-- {
		s.freeIDs = append(s.freeIDs, id)
	}
	s.slots = make([]*seq, seqMax)
	s.maxLen = e.cfg.MaxModelLen
	if !c.Unified() {
		s.maxLen = min(s.maxLen, c.Size()/max(seqMax, 1))
	}
	// A copy across streams reads the source's cells out and writes them
	// in again, at a memory bandwidth taken as 4 GB/s (SmolLM2's 60-cell
	// copies took 0.73 ms each on a 2-vCPU VM: BenchmarkStreamCopy).
	s.cellCost = time.Duration(float64(2*e.model.KVBytesPerToken()) / 4e9 * float64(time.Second))
}

// Chunk tuning bounds.
const (
	// initialChunk is the prefill budget until a prefill has been timed.
	initialChunk = 256
	// minChunk keeps prompts progressing however slow a token is.
	minChunk = 32
	// minStretch is the least time a prompt's chunk may add to a step.
	minStretch = 20 * time.Millisecond
)

// run is the scheduler goroutine.
func (e *Engine) run() {
	s := &e.sched
	// The scheduler keeps its thread: the samplers' compute is measured
	// by the thread's CPU clock (the decodes' by the decoder thread's).
	runtime.LockOSThread()
	defer close(e.done)
	defer func() {
		for _, p := range s.pools {
			p.batch.Free()
		}
	}()
	defer s.cand.Free()
	defer s.threads.close()
	defer func() {
		if s.dec != nil {
			s.dec.Close()
		}
	}()
	for {
		e.mu.Lock()
		inbox, aborts, closing := e.inbox, e.aborts, e.closing
		e.inbox, e.aborts = nil, nil
		e.mu.Unlock()
		s.waiting = append(s.waiting, inbox...)
		for _, g := range aborts {
			s.finishGroup(g, pipeline.Aborted, nil)
		}
		if closing {
			all := slices.Clone(s.waiting)
			for _, p := range s.pools {
				all = append(all, p.running...)
			}
			for _, g := range all {
				s.finishGroup(g, pipeline.Failed, &engine.Error{Kind: engine.KindAborted, Message: "engine is shut down"})
			}
			s.publish()
			return
		}
		if s.runningSeqs() == 0 && len(s.waiting) == 0 {
			s.publish()
			<-e.wakeCh
			continue
		}
		for _, p := range s.pools {
			p.moveOutgrown()
		}
		s.admit()
		s.startPass()
		stepped := false
		for _, p := range s.pools {
			if len(p.running) > 0 {
				p.step()
				stepped = true
			}
		}
		if s.passDecodes+s.passPrefill > 0 {
			s.tuneChunk(s.passTime)
		}
		if stepped {
			if n := s.threads.check(s.stepAt); n > 0 {
				s.setThreads(n)
			}
		}
		s.publish()
	}
}

// startPass resets the pass's counts and prefill budget, and finds
// whether any pool has a sequence to decode.
func (s *scheduler) startPass() {
	s.passDecodes, s.passPrefill, s.passTime = 0, 0, 0
	s.chunkLeft, s.decoding = s.chunk, false
	for _, p := range s.pools {
		for _, q := range p.slots {
			if q != nil && !q.shadow && !q.done && len(q.hist)-q.kv == 1 {
				s.decoding = true
				return
			}
		}
	}
}

// admit moves waiting requests to running, first come first served in
// each pool, while sequence ids and KV room allow: a request that does
// not fit its pool now holds back the later ones of that pool.
func (s *scheduler) admit() {
	all := uint(1)<<len(s.pools) - 1
	var blocked uint
	running := s.runningSeqs()
	for i := 0; i < len(s.waiting) && blocked != all; {
		g := s.waiting[i]
		n, need := demand(g)
		if running+n > s.e.cfg.MaxNumSeqs {
			return
		}
		want := s.poolsFor(g)
		var p *pool
		for k, o := range s.pools {
			if want&^blocked&(1<<k) != 0 && o.fits(n, need) {
				p = o
				break
			}
		}
		if p == nil {
			blocked |= want
			i++
			continue
		}
		if p.sharesPending(g) {
			i++ // its prefix is computed once, ahead, then copied
			continue
		}
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.e.waitingN.Add(-1)
		p.place(g)
		running += n
	}
}

// minShare is the shortest prefix, beyond what g may reuse now, that a
// waiting request waits for a running sequence to compute (sharesPending).
const minShare = 32

// sharesPending reports whether waiting request g shares a prefix of its
// prompt, at least minShare tokens longer than what the pool holds for it
// now, with a running sequence of the pool that has not computed that
// prefix yet (admitted in this pass, or still in its prefill). g then
// stays queued until the prefix is in the KV cache, and starts from a
// copy of it (reuse), where admitting it now would compute the prefix
// once more beside the first: 64 requests arriving together with one
// system prompt compute it once, not 64 times (SGLang's in-batch prefix
// caching). The sequence ahead progresses every pass, so g waits at most
// until its prefix is computed.
func (s *pool) sharesPending(g *group) bool {
	if !s.e.cfg.PrefixCaching || g.promptLP != nil || len(g.seqs) == 0 {
		return false
	}
	h := g.seqs[0].hist
	if len(h) < 2 {
		return false
	}
	h = h[:len(h)-1] // reuse leaves one token to run
	ready, pending := 0, 0
	for _, r := range s.running {
		if r.adapter != g.adapter {
			continue
		}
		for i := range r.seqs {
			o := &r.seqs[i]
			if o.id < 0 || o.shadow || o.done {
				continue
			}
			l := commonPrefix(h, o.hist)
			ready = max(ready, min(l, o.kv))
			if l > o.kv {
				pending = max(pending, l)
			}
		}
	}
	if pending-ready < minShare {
		return false
	}
	for i := range s.cache {
		if s.cache[i].adapter == g.adapter {
			ready = max(ready, commonPrefix(h, s.cache[i].toks))
		}
	}
	return pending-ready >= minShare
}

// poolsFor is the set of pools (bit k: s.pools[k]) g may run in: with
// short streams and a long pool, the short streams when g's choices fit
// one, else the long pool.
func (s *scheduler) poolsFor(g *group) uint {
	if len(s.pools) == 1 || s.pools[0].holds(g) {
		return 1
	}
	return 2
}

// holds reports whether g may run in the pool's streams: each live
// choice fits a stream to the end of its max_tokens, or, where its end is
// not known (without ignore_eos an end-of-sequence token or a stop string
// may come first), its tokens so far, and its min_tokens, fill at most
// half a stream; a choice that outgrows its stream moves to the long pool
// (moveOutgrown).
func (s *pool) holds(g *group) bool {
	sp := &g.req.Sampling
	for i := range g.seqs {
		q := &g.seqs[i]
		if q.done {
			continue
		}
		have := len(q.hist)
		gen := have - g.promptLen()
		if have+g.prep.maxTokens-gen <= s.maxLen {
			continue
		}
		if sp.IgnoreEOS || 2*have > s.maxLen || have+max(0, sp.MinTokens-gen) > s.maxLen {
			return false
		}
	}
	return true
}

// fits reports whether n more sequences needing need KV cells can start.
func (s *pool) fits(n, need int) bool {
	total := s.ctx.Size()
	if s.ctx.Unified() && len(s.running) > 0 && s.kvUsed+need > total-total/100 {
		return false
	}
	return len(s.freeIDs)+len(s.cache) >= n
}

// moveOutgrown moves the running requests with a choice longer than the
// pool's streams to the long pool: their KV copied there when it has
// room (transfer), else they go to the head of the queue, their KV freed
// and recomputed when the long pool admits them (as a preempted request).
func (s *pool) moveOutgrown() {
	if s.maxLen >= s.e.cfg.MaxModelLen {
		return
	}
	for i := len(s.running) - 1; i >= 0; i-- {
		g := s.running[i]
		for j := range g.seqs {
			if q := &g.seqs[j]; !q.done && q.id >= 0 && len(q.hist) > s.maxLen {
				s.running = slices.Delete(s.running, i, i+1)
				if s.transfer(g, s.pools[len(s.pools)-1]) {
					s.moves++
				} else {
					s.preemptions++ // recomputed, as a preempted request
				}
				break
			}
		}
	}
}

// transfer moves running request g, just taken out of s.running, to pool
// dst, each live choice's KV copied from its stream (llama.cpp's sequence
// state, rewritten from s's stream count to dst's one: oneStream). When
// dst has no room for g now, or llama.cpp cannot place a copy, g goes to
// the head of the queue instead, its KV freed (recomputed when admitted),
// and transfer reports false.
func (s *pool) transfer(g *group, dst *pool) bool {
	n, need := demand(g)
	if dst == s || !dst.ctx.Unified() || !dst.fits(n, need) {
		s.requeue(g)
		return false
	}
	ok := true
	for i := range g.seqs {
		q := &g.seqs[i]
		if q.done || q.id < 0 {
			continue
		}
		kv := q.kv
		s.state = s.ctx.SeqState(s.state[:0], q.id)
		s.release(q, false)
		if !ok {
			continue
		}
		one, good := oneStream(s.state, s.ctx.SeqMax())
		dst.take(q, -1, -1)
		if !good || !dst.ctx.SetSeqState(one, q.id) || dst.ctx.SeqPosMax(q.id) != kv-1 {
			ok = false
			dst.release(q, false)
			continue
		}
		q.kv = kv
		dst.kvUsed += kv
	}
	if !ok {
		for i := range g.seqs {
			dst.release(&g.seqs[i], false)
			g.seqs[i].shadow = false
		}
		g.state, g.pool = stateWaiting, nil
		s.waiting = slices.Insert(s.waiting, 0, g)
		s.e.waitingN.Add(1)
		return false
	}
	g.pool = dst
	dst.running = append(dst.running, g)
	return true
}

// oneStream rewrites, in place, a sequence's state taken from a cache of
// streams streams as the state of a one-stream cache: the sequence's own
// stream, the only one holding cells. llama.cpp's layout (the pinned
// release's llama_state_seq_get_data; TestSplitKVAnswersAsWholeContexts
// moves a sequence through it): an 8-byte
// header (a magic and the sequence id), a u32 stream count, then per
// stream a u32 cell count followed, when it is not 0, by the cells. It
// reports false for any other layout.
func oneStream(st []byte, streams int) ([]byte, bool) {
	const hdr = 8
	u32 := func(at int) uint32 { return binary.LittleEndian.Uint32(st[at:]) }
	first := hdr + 4 // the first stream's cell count
	if streams < 1 || len(st) < first+4*streams || int(u32(hdr)) != streams {
		return nil, false
	}
	at := first
	for at < first+4*streams && u32(at) == 0 {
		at += 4
	}
	if at == first+4*streams {
		return nil, false // no cells
	}
	after := streams - 1 - (at-first)/4 // the empty streams after it
	end := len(st) - 4*after
	if end <= at+4 {
		return nil, false
	}
	for k := end; k < len(st); k += 4 {
		if u32(k) != 0 {
			return nil, false
		}
	}
	start := at - first
	copy(st[start:], st[:hdr])
	binary.LittleEndian.PutUint32(st[start+hdr:], 1)
	return st[start:end], true
}

// demand is what g's live choices need of a pool: sequence ids, and KV
// cells (each choice's tokens and the one to come; the choices of a fresh
// request share its prompt).
func demand(g *group) (seqs, cells int) {
	for i := range g.seqs {
		if q := &g.seqs[i]; !q.done {
			seqs++
			cells += len(q.hist) + 1
		}
	}
	if fresh(g) {
		cells = g.promptLen() + seqs
	}
	return seqs, cells
}

// fresh reports whether no choice of g has generated a token.
func fresh(g *group) bool {
	for i := range g.seqs {
		if g.out.Generated(i) > 0 {
			return false
		}
	}
	return true
}

func (s *scheduler) runningSeqs() int {
	n := 0
	for _, p := range s.pools {
		for _, g := range p.running {
			for i := range g.seqs {
				if g.seqs[i].id >= 0 {
					n++
				}
			}
		}
	}
	return n
}

// runningRequests counts the running groups that hold a sequence: the
// requests running, whatever their n (vllm:num_requests_running counts
// requests, not sequences). Once per loop pass, never per token.
func (s *scheduler) runningRequests() int {
	n := 0
	for _, p := range s.pools {
		for _, g := range p.running {
			for i := range g.seqs {
				if g.seqs[i].id >= 0 {
					n++
					break
				}
			}
		}
	}
	return n
}

// place gives g's live choices sequence ids and their longest cached
// prefix, and makes g running.
func (s *pool) place(g *group) {
	now := time.Now()
	if !g.admitted {
		g.admitted = true
		g.out.SetAdmitted(now)
	}
	g.state, g.pool = stateRunning, s
	isFresh := fresh(g)
	for i := range g.seqs {
		q := &g.seqs[i]
		if q.done {
			continue
		}
		q.kv = 0
		q.shadow = isFresh && i > 0
		// Prompt logprobs need the logits of every prompt token: no reuse.
		if !q.shadow && s.e.cfg.PrefixCaching && g.promptLP == nil {
			s.reuse(q, i == 0)
		} else {
			s.take(q, -1, -1)
		}
		s.kvUsed += q.kv
	}
	s.running = append(s.running, g)
}

// take gives q a sequence id: cache entry ci's (its KV kept, for the
// caller to trim), or with ci < 0 the lowest id that keeps the running
// sequences consecutive (llama.cpp puts only consecutive ids in one
// micro-batch of a stream-per-sequence cache): the lowest id not running
// when it is at most one past the highest running id, a cached one
// dropped (but not avoid, a copy's source); else the lowest free id; else
// the least recently used cache entry's, dropped.
func (s *pool) take(q *seq, ci, avoid int) {
	if ci < 0 && !s.ctx.Unified() {
		top := -1
		for id, o := range s.slots {
			if o != nil {
				top = id
			}
		}
		for id := 0; id <= top+1 && id < len(s.slots); id++ {
			if s.slots[id] != nil || id == avoid {
				continue
			}
			if j := s.cacheIndex(id); j >= 0 {
				ci = j
				s.ctx.SeqRemove(id, -1, -1)
			}
			break
		}
	}
	switch {
	case ci >= 0:
		q.id = s.cache[ci].id
		s.cache = slices.Delete(s.cache, ci, ci+1)
	default:
		if len(s.freeIDs) == 0 {
			s.evict()
		}
		j := 0
		for k, id := range s.freeIDs {
			if id < s.freeIDs[j] {
				j = k
			}
		}
		q.id = s.freeIDs[j]
		s.freeIDs = slices.Delete(s.freeIDs, j, j+1)
	}
	s.slots[q.id] = q
}

// cacheIndex is the index of id's cache entry, or -1.
func (s *pool) cacheIndex(id int) int {
	for j := range s.cache {
		if s.cache[j].id == id {
			return j
		}
	}
	return -1
}

// reuse gives q an id and the longest prefix of q.hist already in the
// cache: in place, the cached sequence sharing the most (its cells past
// the prefix dropped), or a copy of a running sequence that shares more
// where the copy pays. At least one token is left to run, so that there
// are logits to sample from.
func (s *pool) reuse(q *seq, count bool) {
	want := len(q.hist) - 1
	ci, lc := -1, 0
	for i := range s.cache {
		if s.cache[i].adapter != q.g.adapter {
			continue // KV of another adapter: other values for the same tokens
		}
		l := commonPrefix(q.hist[:want], s.cache[i].toks)
		if l > lc || l == lc && l > 0 && s.cache[i].id < s.cache[ci].id {
			ci, lc = i, l
		}
	}
	src, lr, srcN := -1, 0, 0
	for _, g := range s.running {
		for i := range g.seqs {
			o := &g.seqs[i]
			if o == q || o.id < 0 || o.shadow || g.adapter != q.g.adapter {
				continue
			}
			if l := commonPrefix(q.hist[:want], o.hist[:o.kv]); l > lr {
				src, lr, srcN = o.id, l, o.kv
			}
		}
	}
	if count {
		s.prefixQueries += uint64(q.g.promptLen())
	}
	// A cached stream is taken in place when most of what it keeps is
	// reused (llama-server's slot similarity), or when no free id is left;
	// else its prefix is copied into a free id where that pays, and it
	// stays cached for the prompts that share more of it.
	inPlace := lc > 0 && (lc*keepShare >= len(s.cache[ci].toks) || len(s.freeIDs) == 0)
	switch {
	case inPlace && !(lr > lc && s.copyPays(lr-lc, srcN)):
		s.take(q, ci, -1)
		s.ctx.SeqRemove(q.id, lc, -1)
		q.kv = lc
		s.counted(q, count)
		return
	case lc > lr:
		s.tick++
		s.cache[ci].used = s.tick // not the one evicted for a free id
		src, lr, srcN = s.cache[ci].id, lc, len(s.cache[ci].toks)
	}
	s.take(q, -1, src)
	if lr > 0 && s.copyPays(lr, srcN) {
		s.copyPrefix(src, q.id, lr)
		q.kv = lr
	}
	s.counted(q, count)
}

// copyPrefix makes dst hold src's first n positions (capi's CopyPrefix),
// counting the copies that moved a whole stream.
func (s *pool) copyPrefix(src, dst, n int) {
	if !s.ctx.CopyPrefix(src, dst, n) {
		s.wholeCopies++
	}
}

// counted records q's reused prefix as the request's cached tokens.
func (s *pool) counted(q *seq, count bool) {
	if count && q.g.out.Generated(q.index) == 0 && q.kv > 0 {
		hit := min(q.kv, q.g.promptLen())
		s.prefixHits += uint64(hit)
		q.g.out.Usage.CachedTokens = hit
	}
}

// keepShare: a cached stream is reused in place when the prefix is at
// least 1/keepShare of what it keeps (llama-server's default slot
// similarity is 0.1 of the prompt).
const keepShare = 2

// copyPays reports whether copying a prefix of gain tokens from a
// sequence holding cells cells saves more than it costs: in a unified
// pool a copy shares cells (free); across streams it moves the source's
// cells, against the prefill of the gained tokens.
func (s *pool) copyPays(gain, cells int) bool {
	if s.ctx.Unified() {
		return true
	}
	if s.tokenCost == 0 {
		return gain >= minShare // no prefill timed yet: a copy of cells is cheap
	}
	return time.Duration(gain)*s.tokenCost > time.Duration(cells)*s.cellCost
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
func (s *pool) evict() {
	i := 0
	for j := range s.cache {
		if s.cache[j].used < s.cache[i].used {
			i = j
		}
	}
	c := s.cache[i]
	s.ctx.SeqRemove(c.id, -1, -1)
	s.freeIDs = append(s.freeIDs, c.id)
	s.cache = slices.Delete(s.cache, i, i+1)
}

// release frees q's sequence id; a sequence that finished normally stays
// in the cache for its prefix when prefix caching is on.
func (s *pool) release(q *seq, keep bool) {
	if q.id < 0 {
		return
	}
	s.slots[q.id] = nil
	s.kvUsed -= q.kv
	if keep && s.e.cfg.PrefixCaching && q.kv > 0 {
		for len(s.cache) >= s.e.cfg.MaxNumSeqs {
			s.evict()
		}
		s.tick++
		s.cache = append(s.cache, cached{id: q.id, toks: q.hist[:q.kv], used: s.tick, adapter: q.g.adapter})
		q.hist = nil // the cache owns it now
	} else {
		s.ctx.SeqRemove(q.id, -1, -1)
		s.freeIDs = append(s.freeIDs, q.id)
	}
	q.id, q.kv = -1, 0
}

// preempt frees the KV of the most recently admitted running request and
// puts it at the head of the queue, to be recomputed. It reports whether
// there was one to preempt.
func (s *pool) preempt() bool {
	if len(s.running) <= 1 {
		return false
	}
	g := s.running[len(s.running)-1]
	s.running = s.running[:len(s.running)-1]
	s.requeue(g)
	s.preemptions++
	return true
}

// requeue frees the KV of g, just taken out of s.running, and puts it at
// the head of the queue.
func (s *pool) requeue(g *group) {
	for i := range g.seqs {
		q := &g.seqs[i]
		s.release(q, false)
		q.shadow = false
	}
	g.state, g.pool = stateWaiting, nil
	s.waiting = slices.Insert(s.waiting, 0, g)
	s.e.waitingN.Add(1)
}

// step runs one batch: decode tokens first, then prefill chunks.
func (s *pool) step() {
	e := s.e
	s.pickAdapter()
	for {
		s.build()
		if s.batch.Len() == 0 {
			return
		}
		if len(e.adapters) > 0 {
			var a *capi.Adapter
			scale := float32(1)
			if s.stepAdapter > 0 {
				a, scale = e.adapters[s.stepAdapter-1], e.cfg.Adapters[s.stepAdapter-1].Scale
			}
			if err := s.ctx.SetAdapter(a, scale); err != nil {
				for _, q := range s.stepSeqs {
					if q.g.state == stateRunning {
						s.finishGroup(q.g, pipeline.Failed, &engine.Error{Kind: engine.KindInternal, Message: err.Error()})
					}
				}
				return
			}
		}
		var rc int
		w0 := time.Now()
		if s.dec != nil {
			var cpu time.Duration
			rc, cpu = s.dec.Decode(s.ctx, s.batch)
			s.compute += cpu
		} else {
			t0 := threadCPU()
			rc = s.ctx.Decode(s.batch)
			s.compute += threadCPU() - t0
		}
		if rc == 0 {
			s.passTime += time.Since(w0)
			s.passDecodes += s.stepDecodes
			s.passPrefill += s.stepPrefill
			s.chunkLeft = max(0, s.chunkLeft-s.stepPrefill)
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
		err := &engine.Error{Kind: engine.KindInternal, Message: "llama_decode failed (code " + strconv.Itoa(rc) + ")"}
		if rc == 1 {
			err.Message = "the KV cache cannot hold this request; raise --kv-cache-tokens or lower --max-model-len"
		}
		for _, q := range s.stepSeqs {
			if q.g.state == stateRunning {
				s.finishGroup(q.g, pipeline.Failed, err)
			}
		}
		return
	}
	s.afterDecode()
}

// pickAdapter chooses the step's adapter among the running requests':
// the next after the last step's, in index order, wrapping (round robin,
// one step each). With no adapter configured it is always the base model.
func (s *pool) pickAdapter() {
	if len(s.e.adapters) == 0 {
		s.stepAdapter = 0
		return
	}
	var set uint64
	for _, g := range s.running {
		set |= 1 << uint(g.adapter)
	}
	if set == 0 || set == 1<<uint(s.stepAdapter) {
		return
	}
	// The lowest adapter above the last one, else the lowest of all.
	if above := set &^ (1<<uint(s.stepAdapter+1) - 1); above != 0 {
		s.stepAdapter = bits.TrailingZeros64(above)
	} else {
		s.stepAdapter = bits.TrailingZeros64(set)
	}
}

// build fills the batch for this step and records each sequence's part:
// one token per decoding sequence, then prefill chunks in admission order
// while the prefill budget lasts; the tokens go in sequence id order.
func (s *pool) build() {
	b := s.batch
	b.Reset()
	s.stepSeqs = s.stepSeqs[:0]
	budget := b.Cap()
	decodes := 0
	for _, q := range s.slots {
		if q == nil {
			continue
		}
		q.out, q.fed = -1, 0
		if q.shadow || q.done || len(q.hist)-q.kv != 1 || budget == 0 || q.g.adapter != s.stepAdapter {
			continue
		}
		q.fed = 1
		budget--
		decodes++
	}
	// A pass with no decode has no one to hold up: the whole budget.
	chunk := budget
	if decodes > 0 || s.decoding {
		chunk = min(budget, s.chunkLeft)
	}
	prefill := 0
	for _, g := range s.running {
		if g.adapter != s.stepAdapter {
			continue
		}
		for i := range g.seqs {
			q := &g.seqs[i]
			rem := len(q.hist) - q.kv
			if q.id < 0 || q.shadow || q.done || rem <= 1 || chunk == 0 {
				continue
			}
			n := min(rem, chunk)
			q.fed = n
			chunk -= n
			prefill += n
		}
	}
	s.stepDecodes, s.stepPrefill = decodes, prefill
	for _, q := range s.slots {
		if q == nil || q.fed == 0 {
			continue
		}
		g := q.g
		q.at = b.Len()
		all := g.promptLP != nil && q.index == 0
		for j := 0; j < q.fed; j++ {
			p := q.kv + j
			last := p == len(q.hist)-1
			idx := b.Add(q.hist[p], p, q.id, last || (all && p < g.promptLen()))
			if last {
				q.out = idx
			}
		}
		s.stepSeqs = append(s.stepSeqs, q)
	}
}

// tuneChunk learns from a pass whose steps took dt: the decode-only pass
// time, and the prefill time per token (the pass's time beyond a
// decode-only pass's, per prefill token). A pass that decodes gets a
// prefill budget, over all its pools, of what fits in max(decode pass,
// minStretch) more: a prompt arriving at most doubles the running
// streams' inter-token gap, or adds minStretch.
func (s *scheduler) tuneChunk(dt time.Duration) {
	ewma := func(avg, x time.Duration) time.Duration {
		if avg == 0 {
			return x
		}
		return avg + (x-avg)/8
	}
	switch {
	case s.passPrefill == 0:
		s.decodeCost = ewma(s.decodeCost, dt)
		return
	case s.passDecodes == 0:
		s.tokenCost = ewma(s.tokenCost, dt/time.Duration(s.passPrefill))
	case s.decodeCost > 0:
		s.tokenCost = ewma(s.tokenCost, max(dt-s.decodeCost, 0)/time.Duration(s.passPrefill))
	}
	if s.tokenCost > 0 {
		s.chunk = max(minChunk, int(max(s.decodeCost, minStretch)/s.tokenCost))
	}
}

// afterDecode advances every sequence of the batch: its KV count, the
// prompt logprobs, and a sampled token where its chunk reached the end.
func (s *pool) afterDecode() {
	s.stepAt = time.Now()
	// Sample first, every sequence of the step, with one clock read pair
	// around all the draws. A fresh request's other choices share choice
	// 0's prompt and draw their first token from the same logits.
	t0 := threadCPU()
	for _, q := range s.stepSeqs {
		g := q.g
		if q.out < 0 || g.state != stateRunning || g.out.Broken() {
			continue
		}
		q.tok = q.sampler.Sample(s.ctx, q.out, s.cand)
		if q.index == 0 && g.out.Generated(0) == 0 && len(g.seqs) > 1 {
			for i := 1; i < len(g.seqs); i++ {
				if o := &g.seqs[i]; o.shadow && o.id >= 0 {
					o.first0, o.drawn = o.sampler.Sample(s.ctx, q.out, s.cand), true
				}
			}
		}
	}
	s.compute += threadCPU() - t0
	for _, q := range s.stepSeqs {
		if q.g.state == stateRunning && !q.g.out.Broken() {
			s.advance(q)
		}
	}
	// Deliver each request's frames of this step.
	for _, g := range s.running {
		if g.state == stateRunning && !g.out.Broken() && g.out.Pending() {
			s.deliver(g)
		}
	}
	// End the requests whose own code panicked in this step (from the
	// back: finishGroup takes each out of s.running).
	for i := len(s.running) - 1; i >= 0; i-- {
		if g := s.running[i]; g.out.Broken() && g.state == stateRunning {
			s.finishGroup(g, pipeline.Failed, engine.PanicError())
		}
	}
	s.running = slices.DeleteFunc(s.running, func(g *group) bool { return g.state != stateRunning })
}

// advance takes q's part of the step just decoded: its KV count, the
// prompt logprobs, and a sampled token when its chunk reached its end. The
// request's own code (its Formatter) runs here; a panic in it marks the
// request broken (failed), for afterDecode to end it. The guard is one
// open-coded defer per sequence per step, nothing per token.
func (s *pool) advance(q *seq) {
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
	tok := q.tok
	if q.index == 0 && g.out.Generated(0) == 0 && len(g.seqs) > 1 {
		// A fresh request's other choices share this prompt's KV (their
		// first tokens were drawn with choice 0's), before choice 0's
		// token is taken (it may end choice 0 and free its sequence).
		for i := 1; i < len(g.seqs); i++ {
			o := &g.seqs[i]
			if !o.shadow || o.id < 0 {
				continue
			}
			s.copyPrefix(q.id, o.id, g.promptLen())
			o.shadow, o.kv = false, g.promptLen()
			s.kvUsed += o.kv
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
	g.out.Deliver()
}

// failed marks g broken after a panic in its own code, logged once with
// the request id and the stack. The step's frames so far are dropped (the
// stream stays after its last whole event delivered); afterDecode ends g
// with engine.PanicError, which frees its sequences.
func (s *scheduler) failed(g *group, r any) {
	g.out.Break(r)
}

// publish makes the loop's figures visible to Stats.
func (s *scheduler) publish() {
	st := &s.e.st
	st.running.Store(int64(s.runningRequests()))
	kv := 0
	for _, p := range s.pools {
		kv += p.kvUsed
	}
	st.kvUsed.Store(int64(kv))
	st.moves.Store(s.moves)
	st.wholeCopies.Store(s.wholeCopies)
	st.prefixQueries.Store(s.prefixQueries)
	st.prefixHits.Store(s.prefixHits)
	st.preemptions.Store(s.preemptions)
	st.promptTokens.Store(s.promptTokens)
	st.genTokens.Store(s.genTokens)
	st.compute.Store(int64(s.compute))
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
