package remote

import (
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// A worker's step gate gathers the deliveries of one engine step.
//
// The worker runs a step for all its requests at once, but their chunks
// reach the engine one by one, each on the goroutine that received it (one
// per llama-server connection, one per gRPC stream), spread over the time
// the worker takes to write them. Delivered as they come, every chunk
// would wake its session and its event loop on its own: 64 streams, 64
// wakes per step. So a streamed request whose sink can stage frames
// (engine.StagedSink) stages each chunk's frames in its sink and reports
// to its worker's gate; once every such request of the worker has reported
// for the step (or a new step began: one reported again), the goroutine
// that completes the step notifies every sink of it in one go, and the
// event loops wake about once per step, as behind an in-process engine.
// A step whose chunks do not all come in time (a request the worker did
// not step, a chunk the worker held back, a worker that writes a step's
// chunks over more than the window) is notified a window after its first
// chunk.
//
// The gate takes no lock: a request joins the step's list with a CAS (the
// list is intrusive: request.gateNext; each node knows the list's length
// up to it, request.gateLen), and whoever completes the step takes the
// whole list with one.
type gate struct {
	// expect counts the requests that report each step: streamed, past
	// their first token, not yet finished.
	expect atomic.Int32
	// head is the step's list, nil when empty.
	head atomic.Pointer[request]
	// timer notifies a step window after its first report.
	timer  *time.Timer
	window time.Duration
}

// DefaultStepWindow bounds how long a step's first chunk waits for the
// rest of the step (Config.StepWindow): what a token may lose in latency,
// against an inter-token gap of tens of milliseconds under load.
const DefaultStepWindow = time.Millisecond

func (g *gate) init(window time.Duration) {
	if window == 0 {
		window = DefaultStepWindow
	}
	g.window = window
	g.timer = time.AfterFunc(time.Hour, g.notifyAll)
	g.timer.Stop()
}

// join counts r among the requests that report each step (at its first
// streamed chunk, on its receive goroutine). It reports whether r uses the
// gate: its sink stages frames, and the gate is on (a window of at least
// 0).
func (g *gate) join(r *request) bool {
	s, ok := r.sink.(engine.StagedSink)
	if !ok || !r.req.Stream || g.window < 0 {
		return false
	}
	r.staged, r.gw = s, g
	g.expect.Add(1)
	return true
}

// report stages r's frames of this step and marks r as reported: the
// step is notified when it is complete. On r's receive goroutine.
func (g *gate) report(r *request, frames []byte) {
	r.staged.Stage(frames)
	if r.inStep.Swap(true) {
		// r is still on the list: its worker began a new step before the
		// last one was notified (or a request with n > 1 choices sent its
		// second one). Notify what there is now.
		g.notifyAll()
		return
	}
	for {
		old := g.head.Load()
		n := int32(1)
		if old != nil {
			n = old.gateLen.Load() + 1
		}
		r.gateNext = old
		r.gateLen.Store(n)
		if g.head.CompareAndSwap(old, r) {
			break
		}
	}
	switch n := r.gateLen.Load(); {
	case n >= g.expect.Load():
		g.take(r)
	case n == 1:
		g.timer.Reset(g.window)
	}
}

// leave uncounts r (its final Result went out, with its frames), and
// notifies the step if the requests still counted have all reported.
func (g *gate) leave() {
	n := g.expect.Add(-1)
	if top := g.head.Load(); top != nil && top.gateLen.Load() >= n {
		g.take(top)
	}
}

// take notifies the list whose top is top, if it still is: a request that
// joined it since will see the longer list and take it itself.
func (g *gate) take(top *request) {
	if g.head.CompareAndSwap(top, nil) {
		notify(top)
	}
}

// notifyAll notifies the whole list (the step's window ran out, or a new
// step began).
func (g *gate) notifyAll() {
	if top := g.head.Swap(nil); top != nil {
		notify(top)
	}
}

// notify tells each sink of a taken list about its staged frames. A
// request is off the list (inStep false) before its sink is told, so that
// frames it stages after are either told of here or put it on a new list.
func notify(r *request) {
	for r != nil {
		next := r.gateNext
		r.gateNext = nil
		r.inStep.Store(false)
		r.notifySink()
		r = next
	}
}

// notifySink tells r's sink, on whichever goroutine completed the step: a
// panic in the sink is logged and goes no further, so that the rest of
// the step is told (r's own session ends at its next chunk or its end,
// when its sink panics on its own goroutine).
func (r *request) notifySink() {
	defer func() {
		if p := recover(); p != nil {
			r.logPanic(p)
		}
	}()
	r.staged.Notify()
}
