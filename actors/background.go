package actors

import (
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
)

// Background responses (POST /v1/responses with background: true) run in
// their session after the HTTP exchange that created them ended: a client
// that leaves does not abort them.
//
//	POST ──▶ session: decode, Prepare, Start (always a stream, FramingRaw)
//	           │ store.Live{queued record, self} ──▶ store: id → live entry
//	           │ 200 {status: queued} (or the stream, as a subscriber)
//	engine ──▶ sink ──▶ session: each batch appended to the event log and
//	           sent to the subscribers (the POST's stream, GET ?stream=true)
//	GET / cancel / GET ?stream=true ──▶ store ──(live)──▶ session answers
//	final ──▶ session: final record (status, body, input, history, log)
//	           │ store.Finish ──▶ store: record in place of the live entry
//	           ◀── store.Finish back: no request reaches the session now; stop
//
// Per batch the session appends the engine's bytes to the log and to each
// subscriber's connection (wrapped in one HTTP chunk for a chunked one):
// no parsing, no store message, no allocation once the buffers grew. GET
// folds the events logged since the last GET into the output so far
// (openai.ResponseAccumulator); the log drops its oldest half when it
// would pass store.Config.MaxEventLogBytes, after folding it.

// maxBackgroundStreams bounds the clients streaming one background
// response at once (the POST's own stream and GET ...?stream=true).
const maxBackgroundStreams = 16

// minEventLog is the first size of an event log: a few hundred events.
const minEventLog = 64 << 10

// background is the state of a background response's session, beside its
// responsesDialect. Actor-only.
type background struct {
	d *responsesDialect
	// stream: the POST asked for the stream; its connection is the first
	// subscriber.
	stream bool
	// running: the engine started and the store knows the session; the
	// session no longer ends with its exchange.
	running bool
	// log holds the stream's events from sequence_number firstSeq on;
	// acc has folded log[:folded] (and everything dropped before it).
	log      []byte
	firstSeq int
	folded   int
	acc      openai.ResponseAccumulator
	maxLog   int
	subs     []bgSubscriber
	// cancels are the cancel requests to answer once the engine ended.
	cancels   []*store.Request
	cancelled bool
	// ended: end ran (or is running); cleanup must not run it again.
	ended bool
	// final is the final record, once put; the session stops when the
	// store sends finish back.
	final   *store.Record
	live    store.Live
	finish  store.Finish
	stopMsg bgStop
	scratch []byte
	// last are the stream's last events, sent to the subscribers (and the
	// cancels answered) once the store holds the final record: with Redis
	// that is when Redis has it, so no node of the fleet can miss it.
	last []byte
	// shared: the records live in Redis; progressAt is when this
	// response's record so far was last written there (about once a
	// second, for the other nodes' GETs).
	shared     bool
	progressAt time.Time
	// liveAck is Redis's acknowledgement of the queued record, which the
	// POST's answer waits for (announce).
	liveAck store.Request
}

// progressEvery is how often a running background response's record is
// written to a shared store, for GETs on other nodes.
const progressEvery = time.Second

// bgSubscriber is one client streaming the response: the POST's own
// connection (follower nil) or a GET ...?stream=true session's.
type bgSubscriber struct {
	conn     Conn
	chunked  bool
	follower *actor.PID
}

// bgUnsubscribe tells the background session a follower's client left:
// sent to it directly once the follower knows it, or to the store (with
// id), which forwards it to a live response's session after the
// follower's own request, so that a client gone before the session took
// its stream over does not keep a subscriber's place.
type bgUnsubscribe struct {
	id   string
	conn Conn
}

// bgDone tells a follower the stream it followed ended (its exchange too).
type bgDone struct{}

// bgStop asks a background session to abort its engine session: the
// server is stopping (Sessions.StopBackground).
type bgStop struct{}

// bgDoneMsg is the one bgDone every follower gets.
var bgDoneMsg = &bgDone{}

func newBackground(d *responsesDialect, maxLog int) *background {
	return &background{d: d, stream: d.req.Stream, maxLog: maxLog}
}

// start runs once the engine session started: the store learns the live
// entry before the client learns the id (the POST's answer, see announce),
// so that the client's next request finds it; with a shared store that is
// once Redis acknowledged the queued record, so any node finds it.
func (b *background) start(ss *session) {
	b.running = true
	ss.finished = true // the exchange is the subscribers' now, not the session's end
	if b.cancelled {
		ss.es.Abort() // the server stopped while it prepared
	}
	d := b.d
	rec := &store.Record{ID: d.id, Status: openai.ResponseQueued, Background: true, Input: d.req.InputItems(d.id)}
	rec.Body = openai.AppendResponse(nil, openai.BuildPartialResponse(&d.meta, openai.ResponseQueued, nil))
	b.live = store.Live{Rec: rec, Owner: ss.self}
	b.shared = !ss.owner.cfg.Store.IsMemory()
	b.progressAt = time.Now()
	if b.shared {
		b.liveAck = store.Request{ReplyTo: ss.self}
		b.live.Ack = &b.liveAck
	}
	ss.owner.store.Live(&b.live)
	if !b.shared {
		b.announce(ss)
	}
}

