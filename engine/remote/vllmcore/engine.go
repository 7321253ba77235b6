package vllmcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
)

// Engine is one attached engine rank: a remote.Client whose requests are
// pinned to its rank. Safe for concurrent use.
//
// One goroutine reads the engine's outputs, decodes each message in place
// and hands every request's new tokens to its Receiver; it alone owns the
// table of requests in flight, which Generate and Abort feed through a
// channel, so the output path takes no lock shared between requests.
type Engine struct {
	f     *Frontend
	rank  int
	ready *v032.ReadyResponse
	in    *zmtp.Conn
	out   *zmtp.Conn
	url   string

	ops  chan op
	done chan struct{} // closed when the reader has ended every call

	failOnce sync.Once
	deadErr  atomic.Pointer[error]

	running, waiting atomic.Int64
	kvUsage          atomic.Uint64 // float64 bits
	stepCounter      atomic.Int64
	// prefixQueries and prefixHits sum the steps' prefix cache counters.
	prefixQueries, prefixHits atomic.Uint64

	callID atomic.Int64
	umu    sync.Mutex
	ucalls map[int64]chan utilityResult

	bufs sync.Pool
}

var (
	_ remote.Client        = (*Engine)(nil)
	_ remote.Controller    = (*Engine)(nil)
	_ remote.ChoiceAborter = (*call)(nil)
)

type op struct {
	c    *call
	drop bool
}

type utilityResult struct {
	result []byte
	err    error
}

func newEngine(f *Frontend, rank int, ready *v032.ReadyResponse, in, out *zmtp.Conn) *Engine {
	return &Engine{
		f: f, rank: rank, ready: ready, in: in, out: out,
		url:    "vllm-core://" + f.ln.Addr().String() + "#" + strconv.Itoa(rank),
		ops:    make(chan op, 1024),
		done:   make(chan struct{}),
		ucalls: map[int64]chan utilityResult{},
	}
}

func (e *Engine) start() {
	go e.read()
	go e.watchInput()
}

// Rank is the engine's data-parallel rank.
func (e *Engine) Rank() int { return e.rank }

// Ranks is the number of data-parallel ranks of the deployment this
// rank belongs to (remote.RankCounted), 0 when not known: the launcher's
// --data-parallel-size (Options.DataParallelSize), else the registration's
// data_parallel_size when above 1 (an MoE model's ranks, which run in
// step). A dense model's ranks register as independent engines of size 1
// each (vLLM's reconfigure_for_independent_dp_rank): one that says 1
// may be one rank of several.
func (e *Engine) Ranks() int {
	switch {
	case e.f != nil && e.f.opts.DataParallelSize > 0:
		return e.f.opts.DataParallelSize
	case e.ready != nil && e.ready.DataParallelSize > 1:
		return e.ready.DataParallelSize
	}
	return 0
}

var _ remote.RankCounted = (*Engine)(nil)

// Ready is the engine's registration (its configuration after start-up).
func (e *Engine) Ready() *v032.ReadyResponse { return e.ready }

// URL names the engine in errors: vllm-core://HANDSHAKE#RANK.
func (e *Engine) URL() string { return e.url }

// Done is closed once the engine is gone and every call of it has ended.
func (e *Engine) Done() <-chan struct{} { return e.done }

// Err is why the engine is gone, nil while it runs.
func (e *Engine) Err() error {
	if p := e.deadErr.Load(); p != nil {
		return *p
	}
	return nil
}

// fail marks the engine gone and closes its connections; the reader then
// ends every call. Idempotent.
func (e *Engine) fail(err error) {
	e.failOnce.Do(func() {
		e.deadErr.Store(&err)
		e.in.Close()
		e.out.Close()
	})
}

// watchInput reads the request connection, where an engine sends nothing
// after its registration: its end is the engine's.
func (e *Engine) watchInput() {
	for {
		if _, err := e.in.ReadMsg(); err != nil {
			e.fail(fmt.Errorf("%w: engine %d's request connection: %v", ErrEngineDead, e.rank, err))
			return
		}
	}
}

