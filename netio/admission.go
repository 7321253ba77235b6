package netio

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
)

// Admission control: a permit is taken before a generation request's
// session starts and held until its exchange ends (response written, or
// the connection closed). With every permit taken, up to maxQueued
// requests wait in FIFO order, parked on their connections (a parked
// connection reads nothing more, like a busy one); beyond that a request
// is refused at once with 429 (529 on Anthropic routes) and Retry-After,
// before any stream starts. A released permit goes straight to the oldest
// waiter, whose session is started by whoever released it.
//
// A waiter has a deadline, MaxQueueWait after it arrived: the loop's
// once-a-second sweep (timeouts.go) refuses a waiter past it with the same
// 429/529 and Retry-After as a full queue, and takes it out of the queue.
// A waiter whose client disconnects leaves the queue at once (ConnClosed,
// from OnClose), whether or not it is past its deadline.
//
// With stream keep-alives on, a waiter that has waited StreamKeepalive
// gets its session before its permit (hold: actors.Sessions.StartHeld).
// The session decodes, validates and prepares the request, answers one
// that fails at once, and sends a stream's 200 head, which the sweep then
// keeps alive; it starts the engine when the permit comes (Admit), and a
// deadline that passes first is its to answer (Expire): netio cannot
// decode a body, so only the session can tell a stream from a plain
// request, and only after validation may a 200 go out.
//
// The lock is taken once per request to acquire and once to release, never
// per token.
type admission struct {
	maxRunning int
	maxQueued  int

	mu      sync.Mutex
	running int
	queue   []*waiter // FIFO; len <= maxQueued
}

type admitResult uint8

const (
	admitted admitResult = iota
	queued
	refusedFull
)

// acquire takes a permit, or parks w, or refuses. Safe for concurrent use.
func (a *admission) acquire(w func() *waiter) (admitResult, *waiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running < a.maxRunning {
		a.running++
		return admitted, nil
	}
	if len(a.queue) < a.maxQueued {
		pw := w()
		a.queue = append(a.queue, pw)
		return queued, pw
	}
	return refusedFull, nil
}

// release returns a permit: it goes to the oldest waiter still waiting,
// whose session starts now; otherwise the count drops. Safe for concurrent
// use.
func (a *admission) release() {
	for {
		a.mu.Lock()
		if len(a.queue) == 0 {
			a.running--
			a.mu.Unlock()
			return
		}
		w := a.queue[0]
		copy(a.queue, a.queue[1:])
		a.queue[len(a.queue)-1] = nil
		a.queue = a.queue[:len(a.queue)-1]
		a.mu.Unlock()
		if w.start() {
			return // the permit is the waiter's now
		}
	}
}

// remove takes a waiter whose client left out of the queue.
func (a *admission) remove(w *waiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, q := range a.queue {
		if q == w {
			copy(a.queue[i:], a.queue[i+1:])
			a.queue[len(a.queue)-1] = nil
			a.queue = a.queue[:len(a.queue)-1]
			return
		}
	}
}

// Queued is the number of requests waiting for a permit.
func (a *admission) queuedLen() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queue)
}

type waiterState uint8

const (
	waiting waiterState = iota
	started
	gone
)

// waiter is a parked generation request. It stands in as the connection's
// actors.Handle until its session starts, then forwards to the session's.
type waiter struct {
	adm      *admission
	sessions *actors.Sessions
	conn     *tracked
	req      *actors.Request
	queuedAt time.Time // when the request arrived (its deadline runs from here)

	mu    sync.Mutex
	state waiterState
	h     actors.Handle
	// held is the session started before the permit (hold), also in h.
	held actors.HeldHandle

	// startLocal, when set, starts an in-process request (AdmitLocal)
	// instead of Sessions.Start.
	startLocal func() actors.Handle
}

// start starts the waiter's session unless its client left. It reports
// whether the waiter took the permit. Safe for concurrent use.
func (w *waiter) start() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != waiting {
		return false
	}
	w.state = started
	if w.held != nil {
		w.held.Admit()
		return true
	}
	if w.startLocal != nil {
		w.h = w.startLocal()
		return true
	}
	w.h = w.sessions.Start(w.conn, w.req)
	return true
}

// ConnClosed implements actors.Handle: a waiting request leaves the queue;
// a started one's session is told. Safe for concurrent use.
func (w *waiter) ConnClosed() { w.withdraw() }

// withdraw does ConnClosed's work and returns the state the waiter was in.
// Safe for concurrent use.
func (w *waiter) withdraw() waiterState {
	st := w.withdrawQuiet()
	w.mu.Lock()
	h := w.h
	w.mu.Unlock()
	if h != nil {
		h.ConnClosed()
	}
	return st
}

// withdrawQuiet takes a waiting waiter out of the queue, telling nobody,
// and returns the state it was in. Safe for concurrent use.
func (w *waiter) withdrawQuiet() waiterState {
	w.mu.Lock()
	st := w.state
	if st == waiting {
		w.state = gone
	}
	w.mu.Unlock()
	if st == waiting {
		w.adm.remove(w)
	}
	return st
}

// hold starts the session of a waiter still waiting, before its permit
// (actors.Sessions.StartHeld), unless it has one. Loop-only (the sweep);
// HTTP waiters only.
func (w *waiter) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != waiting || w.h != nil || w.startLocal != nil {
		return
	}
	w.held = w.sessions.StartHeld(w.conn, w.req)
	w.h = w.held
}

// settle runs when the waiter's exchange ended: a held session may answer
// its request (a validation error) while it is still in the queue, which
// it then leaves. It reports whether the waiter holds a permit to
// release. Safe for concurrent use.
func (w *waiter) settle() (owes bool) { return w.withdrawQuiet() == started }

// holdsPermit reports whether the waiter's session started (and so holds
// a permit to release when its exchange ends). Safe for concurrent use.
func (w *waiter) holdsPermit() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == started
}

// expire takes a waiter still waiting past its deadline out of the queue
// and reports whether it did. A held session is told to answer (Expire);
// otherwise the caller answers the request (answer is true). A waiter that
// started or whose client left is left alone. Safe for concurrent use.
func (w *waiter) expire() (expired, answer bool) {
	w.mu.Lock()
	if w.state != waiting {
		w.mu.Unlock()
		return false, false
	}
	w.state = gone
	held := w.held
	w.mu.Unlock()
	w.adm.remove(w)
	if held != nil {
		held.Expire()
		return true, false
	}
	return true, true
}

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

// Admit implements actors.Admitter for the generation requests no HTTP
// exchange carries (the creates of a Responses API WebSocket): the
// in-process admission of AdmitLocal, whose Local is the
// actors.Admission. The module root hands the Server to
// actors.Sessions.SetAdmitter. Safe for concurrent use.
func (s *Server) Admit(start func() actors.Handle) (actors.Admission, error) {
	l, err := s.AdmitLocal(func(*Local) actors.Handle { return start() })
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ actors.Admitter = (*Server)(nil)
