package netio

import (
	"sync"
	"time"

	"github.com/vajra-go/vajra/actors"
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

	// startLocal, when set, starts an in-process request (local.go)
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