// announce answers the POST: the queued object, or the stream from its
// start, the events logged meanwhile first. Runs once the store holds the
// live entry's record (at once for the memory store).
func (b *background) announce(ss *session) {
	if !b.stream {
		ss.conn.Respond(200, contentTypeJSON, nil, b.live.Rec.Body)
		return
	}
	if !ss.streaming { // a held session (held.go) may have sent the head already
		ss.conn.StartStream(ss.d.streamContentType(), nil)
	}
	sub := bgSubscriber{conn: ss.conn, chunked: ss.req.Chunked}
	logged := b.log
	if b.final != nil { // it ended meanwhile: its last events go with the end (delivered)
		logged = b.final.Events[:len(b.final.Events)-len(b.last)]
	}
	b.send(ss, &sub, logged, false)
	b.subs = append(b.subs, sub)
}

// forward takes what the engine delivered: the events go to the log and
// the subscribers; the final ends the response.
func (b *background) forward(ss *session, ctx actor.Context) {
	var final *engine.Result
	ss.out, final = ss.sink.take(ss.out[:0])
	if b.final != nil {
		return
	}
	if final == nil {
		if len(ss.out) > 0 {
			ss.watch.sent(ss.out)
			b.appendLog(ss.out)
			for i := range b.subs {
				b.send(ss, &b.subs[i], ss.out, false)
			}
			if b.shared {
				b.shareProgress(ss)
			}
		}
		return
	}
	b.end(ss, final, false)
}

// shareProgress writes the record so far to the shared store, at most once
// per progressEvery (one clock read per batch; only background responses
// with a shared store come here).
func (b *background) shareProgress(ss *session) {
	now := time.Now()
	if now.Sub(b.progressAt) < progressEvery {
		return
	}
	b.progressAt = now
	// A record of its own each time (once a second): the store reads it
	// on its own goroutine while the next snapshot is made.
	ss.owner.store.Progress(b.snapshot())
}

// snapshot is the record of the response so far: queued, or in progress
// with the output generated up to now.
func (b *background) snapshot() *store.Record {
	b.acc.Fold(b.log[b.folded:])
	b.folded = len(b.log)
	status := openai.ResponseQueued
	if b.acc.Started {
		status = openai.ResponseInProgress
	}
	rec := &store.Record{ID: b.d.id, Status: status, Background: true, Input: b.live.Rec.Input}
	rec.Body = openai.AppendResponse(nil, openai.BuildPartialResponse(&b.d.meta, status, b.acc.Output()))
	return rec
}

// end finishes the response: the stream's last events (the engine's, or
// the terminal event the session writes when the engine wrote none: after
// a cancel or a panic), the final record to the store, then, once the
// store holds it (store.Finish comes back, see delivered) or at once when
// now (the session has stopped), the last frames and the end to every
// subscriber, and the answer to each cancel.
func (b *background) end(ss *session, final *engine.Result, now bool) {
	b.ended = true
	d := b.d
	out := ss.out
	if len(out) > 0 {
		ss.watch.sent(out)
	}
	obj := openai.BuildResponse(&d.meta, final)
	if !openai.EndsStream(out) {
		out = openai.AppendTerminalEvent(out, codegen.FramingRaw, d.nextSeq, obj)
		d.nextSeq++
	}
	b.appendLog(out)
	rec := d.record(ss, final, openai.AppendResponse(nil, obj))
	rec.Status, rec.Background = obj.Status, true
	rec.Events, rec.FirstSeq = b.log, b.firstSeq
	rec.Size = store.RecordSize(rec)
	b.log = nil // the record's now
	b.final = rec
	b.finish = store.Finish{Rec: rec, Owner: ss.self}
	ss.owner.store.Finish(&b.finish)
	b.last = out
	ss.out = out
	if now {
		b.delivered(ss)
	}
}

// delivered ends every subscriber's stream with the last events and
// answers the cancels, with the final record.
func (b *background) delivered(ss *session) {
	for i := range b.subs {
		b.send(ss, &b.subs[i], b.last, true)
	}
	b.subs = nil
	for _, m := range b.cancels {
		m.Answer(ss.owner.root, store.Reply{Rec: b.final})
	}
	b.cancels = nil
	b.last = nil
}

// appendLog appends whole events to the log, first dropping its older half
// (folded into acc before) when it would pass its bound.
func (b *background) appendLog(events []byte) {
	if len(b.log) > 0 && len(b.log)+len(events) > b.maxLog {
		b.dropOldest()
	}
	empty := len(b.log) == 0
	if need := len(b.log) + len(events); need > cap(b.log) {
		// Double (append grows large slices by a quarter: a dozen copies
		// on the way to a megabyte), never past the bound.
		grown := make([]byte, len(b.log), min(max(need, 2*cap(b.log), minEventLog), max(need, b.maxLog)))
		copy(grown, b.log)
		b.log = grown
	}
	b.log = append(b.log, events...)
	if empty {
		b.firstSeq, _ = openai.FirstSequenceNumber(b.log)
	}
}

