package remote

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
)

// request is one admitted request: the engine.Session handed to the caller
// and the Receiver of its call on the worker. Everything but the atomics
// belongs to the client's receive goroutine (which serializes Tokens and
// End) once Generate was called.
type request struct {
	e   *Engine
	w   *Worker
	sel Selection
	req *engine.Request
	g   Generate
	q   Query
	// tried are the workers that refused r before its first byte.
	tried  [4]*Worker
	ntried int
	p      *prepared

	call     atomic.Pointer[callBox]
	cur      atomic.Pointer[Worker] // w, for WorkerURL on other goroutines
	aborting atomic.Bool
	// state: why the request is ending early (abortedBy*), set once.
	reason atomic.Uint32
	// sentNano is when the call was sent; lastNano when the worker last
	// sent output (0 before the first token): the stall sweep reads them.
	sentNano atomic.Int64
	lastNano atomic.Int64

	// out is the request's output (engine/pipeline): choices, parsers,
	// logprobs, usage, frames, the final Result.
	out      pipeline.Out
	lp       engine.TokenLogprob // the token's logprob being built
	stopIDs  []int
	cachedIn bool // the worker reported cached tokens
	ownEnd   bool // the engine ended a choice the worker would have gone on with
}

// callBox holds the Call for an atomic pointer.
type callBox struct {
	c       Call
	attempt int
}

// Reasons a request ends before its worker ended it.
const (
	reasonNone uint32 = iota
	reasonClient
	reasonTimeoutFirst
	reasonTimeoutInter
	reasonClosed
)

// Start sends a prepared request to a worker; see engine.Engine. It fails
// with KindClosed when no worker is healthy.
func (e *Engine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	if req.Stream && req.Formatter == nil {
		return nil, &engine.Error{Kind: engine.KindInternal, Message: "streamed request without a Formatter"}
	}
	if e.closed.Load() {
		return nil, e.unavailable()
	}
	p, ok := req.Prepared.(*prepared)
	if !ok || p.e != e {
		if err := e.Prepare(req); err != nil {
			return nil, err
		}
		p = req.Prepared.(*prepared)
	}
	r, err := e.newRequest(req, p, sink)
	if err != nil {
		return nil, err
	}
	r.g = Generate{
		ID:             "vajra-" + strconv.FormatUint(e.callSeq.Add(1), 36),
		Prompt:         p.Prompt,
		Sampling:       &req.Sampling,
		MaxTokens:      p.MaxTokens,
		MinTokens:      min(req.Sampling.MinTokens, p.MaxTokens),
		Constraint:     p.constraint,
		PromptLogprobs: req.PromptLogprobs,
		EOSTokenIDs:    p.m.eosIDs,
		CachePrompt:    true,
		BadWords:       p.BadWords,
	}
	if v := req.VLLM; v != nil {
		r.g.AllowedTokenIDs, r.g.Priority, r.g.CacheSalt = v.AllowedTokenIDs, v.Priority, v.CacheSalt
		r.g.SessionID, r.g.ExtraArgs = v.SessionID, v.ExtraArgs
	}
	r.q = Query{Prompt: p.Prompt, N: r.out.Choices(), Salt: r.g.CacheSalt}
	if v := req.VLLM; v != nil && v.PinRank {
		r.q.Pinned, r.q.Rank = true, v.DataParallelRank
	}
	for {
		err := r.send()
		if err == nil {
			return r, nil
		}
		if err == errNoWorker {
			return nil, e.unavailableFor(&r.q)
		}
		// Start does not wait out a Router's back-off (its caller must
		// not block): the retry goes to another worker at once.
		if _, ok := r.nextAttempt(err); !ok {
			return nil, workerError(err)
		}
	}
}

// errNoWorker: no worker may take the request now.
var errNoWorker = errors.New("remote: no worker")

// send picks a worker for r's next attempt and sends the call: nil once a
// worker took it, errNoWorker, or the worker's error (r released).
func (r *request) send() error {
	e := r.e
	sel := e.pick(&r.q, r.tried[:r.ntried])
	w := sel.Decode
	if w == nil {
		return errNoWorker
	}
	r.sel, r.w = sel, w
	r.cur.Store(w)
	attempt := r.q.Attempt
	w.inflight.Add(1)
	e.running.Add(1)
	e.track(r)
	now := time.Now()
	r.out.SetAdmitted(now)
	r.sentNano.Store(now.UnixNano())
	c, err := w.client.Generate(context.Background(), &r.g, r)
	if err != nil {
		r.release(Outcome{Result: OutcomeFailed, Status: statusOf(err)})
		return err
	}
	box := &callBox{c: c, attempt: attempt}
	for {
		// The call may have ended, and a retry started, before Generate
		// returned (llama-server): a later attempt's call stays.
		old := r.call.Load()
		if old != nil && old.attempt > attempt || r.call.CompareAndSwap(old, box) {
			break
		}
	}
	if r.aborting.Load() {
		c.Abort()
	}
	return nil
}

