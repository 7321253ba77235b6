package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/engine"
)

// Held sessions: a request that has waited in netio's admission queue for
// longer than the stream keep-alive period gets its session before its
// permit, so that a streamed one can send its 200 and keep-alives while it
// waits, without breaking "validate before the 200": netio cannot decode a
// body, the session can. A held session decodes, validates and prepares
// its request (Engine.Prepare: the prompt's rendering, tokenization and
// context check) exactly as an admitted one does, answers a request that
// fails with its error status at once, and then waits: a stream sends its
// head first (netio's sweep then keeps it alive), a non-streamed request
// sends nothing. Only Engine.Start waits for the permit (Admit). What can
// fail after the head (the queue deadline passing, Engine.Start refusing)
// ends the stream with the dialect's in-stream error event.
//
// Held sessions cost a decode and a prepare of work that no permit bounds;
// the admission queue's own bound (--max-queued-requests) bounds them.

// HeldHandle is the handle of a session started before its admission
// permit (Sessions.StartHeld). Its methods are safe for concurrent use.
type HeldHandle interface {
	Handle
	// Admit tells the session it holds its permit: it starts its engine
	// work as soon as its request is prepared. At most once.
	Admit()
	// Expire tells the session its request waited past the queue
	// deadline and left the queue: it answers QueueTimeoutMessage as a
	// 429 (529 on Anthropic's API) with code queue_timeout, or, if its
	// stream head is out, ends the stream with that error in-stream. At
	// most once, and never after Admit.
	Expire()
}

// QueueTimeoutMessage is the message of a request refused because it
// waited in the admission queue past its deadline, whether netio answers
// it (a request with no session yet) or its held session does.
const QueueTimeoutMessage = "The request waited longer than the server's queue deadline (--max-queue-wait) for a free slot; retry after the time in Retry-After."

// QueueTimeoutCode is the error code of that refusal on the OpenAI routes.
const QueueTimeoutCode = "queue_timeout"

// admitted and expired are the messages Admit and Expire send; each
// session holds its own, so neither allocates.
type (
	admitted struct{}
	expired  struct{}
)

// StartHeld spawns the session of a request still waiting for its
// admission permit: see the top of this file. It never blocks. Safe for
// concurrent use.
func (s *Sessions) StartHeld(conn Conn, req *Request) HeldHandle {
	return s.start(conn, req, true)
}

// Admit implements HeldHandle.
func (ss *session) Admit() { ss.owner.root.Send(ss.pid, &ss.admitMsg) }

// Expire implements HeldHandle.
func (ss *session) Expire() { ss.owner.root.Send(ss.pid, &ss.expireMsg) }

// admit runs when the permit came: the engine starts now, or once the
// request is prepared.
func (ss *session) admit(ctx actor.Context) {
	ss.held = false
	if ss.ready && !ss.finished {
		ss.ready = false
		if hl, ok := ss.d.(heldLauncher); ok && hl.launchHeld(ss, ctx) {
			return
		}
		ss.launch(ctx)
	}
}

// heldLauncher is a dialect that starts its engine work itself (a batch of
// completions prompts, from decode): when a held session gets its permit,
// launchHeld starts it and reports true, or reports false to leave the
// start to the session.
type heldLauncher interface {
	launchHeld(ss *session, ctx actor.Context) bool
}

// expire ends a held request that waited past the queue deadline.
func (ss *session) expire(ctx actor.Context) {
	if ss.finished || !ss.held {
		return
	}
	e := &engine.Error{Kind: engine.KindOverloaded, Message: QueueTimeoutMessage}
	if ss.streaming {
		ss.failStream(ctx, e)
		return
	}
	ae := *ss.d.engineError(e, &ss.ereq)
	ae.Code = QueueTimeoutCode
	ss.fail(ctx, &ae)
}

// failStream ends a stream whose head is out but whose engine work never
// started (or failed to start) with the dialect's in-stream error.
func (ss *session) failStream(ctx actor.Context, e *engine.Error) {
	ss.finished = true
	ss.body = ss.d.appendStreamError(ss.takeBody(), ss, e)
	ss.conn.EndStream(ss.body)
	ss.releaseBody()
	ss.stop(ctx)
}
