package actors

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/internal/eventually"
)

// invoker records what a mailbox runs, and fails the test if two workers
// ever run the same mailbox at once.
type invoker struct {
	t       *testing.T
	mu      sync.Mutex
	log     []string
	inside  atomic.Int32
	failed  []any
	done    chan struct{} // gets one value per user message when not nil
	panicOn any
}

func (v *invoker) enter() {
	if v.inside.Add(1) != 1 {
		v.t.Error("two goroutines ran one mailbox at once")
	}
}

func (v *invoker) InvokeSystemMessage(m any) {
	v.enter()
	defer v.inside.Add(-1)
	v.mu.Lock()
	v.log = append(v.log, fmt.Sprint("sys:", m))
	v.mu.Unlock()
}

func (v *invoker) InvokeUserMessage(m any) {
	v.enter()
	defer v.inside.Add(-1)
	if v.panicOn != nil && m == v.panicOn {
		panic("boom")
	}
	v.mu.Lock()
	v.log = append(v.log, fmt.Sprint(m))
	v.mu.Unlock()
	if v.done != nil {
		v.done <- struct{}{}
	}
}

func (v *invoker) EscalateFailure(reason, m any) {
	v.mu.Lock()
	v.failed = append(v.failed, m)
	v.mu.Unlock()
}

func (v *invoker) snapshot() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.log...)
}

// nopInvoker runs messages and keeps nothing.
type nopInvoker struct{}

func (nopInvoker) InvokeSystemMessage(any)  {}
func (nopInvoker) InvokeUserMessage(any)    {}
func (nopInvoker) EscalateFailure(any, any) {}

// newTestMailbox returns a mailbox of a stopped pool: posts run on the
// posting goroutine, so each test is deterministic.
func newTestMailbox(t *testing.T, v actor.MessageInvoker) *mailbox {
	p := NewWorkerPool(1)
	p.Stop()
	m := p.Producer()().(*mailbox)
	if v != nil {
		m.RegisterHandlers(v, nil)
	}
	m.Start()
	return m
}

func TestMailboxOrderAndGrowth(t *testing.T) {
	v := &invoker{t: t}
	m := newTestMailbox(t, v)
	// Hold the mailbox "scheduled" so posts queue up and wrap the ring.
	m.scheduled.Store(true)
	for i := range 3 {
		m.PostUserMessage(i)
	}
	m.run(0) // takes 0..2; the ring's head is now at 3
	m.scheduled.Store(true)
	for i := 3; i < 20; i++ { // wraps, then grows past mailboxRing
		m.PostUserMessage(i)
	}
	m.PostSystemMessage("stop")
	m.run(0)
	got := v.snapshot()
	want := []string{"0", "1", "2", "sys:stop"}
	for i := 3; i < 20; i++ {
		want = append(want, fmt.Sprint(i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ran %v\nwant %v", got, want)
	}
	if m.UserMessageCount() != 0 {
		t.Fatalf("%d left", m.UserMessageCount())
	}
}

func TestMailboxSuspendHoldsUserMessages(t *testing.T) {
	v := &invoker{t: t}
	m := newTestMailbox(t, v)
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("a")
	m.PostUserMessage("b")
	if got := v.snapshot(); len(got) != 0 || m.UserMessageCount() != 2 {
		t.Fatalf("suspended mailbox ran %v (%d queued)", got, m.UserMessageCount())
	}
	m.PostSystemMessage("ping") // system messages still run
	m.PostSystemMessage(&actor.ResumeMailbox{})
	if got := v.snapshot(); fmt.Sprint(got) != "[sys:ping a b]" {
		t.Fatalf("ran %v", got)
	}
}

func TestMailboxPanicEscalatesAndGoesOn(t *testing.T) {
	v := &invoker{t: t, panicOn: "bad"}
	m := newTestMailbox(t, v)
	m.scheduled.Store(true)
	m.PostUserMessage("a")
	m.PostUserMessage("bad")
	m.PostUserMessage("c")
	m.run(0)
	if fmt.Sprint(v.failed) != "[bad]" {
		t.Fatalf("escalated %v, want [bad]", v.failed)
	}
	if got := v.snapshot(); fmt.Sprint(got) != "[a c]" {
		t.Fatalf("ran %v: the message after the panic must still run", got)
	}
}

// TestMailboxManyProducers: 8 goroutines post 2,000 messages each to one
// mailbox on a 4-worker pool: every message runs once, in each
// producer's order, and never on two workers at once.
func TestMailboxManyProducers(t *testing.T) {
	const producers, each = 8, 2000
	v := &invoker{t: t, done: make(chan struct{}, producers*each)}
	p := NewWorkerPool(4)
	defer p.Stop()
	m := p.Producer()().(*mailbox)
	m.RegisterHandlers(v, nil)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m.PostUserMessage([2]int{g, i})
			}
		}()
	}
	wg.Wait()
	for range producers * each {
		<-v.done
	}
	next := make([]int, producers)
	for _, s := range v.snapshot() {
		var g, i int
		if _, err := fmt.Sscanf(s, "[%d %d]", &g, &i); err != nil || i != next[g] {
			t.Fatalf("message %q out of order (want %d from producer %d)", s, next[g], g)
		}
		next[g]++
	}
}

// TestMailboxPostAllocations: a pointer message to an idle mailbox
// allocates nothing (the reason this mailbox exists).
func TestMailboxPostAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	m := newTestMailbox(t, nil)
	m.RegisterHandlers(nopInvoker{}, nil)
	msg := &struct{ n int }{}
	if n := testing.AllocsPerRun(1000, func() { m.PostUserMessage(msg) }); n != 0 {
		t.Fatalf("%.1f allocations per post", n)
	}
}

