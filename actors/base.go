package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// One actor base for every session kind. An HTTP request's session
// (session.go), a Realtime connection (realtime.go), a Responses API
// WebSocket connection (responses_ws.go) and an in-process request
// (inproc.go) are each one protoactor actor that embeds actorBase, and
// actorBase does what they all do, once, the way net/http's conn.serve is
// one loop for every connection and nats-server's client one type with a
// kind:
//
//   - start: the actor, its mailbox and its registry name are one
//     allocation (the kind's struct; spawner.spawnNamed), and the session
//     counts in Sessions.Active from its spawn until it stopped;
//   - serve, every kind's Receive: Started records the actor's address and
//     calls begin; the handle's ConnClosed (connClosed) calls clientGone;
//     Stopped calls cleanup and ends the count; a request prepared on the
//     prepare pool (prepDone) goes to prepared; every other message goes
//     to receive. A panic in any of them is logged once per session, with
//     its request id, endpoint and stack, counted in Sessions.Panics, and
//     handed on to the supervisor, which stops the session: cleanup then
//     ends its response or closes its connection;
//   - stop: at most once, straight to its own mailbox, and not while the
//     prepare pool holds its engine request (the stop waits for prepDone);
//   - ConnClosed: one preallocated message.
//
// A WebSocket session (wsBase, ws.go) adds the client-message inbox and
// its bounds. What stays with each kind is its protocol.

// actorBase is the part of every session actor that is the same for every
// kind. Its fields are written in the actor (self, log, the flags) or
// before the spawn (owner, id, ep), except pid, which start writes for the
// handle's methods once the spawn returned. It is part of the session a
// held stream keeps, so its one-byte fields sit together
// (TestHeldSessionSize).
type actorBase struct {
	owner *Sessions
	// pid is the actor's address for its handle (ConnClosed and the
	// kind's own notices, from other goroutines); self is the same
	// address for the actor and its sink, written at Started.
	pid  *actor.PID
	self *actor.PID
	// id is the request id every log line of the session carries (an
	// upgraded connection's for a WebSocket session).
	id  string
	log *zap.Logger // with id and ep; built on first use
	// prepErr is Engine.Prepare's error for a request the prepare pool
	// prepared (prepare.go), read when prepDone arrives.
	prepErr error

	ep        Endpoint
	stopped   bool // stop requested
	panicked  bool // the actor's code panicked (logged by recoverPanic)
	preparing bool // the prepare pool owns the engine request until prepDone
	stopLater bool // stop was asked while preparing: prepDone stops

	closeMsg connClosed // preallocated: ConnClosed sends a pointer to it
	prepMsg  prepDone   // preallocated: the prepare pool sends it

	// mb is the actor's mailbox and name the bytes of its registry id,
	// part of the actor so that neither costs an allocation of its own
	// (spawner.spawnNamed).
	mb   mailbox
	name spawnName
}

// send queues p on conn, leaving the wake of its event loop to the
// worker running the actor when it can (see DeferredSender). Actor-only.
func (b *actorBase) send(conn Conn, p []byte) {
	if w := b.mb.wakes(); w != nil {
		if d, ok := conn.(DeferredSender); ok {
			if k := d.SendDeferred(p); k != nil {
				w.add(k)
			}
			return
		}
	}
	conn.Send(p)
}

// sessionActor is what a session kind adds to actorBase. Every method runs
// in the actor, called by serve.
type sessionActor interface {
	actor.Actor
	// begin runs once, at Started, with self set.
	begin(ctx actor.Context)
	// clientGone runs for the handle's ConnClosed: the client left (an
	// in-process request's requester cancelled).
	clientGone(ctx actor.Context)
	// receive gets every message serve does not handle itself.
	receive(ctx actor.Context)
	// cleanup runs once when the actor stopped, also after a panic,
	// before the session stops counting as live.
	cleanup()
}

// preparedActor is a session kind whose engine request may be prepared on
// the prepare pool (prepare.go): prepared runs in the actor when it was,
// with Prepare's error, unless the session was stopped meanwhile.
type preparedActor interface {
	prepared(ctx actor.Context, err error)
}

