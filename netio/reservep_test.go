package netio

import (
	"runtime"
	"testing"

	"go.uber.org/zap"
)

// TestReserveP: GOMAXPROCS is raised to loops+1 when lower, and never
// lowered.
func TestReserveP(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if from, to := reserveP(1); from != 1 || to != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("reserveP(1) at GOMAXPROCS 1 = %d, %d; GOMAXPROCS now %d; want 1, 2, 2", from, to, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(8)
	if from, to := reserveP(2); from != 8 || to != 8 || runtime.GOMAXPROCS(0) != 8 {
		t.Fatalf("reserveP(2) at GOMAXPROCS 8 = %d, %d; GOMAXPROCS now %d; want 8, 8, 8", from, to, runtime.GOMAXPROCS(0))
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

// TestProcControlStops: the controller returns when its stop channel
// closes.
func TestProcControlStops(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		procControl(zap.NewNop(), runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), stop)
		close(done)
	}()
	close(stop)
	<-done
}