// nextAttempt records that r's worker refused it and says whether r may
// go to another worker, and after how long.
func (r *request) nextAttempt(err error) (time.Duration, bool) {
	var we *WorkerError
	if !errors.As(err, &we) || !we.Retryable || r.ntried == len(r.tried) {
		return 0, false
	}
	if we.Status == 0 {
		r.e.failed(r.w)
	}
	r.tried[r.ntried] = r.w
	r.ntried++
	r.q.Attempt++
	if rt := r.e.router; rt != nil {
		return rt.Retry(&r.q, r.q.Attempt)
	}
	return 0, r.q.Attempt < len(r.e.list())
}

// retryEnd takes a call its worker refused before the first byte (the
// refusal came in End: llama-server) to another worker, after the
// Router's back-off. It reports whether it did; r is released then.
func (r *request) retryEnd(end *End) bool {
	if end.Err == nil || r.out.Done() || r.out.Started() || r.reason.Load() != reasonNone ||
		r.aborting.Load() || r.e.closed.Load() {
		return false
	}
	wait, ok := r.nextAttempt(end.Err)
	if !ok {
		return false
	}
	r.release(Outcome{Result: OutcomeFailed, Status: statusOf(end.Err)})
	time.AfterFunc(wait, r.resend)
	return true
}

// resend is a retry's next attempt, on a timer's goroutine: no call of r
// is in flight, so it may end r itself.
func (r *request) resend() {
	for {
		if r.reason.Load() != reasonNone || r.aborting.Load() || r.e.closed.Load() {
			r.reason.CompareAndSwap(reasonNone, reasonClosed)
			r.endCall(&End{})
			return
		}
		err := r.send()
		if err == nil {
			return
		}
		if err == errNoWorker {
			r.finish(pipeline.Failed, r.e.unavailableFor(&r.q).(*engine.Error))
			return
		}
		wait, ok := r.nextAttempt(err)
		if !ok {
			r.finish(pipeline.Failed, workerError(err))
			return
		}
		if wait > 0 {
			time.AfterFunc(wait, r.resend)
			return
		}
	}
}

// statusOf is a worker error's status (0: the connection, or not one).
func statusOf(err error) int {
	var we *WorkerError
	if errors.As(err, &we) {
		return we.Status
	}
	return 0
}

// outcome is how the call that end ends went, for the Router.
func (r *request) outcome(end *End) Outcome {
	o := Outcome{FirstByte: r.out.Started(), PromptTokens: end.PromptTokens, CachedTokens: end.CachedTokens}
	switch reason := r.reason.Load(); {
	case reason == reasonClient || reason == reasonClosed:
		o.Result = OutcomeCanceled
	case reason != reasonNone:
		o.Result = OutcomeFailed
	case end.Err != nil && r.out.Live() > 0 && !r.aborting.Load():
		o.Result, o.Status = OutcomeFailed, statusOf(end.Err)
	}
	return o
}

