package actors

import (
	"fmt"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
)

// session is the actor of one generation request.
type session struct {
	actorBase // spawn, serve, stop, panics, mailbox (base.go)

	conn Conn
	req  *Request
	d    dialect

	ereq engine.Request
	es   engine.Session
	sink sink

	// watch reads each forwarded batch of a stream, for a dialect that
	// must know where the stream stopped (streamWatcher); nil for others.
	watch streamWatcher
	// bg is a background response's state (background.go): once running,
	// the session outlives its exchange and serves its stream's
	// subscribers; nil for every other request.
	bg *background
	// bodyLen is the request body's size, kept after the body goes back
	// to its pool: a large one is prepared on the prepare pool.
	bodyLen int
	// saving: the response's save must be acknowledged by the store
	// before the response's end goes out (a shared store, where another
	// node may serve the client's next request); save holds the wait.
	save *saveWait

	// The one-byte fields sit together: a held stream keeps its session,
	// and this keeps the session and its dialect in a 1 KiB size class.
	framing   codegen.Framing
	streaming bool // the stream's head was sent
	finished  bool // the response ended (or was abandoned)
	// held: the session runs before its admission permit (held.go) and
	// starts no engine work until admitted; ready: its request is prepared
	// and waits for the permit.
	held      bool
	ready     bool
	saving    bool
	admitMsg  admitted
	expireMsg expired

	out  []byte // forwarded bytes, reused
	body []byte // non-stream body (or other scratch output)
	// bodyBuf holds body's buffer while it is lent from respBufs.
	bodyBuf *[]byte
}

// framesReady tells a session its sink holds bytes (and maybe the result).
type framesReady struct{}

// Receive implements actor.Actor (actorBase.serve).
func (ss *session) Receive(ctx actor.Context) { ss.serve(ss, ctx) }

// receive handles the session's messages but the base's (actorBase.serve).
func (ss *session) receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *framesReady:
		ss.forward(ctx)
	case *admitted:
		ss.admit(ctx)
	case *expired:
		ss.expire(ctx)
	default:
		if m, ok := ctx.Message().(*store.Reply); ok && ss.save != nil && m == &ss.save.ack.Reply {
			ss.saved(ctx)
			return
		}
		if ss.bg != nil && ss.bg.receive(ss, ctx) {
			return
		}
		// Replies addressed to the dialect (the response store's answers).
		if r, ok := ss.d.(receiver); ok && !ss.finished {
			r.receive(ss, ctx)
		}
	}
}

// clientGone runs when the client left (ConnClosed).
func (ss *session) clientGone(ctx actor.Context) {
	if ss.bg != nil && ss.bg.running {
		// A background response goes on without its client.
		ss.bg.unsubscribe(ss.conn)
		return
	}
	if w, ok := ss.d.(closeWatcher); ok {
		w.connClosed(ss)
	}
	// Disconnect means abort: free the engine slot now.
	if !ss.finished {
		if ce := ss.owner.log.Check(zap.DebugLevel, "client disconnected; aborting"); ce != nil {
			ce.Write(zap.String("request_id", ss.req.RequestID), zap.Stringer("endpoint", ss.req.Endpoint))
		}
	}
	ss.finished = true
	ss.abort()
	ss.stop(ctx) // or prepDone, if the prepare pool owns ereq
}

// begin decodes, validates, prepares and starts the request. Every check
// that can fail runs before the status line is written.
func (ss *session) begin(ctx actor.Context) {
	ss.sink.bind(&ss.actorBase, &ss.ereq)
	ss.bodyLen = len(ss.req.Body)
	ae := ss.d.decode(ss)
	// Decoded requests hold copies (codegen's decoders alias the body only
	// when asked to: bodyViewer), so the body's pooled buffer goes back
	// now rather than at the end of what may be a long stream.
	if _, views := ss.d.(bodyViewer); !views {
		ss.req.release()
	}
	if ae != nil {
		if ae != errPending {
			ss.fail(ctx, ae)
		}
		return
	}
	ss.proceed(ctx)
}

// proceed checks the model, prepares and starts a decoded request. A
// dialect whose decode returned errPending calls it once it has what it
// waited for.
func (ss *session) proceed(ctx actor.Context) {
	if !ss.owner.servesModel(ss.ereq.Model) {
		ss.fail(ctx, modelNotFound(ss.ereq.Model))
		return
	}
	if err := ss.vllmHeaders(); err != nil {
		ss.fail(ctx, ss.d.engineError(err, &ss.ereq))
		return
	}
	// A large prompt is rendered and tokenized off the mailbox workers
	// (prepare.go); the session goes on in prepared when it is done.
	if ss.bodyLen >= offPoolBody && ss.owner.prep.submit(ss) {
		return
	}
	ss.prepared(ctx, ss.owner.cfg.Engine.Prepare(&ss.ereq))
}