// blockingInvoker holds its worker in the first user message until release
// is closed.
type blockingInvoker struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingInvoker) InvokeSystemMessage(any) {}
func (b *blockingInvoker) InvokeUserMessage(any) {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
}
func (b *blockingInvoker) EscalateFailure(any, any) {}

// A mailbox woken while Stop waits for a busy worker runs on the waker's
// goroutine without taking that worker's end from the queue: Stop returns
// once the worker is free (it used to wait forever, which hung every
// shutdown that raced an engine's last deliveries).
func TestWorkerPoolStopRacingSubmit(t *testing.T) {
	p := NewWorkerPool(1)
	busy := &blockingInvoker{entered: make(chan struct{}), release: make(chan struct{})}
	m1 := p.Producer()().(*mailbox)
	m1.RegisterHandlers(busy, nil)
	m1.Start()
	m1.PostUserMessage(1)
	<-busy.entered
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	eventually.True(t, "Stop queues the worker's end", func() bool { return p.stopped.Load() && len(p.queue) == 1 })
	v := &invoker{t: t, done: make(chan struct{}, 1)}
	m2 := p.Producer()().(*mailbox)
	m2.RegisterHandlers(v, nil)
	m2.Start()
	m2.PostUserMessage("late")
	select {
	case <-v.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the late message never ran")
	}
	close(busy.release)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop never returned: the worker's end was lost")
	}
}

// countWaker counts its wakes.
type countWaker struct{ n atomic.Int32 }

func (w *countWaker) Wake() { w.n.Add(1) }

// deferInvoker defers k's wake from every user message of its mailbox,
// as a session's send does; a message that is a channel is waited on
// first (it holds the worker).
type deferInvoker struct {
	mb  *mailbox
	k   Waker
	ran chan struct{}
}

func (v *deferInvoker) InvokeSystemMessage(any) {}
func (v *deferInvoker) InvokeUserMessage(m any) {
	if c, ok := m.(chan struct{}); ok {
		<-c
	}
	if w := v.mb.wakes(); w != nil {
		w.add(v.k)
	}
	v.ran <- struct{}{}
}
func (v *deferInvoker) EscalateFailure(any, any) {}

// TestWorkerDefersWakes: mailboxes run back to back by one worker wake
// each Waker their actors deferred once, when the worker's queue is empty,
// and at least every maxDeferredRuns mailboxes when it is not; a mailbox
// run off the pool's workers has no deferred wakes.
func TestWorkerDefersWakes(t *testing.T) {
	p := NewWorkerPool(1)
	defer p.Stop()
	k := new(countWaker)
	const n = maxDeferredRuns + 8
	ran := make(chan struct{}, n+1)
	boxes := make([]*mailbox, n+1)
	for i := range boxes {
		m := new(mailbox)
		p.initMailbox(m)
		m.RegisterHandlers(&deferInvoker{mb: m, k: k, ran: ran}, nil)
		boxes[i] = m
	}
	// The first mailbox holds the worker while the others queue.
	hold := make(chan struct{})
	boxes[0].PostUserMessage(hold)
	for _, m := range boxes[1:] {
		m.PostUserMessage("frames")
	}
	close(hold)
	for range boxes {
		<-ran
	}
	// n+1 mailboxes: a flush after maxDeferredRuns, one at the end.
	eventually.True(t, "the worker wakes the loop it deferred", func() bool { return k.n.Load() >= 2 })
	if got := k.n.Load(); got != 2 {
		t.Fatalf("%d wakes for %d mailboxes run back to back, want 2 (every %d and at the end)", got, n+1, maxDeferredRuns)
	}

	m := new(mailbox)
	m.RegisterHandlers(&deferInvoker{mb: m, k: k, ran: ran}, nil)
	m.pool = p
	if m.wakes() != nil {
		t.Fatal("a mailbox off the workers has deferred wakes")
	}
}

// TestWorkerWakesBeforeForeignActor: the loops a worker's sessions
// deferred are woken before the worker runs an actor that is not a
// session (a mailbox of Producer's: the response store's, an embedding
// program's), which may block: a stream must not wait on it.
func TestWorkerWakesBeforeForeignActor(t *testing.T) {
	p := NewWorkerPool(1)
	defer p.Stop()
	k := new(countWaker)
	ran := make(chan struct{}, 4)
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release() // before Stop, which waits for the worker
	session := new(mailbox)
	p.initMailbox(session)
	session.RegisterHandlers(&deferInvoker{mb: session, k: k, ran: ran}, nil)
	blocker := p.Producer()().(*mailbox)
	blocker.RegisterHandlers(&deferInvoker{mb: blocker, k: k, ran: ran}, nil)

	// Hold the worker so that both queue behind it, session first.
	first := new(mailbox)
	p.initMailbox(first)
	gate := make(chan struct{})
	first.RegisterHandlers(&deferInvoker{mb: first, k: k, ran: ran}, nil)
	first.PostUserMessage(gate)
	session.PostUserMessage("frames")
	blocker.PostUserMessage(hold) // blocks the worker until released
	close(gate)
	eventually.True(t, "the session's loop is woken while the foreign actor blocks the worker",
		func() bool { return k.n.Load() == 1 })
	if len(ran) != 2 {
		t.Fatalf("%d runs before the blocker, want 2", len(ran))
	}
	release()
	for range 3 {
		<-ran
	}
}