// base implements prepJob for every kind.
func (b *actorBase) base() *actorBase { return b }

// connClosed tells a session its client is gone.
type connClosed struct{}

// start spawns a, whose actorBase is b, as a session of endpoint ep with
// request id id, and counts it live. Safe for concurrent use.
func (b *actorBase) start(s *Sessions, a sessionActor, ep Endpoint, id string) *actor.PID {
	b.owner, b.ep, b.id = s, ep, id
	s.active.Add(1)
	b.pid = s.spawner.spawnNamed(a, &b.mb, &b.name)
	return b.pid
}

// ConnClosed implements Handle: it posts the session's preallocated
// notice. Safe for concurrent use; idempotent (the session acts once).
func (b *actorBase) ConnClosed() { b.owner.root.Send(b.pid, &b.closeMsg) }

// serve is the Receive of every session kind a (whose base is b). The
// deferred recoverPanic is open-coded: it costs nothing unless a panic
// happens.
func (b *actorBase) serve(a sessionActor, ctx actor.Context) {
	defer b.recoverPanic()
	switch ctx.Message().(type) {
	case *actor.Started:
		b.self = ctx.Self()
		a.begin(ctx)
	case *connClosed:
		a.clientGone(ctx)
	case *prepDone:
		b.preparing = false
		if b.stopLater {
			b.stop(ctx)
			return
		}
		a.(preparedActor).prepared(ctx, b.prepErr)
	case *actor.Stopped:
		a.cleanup()
		b.owner.sessionEnded()
	default:
		a.receive(ctx)
	}
}

// recoverPanic logs a panic of the session's own code once, with its
// request id and the stack, counts it, and panics again: the mailbox hands
// it to the session's supervisor, which stops the session, and the kind's
// cleanup ends its response (or closes its connection).
func (b *actorBase) recoverPanic() {
	if r := recover(); r != nil {
		if !b.panicked {
			b.panicked = true
			b.owner.panics.Add(1)
			b.logger().Error("session panicked; it is ended", zap.Any("panic", r), zap.Stack("stack"))
		}
		panic(r)
	}
}

// observe tells the Observer about the session's final Result, on the
// engine's goroutine (a sink's Deliver). A panic in it is the session's
// (logged with the request id and stack, and counted): it must neither
// reach the engine's goroutine nor keep the final from the session. It
// reads only what was written before the spawn.
func (b *actorBase) observe(o Observer, model string, final *engine.Result) {
	defer func() {
		if r := recover(); r != nil {
			b.owner.panics.Add(1)
			b.owner.log.Error("panic in the request observer", zap.String("request_id", b.id),
				zap.Stringer("endpoint", b.ep), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	o.RequestDone(b.ep, model, final)
}

// logger returns the session's logger: every line carries the request id
// and the endpoint. Built on first use, so a session that logs nothing
// pays nothing.
func (b *actorBase) logger() *zap.Logger {
	if b.log == nil {
		b.log = b.owner.log.With(zap.String("request_id", b.id), zap.Stringer("endpoint", b.ep))
	}
	return b.log
}

// stop stops the actor, once. While the prepare pool owns the session's
// engine request, prepDone stops it instead.
func (b *actorBase) stop(ctx actor.Context) {
	if b.preparing {
		b.stopLater = true
		return
	}
	if !b.stopped {
		b.stopped = true
		if b.owner.direct {
			b.mb.PostSystemMessage(stopMsg)
		} else {
			ctx.Stop(ctx.Self())
		}
	}
}

// stopMsg is the system message that stops a session posted straight to
// its mailbox. ctx.Stop(ctx.Self()) would do the same through the
// session's address, whose first lookup caches the process in the PID (an
// allocation per request); the session's mailbox is its own field, so the
// notice needs no lookup. protoactor's registry marks the process dead when
// the stopped actor leaves it, as after ctx.Stop.
var stopMsg = &actor.Stop{}
