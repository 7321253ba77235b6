package remote

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
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
	sink   engine.Sink

	call     atomic.Pointer[callBox]
	cur      atomic.Pointer[Worker] // w, for WorkerURL on other goroutines
	aborting atomic.Bool
	// state: why the request is ending early (abortedBy*), set once.
	reason atomic.Uint32
	// sentNano is when the call was sent; lastNano when the worker last
	// sent output (0 before the first token): the stall sweep reads them.
	sentNano atomic.Int64
	lastNano atomic.Int64

	choices  []choice
	live     int
	started  bool
	done     bool
	broken   bool
	usage    engine.Usage
	buf      []byte // this chunk's frames
	arrival  time.Time
	sent     time.Time
	first    time.Time
	gaps     engine.Gaps
	start    engine.Start
	delta    engine.Delta
	end      engine.ChoiceEnd
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

// choice is one choice's state.
type choice struct {
	index  int
	parser *text.Parser
	forced *text.Forced
	events []text.Event
	piece  []byte

	gen  []int // generated ids (those the worker named)
	n    int   // generated tokens
	lps  []engine.TokenLogprob
	tops []engine.TopLogprob // arena for lps' alternatives, append-only
	strs []byte              // arena for logprob token strings, append-only
	pend int                 // gen[pend:] not yet delivered in a Delta

	first       bool
	done        bool
	finish      engine.FinishReason
	stopString  string
	stopTokenID int
}

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
	r := e.newRequest(req, p, sink)
	r.g = Generate{
		ID:             "vajra-" + strconv.FormatUint(e.callSeq.Add(1), 36),
		Prompt:         p.prompt,
		Sampling:       &req.Sampling,
		MaxTokens:      p.maxTokens,
		MinTokens:      min(req.Sampling.MinTokens, p.maxTokens),
		Constraint:     p.constraint,
		PromptLogprobs: req.PromptLogprobs,
		CachePrompt:    true,
	}
	r.q = Query{Prompt: p.prompt, N: len(r.choices)}
	for {
		err := r.send()
		if err == nil {
			return r, nil
		}
		if err == errNoWorker {
			return nil, e.unavailable()
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
	r.sent = now
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
	if end.Err == nil || r.done || r.started || !r.first.IsZero() || r.reason.Load() != reasonNone ||
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
			r.finish(r.e.unavailable().(*engine.Error))
			return
		}
		wait, ok := r.nextAttempt(err)
		if !ok {
			r.finish(workerError(err))
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
	o := Outcome{FirstByte: !r.first.IsZero(), PromptTokens: end.PromptTokens, CachedTokens: end.CachedTokens}
	switch reason := r.reason.Load(); {
	case reason == reasonClient || reason == reasonClosed:
		o.Result = OutcomeCanceled
	case reason != reasonNone:
		o.Result = OutcomeFailed
	case end.Err != nil && r.live > 0 && !r.aborting.Load():
		o.Result, o.Status = OutcomeFailed, statusOf(end.Err)
	}
	return o
}

func (e *Engine) newRequest(req *engine.Request, p *prepared, sink engine.Sink) *request {
	n := req.Sampling.Choices()
	r := &request{e: e, req: req, p: p, sink: sink, choices: make([]choice, n), live: n,
		arrival: req.Arrival, stopIDs: req.Sampling.StopTokenIDs}
	now := time.Now()
	if r.arrival.IsZero() || r.arrival.After(now) {
		r.arrival = now
	}
	r.usage.PromptTokens = len(p.prompt)
	for i := range r.choices {
		c := &r.choices[i]
		c.index, c.stopTokenID = i, -1
		if p.forced {
			c.forced = new(text.Forced)
			c.forced.Reset(p.forcedName, req.Stream)
		} else {
			// Options were checked by New; a Parser fails on unknown names only.
			c.parser, _ = text.NewParser(p.parse)
		}
		c.gen = make([]int, 0, min(p.maxTokens, 256))
		if req.Sampling.Logprobs {
			c.lps = make([]engine.TokenLogprob, 0, min(p.maxTokens, 256))
		}
	}
	return r
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

// Tokens takes one chunk of one choice's tokens: detokenize, stop checks,
// parse, frame, one Deliver. Per token it allocates nothing once the
// choice's buffers have grown.
func (r *request) Tokens(ck *Chunk) {
	if r.done || ck.Choice < 0 || ck.Choice >= len(r.choices) || len(ck.TokenIDs) == 0 {
		return
	}
	c := &r.choices[ck.Choice]
	if c.done {
		return
	}
	defer r.recoverPanic()
	now := time.Now()
	r.lastNano.Store(now.UnixNano())
	if r.first.IsZero() {
		r.first = now
	}
	r.gaps.Step(now)
	if ck.CachedTokens > 0 {
		r.usage.CachedTokens, r.cachedIn = ck.CachedTokens, true
	}
	if !r.started {
		r.appendStart()
	}
	m := r.p.m
	sp := &r.req.Sampling
	if ck.Missing > 0 {
		// Tokens the worker did not name: counted; their text comes with
		// the chunk's last token.
		r.usage.CompletionTokens += ck.Missing
		c.n += ck.Missing
		if c.parser != nil {
			c.parser.Count(ck.Missing)
		}
	}
	last := len(ck.TokenIDs) - 1
	for i, id := range ck.TokenIDs {
		own := false // the engine ends the choice where the worker would not
		r.usage.CompletionTokens++
		c.n++
		c.gen = append(c.gen, int(id))
		if c.lps != nil {
			c.lps = append(c.lps, c.logprob(m, ck, i, sp.TopLogprobs))
		}
		switch {
		case id < 0 || int(id) >= m.vocab:
			c.finish, own = engine.FinishStop, true
		case m.eos[id] && !sp.IgnoreEOS:
			c.finish = engine.FinishStop
		case len(r.stopIDs) > 0 && slices.Contains(r.stopIDs, int(id)):
			c.finish, c.stopTokenID = engine.FinishStop, int(id)
		default:
			c.piece = c.piece[:0]
			switch {
			case ck.Text != nil:
				if i == last {
					c.piece = append(c.piece, ck.Text...)
				}
			case text.KeepToken(m.kind[id], &r.p.parse, sp.KeepSpecialTokens):
				c.piece = m.tok.AppendPiece(c.piece, id)
			}
			if c.forced != nil {
				c.events = c.forced.Feed(c.events[:0], c.piece)
				r.emit(c, c.events)
				break
			}
			var stopped bool
			c.events, stopped = c.parser.Feed(c.events[:0], c.piece)
			if hasReasoning(c.events) {
				r.usage.ReasoningTokens++
			}
			r.emit(c, c.events)
			if stopped {
				c.finish, c.stopString = engine.FinishStop, c.parser.StopString()
			}
		}
		if c.finish == "" && c.n >= r.p.maxTokens {
			c.finish = engine.FinishLength
		}
		if c.finish != "" {
			r.endChoice(c)
			if c.stopString != "" || c.stopTokenID >= 0 || own {
				// The worker does not know this end: stop it there.
				r.ownEnd = true
				r.stopChoice(c)
			}
			break
		}
	}
	if r.live == 0 && r.ownEnd {
		// The worker's End (an abort) has nothing more to say.
		r.finish(nil)
		return
	}
	// Otherwise the worker's End follows at once, with its usage.
	if len(r.buf) > 0 {
		r.sink.Deliver(r.buf, nil)
		r.buf = r.buf[:0]
	}
}

// stopChoice tells the worker a choice the engine ended is over.
func (r *request) stopChoice(c *choice) {
	b := r.call.Load()
	if r.live == 0 {
		r.aborting.Store(true)
		if b != nil {
			b.c.Abort()
		}
		return
	}
	if b != nil {
		if ca, ok := b.c.(ChoiceAborter); ok {
			ca.AbortChoice(c.index)
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
	if r.done {
		return
	}
	defer r.recoverPanic()
	if end.PromptTokens > 0 {
		r.usage.PromptTokens = end.PromptTokens
	}
	counted := 0
	for _, ce := range end.Choices {
		counted += ce.CompletionTokens
	}
	if counted > r.usage.CompletionTokens {
		// Tokens the worker generated and never streamed (llama-server's
		// held incomplete UTF-8 at the end).
		r.usage.CompletionTokens = counted
	}
	if end.CachedTokens > 0 || !r.cachedIn {
		r.usage.CachedTokens = end.CachedTokens
	}
	var err *engine.Error
	switch reason := r.reason.Load(); {
	case reason == reasonClient:
		err = &engine.Error{Kind: engine.KindAborted, Message: abortedByClient}
	case reason == reasonClosed:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine is shut down"}
	case reason == reasonTimeoutFirst:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine worker " + r.w.url +
			" sent no token within " + r.e.cfg.FirstTokenTimeout.String() + " (--worker-first-token-timeout); the request was aborted on it"}
	case reason == reasonTimeoutInter:
		err = &engine.Error{Kind: engine.KindClosed, Message: "the engine worker " + r.w.url +
			" sent nothing for " + r.e.cfg.InterTokenTimeout.String() + " (--worker-inter-token-timeout); the request was aborted on it"}
	case end.Err != nil && r.live == 0:
		// Every choice had ended: the output is whole.
	case end.Err != nil:
		var we *WorkerError
		if errors.As(end.Err, &we) && we.Status == 0 && !r.e.closed.Load() {
			r.e.failed(r.w)
		}
		err = workerError(end.Err)
	}
	if err == nil {
		for i := range r.choices {
			c := &r.choices[i]
			if c.done {
				continue
			}
			ce := endOf(end, i)
			switch ce.FinishReason {
			case "length":
				c.finish = engine.FinishLength
			case "abort", "error":
				c.finish = engine.FinishAbort
			default:
				c.finish = engine.FinishStop
				if ce.MatchedTokenID >= 0 && slices.Contains(r.stopIDs, int(ce.MatchedTokenID)) {
					c.stopTokenID = int(ce.MatchedTokenID)
				}
			}
			r.endChoice(c)
		}
	}
	r.finish(err)
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

// abortedByClient marks an abort the client asked for: the stream gets no
// error event (the client is gone).
const abortedByClient = "the request was aborted"

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

func (r *request) appendStart() {
	r.started = true
	if !r.req.Stream {
		return
	}
	r.start = engine.Start{
		PromptTokens:   r.usage.PromptTokens,
		CachedTokens:   r.usage.CachedTokens,
		N:              len(r.choices),
		PromptTokenIDs: r.req.PromptTokens,
	}
	r.buf = r.req.Formatter.AppendStart(r.buf, &r.start)
}

// emit writes the frames of c's events.
func (r *request) emit(c *choice, events []text.Event) {
	if !r.req.Stream {
		return
	}
	for i := range events {
		r.writeDelta(c, &events[i])
	}
}

// writeDelta appends one Delta's frames; ev nil writes the tokens whose
// text was held back (for their logprobs).
func (r *request) writeDelta(c *choice, ev *text.Event) {
	d := &r.delta
	*d = engine.Delta{Choice: c.index, Kind: engine.DeltaText, Usage: &r.usage}
	if ev != nil {
		d.Kind, d.Text = ev.Kind, ev.Text
	}
	switch d.Kind {
	case engine.DeltaToolCallStart:
		d.ToolCallIndex, d.ToolCallID, d.ToolName = ev.ToolIndex, ev.ToolID, ev.ToolName
	case engine.DeltaToolCallArgs:
		d.ToolCallIndex = ev.ToolIndex
	default:
		d.TokenIDs = c.gen[c.pend:]
		if c.lps != nil {
			d.Logprobs = c.lps[c.pend:]
		}
		c.pend = len(c.gen)
	}
	d.First, c.first = !c.first, true
	r.buf = r.req.Formatter.AppendDelta(r.buf, d)
}

// endChoice flushes c's parser and writes its closing frame.
func (r *request) endChoice(c *choice) {
	if c.forced != nil {
		c.events = c.forced.Finish(c.events[:0])
	} else {
		c.events = c.parser.Finish(c.events[:0])
	}
	r.emit(c, c.events)
	if r.req.Stream && c.lps != nil && c.pend < len(c.gen) {
		r.writeDelta(c, nil)
	}
	if c.finish == engine.FinishStop && (c.forced != nil && len(c.forced.Calls()) > 0 || c.parser != nil && c.parser.ToolCalled()) {
		c.finish = engine.FinishToolCalls
	}
	c.done = true
	r.live--
	if r.req.Stream {
		ce := &r.end
		*ce = engine.ChoiceEnd{Choice: c.index, FinishReason: c.finish, StopString: c.stopString,
			StopTokenID: c.stopTokenID, Usage: &r.usage}
		r.buf = r.req.Formatter.AppendChoiceEnd(r.buf, ce)
	}
}

// finish builds the final Result and delivers it with the stream's last
// frames; err nil is success. Choices still running end as aborted.
func (r *request) finish(err *engine.Error) {
	if r.done {
		return
	}
	r.done = true
	now := time.Now()
	res := &engine.Result{
		Choices:      make([]engine.Choice, len(r.choices)),
		Usage:        r.usage,
		Err:          err,
		PromptTokens: r.req.PromptTokens,
		Gaps:         r.gaps,
	}
	res.SetTimes(r.arrival, r.sent, r.first, now)
	for i := range r.choices {
		c := &r.choices[i]
		if !c.done {
			c.done, c.finish = true, engine.FinishAbort
			if !r.broken {
				if c.forced != nil {
					c.forced.Finish(c.events[:0])
				} else {
					c.parser.Finish(c.events[:0])
				}
			}
		}
		ch := &res.Choices[i]
		*ch = engine.Choice{Index: i, TokenIDs: c.gen, FinishReason: c.finish, StopString: c.stopString,
			StopTokenID: c.stopTokenID, Logprobs: c.lps}
		switch {
		case r.broken:
		case c.forced != nil:
			ch.ToolCalls, ch.Text = c.forced.Calls(), c.forced.Content()
		default:
			ch.Text, ch.Reasoning = c.parser.Content(), c.parser.Reasoning()
			if calls := c.parser.ToolCalls(); len(calls) > 0 {
				ch.ToolCalls = slices.Clone(calls)
			}
		}
	}
	r.e.promptN.Add(uint64(r.usage.PromptTokens))
	r.e.genN.Add(uint64(r.usage.CompletionTokens))
	res.Panicked = r.broken
	var frames []byte
	if r.req.Stream && !r.broken {
		frames = r.endFrames(res)
	}
	if r.live > 0 || err != nil {
		// Anything still running on the worker is of no use now.
		r.abortCall()
	}
	r.deliverFinal(frames, res)
	r.buf = nil
}

// endFrames appends the frames that end the stream: the end, or the error
// event of a failure; none after the client's abort.
func (r *request) endFrames(res *engine.Result) (frames []byte) {
	defer func() {
		if p := recover(); p != nil {
			r.logPanic(p)
			res.Err, res.Panicked, frames = engine.PanicError(), true, nil
		}
	}()
	switch {
	case res.Err == nil:
		return r.req.Formatter.AppendEnd(r.buf, res)
	case res.Err.Message != abortedByClient:
		return r.req.Formatter.AppendError(r.buf, res.Err)
	}
	return nil
}

func (r *request) deliverFinal(frames []byte, res *engine.Result) {
	defer func() {
		if p := recover(); p != nil {
			r.logPanic(p)
		}
	}()
	r.sink.Deliver(frames, res)
}

// recoverPanic ends r alone when its own code (Formatter, Sink, parser)
// panicked: the call is aborted and a panicked Result delivered.
func (r *request) recoverPanic() {
	p := recover()
	if p == nil {
		return
	}
	r.logPanic(p)
	if r.done {
		return
	}
	r.broken = true
	r.buf = r.buf[:0]
	r.finish(engine.PanicError())
}

func (r *request) logPanic(p any) {
	r.e.log.Error("panic in a request's output; the request is ended, the engine goes on",
		zap.String("request_id", r.req.ID), zap.Any("panic", p), zap.Stack("stack"))
}

// logprob is token i of chunk ck as an engine.TokenLogprob, its strings
// and alternatives in c's append-only arenas (earlier entries keep
// pointing at the old arrays when one grows, and those are never written
// again).
func (c *choice) logprob(m *model, ck *Chunk, i, top int) engine.TokenLogprob {
	id := ck.TokenIDs[i]
	lp := engine.TokenLogprob{TokenID: int(id), Token: c.tokenString(m, id)}
	if i < len(ck.Logprobs) {
		lp.Logprob = ck.Logprobs[i]
	}
	if top > 0 && i < len(ck.Top) {
		at := len(c.tops)
		for j, t := range ck.Top[i] {
			if j == top {
				break
			}
			c.tops = append(c.tops, engine.TopLogprob{TokenID: int(t.TokenID), Token: c.tokenString(m, t.TokenID), Logprob: t.Logprob})
		}
		lp.Top = c.tops[at:len(c.tops):len(c.tops)]
	}
	return lp
}

// tokenString is the text of id in c's string arena.
func (c *choice) tokenString(m *model, id int32) string {
	if id < 0 || int(id) >= m.vocab {
		return ""
	}
	at := len(c.strs)
	if cap(c.strs)-at < 64 {
		c.strs = slices.Grow(c.strs[:at:at], 4096)
	}
	c.strs = m.tok.AppendPiece(c.strs, id)
	b := c.strs[at:]
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// hasReasoning reports whether a token's events hold reasoning text.
func hasReasoning(events []text.Event) bool {
	for i := range events {
		if events[i].Kind == engine.DeltaReasoning {
			return true
		}
	}
	return false
}
