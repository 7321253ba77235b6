package netio

import (
	"runtime"
	"testing"
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
