package spareproc

import (
	"runtime"
	"testing"

	"go.uber.org/zap"
)

// TestReserve: GOMAXPROCS is raised to loops+1 when lower, and never
// lowered.
func TestReserve(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if from, to := reserve(1); from != 1 || to != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("reserve(1) at GOMAXPROCS 1 = %d, %d; GOMAXPROCS now %d; want 1, 2, 2", from, to, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(8)
	if from, to := reserve(2); from != 8 || to != 8 || runtime.GOMAXPROCS(0) != 8 {
		t.Fatalf("reserve(2) at GOMAXPROCS 8 = %d, %d; GOMAXPROCS now %d; want 8, 8, 8", from, to, runtime.GOMAXPROCS(0))
	}
}

// TestSpareWanted: the spare P goes at saturatedUtil and comes back below
// relaxedUtil; in between, it stays as it is.
func TestSpareWanted(t *testing.T) {
	for _, c := range []struct {
		spare bool
		util  float64
		want  bool
	}{
		{true, 0.2, true}, {true, 0.89, true}, {true, 0.90, false}, {true, 1.3, false},
		{false, 1.0, false}, {false, 0.8, false}, {false, 0.70, false}, {false, 0.69, true}, {false, 0, true},
	} {
		if got := spareWanted(c.spare, c.util); got != c.want {
			t.Errorf("spareWanted(%v, %.2f) = %v, want %v", c.spare, c.util, got, c.want)
		}
	}
}

// TestControlStops: the controller returns when its stop channel
// closes.
func TestControlStops(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		control(zap.NewNop(), runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), stop)
		close(done)
	}()
	close(stop)
	<-done
}

// TestStartOnce: Start raises GOMAXPROCS and runs its controller; a second
// Start while it runs changes nothing; once stopped, the next Start may
// manage GOMAXPROCS again.
func TestStartOnce(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	stop := make(chan struct{})
	done := Start(zap.NewNop(), 1, 0, stop)
	if done == nil || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("Start(1) at GOMAXPROCS 1: done %v, GOMAXPROCS %d; want a channel and 2", done, runtime.GOMAXPROCS(0))
	}
	if d := Start(zap.NewNop(), 4, 0, stop); d != nil || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("a second Start while the first runs: done %v, GOMAXPROCS %d; want nil and 2", d, runtime.GOMAXPROCS(0))
	}
	close(stop)
	<-done
	runtime.GOMAXPROCS(1)
	stop2 := make(chan struct{})
	d := Start(zap.NewNop(), 1, 0, stop2)
	close(stop2)
	if d == nil {
		t.Fatal("Start after the first controller ended changed nothing")
	}
	<-d
}

// TestStartHeld: an engine's Ps held in C calls are added to the reserve
// (loops + held + 1), and no controller takes the spare back: GOMAXPROCS
// stays there until stop.
func TestStartHeld(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(old)
	stop := make(chan struct{})
	done := Start(zap.NewNop(), 2, 1, stop)
	if done == nil || runtime.GOMAXPROCS(0) != 4 {
		t.Fatalf("Start(2 loops, 1 held) at GOMAXPROCS 2: done %v, GOMAXPROCS %d; want a channel and 4", done, runtime.GOMAXPROCS(0))
	}
	if d := Start(zap.NewNop(), 1, 0, stop); d != nil {
		t.Fatal("a second Start while the first holds GOMAXPROCS ran")
	}
	close(stop)
	<-done
	if runtime.GOMAXPROCS(0) != 4 {
		t.Fatalf("GOMAXPROCS %d after stop, want 4 (left as raised)", runtime.GOMAXPROCS(0))
	}
}
