package netio

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// fakeLoop records Execute calls instead of running them.
type fakeLoop struct {
	mu       sync.Mutex
	executed []gnet.Runnable
}

func (f *fakeLoop) Register(context.Context, net.Addr) (<-chan gnet.RegisteredResult, error) {
	return nil, nil
}
func (f *fakeLoop) Enroll(context.Context, net.Conn) (<-chan gnet.RegisteredResult, error) {
	return nil, nil
}
func (f *fakeLoop) Execute(_ context.Context, r gnet.Runnable) error {
	f.mu.Lock()
	f.executed = append(f.executed, r)
	f.mu.Unlock()
	return nil
}
func (f *fakeLoop) Schedule(context.Context, gnet.Runnable, time.Duration) error { return nil }
func (f *fakeLoop) Close(gnet.Conn) error                                        { return nil }

// TestOutboxOneWakePerBatch: however many connections of a loop get bytes
// before the loop runs, the loop is woken once, and every connection is
// flushed in that one pass; a connection queued twice is flushed once.
func TestOutboxOneWakePerBatch(t *testing.T) {
	fl := &fakeLoop{}
	l := &loop{el: fl}
	l.bell.Store(-1) // no doorbell: Execute is the bell
	conns := make([]*conn, 100)
	for i := range conns {
		conns[i] = &conn{loop: l, closed: true} // closed: flushOutbox writes nothing
		l.ready(conns[i])
		l.ready(conns[i])
	}
	if len(fl.executed) != 1 {
		t.Fatalf("loop woken %d times for one batch, want 1", len(fl.executed))
	}
	var flushed int
	for c := l.head.Load(); c != nil; c = c.nextReady {
		flushed++
	}
	if flushed != len(conns) {
		t.Fatalf("ready list holds %d connections, want %d", flushed, len(conns))
	}
	_ = fl.executed[0].Run(context.Background())
	if l.head.Load() != nil || l.rung.Load() {
		t.Fatal("Run left the ready list or the bell set")
	}
	for i, c := range conns {
		if c.queued.Load() {
			t.Fatalf("conn %d still marked queued", i)
		}
	}
	// The next batch rings again.
	l.ready(conns[0])
	if len(fl.executed) != 2 {
		t.Fatalf("second batch: %d wakes, want 2", len(fl.executed))
	}
}

// TestOutboxConcurrentProducers: producers racing with the loop never lose
// a connection: every ready() is followed by a Run that sees it.
func TestOutboxConcurrentProducers(t *testing.T) {
	fl := &fakeLoop{}
	l := &loop{el: fl}
	l.bell.Store(-1)
	const producers, rounds = 8, 2000
	conns := make([]*conn, producers)
	for i := range conns {
		conns[i] = &conn{loop: l, closed: true}
	}
	var wg sync.WaitGroup
	for i := 0; i < producers; i++ {
		wg.Add(1)
		go func(c *conn) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l.ready(c)
			}
		}(conns[i])
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Play the loop: run whatever was executed until producers finish.
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		fl.mu.Lock()
		runs := fl.executed
		fl.executed = nil
		fl.mu.Unlock()
		for _, r := range runs {
			_ = r.Run(context.Background())
		}
	}
	fl.mu.Lock()
	pending := len(fl.executed)
	fl.mu.Unlock()
	if l.head.Load() != nil && pending == 0 && !l.rung.Load() {
		t.Fatal("a queued connection has no wake pending: it would never be flushed")
	}
}