// sub is one sub-request in the reader's table: a call's choice.
type sub struct {
	c      *call
	choice int
}

// read is the output loop.
func (e *Engine) read() {
	table := map[string]sub{}
	var o v032.Outputs
	var err error
	for {
		var frames [][]byte
		frames, err = e.out.ReadMsg()
		if err != nil {
			err = fmt.Errorf("%w: engine %d's output connection: %v", ErrEngineDead, e.rank, err)
			break
		}
		if len(frames) == 1 && string(frames[0]) == v032.EngineCoreDead {
			err = fmt.Errorf("%w: engine %d reported ENGINE_CORE_DEAD (its log says why)", ErrEngineDead, e.rank)
			break
		}
		e.drain(table)
		if derr := o.Decode(frames); derr != nil {
			err = fmt.Errorf("engine %d: %w", e.rank, derr)
			break
		}
		if o.HasStats {
			e.running.Store(int64(o.Stats.Running))
			e.waiting.Store(int64(o.Stats.Waiting))
			e.kvUsage.Store(math.Float64bits(o.Stats.KVCacheUsage))
			e.stepCounter.Store(int64(o.Stats.StepCounter))
			if o.Stats.PrefixQueries > 0 {
				e.prefixQueries.Add(uint64(o.Stats.PrefixQueries))
				e.prefixHits.Add(uint64(max(o.Stats.PrefixHits, 0)))
			}
		}
		if o.HasUtility {
			e.utilityDone(&o.Utility)
		}
		for i := range o.Outputs {
			out := &o.Outputs[i]
			s, ok := table[string(out.RequestID)]
			if !ok {
				continue // aborted, or not ours
			}
			if s.c.deliver(s.choice, out) {
				delete(table, string(out.RequestID))
			}
		}
	}
	e.fail(err)
	e.drain(table)
	for _, s := range table {
		s.c.endAll(e.workerError(503, true, err))
	}
	e.umu.Lock()
	for id, ch := range e.ucalls {
		ch <- utilityResult{err: err}
		delete(e.ucalls, id)
	}
	e.umu.Unlock()
	close(e.done)
	e.f.detach(e, err)
}

// drain applies the queued table changes.
func (e *Engine) drain(table map[string]sub) {
	for {
		select {
		case op := <-e.ops:
			for i, id := range op.c.subs {
				if op.drop {
					delete(table, id)
				} else {
					table[id] = sub{op.c, i}
				}
			}
		default:
			return
		}
	}
}

func (e *Engine) workerError(status int, retry bool, err error) *remote.WorkerError {
	return &remote.WorkerError{Worker: e.url, Status: status, Retryable: retry, Message: "vLLM engine core", Err: err}
}

// send writes one request message.
func (e *Engine) send(typ byte, payload []byte) error {
	t := [1]byte{typ}
	return e.in.WriteMsg(t[:], payload)
}

func (e *Engine) buf() *[]byte {
	if b, ok := e.bufs.Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, 4096)
	return &b
}

