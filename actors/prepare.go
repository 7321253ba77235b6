package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// Why a pool of its own for Engine.Prepare: rendering and tokenizing a
// prompt costs time in proportion to its size (a 100,000-token CJK prompt
// takes the tokenizer's slow path for over a second), and on the mailbox
// workers that forward every stream's frames it would hold one of a few
// workers and a core the whole time. A request whose body is at least
// offPoolBody bytes is prepared on prepPool instead: a few goroutines
// (half of GOMAXPROCS), so that big prompts together hold at most that many
// Ps and never a mailbox worker. The prepared request comes back to its
// session as a message. Smaller requests keep the direct path: it costs
// nothing more. (Running the workers on threads of lower kernel priority
// was tried and is worse: a starved thread keeps its P, and the goroutines
// queued on that P wait with it.)

// offPoolBody is the body size from which a request is prepared on the
// prepare pool. Below it tokenizing takes well under a millisecond even
// on the slow path, less than the hop to another goroutine is worth.
const offPoolBody = 16 << 10

// prepQueue bounds the requests waiting for a prepare worker. When it is
// full, the session prepares in place, as small requests do.
const prepQueue = 1024

// prepPool runs Engine.Prepare for large requests on its own goroutines.
type prepPool struct {
	log   *zap.Logger
	queue chan prepJob
	wg    sync.WaitGroup
	// ran counts the requests prepared here (a test's witness that a
	// request did not hold a mailbox worker).
	ran atomic.Uint64
}

// prepJob is a session whose engine request a prepare worker prepares:
// an HTTP session's (session.go) or a Realtime response's, whose
// truncation loop runs with it (realtime.go). From submit until prepDone
// arrives the request is the worker's, and the session does not stop
// (actorBase.stop).
type prepJob interface {
	base() *actorBase
	// prepareOff prepares the request; it runs on a prepare worker.
	prepareOff() error
}

// newPrepPool starts n prepare workers (half of GOMAXPROCS, at least one,
// when n <= 0).
func newPrepPool(log *zap.Logger, n int) *prepPool {
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	p := &prepPool{log: log, queue: make(chan prepJob, prepQueue)}
	p.wg.Add(n)
	for range n {
		go p.work()
	}
	return p
}

func (p *prepPool) work() {
	defer p.wg.Done()
	for j := range p.queue {
		b := j.base()
		b.prepErr = p.prepare(j, b)
		p.ran.Add(1)
		b.owner.root.Send(b.self, &b.prepMsg)
	}
}

// prepare runs j's preparation. A panic in it is that session's: it is
// logged once with the request id and stack, counted, and becomes the
// request's error (an HTTP request's 500).
func (p *prepPool) prepare(j prepJob, b *actorBase) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// Logged here, once: the actor's own code did not panic.
			b.owner.panics.Add(1)
			p.log.Error("panic while preparing a request; the request is ended", zap.String("request_id", b.id),
				zap.Stringer("endpoint", b.ep), zap.Any("panic", r), zap.Stack("stack"))
			err = &engine.Error{Kind: engine.KindInternal, Message: "internal error while preparing the request; see the server log"}
		}
	}()
	return j.prepareOff()
}

// submit queues j for a prepare worker and marks its session preparing;
// false when the queue is full (the caller prepares in place). Runs in
// j's actor; not after stop.
func (p *prepPool) submit(j prepJob) bool {
	b := j.base()
	b.preparing = true
	select {
	case p.queue <- j:
		return true
	default:
		b.preparing = false
		return false
	}
}

// stop ends the workers once the queued requests are prepared.
func (p *prepPool) stop() {
	close(p.queue)
	p.wg.Wait()
}

// prepDone tells a session its request was prepared off the pool
// (actorBase.prepErr holds Prepare's error).
type prepDone struct{}
