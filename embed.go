package vajra

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/netio"
)

// The in-process protocol. Its types are defined in package actors, whose
// session actors speak it, and named here so that an embedding program
// needs only this package.

// Generate asks for one generation. Send it to Server.PID with Request
// (actor.Context.Request, so that the replies go to the sender) or set its
// ReplyTo; Server.Generate does the same. The replies are *Output messages,
// the last of which has Final set. Fields: see actors.Generate.
type Generate = actors.Generate

// Output is the reply to a Generate: a notice, the same pointer for one
// request, on which the requester calls Take and then reads Frames (a
// dialect's server-sent events) or Deltas (typed output) and, at the end,
// Final (the engine's Result with usage, or the error that ended the
// request). Fields and contract: see actors.Output.
type Output = actors.Output

// Delta is one piece of typed output: a choice's text, reasoning or tool
// call, in Output.Deltas when the Generate asked for no dialect.
type Delta = actors.Delta

// CancelGeneration asks the server, at Server.PID, to abort the generation
// of its Request (the pointer that was sent). The requester still gets the
// final Output, with an error of kind engine.KindAborted unless the engine
// finished first.
type CancelGeneration = actors.CancelGeneration

// MaxChoices is the most choices (Sampling.N) a Generate may ask for.
const MaxChoices = actors.MaxLocalChoices

// PID is the server's address in its actor system for the in-process
// protocol: it takes *Generate and *CancelGeneration. Valid from New until
// Stop; after Stop messages to it go to protoactor's dead letters.
func (s *Server) PID() *actor.PID { return s.gateway }

// ActorSystem is the actor system the server's actors live in:
// Config.ActorSystem, or the one New created. Requesters must live in it.
func (s *Server) ActorSystem() *actor.ActorSystem { return s.sessions.System() }

// Generate sends g to the server on behalf of ctx's actor: the Outputs go
// to ctx.Self(), or to g.ReplyTo when set (which a context without a self,
// such as the root context, needs). It never blocks. Safe for concurrent
// use, like any actor.SenderContext method.
func (s *Server) Generate(ctx actor.SenderContext, g *Generate) {
	if g.ReplyTo != nil {
		ctx.Send(s.gateway, g)
		return
	}
	ctx.Request(s.gateway, g)
}

// Cancel aborts the generation of g (see CancelGeneration). Safe for
// concurrent use; a cancel after the request ended does nothing.
func (s *Server) Cancel(ctx actor.SenderContext, g *Generate) {
	ctx.Send(s.gateway, &CancelGeneration{Request: g})
}

// Mailbox returns a producer of Vajra's own mailbox, for requester actors
// (actor.WithMailbox): their messages run on the server's worker pool and
// a message to an idle actor allocates nothing, so a requester receives
// its tokens without allocating (protoactor's default mailbox allocates
// once per wake). Actors with it may outlive the server: once the pool has
// stopped they run on the goroutine that sends to them.
func (s *Server) Mailbox() actor.MailboxProducer { return s.sessions.Mailbox() }

// gateway is the actor at Server.PID. It admits each Generate through the
// server's admission control (the same permits and queue as HTTP requests)
// and starts its session actor, which then talks to the requester
// directly; it handles cancels, and at Stop cancels every request still
// live. The work per message is a few map and admission operations: the
// session does the rest.
type gateway struct {
	srv *Server
}

// localReq is one live in-process request, from its Generate until its
// session ends it.
type localReq struct {
	replyTo *actor.PID
	l       *netio.Local // nil until admitted
}

// localTable maps live requests to their admission state, for cancels.
// The lock is taken a few times per request, never per token.
type localTable struct {
	mu sync.Mutex
	m  map[*Generate]*localReq
}

func (gw *gateway) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Generate:
		gw.generate(ctx, m)
	case *CancelGeneration:
		gw.cancel(m.Request)
	case *actor.Stopping:
		gw.cancelAll()
	}
}

func (gw *gateway) generate(ctx actor.Context, g *Generate) {
	s := gw.srv
	replyTo := g.ReplyTo
	if replyTo == nil {
		replyTo = ctx.Sender()
	}
	if replyTo == nil {
		s.log.Warn("in-process request dropped: no ReplyTo and no sender to reply to (send it with Request or Server.Generate)", zap.String("request_id", g.ID))
		return
	}
	arrival := time.Now()
	e := &localReq{replyTo: replyTo}
	t := &s.local
	t.mu.Lock()
	t.m[g] = e
	t.mu.Unlock()
	l, err := s.net.AdmitLocal(func(l *netio.Local) actors.Handle {
		t.set(g, e, l)
		return s.sessions.StartLocal(g, replyTo, arrival, func() {
			t.remove(g, e)
			l.End()
		})
	})
	if err != nil {
		t.remove(g, e)
		s.sessions.ReplyLocal(g, replyTo, engine.AsError(err))
		return
	}
	t.set(g, e, l)
}

// cancel withdraws g: a started request's session aborts its engine
// session (the final Output follows from there); a request still waiting
// for a permit leaves the queue and is answered here.
func (gw *gateway) cancel(g *Generate) {
	s := gw.srv
	t := &s.local
	t.mu.Lock()
	e := t.m[g]
	var l *netio.Local
	if e != nil {
		l = e.l
	}
	t.mu.Unlock()
	if l == nil {
		return
	}
	if !l.Cancel() {
		t.remove(g, e)
		l.End()
		s.sessions.ReplyLocal(g, e.replyTo, &engine.Error{Kind: engine.KindAborted, Message: "The request was cancelled."})
	}
}

// cancelAll cancels every live request (Stop).
func (gw *gateway) cancelAll() {
	t := &gw.srv.local
	t.mu.Lock()
	gs := make([]*Generate, 0, len(t.m))
	for g := range t.m {
		gs = append(gs, g)
	}
	t.mu.Unlock()
	for _, g := range gs {
		gw.cancel(g)
	}
}

// set records e's admission state, unless its request already ended.
func (t *localTable) set(g *Generate, e *localReq, l *netio.Local) {
	t.mu.Lock()
	if t.m[g] == e {
		e.l = l
	}
	t.mu.Unlock()
}

// remove forgets g's request e (and not a later request with the same g).
func (t *localTable) remove(g *Generate, e *localReq) {
	t.mu.Lock()
	if t.m[g] == e {
		delete(t.m, g)
	}
	t.mu.Unlock()
}

// startGateway spawns the actor at Server.PID, restarted on failure (it
// keeps no state of its own but the table, which survives a restart).
func (s *Server) startGateway() {
	s.local.m = map[*Generate]*localReq{}
	sys := s.sessions.System()
	props := actor.PropsFromProducer(func() actor.Actor { return &gateway{srv: s} }, actor.WithMailbox(s.sessions.Mailbox()))
	s.gateway = sys.Root.Spawn(props)
}

// stopGateway stops the gateway, which cancels every live in-process
// request, and waits for it to be gone.
func (s *Server) stopGateway() {
	_ = s.sessions.System().Root.StopFuture(s.gateway).Wait()
}