// Generate implements remote.Client: one EngineCoreRequest per choice
// (vLLM's parent/child ids "i_ID" when n > 1, sharing the prompt and so
// its cached prefix), pinned to this engine's rank.
func (e *Engine) Generate(ctx context.Context, g *remote.Generate, rx remote.Receiver) (remote.Call, error) {
	if err := e.Err(); err != nil {
		return nil, e.workerError(503, true, err)
	}
	n := g.Sampling.Choices()
	c := &call{e: e, id: g.ID, rx: rx, n: n, left: n}
	c.end.Choices = make([]remote.ChoiceEnd, n)
	c.choiceDone = make([]bool, n)
	c.subs = make([]string, n)
	for i := range c.subs {
		c.subs[i] = g.ID
		if n > 1 {
			c.subs[i] = strconv.Itoa(i) + "_" + g.ID
		}
		c.end.Choices[i].MatchedTokenID = -1
	}
	c.wantLogprobs = g.Sampling.Logprobs
	sp := e.sampling(g)
	r := v032.Request{
		Prompt: g.Prompt, Sampling: &sp,
		ArrivalTime:      float64(time.Now().UnixNano()) / 1e9,
		DataParallelRank: e.rank,
		Priority:         g.Priority,
		CacheSalt:        g.CacheSalt,
		SessionID:        g.SessionID,
	}
	if !g.CachePrompt {
		sp.SkipReadingPrefixCache = true
	}
	select {
	case e.ops <- op{c: c}:
	case <-e.done:
		return nil, e.workerError(503, true, e.Err())
	case <-ctx.Done():
		return nil, e.workerError(503, true, ctx.Err())
	}
	bp := e.buf()
	defer e.bufs.Put(bp)
	seed := sp.Seed
	for i, id := range c.subs {
		r.ID = id
		if n > 1 {
			r.ExternalID = g.ID
		}
		if sp.HasSeed {
			sp.Seed = seed + int64(i) // each choice its own seed, as vLLM's ParentRequest
		}
		if g.PromptLogprobs != 0 && i > 0 {
			sp.PromptLogprobs = -1 // the prompt's logprobs once
		}
		*bp = v032.AppendRequest((*bp)[:0], &r)
		if err := e.send(v032.TypeAdd, *bp); err != nil {
			werr := e.workerError(503, i == 0, fmt.Errorf("%w: %v", ErrEngineDead, err))
			e.fail(werr.Err)
			if i == 0 {
				c.mu.Lock()
				c.ended = true // no End: Generate fails
				c.mu.Unlock()
				return nil, werr
			}
			c.endAll(werr)
			return c, nil
		}
	}
	return c, nil
}

// sampling maps the request to SamplingParams with every field the engine
// core reads, including the private ones vLLM's front end fills.
func (e *Engine) sampling(g *remote.Generate) v032.Sampling {
	s := g.Sampling
	sp := v032.NewSampling()
	sp.Temperature = s.Temperature
	if s.TopP > 0 {
		sp.TopP = s.TopP
	}
	if s.TopK > 0 {
		sp.TopK = s.TopK
	}
	sp.MinP = s.MinP
	if s.HasSeed {
		sp.Seed, sp.HasSeed = s.Seed, true
	}
	sp.PresencePenalty = s.PresencePenalty
	sp.FrequencyPenalty = s.FrequencyPenalty
	if s.RepetitionPenalty > 0 {
		sp.RepetitionPenalty = s.RepetitionPenalty
	}
	sp.MaxTokens = g.MaxTokens
	sp.MinTokens = max(g.MinTokens, 0)
	sp.IgnoreEOS = s.IgnoreEOS
	for _, id := range s.StopTokenIDs {
		sp.StopTokenIDs = append(sp.StopTokenIDs, int32(id))
	}
	// As vLLM's front end (SamplingParams.update_from_generation_config):
	// the tokenizer's EOS is _eos_token_id unless ignore_eos; the other
	// EOS ids (generation_config's) become stop token ids unless
	// ignore_eos; all of them are in _all_stop_token_ids, which the
	// engine bans until min_tokens.
	eos := g.EOSTokenIDs
	all := slices.Clone(sp.StopTokenIDs)
	for i, id := range eos {
		all = append(all, id)
		switch {
		case s.IgnoreEOS:
		case i == 0:
			sp.EOSTokenID = id
		case !slices.Contains(sp.StopTokenIDs, id):
			sp.StopTokenIDs = append(sp.StopTokenIDs, id)
		}
	}
	slices.Sort(all)
	sp.AllStopTokenIDs = slices.Compact(all)
	if s.Logprobs {
		sp.Logprobs = s.TopLogprobs
	}
	if g.PromptLogprobs != 0 {
		sp.PromptLogprobs = max(g.PromptLogprobs, 0)
	}
	for _, b := range s.LogitBias {
		sp.LogitBiasIDs = append(sp.LogitBiasIDs, int32(b.TokenID))
		sp.LogitBiasValues = append(sp.LogitBiasValues, b.Bias)
	}
	if g.AllowedTokenIDs != nil {
		sp.AllowedTokenIDs = make([]int32, len(g.AllowedTokenIDs))
		for i, id := range g.AllowedTokenIDs {
			sp.AllowedTokenIDs[i] = int32(id)
		}
	}
	sp.ExtraArgs = g.ExtraArgs
	if len(g.BadWords) > 0 {
		sp.BadWordsTokenIDs = g.BadWords
	}
	// The grammar in xgrammar's dialect when there is one
	// (remote.Constraint says why), else the constraint as it came.
	sp.StructBackend = "xgrammar"
	switch c := &g.Constraint; {
	case c.EBNF != "":
		sp.StructKind, sp.StructValue = v032.StructGrammar, c.EBNF
	case c.Kind == remote.ConstraintJSONObject:
		sp.StructKind = v032.StructJSONObject
	case c.Kind == remote.ConstraintJSONSchema:
		sp.StructKind, sp.StructValue = v032.StructJSON, c.Value
	case c.Kind == remote.ConstraintGrammar:
		sp.StructKind, sp.StructValue = v032.StructGrammar, c.Value
	default:
		sp.StructBackend = ""
	}
	return sp
}

