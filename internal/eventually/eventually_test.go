package eventually

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestTrueWaitsForAnotherGoroutine: the condition turns true later, on
// another goroutine, and True returns once it has.
func TestTrueWaitsForAnotherGoroutine(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	True(t, "five increments", func() bool { return n.Load() == 5 })
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = format
}

// TestWithinFailsOnAStall: a condition that never holds fails the test
// once the bound has passed, and not before the condition was polled.
func TestWithinFailsOnAStall(t *testing.T) {
	tb := &fatalTB{TB: t}
	polls := 0
	// Within returns after Fatalf here (the fake does not stop the
	// goroutine): the loop must end on its own after the deadline.
	done := make(chan struct{})
	go func() {
		defer close(done)
		Within(tb, 20*time.Millisecond, "never", func() bool {
			polls++
			return tb.failed
		})
	}()
	<-done
	if !tb.failed || polls < 2 {
		t.Fatalf("failed %v after %d polls", tb.failed, polls)
	}
}