// vllmHeaders applies vLLM's request headers to the decoded request, as
// vLLM's front end does: X-data-parallel-rank pins the request to that
// data-parallel rank (the engine checks it; a header that names none is
// refused), X-Vllm-Priority replaces the body's priority, X-Session-ID is
// the session when the body's session_id names none.
func (ss *session) vllmHeaders() *engine.Error {
	r := ss.req
	if r.RankBad {
		return &engine.Error{Kind: engine.KindInvalid, Param: "X-data-parallel-rank",
			Message: "X-data-parallel-rank must be an integer: the data-parallel rank of the engine to run the request on"}
	}
	ext := func() *engine.VLLMExtensions {
		if ss.ereq.VLLM == nil {
			ss.ereq.VLLM = new(engine.VLLMExtensions)
		}
		return ss.ereq.VLLM
	}
	if r.RankSet {
		ext().PinRank, ext().DataParallelRank = true, r.Rank
	}
	if r.PrioritySet && (r.Priority != 0 || ss.ereq.VLLM != nil) {
		ext().Priority = r.Priority
	}
	if r.SessionID != "" && (ss.ereq.VLLM == nil || ss.ereq.VLLM.SessionID == "" || ss.ereq.VLLM.SessionFromXArgs) {
		ext().SessionID, ext().SessionFromXArgs = r.SessionID, false
	}
	return nil
}

// prepareOff implements prepJob: Engine.Prepare on a prepare worker.
func (ss *session) prepareOff() error { return ss.owner.cfg.Engine.Prepare(&ss.ereq) }

// prepared starts a request Engine.Prepare returned err for, and writes
// the status line of a stream. A held session (held.go) writes the status
// line of its stream and waits for its permit to start the engine.
func (ss *session) prepared(ctx actor.Context, err error) {
	if ss.finished { // the client left while the prepare pool had it
		ss.stop(ctx)
		return
	}
	if err != nil {
		ss.fail(ctx, ss.d.engineError(engine.AsError(err), &ss.ereq))
		return
	}
	ss.ereq.ID = ss.req.RequestID
	ss.ereq.Arrival = ss.req.Arrival
	// vLLM's per-request stream_interval raises the server's, never
	// lowers it.
	ss.ereq.StreamInterval = max(ss.ereq.StreamInterval, ss.owner.cfg.StreamInterval)
	ss.framing = ss.req.framing()
	if ss.bg != nil {
		// A background response's events are logged raw and framed per
		// subscriber (background.go).
		ss.framing = codegen.FramingRaw
	}
	if ss.ereq.Stream {
		// The stream's constant parts are the session's: the dialect
		// decides them, hands them to the engine in StreamInfo and builds
		// the Go Formatter from the same values.
		ss.ereq.StreamInfo = engine.StreamInfo{Model: ss.ereq.Model, Chunked: ss.framing == codegen.FramingChunked}
		ss.ereq.Formatter = ss.d.stream(ss)
		ss.watch, _ = ss.d.(streamWatcher)
	}
	if ss.held {
		ss.ready = true
		// A background response always runs as a stream inside; only a
		// client that asked for the stream gets its head now.
		if ss.ereq.Stream && (ss.bg == nil || ss.bg.stream) {
			ss.conn.StartStream(ss.d.streamContentType(), nil)
			ss.streaming = true
		}
		return
	}
	ss.launch(ctx)
}

// launch starts the engine for a prepared request and writes the status
// line of a stream, unless a held session wrote it already: an engine
// that refuses then ends the stream with the in-stream error.
func (ss *session) launch(ctx actor.Context) {
	es, err := ss.owner.cfg.Engine.Start(&ss.ereq, &ss.sink)
	if err != nil {
		if ss.streaming {
			ss.failStream(ctx, engine.AsError(err))
		} else {
			ss.fail(ctx, ss.d.engineError(engine.AsError(err), &ss.ereq))
		}
		return
	}
	ss.es = es
	if r, ok := ss.d.(startedDialect); ok {
		r.started(ss)
	}
	if ss.bg != nil {
		ss.bg.start(ss)
		return
	}
	if ss.ereq.Stream && !ss.streaming {
		ss.conn.StartStream(ss.d.streamContentType(), ss.workerHeader())
		ss.streaming = true
	}
}