// Info implements remote.Client from the engine's registration and the
// Frontend's options.
func (e *Engine) Info(context.Context) (*remote.Info, error) {
	if err := e.Err(); err != nil {
		return nil, e.workerError(503, true, err)
	}
	o := &e.f.opts
	return &remote.Info{
		ServedModelName:  o.ServedModelName,
		ModelPath:        o.ModelPath,
		MaxContextLength: e.ready.MaxModelLen,
		BOSTokenID:       -1,
		PromptLogprobs:   true,
		// Priority as vLLM's own front end: sent, and ordering the queue
		// when the engine runs --scheduling-policy priority; the cache
		// salt goes into the engine's block hashes.
		Supports: engine.CapBadWords | engine.CapAllowedTokenIDs | engine.CapPriority | engine.CapCacheSalt | engine.CapExtraArgs,
		Slots:    e.ready.MaxNumSeqs,
	}, nil
}

// Health implements remote.Client: the engine is up while its
// connections are.
func (e *Engine) Health(context.Context) error {
	if err := e.Err(); err != nil {
		return e.workerError(503, true, err)
	}
	return nil
}

// Load implements remote.Client with the engine's scheduler stats of its
// last step.
func (e *Engine) Load(context.Context) (remote.Load, error) {
	if err := e.Err(); err != nil {
		return remote.Load{}, e.workerError(503, true, err)
	}
	return remote.Load{
		Running:       int(e.running.Load()),
		Waiting:       int(e.waiting.Load()),
		KVUsage:       math.Float64frombits(e.kvUsage.Load()),
		Capacity:      e.ready.MaxNumSeqs,
		PrefixQueries: e.prefixQueries.Load(),
		PrefixHits:    e.prefixHits.Load(),
	}, nil
}

// Running is the engine's running count of its last reported step.
func (e *Engine) Running() int { return int(e.running.Load()) }

// TokenizerFiles implements remote.Client: the engine core has no
// tokenizer.
func (e *Engine) TokenizerFiles(context.Context) (map[string][]byte, error) {
	return nil, remote.ErrUnsupported
}

// Close implements remote.Client: every call ends with an error and the
// connections close (the engine itself goes on, without a front end).
func (e *Engine) Close() error {
	e.fail(fmt.Errorf("%w: front end closed", ErrClosed))
	<-e.done
	return nil
}