func (e *Engine) newRequest(req *engine.Request, p *prepared, sink engine.Sink) (*request, error) {
	r := &request{e: e, req: req, p: p, stopIDs: req.Sampling.StopTokenIDs}
	err := r.out.Init(&pipeline.Config{Request: req, Sink: sink, Vocab: p.m, Logger: e.log, Parse: p.Parse,
		Forced: p.Forced, ForcedName: p.ForcedName, PromptTokens: len(p.Prompt), MaxTokens: p.MaxTokens})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// WorkerURL is the URL of the worker running the request (the last one
// tried, before the first byte). Call it after Start returned, or after
// the final Result: a retry may change it in between.
func (r *request) WorkerURL() string {
	if w := r.cur.Load(); w != nil {
		return w.url
	}
	return ""
}

// Abort stops the request and its call on the worker; see engine.Session.
func (r *request) Abort() {
	r.reason.CompareAndSwap(reasonNone, reasonClient)
	r.abortCall()
}

// shutdown ends r because the engine closes.
func (r *request) shutdown() {
	r.reason.CompareAndSwap(reasonNone, reasonClosed)
	r.abortCall()
}

func (r *request) abortCall() {
	if r.aborting.Swap(true) {
		return
	}
	if b := r.call.Load(); b != nil {
		b.c.Abort()
	}
}

// stalled reports whether the worker has kept r waiting too long.
func (r *request) stalled(now int64, first, inter time.Duration) bool {
	if r.aborting.Load() {
		return false
	}
	last := r.lastNano.Load()
	if last == 0 {
		return first > 0 && now-r.sentNano.Load() > int64(first)
	}
	return inter > 0 && now-last > int64(inter)
}

// timeout ends a stalled request: its call is aborted on the worker and
// its End reports the timeout.
func (r *request) timeout() {
	reason := reasonTimeoutInter
	if r.lastNano.Load() == 0 {
		reason = reasonTimeoutFirst
	}
	if r.reason.CompareAndSwap(reasonNone, reason) {
		r.abortCall()
	}
}

// Tokens takes one chunk of one choice's tokens into the request's
// output (engine/pipeline): detokenize, stop checks, parse, frame, one
// Deliver. Per token it allocates nothing once the choice's buffers have
// grown.
func (r *request) Tokens(ck *Chunk) {
	o := &r.out
	if ck.PromptLogprobs != nil && !o.Started() && o.PromptLogprobs() == nil {
		// The worker's prompt logprobs (completions with echo) come
		// first, freshly allocated: the Result keeps them.
		pipeline.NameTokens(r.p.m, ck.PromptLogprobs)
		o.SetPromptLogprobs(ck.PromptLogprobs)
	}
	if o.Done() || ck.Choice < 0 || ck.Choice >= o.Choices() || len(ck.TokenIDs) == 0 {
		return
	}
	ci := ck.Choice
	if o.ChoiceDone(ci) {
		return
	}
	defer r.recoverPanic()
	now := time.Now()
	r.lastNano.Store(now.UnixNano())
	if ck.CachedTokens > 0 {
		o.Usage.CachedTokens, r.cachedIn = ck.CachedTokens, true
	}
	o.Step(now)
	sp := &r.req.Sampling
	// Tokens the worker did not name: counted; their text comes with
	// the chunk's last token.
	o.Count(ci, ck.Missing)
	last := len(ck.TokenIDs) - 1
	for i, id := range ck.TokenIDs {
		var lp *engine.TokenLogprob
		if sp.Logprobs {
			var l float32
			if i < len(ck.Logprobs) {
				l = ck.Logprobs[i]
			}
			var top []TopLogprob
			if i < len(ck.Top) {
				top = ck.Top[i]
			}
			r.lp = o.Logprob(ci, id, l, top, sp.TopLogprobs)
			lp = &r.lp
		}
		var end pipeline.End
		switch {
		case ck.Text == nil:
			end = o.Token(ci, id, lp)
		case i == last:
			end = o.TokenText(ci, id, lp, ck.Text)
		default:
			end = o.TokenText(ci, id, lp, nil)
		}
		if end == pipeline.Going {
			continue
		}
		if end == pipeline.Stopped {
			// The worker does not know this end: stop it there.
			r.ownEnd = true
			r.stopChoice(ci)
		}
		break
	}
	if o.Live() == 0 && r.ownEnd {
		// The worker's End (an abort) has nothing more to say.
		r.finish(pipeline.Done, nil)
		return
	}
	// Otherwise the worker's End follows at once, with its usage.
	o.Deliver()
}

// stopChoice tells the worker a choice the engine ended is over.
func (r *request) stopChoice(index int) {
	b := r.call.Load()
	if r.out.Live() == 0 {
		r.aborting.Store(true)
		if b != nil {
			b.c.Abort()
		}
		return
	}
	if b != nil {
		if ca, ok := b.c.(ChoiceAborter); ok {
			ca.AbortChoice(index)
		}
	}
}

// End ends the call: the worker's finish of the choices still running, or
// its failure.
func (r *request) End(end *End) {
	if r.retryEnd(end) {
		return
	}
	defer r.release(r.outcome(end))
	r.endCall(end)
}

// endCall is End but for the accounting.
func (r *request) endCall(end *End) {
	o := &r.out
	if o.Done() {
		return
	}
	defer r.recoverPanic()
	if end.PromptTokens > 0 {
		o.Usage.PromptTokens = end.PromptTokens
	}
	counted := 0
	for _, ce := range end.Choices {
		counted += ce.CompletionTokens
	}
	if counted > o.Usage.CompletionTokens {
		// Tokens the worker generated and never streamed (llama-server's
		// held incomplete UTF-8 at the end).
		o.Usage.CompletionTokens = counted
	}
	if end.CachedTokens > 0 || !r.cachedIn {
		o.Usage.CachedTokens = end.CachedTokens
	}
	cause, err := pipeline.Failed, (*engine.Error)(nil)
	switch reason := r.reason.Load(); {
	case reason == reasonClient:
		cause = pipeline.Aborted
	case reason == reasonClosed:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine is shut down"}
	case reason == reasonTimeoutFirst:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine worker " + r.w.url +
			" sent no token within " + r.e.cfg.FirstTokenTimeout.String() + " (--worker-first-token-timeout); the request was aborted on it"}
	case reason == reasonTimeoutInter:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine worker " + r.w.url +
			" sent nothing for " + r.e.cfg.InterTokenTimeout.String() + " (--worker-inter-token-timeout); the request was aborted on it"}
	case end.Err != nil && o.Live() == 0:
		// Every choice had ended: the output is whole.
		cause = pipeline.Done
	case end.Err != nil:
		var we *WorkerError
		if errors.As(end.Err, &we) && we.Status == 0 && !r.e.closed.Load() {
			r.e.failed(r.w)
		}
		err = workerError(end.Err)
	default:
		cause = pipeline.Done
	}
	if cause == pipeline.Done {
		for i := range o.Choices() {
			if o.ChoiceDone(i) {
				continue
			}
			ce := endOf(end, i)
			finish, stopID := engine.FinishStop, -1
			switch ce.FinishReason {
			case "length":
				finish = engine.FinishLength
			case "abort", "error":
				finish = engine.FinishAbort
			default:
				if ce.MatchedTokenID >= 0 && slices.Contains(r.stopIDs, int(ce.MatchedTokenID)) {
					stopID = int(ce.MatchedTokenID)
				}
			}
			o.EndChoice(i, finish, stopID)
		}
	}
	r.finish(cause, err)
}