// workerNamer is an engine Session that names the worker running it.
type workerNamer interface{ WorkerURL() string }

// workerHeader is the X-Vajra-Worker header line (Config.WorkerHeader),
// or nil. Allocates only when the header is on.
func (ss *session) workerHeader() []byte {
	if !ss.owner.cfg.WorkerHeader || ss.es == nil {
		return nil
	}
	wn, ok := ss.es.(workerNamer)
	if !ok {
		return nil
	}
	u := wn.WorkerURL()
	if u == "" || strings.ContainsAny(u, "\r\n") {
		return nil
	}
	return []byte("X-Vajra-Worker: " + u + "\r\n")
}

// bodyViewer is a dialect whose decoded request holds views of the body:
// the session keeps the body until the dialect releases it (once its
// engine has started: startedDialect) or the session ends (cleanup).
type bodyViewer interface {
	viewsBody()
}

// startedDialect is a dialect that lets go of what it no longer needs once
// the engine has started: a session may live for minutes (a held stream),
// and the decoded request is most of its memory.
type startedDialect interface {
	started(ss *session)
}

// streamWatcher is a dialect that reads every batch of a stream the
// session forwards (the Responses API's, for the sequence_number an error
// event of the session's own would take). sent must be cheap: it runs once
// per batch, in the session actor.
type streamWatcher interface {
	sent(frames []byte)
}

// streamEnder is a dialect with work of its own when a stream ends (the
// Responses store's save). streamEnded runs in the session actor with the
// final Result, before the stream's last frames go to the connection.
type streamEnder interface {
	streamEnded(ss *session, res *engine.Result)
}

// closeWatcher is a dialect with work of its own when its client leaves
// (a follower of a background response unsubscribes). connClosed runs in
// the session actor before the session aborts and stops.
type closeWatcher interface {
	connClosed(ss *session)
}

// errorEnder is a dialect with work of its own when a non-streamed
// request fails after Start (the Responses store keeps failed responses).
// errorEnded runs in the session actor with the final Result, before the
// error body goes to the connection.
type errorEnder interface {
	errorEnded(ss *session, res *engine.Result)
}

// saveFailer is a dialect that stores responses: appendSaveFailed turns a
// stream's last frames (its terminal event) into the failure of a save
// the client asked for (see saved).
type saveFailer interface {
	appendSaveFailed(frames []byte, ss *session, err error) []byte
}

// forward moves what the engine delivered to the connection, untouched.
func (ss *session) forward(ctx actor.Context) {
	if ss.bg != nil && ss.bg.running {
		ss.bg.forward(ss, ctx)
		return
	}
	var final *engine.Result
	ss.out, final = ss.sink.take(ss.out[:0])
	if ss.finished {
		return
	}
	if final == nil || !ss.streaming {
		if len(ss.out) > 0 {
			ss.send(ss.conn, ss.out)
			if ss.watch != nil {
				ss.watch.sent(ss.out)
			}
		}
		if final == nil {
			return
		}
	}
	ss.finished = true
	switch {
	case ss.streaming:
		// The engine already wrote the end (or its in-stream error) into
		// the last frames, unless code it ran for this request panicked:
		// then the stream stops after its last whole event and the
		// session ends it with the dialect's error event. What the
		// session owns at the end (the store's save) happens before they
		// leave, so that a client that saw the end finds the response
		// with its next request.
		if final.Panicked {
			if ss.watch != nil && len(ss.out) > 0 {
				ss.watch.sent(ss.out)
			}
			ss.out = ss.d.appendStreamError(ss.out, ss, final.Err)
		}
		ss.wsStreamEnding(final)
		if e, ok := ss.d.(streamEnder); ok {
			e.streamEnded(ss, final)
		}
		if ss.withhold(withheldStream, 0) {
			return
		}
		ss.conn.EndStream(ss.out)
	case final.Err != nil:
		if e, ok := ss.d.(errorEnder); ok {
			e.errorEnded(ss, final)
		}
		ae := ss.d.engineError(final.Err, &ss.ereq)
		ss.body = ss.d.appendError(ss.takeBody(), ae)
		if ss.withhold(withheldResponse, ae.Status) {
			return
		}
		ss.conn.Respond(ae.Status, contentTypeJSON, ss.workerHeader(), ss.body)
		ss.releaseBody()
	default:
		ss.body = ss.d.appendResponse(ss.takeBody(), ss, final)
		if ss.withhold(withheldResponse, 200) {
			return
		}
		ss.conn.Respond(200, contentTypeJSON, ss.workerHeader(), ss.body)
		ss.releaseBody()
	}
	ss.stop(ctx)
}