// Utility calls the engine's method (EngineCore.<method>) with args
// (encoded msgpack values) and returns its result, an encoded msgpack
// value.
func (e *Engine) Utility(ctx context.Context, method string, args ...[]byte) ([]byte, error) {
	if err := e.Err(); err != nil {
		return nil, e.workerError(503, true, err)
	}
	id := e.callID.Add(1)
	ch := make(chan utilityResult, 1)
	e.umu.Lock()
	select {
	case <-e.done:
		e.umu.Unlock()
		return nil, e.workerError(503, true, e.Err())
	default:
	}
	e.ucalls[id] = ch
	e.umu.Unlock()
	if err := e.send(v032.TypeUtility, v032.AppendUtility(nil, 0, id, method, args...)); err != nil {
		e.fail(fmt.Errorf("%w: %v", ErrEngineDead, err))
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		e.umu.Lock()
		delete(e.ucalls, id)
		e.umu.Unlock()
		return nil, ctx.Err()
	}
}

// ErrUtility reports a utility call the engine answered with a failure.
var ErrUtility = errors.New("vllmcore: engine utility call failed")

func (e *Engine) utilityDone(u *v032.UtilityOutput) {
	e.umu.Lock()
	ch := e.ucalls[u.CallID]
	delete(e.ucalls, u.CallID)
	e.umu.Unlock()
	if ch == nil {
		return
	}
	if u.Failure != nil {
		ch <- utilityResult{err: fmt.Errorf("%w: %s", ErrUtility, u.Failure)}
		return
	}
	r := []byte{0xc0}
	if u.Result != nil {
		r = slices.Clone(u.Result)
	}
	ch <- utilityResult{result: r}
}

// ResetPrefixCache empties the engine's prefix cache (vLLM's
// /reset_prefix_cache), also the running requests' blocks with
// resetRunning and its KV connector's with resetExternal; it reports
// whether the engine did.
func (e *Engine) ResetPrefixCache(ctx context.Context, resetRunning, resetExternal bool) (bool, error) {
	r, err := e.Utility(ctx, "reset_prefix_cache", msgp.AppendBool(nil, resetRunning), msgp.AppendBool(nil, resetExternal))
	if err != nil {
		return false, err
	}
	ok, _, derr := msgp.ReadBoolBytes(r)
	if derr != nil {
		return false, fmt.Errorf("%w: reset_prefix_cache returned %x", v032.ErrMessage, r)
	}
	return ok, nil
}

// Sleep pauses the engine's scheduling (level 0), also frees its weights
// (level 1) or discards them (level 2), until WakeUp (vLLM's /sleep;
// levels 1 and 2 need the engine's --enable-sleep-mode). mode says what
// becomes of running requests: "abort", "wait" or "keep" ("": abort).
func (e *Engine) Sleep(ctx context.Context, level int, mode string) error {
	if mode == "" {
		mode = "abort"
	}
	_, err := e.Utility(ctx, "sleep", msgp.AppendInt(nil, level), msgp.AppendString(nil, mode))
	return err
}

// WakeUp undoes Sleep (vLLM's /wake_up): tags nil wakes everything,
// ["scheduling"] a level 0 sleep. It reports whether the engine is fully
// awake.
func (e *Engine) WakeUp(ctx context.Context, tags []string) (bool, error) {
	arg := msgp.AppendNil(nil)
	if tags != nil {
		arg = msgp.AppendArrayHeader(nil, uint32(len(tags)))
		for _, t := range tags {
			arg = msgp.AppendString(arg, t)
		}
	}
	r, err := e.Utility(ctx, "wake_up", arg)
	if err != nil {
		return false, err
	}
	awake, _, derr := msgp.ReadBoolBytes(r)
	if derr != nil {
		return false, fmt.Errorf("%w: wake_up returned %x", v032.ErrMessage, r)
	}
	return awake, nil
}

