package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Why a mailbox of our own: protoactor's default mailbox allocates a queue
// node per message and starts a goroutine per wake (`go fn()` on a method
// value), so every engine step would cost each streaming session two
// allocations and a goroutine. This mailbox keeps messages in a ring that
// grows once and is then reused, and runs woken mailboxes on a fixed pool of
// workers fed by a channel of mailbox pointers: posting a pointer message to
// an idle session allocates nothing.

// mailboxRing is the initial capacity of a session's message rings. A
// session rarely holds more than a start, a frames notice and a close (its
// sink posts one frames notice at a time), or more than the start, stop and
// terminated system messages.
const (
	mailboxRing       = 4
	mailboxSystemRing = 3
)

// mailbox implements actor.Mailbox. Its lock is per session: never shared.
// It is part of the session (a held stream keeps it), so its fields are
// laid out to keep the session in its size class (TestHeldSessionSize).
type mailbox struct {
	mu     sync.Mutex
	user   ring
	system ring
	// The rings start on these arrays, so that a session's mailbox is one
	// allocation until a ring outgrows them (rarely: see mailboxRing).
	userBuf   [mailboxRing]any
	systemBuf [mailboxSystemRing]any

	scheduled atomic.Bool // true while queued on or run by a worker
	suspended bool
	// foreign: not a session's mailbox but one of Producer's (the
	// response store's actor, an embedding program's actors), whose runs
	// may take any time; a worker wakes the loops its sessions deferred
	// before it runs one.
	foreign bool
	// worker is the pool worker running the mailbox now, plus one (0: it
	// runs on some other goroutine); read only by the actor it runs, for
	// its worker's deferred wakes (Wakes).
	worker  uint16
	invoker actor.MessageInvoker
	pool    *WorkerPool
}

// ring is a FIFO of messages that grows by doubling and is reused.
type ring struct {
	buf        []any
	head, size int32
}

func (r *ring) push(m any) {
	if int(r.size) == len(r.buf) {
		n := len(r.buf) * 2
		if n == 0 {
			n = mailboxRing
		}
		buf := make([]any, n)
		for i := 0; i < int(r.size); i++ {
			buf[i] = r.buf[(int(r.head)+i)%len(r.buf)]
		}
		r.buf, r.head = buf, 0
	}
	r.buf[int(r.head+r.size)%len(r.buf)] = m
	r.size++
}

func (r *ring) pop() any {
	if r.size == 0 {
		return nil
	}
	m := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % int32(len(r.buf))
	r.size--
	return m
}

// PostUserMessage queues a user message and schedules the mailbox.
// Safe for concurrent use.
func (m *mailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// PostSystemMessage queues a system message and schedules the mailbox.
// Safe for concurrent use.
func (m *mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers is called once by protoactor when the actor is spawned.
// The dispatcher is ignored: the mailbox always runs on its worker pool.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, _ actor.Dispatcher) {
	m.invoker = invoker
}

// Start is called once by protoactor after RegisterHandlers.
func (m *mailbox) Start() {}

// UserMessageCount returns the number of queued user messages.
func (m *mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int(m.user.size)
}

func (m *mailbox) schedule() {
	if m.scheduled.CompareAndSwap(false, true) {
		m.pool.submit(m)
	}
}

// next pops the next message to run: system messages first; user messages
// only while not suspended.
func (m *mailbox) next() (msg any, system bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if msg = m.system.pop(); msg != nil {
		return msg, true
	}
	if m.suspended {
		return nil, false
	}
	return m.user.pop(), false
}

func (m *mailbox) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.system.size > 0 || (!m.suspended && m.user.size > 0)
}

// wakes returns the deferred wakes of the worker running m, or nil when m
// runs on no worker of its pool. Actor-only (the actor m runs).
func (m *mailbox) wakes() *Wakes {
	if m.worker == 0 {
		return nil
	}
	return &m.pool.workers[m.worker-1].wakes
}

// run processes messages until the mailbox is empty (or suspended), then
// goes idle, rescheduling itself if a message raced in. worker is the
// running worker's index plus one (0: no worker).
func (m *mailbox) run(worker uint16) {
	for {
		// worker is m's while it is scheduled: cleared before another
		// worker may take m (the Store below).
		m.worker = worker
		m.drain()
		m.worker = 0
		m.scheduled.Store(false)
		if !m.pending() || !m.scheduled.CompareAndSwap(false, true) {
			return
		}
	}
}