// saveWait is a session's wait for the acknowledgement of its response's
// save (saveWith): ack is the request the store answers, withheld says what
// waits for it. Only a shared store makes a session wait, so the session
// holds it by pointer, allocated by the save: a held stream (most sessions
// alive at a time) does not carry it.
type saveWait struct {
	ack            store.Request
	withheld       withheldEnd
	withheldStatus int
}

// withheldEnd is what a session keeps back until its save is acknowledged.
type withheldEnd uint8

const (
	withheldNone     withheldEnd = iota
	withheldStream               // ss.out: the stream's last frames
	withheldResponse             // ss.body: the body of a response with status withheldStatus
)

// saveWith sends rec to the store. With a shared store (Redis) the session
// then keeps its response's end (the stream's last frames, or the body,
// failed or not) back until the store acknowledges the save (saved), so
// that a client that saw the end can read or chain the response through
// any node of the fleet; the memory store needs no wait, since it serves
// every later request after this put.
func (ss *session) saveWith(rec *store.Record) {
	if ss.owner.cfg.Store.IsMemory() {
		ss.owner.store.Put(rec, nil)
		return
	}
	ss.saving = true
	ss.save = &saveWait{ack: store.Request{ReplyTo: ss.self}}
	ss.owner.store.Put(rec, &ss.save.ack)
}

// withhold keeps the response's end (what; status for a response) back
// while a save is unacknowledged; it reports whether it did.
func (ss *session) withhold(what withheldEnd, status int) bool {
	if !ss.saving {
		return false
	}
	ss.save.withheld, ss.save.withheldStatus = what, status
	return true
}

// saved runs when the store acknowledged the save, or reported that it
// failed (the store logged and counted that): the end kept back goes out
// and the session stops. A client that asked for storing is never told
// its response was stored when it was not: on a failed save a stream's
// terminal event becomes response.failed with code
// response_store_unavailable (saveFailer), and a non-streamed 200 becomes
// the 503 of that code; an error response stays as it was.
func (ss *session) saved(ctx actor.Context) {
	ss.saving = false
	if ss.stopped { // the client left meanwhile: nothing to send
		return
	}
	w := ss.save
	failed := w.ack.Reply.Err
	switch w.withheld {
	case withheldStream:
		if f, ok := ss.d.(saveFailer); ok && failed != nil {
			ss.out = f.appendSaveFailed(ss.out, ss, failed)
		}
		ss.conn.EndStream(ss.out)
	case withheldResponse:
		status := w.withheldStatus
		if failed != nil && status == 200 {
			ae := storeUnavailable(failed)
			status, ss.body = ae.Status, ss.d.appendError(ss.takeBody(), ae)
		}
		ss.conn.Respond(status, contentTypeJSON, nil, ss.body)
		ss.releaseBody()
	}
	w.withheld = withheldNone
	ss.stop(ctx)
}

// respBufs holds the buffers non-streamed bodies are rendered into: Respond
// copies the body, so the buffer goes back at once and a request's body
// costs no allocation of its own once the pool is warm.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBody bounds the buffers kept in respBufs.
const maxPooledBody = 1 << 20

// takeBody returns an empty pooled buffer for ss.body.
func (ss *session) takeBody() []byte {
	ss.bodyBuf = respBufs.Get().(*[]byte)
	return (*ss.bodyBuf)[:0]
}

// releaseBody returns ss.body's buffer to the pool once it was sent.
func (ss *session) releaseBody() {
	if ss.bodyBuf != nil && cap(ss.body) <= maxPooledBody {
		*ss.bodyBuf = ss.body[:0]
		respBufs.Put(ss.bodyBuf)
	}
	ss.bodyBuf, ss.body = nil, nil
}

// fail ends a request that failed before its status line.
func (ss *session) fail(ctx actor.Context, ae *apiError) {
	if ae.Status >= 500 {
		ss.logger().Warn("request failed", zap.Int("status", ae.Status), zap.String("type", ae.Type), zap.String("message", ae.Message))
	} else if ce := ss.owner.log.Check(zap.DebugLevel, "request refused"); ce != nil {
		ce.Write(zap.String("request_id", ss.req.RequestID), zap.Int("status", ae.Status), zap.String("type", ae.Type), zap.String("code", ae.Code))
	}
	ss.finished = true
	ss.body = ss.d.appendError(ss.takeBody(), ae)
	ss.conn.Respond(ae.Status, contentTypeJSON, nil, ss.body)
	ss.releaseBody()
	ss.stop(ctx)
}