// IsSleeping asks the engine whether it sleeps (vLLM's /is_sleeping).
func (e *Engine) IsSleeping(ctx context.Context) (bool, error) {
	r, err := e.Utility(ctx, "is_sleeping")
	if err != nil {
		return false, err
	}
	ok, _, derr := msgp.ReadBoolBytes(r)
	if derr != nil {
		return false, fmt.Errorf("%w: is_sleeping returned %x", v032.ErrMessage, r)
	}
	return ok, nil
}

// call is one request in flight: n sub-requests, one per choice.
type call struct {
	e            *Engine
	id           string
	rx           remote.Receiver
	n            int
	subs         []string
	wantLogprobs bool

	// mu guards the call's state; it is not held during the Receiver's
	// methods, which may call Abort or AbortChoice on the same goroutine
	// (the remote engine ends a choice on a stop string, or the request
	// when it fails). busy says one runs (emit): an End due meanwhile is
	// left pending for the goroutine running it, so that the Receiver's
	// methods never run concurrently and End comes last.
	mu         sync.Mutex
	busy       bool
	pendingEnd bool
	ended      bool
	left       int
	choiceDone []bool
	end        remote.End
	chunk      remote.Chunk
	lps        []float32
	top        [][]remote.TopLogprob
	topBuf     []remote.TopLogprob
	prompt     []engine.TokenLogprob
}

// deliver hands one output to the Receiver; it reports whether this
// sub-request is over.
func (c *call) deliver(choice int, out *v032.Output) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.choiceDone[choice] {
		return true
	}
	if out.HasPrefill && choice == 0 {
		c.end.PromptTokens, c.end.CachedTokens = out.PromptTokens, out.CachedTokens
	}
	if out.PromptLogprobs.Rows > 0 && choice == 0 {
		c.addPromptLogprobs(&out.PromptLogprobs)
	}
	if len(out.TokenIDs) > 0 {
		ch := &c.chunk
		*ch = remote.Chunk{Choice: choice, TokenIDs: out.TokenIDs}
		if out.HasPrefill {
			ch.PromptTokens, ch.CachedTokens = out.PromptTokens, out.CachedTokens
		}
		if c.prompt != nil && choice == 0 {
			if len(c.prompt) > 0 {
				c.prompt[0] = engine.TokenLogprob{TokenID: c.prompt[0].TokenID}
			}
			ch.PromptLogprobs = c.prompt
			c.prompt = nil
		}
		if l := &out.Logprobs; c.wantLogprobs && l.Rows == len(out.TokenIDs) {
			c.logprobs(l)
		}
		c.end.Choices[choice].CompletionTokens += len(out.TokenIDs)
		c.emit(func() { c.rx.Tokens(ch) })
		if c.ended || c.choiceDone[choice] {
			return true // the Receiver ended it
		}
	}
	if out.FinishReason == v032.NoFinish {
		return false
	}
	ce := &c.end.Choices[choice]
	ce.FinishReason = v032.FinishReasonString(out.FinishReason)
	if out.FinishReason == v032.FinishRepetition {
		ce.FinishReason = "stop"
	}
	if out.StopToken >= 0 {
		ce.MatchedTokenID = int32(out.StopToken)
	}
	if out.FinishReason == v032.FinishError {
		c.end.Err = c.e.workerError(500, false, fmt.Errorf("the engine failed request %s", out.RequestID))
	}
	c.choiceDone[choice] = true
	c.left--
	if c.left == 0 {
		c.ended = true
		c.endLocked()
	}
	return true
}

// emit runs f, a Receiver method, with mu released and the call busy,
// then delivers an End left pending meanwhile. mu is held on entry and on
// return.
func (c *call) emit(f func()) {
	c.busy = true
	c.mu.Unlock()
	f()
	c.mu.Lock()
	c.busy = false
	if c.pendingEnd {
		c.pendingEnd = false
		c.endLocked()
	}
}

// endLocked delivers End now, or leaves it pending while a Receiver
// method runs. mu is held on entry and on return; ended is set.
func (c *call) endLocked() {
	if c.busy {
		c.pendingEnd = true
		return
	}
	c.emit(func() { c.rx.End(&c.end) })
}