func (m *mailbox) drain() {
	var msg any
	defer func() {
		// A panic in the actor becomes a failure for its supervisor, as
		// in protoactor's own mailbox.
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for {
		var system bool
		if msg, system = m.next(); msg == nil {
			return
		}
		if !system {
			m.invoker.InvokeUserMessage(msg)
			continue
		}
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.mu.Lock()
			m.suspended = true
			m.mu.Unlock()
		case *actor.ResumeMailbox:
			m.mu.Lock()
			m.suspended = false
			m.mu.Unlock()
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
	}
}

// WorkerPool runs woken mailboxes on a fixed set of goroutines. After
// Stop, a mailbox that is woken runs on the goroutine that woke it (as with
// protoactor's synchronized dispatcher): actors of an embedding program
// that use the pool's mailboxes (Sessions.Mailbox) may outlive it.
type WorkerPool struct {
	queue   chan *mailbox // never closed: a nil tells one worker to end
	n       int
	stopped atomic.Bool
	wg      sync.WaitGroup
	workers []worker
}

// worker is one goroutine of a WorkerPool: the wakes its mailboxes
// deferred.
type worker struct {
	wakes Wakes
	_     [64]byte // the workers' wakes on cache lines of their own
}

// Waker wakes what writes a connection: its event loop (netio's loop).
type Waker interface{ Wake() }

// DeferredSender is a Conn that can leave waking its writer to the caller:
// SendDeferred queues p as Send does and returns the Waker to call, or nil
// when no wake is owed (the writer is already to be woken, or the exchange
// ended). Sessions running on their worker pool defer the wakes of their
// frames: each worker wakes every event loop its sessions wrote to once
// when its batch of woken mailboxes ends (its queue empty, or after
// maxDeferredRuns mailboxes), so that an engine step's frames for many
// sessions wake each loop once instead of once per session (a loop
// sharing a CPU with the workers' thread would otherwise take the CPU at
// each session's ring and wake several times per step).
type DeferredSender interface {
	SendDeferred(p []byte) Waker
}

// Wakes are the wakes a worker's sessions deferred, each Waker once.
// Worker-only.
type Wakes struct {
	list []Waker
	runs int // mailboxes run since the last flush
}

// maxDeferredRuns bounds how many woken mailboxes a worker runs before it
// wakes the loops they wrote to: a step of thousands of sessions gets its
// loops writing while the worker goes on, not after it.
const maxDeferredRuns = 32

// add records k, unless it is recorded.
func (w *Wakes) add(k Waker) {
	for _, x := range w.list {
		if x == k {
			return
		}
	}
	w.list = append(w.list, k)
}

// flush wakes every recorded Waker and forgets them.
func (w *Wakes) flush() {
	for i, k := range w.list {
		k.Wake()
		w.list[i] = nil
	}
	w.list, w.runs = w.list[:0], 0
}

// workerQueue bounds the number of mailboxes waiting for a worker. A
// producer that finds it full waits: that is back-pressure on the engine
// step, never a lost message.
const workerQueue = 1 << 16

// NewWorkerPool starts n workers (GOMAXPROCS when n <= 0).
func NewWorkerPool(n int) *WorkerPool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, 1<<16-1) // a mailbox names its worker in a uint16
	p := &WorkerPool{queue: make(chan *mailbox, workerQueue), n: n, workers: make([]worker, n)}
	p.wg.Add(n)
	for i := 0; i < n; i++ {
		go p.work(i)
	}
	return p
}

// work is worker i's loop: it runs woken mailboxes, and wakes the loops
// they deferred before it waits for more (or after maxDeferredRuns).
func (p *WorkerPool) work(i int) {
	defer p.wg.Done()
	w := &p.workers[i].wakes
	for m := range p.queue {
		if m == nil {
			w.flush()
			return
		}
		if m.foreign && len(w.list) > 0 {
			// The sessions run before it have waited for their loops
			// long enough: an embedder's actor may block.
			w.flush()
		}
		m.run(uint16(i + 1))
		if w.runs++; len(w.list) > 0 && (w.runs >= maxDeferredRuns || len(p.queue) == 0) {
			w.flush()
		}
	}
}

// submit hands a woken mailbox to a worker. Once the pool stopped, the
// mailbox (and any other left in the queue) runs here instead: a wake
// queued after the workers took their end would otherwise be lost. The
// check costs one atomic load per wake.
func (p *WorkerPool) submit(m *mailbox) {
	p.queue <- m
	if p.stopped.Load() {
		p.runQueued()
	}
}

// runQueued runs the mailboxes left in the queue on the caller's goroutine,
// each of those queued now once. A nil is a worker's end that Stop queued
// and the worker has not taken yet: it goes back in the queue for that
// worker (a submit racing Stop used to swallow it, and Stop then waited
// forever for the worker).
func (p *WorkerPool) runQueued() {
	for n := len(p.queue); n > 0; n-- {
		select {
		case m := <-p.queue:
			if m == nil {
				p.queue <- nil
				continue
			}
			m.run(0)
		default:
			return
		}
	}
}

// Producer returns a MailboxProducer for actor props whose mailboxes run on
// this pool.
func (p *WorkerPool) Producer() actor.MailboxProducer {
	return func() actor.Mailbox {
		m := &mailbox{foreign: true}
		p.initMailbox(m)
		return m
	}
}

// initMailbox readies a zero mailbox to run on this pool (its rings start
// on its own arrays).
func (p *WorkerPool) initMailbox(m *mailbox) {
	m.pool = p
	m.user.buf, m.system.buf = m.userBuf[:], m.systemBuf[:]
}

// Stop ends the workers after the queued mailboxes ran. Mailboxes woken
// later run on the goroutine that wakes them. Idempotent.
func (p *WorkerPool) Stop() {
	if p.stopped.Swap(true) {
		return
	}
	for i := 0; i < p.n; i++ {
		p.queue <- nil
	}
	p.wg.Wait()
	p.runQueued()
}