// endOf is choice i's end, or a plain stop when the worker gave none.
func endOf(end *End, i int) ChoiceEnd {
	if i < len(end.Choices) {
		return end.Choices[i]
	}
	return ChoiceEnd{FinishReason: "stop", MatchedTokenID: -1}
}

// release drops the request from the worker's and engine's counts, once
// per call when it has ended, and tells the Router how it went.
func (r *request) release(o Outcome) {
	if r.w.inflight.Add(-1) == 0 && r.w.draining.Load() {
		r.e.retire(r.w)
	}
	r.e.running.Add(-1)
	r.e.untrack(r)
	if rt := r.e.router; rt != nil {
		rt.Done(r.sel, &r.q, o)
	}
}

// workerError maps a worker's failure to the engine error the dialects
// render: overloaded (429), unavailable (503: the worker or the way to it
// is gone, its stream broke), refused (400) or a failure the worker
// reported (500, whose details the dialects keep to the log).
func workerError(err error) *engine.Error {
	var we *WorkerError
	if !errors.As(err, &we) {
		return &engine.Error{Kind: engine.KindInternal, Message: "the engine worker failed: " + err.Error()}
	}
	switch {
	case we.Status == 429:
		return &engine.Error{Kind: engine.KindOverloaded, Message: "the engine worker is overloaded: " + we.Message}
	case we.Status == 400 || we.Status == 422:
		return &engine.Error{Kind: engine.KindInvalid, Message: "the engine worker refused the request: " + we.Message}
	case we.Status == 503 || we.Status == 0:
		return &engine.Error{Kind: engine.KindClosed, Message: "the engine worker " + we.Worker + " is unavailable: " + we.Message}
	}
	return &engine.Error{Kind: engine.KindInternal, Message: we.Error()}
}

// finish ends the request for cause (err: the failure) and delivers its
// final Result with the stream's last frames. Choices still running end
// as aborted, and the worker's call with them.
func (r *request) finish(cause pipeline.Cause, err *engine.Error) {
	o := &r.out
	live := o.Live()
	frames, res := o.Finish(cause, err)
	if res == nil {
		return
	}
	r.e.promptN.Add(uint64(res.Usage.PromptTokens))
	r.e.genN.Add(uint64(res.Usage.CompletionTokens))
	if live > 0 || cause != pipeline.Done {
		// Anything still running on the worker is of no use now.
		r.abortCall()
	}
	o.DeliverFinal(frames, res)
}

// recoverPanic ends r alone when its own code (Formatter, Sink, parser)
// panicked: the call is aborted and a panicked Result delivered.
func (r *request) recoverPanic() {
	p := recover()
	if p == nil {
		return
	}
	done := r.out.Done()
	r.out.Break(p)
	if !done {
		r.finish(pipeline.Failed, engine.PanicError())
	}
}