// logprobs fills the chunk's logprobs from the engine's rows: column 0 the
// sampled token, the others its top alternatives.
func (c *call) logprobs(l *v032.Logprobs) {
	ch := &c.chunk
	c.lps = c.lps[:0]
	c.top = c.top[:0]
	c.topBuf = c.topBuf[:0]
	need := l.Rows * max(l.Cols-1, 0)
	if cap(c.topBuf) < need {
		c.topBuf = make([]remote.TopLogprob, 0, need)
	}
	for r := 0; r < l.Rows; r++ {
		c.lps = append(c.lps, l.Logprobs[r*l.Cols])
		start := len(c.topBuf)
		for k := 1; k < l.Cols; k++ {
			c.topBuf = append(c.topBuf, remote.TopLogprob{TokenID: l.TokenIDs[r*l.Cols+k], Logprob: l.Logprobs[r*l.Cols+k]})
		}
		c.top = append(c.top, c.topBuf[start:len(c.topBuf):len(c.topBuf)])
	}
	ch.Logprobs, ch.Top = c.lps, c.top
}

// addPromptLogprobs gathers the prompt's logprobs (sent in parts under
// chunked prefill). The first prompt token has none.
func (c *call) addPromptLogprobs(l *v032.Logprobs) {
	if c.prompt == nil {
		c.prompt = make([]engine.TokenLogprob, 1, l.Rows+1)
	}
	for r := 0; r < l.Rows; r++ {
		tl := engine.TokenLogprob{TokenID: int(l.TokenIDs[r*l.Cols]), Logprob: l.Logprobs[r*l.Cols]}
		for k := 1; k < l.Cols; k++ {
			tl.Top = append(tl.Top, engine.TopLogprob{TokenID: int(l.TokenIDs[r*l.Cols+k]), Logprob: l.Logprobs[r*l.Cols+k]})
		}
		c.prompt = append(c.prompt, tl)
	}
}

// endAll ends the call with err (the engine is gone). Idempotent.
func (c *call) endAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	for i := range c.end.Choices {
		if !c.choiceDone[i] {
			c.end.Choices[i].FinishReason = "error"
		}
	}
	c.end.Err = err
	c.endLocked()
}

// Abort implements remote.Call: one abort message names every sub-request
// still running, and the call ends at once (the engine sends nothing for
// a request its front end aborted).
func (c *call) Abort() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	var ids []string
	for i, id := range c.subs {
		if !c.choiceDone[i] {
			ids = append(ids, id)
			c.choiceDone[i] = true
			c.end.Choices[i].FinishReason = "abort"
		}
	}
	c.endLocked()
	c.mu.Unlock()
	c.e.abort(c, ids)
}

// AbortChoice implements remote.ChoiceAborter: the choice's sub-request
// is aborted; the call ends when its last choice does.
func (c *call) AbortChoice(i int) {
	c.mu.Lock()
	if c.ended || i < 0 || i >= c.n || c.choiceDone[i] {
		c.mu.Unlock()
		return
	}
	c.choiceDone[i] = true
	c.end.Choices[i].FinishReason = "abort"
	c.left--
	last := c.left == 0
	if last {
		c.ended = true
		c.endLocked()
	}
	c.mu.Unlock()
	c.e.abort(nil, []string{c.subs[i]})
	if last {
		c.e.forget(c)
	}
}

func (e *Engine) abort(c *call, ids []string) {
	if len(ids) > 0 && e.Err() == nil {
		if err := e.send(v032.TypeAbort, v032.AppendAbort(nil, ids...)); err != nil {
			e.fail(fmt.Errorf("%w: %v", ErrEngineDead, err))
		}
	}
	if c != nil {
		e.forget(c)
	}
}

// forget drops c from the reader's table (best effort: a full queue
// leaves it until the engine detaches).
func (e *Engine) forget(c *call) {
	select {
	case e.ops <- op{c: c, drop: true}:
	default:
	}
}