func (ss *session) abort() {
	ss.sink.detach()
	if ss.es != nil {
		ss.es.Abort()
	}
}

// cleanup runs once when the actor stopped, also after a panic: a response
// that did not end gets the dialect's error (in-stream if the head is out,
// after the last whole event forwarded) or the connection is abandoned.
// The in-stream error is the dialect's own rendering, not the engine's
// Formatter: an engine may write its own frames, and the engine's
// goroutine may still be in the Formatter when the session fails.
func (ss *session) cleanup() {
	if !ss.finished {
		if !ss.panicked { // a panic was logged already
			ss.logger().Error("session stopped without ending its response", zap.Bool("streaming", ss.streaming))
		}
		ss.finished = true
		ss.abort()
		ae := &apiError{Status: 500, Type: "server_error", Message: "The session failed; see the server log."}
		if ss.streaming {
			ss.body = ss.d.appendStreamError(ss.body[:0], ss, &engine.Error{Kind: engine.KindInternal, Message: ae.Message})
			if len(ss.body) > 0 {
				ss.conn.EndStream(ss.body)
			} else {
				ss.conn.Abandon()
			}
		} else {
			ss.body = ss.d.appendError(ss.body[:0], ae)
			ss.conn.Respond(ae.Status, contentTypeJSON, nil, ss.body)
		}
	}
	if ss.bg != nil {
		ss.bg.cleanup(ss)
	}
	if ss.bodyBuf != nil { // a body withheld for a save the client did not wait for
		ss.releaseBody()
	}
	ss.sink.detach()
	ss.req.release()
}

const contentTypeJSON = "application/json"

// sink receives the engine's deliveries on the engine's goroutine and
// coalesces them until the actor takes them: one message per batch, however
// many steps ran before the actor got to it. Its lock is the session's own.
// It serves any session actor (the HTTP session, the Realtime session):
// bind sets whom it reports to before the engine starts.
type sink struct {
	// b is the actor told of each batch (*framesReady), which the sink
	// posts to b's own mailbox when the sessions allow it (direct: the
	// sessions' root has no sender middleware for its own notices to
	// pass), without the address lookup whose cached result costs an
	// allocation per request; b's endpoint and request id are the
	// Observer's and the logs'.
	b        *actorBase
	ereq     *engine.Request // the request whose Result it observes
	mu       sync.Mutex
	pending  []byte
	final    *engine.Result
	notified bool
	detached bool
	msg      framesReady
}

// Deliver implements engine.Sink.
func (k *sink) Deliver(frames []byte, final *engine.Result) {
	if final != nil {
		if final.Panicked {
			// The engine logged it; the session ends the stream.
			k.b.owner.panics.Add(1)
		}
		if o := k.b.owner.cfg.Observer; o != nil {
			// Once per request, also when the session already left (a
			// client disconnect counts as an abort).
			k.b.observe(o, k.ereq.Model, final)
		}
	}
	k.mu.Lock()
	if k.detached {
		k.mu.Unlock()
		return
	}
	k.pending = append(k.pending, frames...)
	if final != nil {
		k.final = final
	}
	post := !k.notified
	k.notified = true
	k.mu.Unlock()
	if post {
		if b := k.b; b.owner.direct {
			b.mb.PostUserMessage(&k.msg)
		} else {
			b.owner.root.Send(b.self, &k.msg)
		}
	}
}

// bind readies k for an engine session of ereq whose deliveries go to the
// actor of b: before Engine.Start (the engine's goroutine reads these
// fields without the lock; Start orders the writes before it). A sink
// used for one engine session after another (the Realtime session's) is
// bound again for each, once the previous one delivered its final.
func (k *sink) bind(b *actorBase, ereq *engine.Request) {
	k.b, k.ereq = b, ereq
	k.mu.Lock()
	k.detached, k.final, k.notified = false, nil, false
	k.mu.Unlock()
}

// take swaps out what was delivered: the pending bytes are appended to dst
// (the caller's spare buffer becomes the next pending buffer).
func (k *sink) take(dst []byte) ([]byte, *engine.Result) {
	k.mu.Lock()
	out := k.pending
	k.pending = dst[:0]
	final := k.final
	k.final = nil
	k.notified = false
	k.mu.Unlock()
	return out, final
}

// detach drops later deliveries (the session is going away).
func (k *sink) detach() {
	k.mu.Lock()
	k.detached = true
	k.pending = nil
	k.mu.Unlock()
}

// apiError is one error, rendered in the dialect's shape.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func modelNotFound(model string) *apiError {
	return &apiError{Status: 404, Type: "not_found_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %q does not exist.", model)}
}