// dropOldest drops the log's older half, cut after a whole event, once its
// output is folded into acc (GET shows it still).
func (b *background) dropOldest() {
	cut := len(b.log)
	if _, rest, ok := openai.NextEvent(b.log[len(b.log)/2:]); ok {
		cut -= len(rest)
	}
	if b.folded < cut {
		b.acc.Fold(b.log[b.folded:cut])
		b.folded = cut
	}
	n := copy(b.log, b.log[cut:])
	b.log = b.log[:n]
	b.folded -= cut
	b.firstSeq, _ = openai.FirstSequenceNumber(b.log)
}

// send writes events to one subscriber, in one HTTP chunk for a chunked
// connection; last ends its stream too, and tells its follower.
func (b *background) send(ss *session, sub *bgSubscriber, events []byte, last bool) {
	p := events
	if sub.chunked {
		b.scratch = appendChunk(b.scratch[:0], events, last)
		p = b.scratch
	}
	if !last {
		if len(p) > 0 {
			sub.conn.Send(p)
		}
		return
	}
	sub.conn.EndStream(p)
	if sub.follower != nil {
		ss.owner.root.Send(sub.follower, bgDoneMsg)
	}
}

// appendChunk appends events as one HTTP/1.1 chunk (none when empty) and,
// when last, the last chunk that ends the body.
func appendChunk(dst, events []byte, last bool) []byte {
	if len(events) > 0 {
		var mark int
		dst, mark = codegen.BeginFrame(dst, codegen.FramingChunked)
		dst = append(dst, events...)
		dst = codegen.EndFrame(dst, codegen.FramingChunked, mark)
	}
	if last {
		dst = codegen.AppendLastChunk(dst, codegen.FramingChunked)
	}
	return dst
}

// receive handles the background session's own messages; false for
// others. Runs in the session actor.
func (b *background) receive(ss *session, ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *store.Reply:
		if m != &b.liveAck.Reply {
			return false
		}
		b.announce(ss)
	case *store.Request:
		b.serve(ss, m)
	case *bgUnsubscribe:
		b.unsubscribe(m.conn)
	case *store.Finish:
		// The store holds the final record: the subscribers may see the
		// end, and nothing reaches us any more.
		b.delivered(ss)
		ss.stop(ctx)
	case *bgStop:
		// Before start, start aborts (running is false: see session.Receive).
		b.cancelled = true
		if b.running && !b.ended {
			ss.es.Abort()
		}
	default:
		return false
	}
	return true
}

// serve answers a request the store forwarded for this live response: GET
// (the partial object, or, with stream, the events after starting_after
// and then the live ones) and cancel (abort; answered at the end). Once
// the final record exists, every request gets it, as from the store.
func (b *background) serve(ss *session, m *store.Request) {
	reply := func(r store.Reply) { m.Answer(ss.owner.root, r) }
	if b.final != nil {
		reply(store.Reply{Rec: b.final})
		return
	}
	ask, _ := m.Stream.(*streamAsk)
	switch {
	case m.Op == store.Cancel:
		b.cancels = append(b.cancels, m)
		if !b.cancelled {
			b.cancelled = true
			ss.es.Abort() // the final (cancelled) comes to forward
		}
	case ask != nil:
		events, ok := openai.EventsAfter(b.log, ask.after)
		if !ok {
			reply(store.Reply{Refusal: eventsGone(ask.after, b.firstSeq)})
			return
		}
		if len(b.subs) >= maxBackgroundStreams {
			reply(store.Reply{Refusal: &apiError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded",
				Message: "Too many streams of this response are open; close one and retry."}})
			return
		}
		sub := bgSubscriber{conn: ask.conn, chunked: ask.chunked, follower: m.ReplyTo}
		sub.conn.StartStream(ss.d.streamContentType(), nil)
		b.send(ss, &sub, events, false)
		b.subs = append(b.subs, sub)
		reply(store.Reply{From: ss.self})
	default:
		reply(store.Reply{Rec: b.snapshot()})
	}
}

// eventsGone is the refusal of a resume from before the log's first kept
// event.
func eventsGone(after, first int) *apiError {
	return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "starting_after",
		Message: "The events after sequence_number " + strconv.Itoa(after) + " are no longer kept; the first kept is " + strconv.Itoa(first) + "."}
}

// unsubscribe drops the subscriber on conn (its client left).
func (b *background) unsubscribe(conn Conn) {
	for i := range b.subs {
		if b.subs[i].conn == conn {
			b.subs = append(b.subs[:i], b.subs[i+1:]...)
			return
		}
	}
}

// cleanup runs when the session stopped (Stopped). A response that never
// got its final (the session panicked, or was stopped) is ended as failed,
// stored so and taken off the store's live entries; the slot in Sessions'
// count is returned.
func (b *background) cleanup(ss *session) {
	if b.running && !b.ended {
		ss.sink.detach()
		if ss.es != nil {
			ss.es.Abort()
		}
		ss.out = ss.out[:0]
		b.end(ss, &engine.Result{Err: &engine.Error{Kind: engine.KindInternal, Message: "The session failed; see the server log."}}, true)
	}
	ss.owner.releaseBackground(ss)
}
