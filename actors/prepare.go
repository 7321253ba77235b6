package actors

import (
	"runtime"
	"sync"

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
	eng   engine.Engine
	log   *zap.Logger
	queue chan *session
	wg    sync.WaitGroup
}

// newPrepPool starts n prepare workers (half of GOMAXPROCS, at least one,
// when n <= 0).
func newPrepPool(eng engine.Engine, log *zap.Logger, n int) *prepPool {
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	p := &prepPool{eng: eng, log: log, queue: make(chan *session, prepQueue)}
	p.wg.Add(n)
	for range n {
		go p.work()
	}
	return p
}

func (p *prepPool) work() {
	defer p.wg.Done()
	for ss := range p.queue {
		ss.prepErr = p.prepare(ss)
		ss.owner.root.Send(ss.self, &ss.prepMsg)
	}
}

// prepare runs Engine.Prepare for ss. A panic in it is that session's: it
// is logged once with the request id and stack, counted, and becomes the
// request's 500.
func (p *prepPool) prepare(ss *session) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ss.owner.panics.Add(1)
			p.log.Error("panic while preparing a request; the request is ended", zap.String("request_id", ss.req.RequestID),
				zap.Any("panic", r), zap.Stack("stack"))
			err = &engine.Error{Kind: engine.KindInternal, Message: "internal error while preparing the request; see the server log"}
		}
	}()
	return p.eng.Prepare(&ss.ereq)
}

// submit queues ss for a prepare worker; false when the queue is full.
// Safe for concurrent use; not after stop.
func (p *prepPool) submit(ss *session) bool {
	select {
	case p.queue <- ss:
		return true
	default:
		return false
	}
}

// stop ends the workers once the queued requests are prepared.
func (p *prepPool) stop() {
	close(p.queue)
	p.wg.Wait()
}

// prepDone tells a session its request was prepared off the pool
// (session.prepErr holds Prepare's error).
type prepDone struct{}
