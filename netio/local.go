package netio

import (
	"sync/atomic"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
)

// In-process requests (the module root's embedding API) reach no
// connection, but they share the server's admission control and drain
// with HTTP requests: a permit from the same pool, a place in the same
// FIFO queue, the same refusals (counted in the same rejection metrics),
// and a place in the in-flight count a drain waits for.

// Local is one in-process generation request's hold on admission control
// and drain, from AdmitLocal until End. Its methods are safe for concurrent
// use.
type Local struct {
	srv    *Server
	w      *waiter       // parked first (the queue); nil when admitted at once
	h      actors.Handle // the session, when started at once
	permit bool          // admitted at once holding a permit
	ended  atomic.Bool
}

// AdmitLocal admits an in-process generation request. start gets the
// request's Local (to End it). When a permit is free (or there is no cap)
// start runs now, on the caller's goroutine;
// when every permit is taken and the queue has room, the request waits
// in the same FIFO as parked HTTP requests and start runs later, on the
// goroutine that frees a permit; start must not block. Refusals come as
// an *engine.Error: KindClosed while the server drains, KindOverloaded
// when the queue is full, and start is then never called.
//
// The caller must call End exactly when the request is over (its engine
// session delivered its final Result, or Cancel reported it never
// started). Safe for concurrent use.
func (s *Server) AdmitLocal(start func(*Local) actors.Handle) (*Local, error) {
	if s.draining.Load() {
		s.rejected.draining.Inc()
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "The server is shutting down."}
	}
	l := &Local{srv: s}
	s.inflight.Add(1)
	if s.adm != nil {
		res, _ := s.adm.acquire(func() *waiter {
			l.w = &waiter{adm: s.adm, sessions: s.sessions, startLocal: func() actors.Handle { return start(l) }}
			return l.w
		})
		switch res {
		case refusedFull:
			s.rejected.overloaded.Inc()
			s.endLocal()
			return nil, &engine.Error{Kind: engine.KindOverloaded,
				Message: "The server is at its limit of concurrent requests (max_concurrent_requests) and its queue is full; retry later."}
		case queued:
			return l, nil
		}
		l.permit = true
	}
	l.h = start(l)
	return l, nil
}

// Cancel withdraws the request: a request still waiting for a permit
// leaves the queue and Cancel reports false (it never started: the caller
// ends it); a started one's session is told (Handle.ConnClosed) and Cancel
// reports true. Safe for concurrent use; idempotent.
func (l *Local) Cancel() (ran bool) {
	if l.w == nil {
		l.h.ConnClosed()
		return true
	}
	return l.w.withdraw() == started
}

// End returns the request's permit (to the oldest waiter, HTTP or
// in-process) and its place in the in-flight count. Safe for concurrent
// use; idempotent.
func (l *Local) End() {
	if l.ended.Swap(true) {
		return
	}
	owes := l.permit
	if l.w != nil {
		owes = l.w.holdsPermit()
	}
	if owes {
		l.srv.adm.release()
	}
	l.srv.endLocal()
}

// endLocal drops an in-process request from the in-flight count.
func (s *Server) endLocal() {
	if s.inflight.Add(-1) == 0 && s.draining.Load() {
		s.signalIdle()
	}
}
