package integration_test

import (
	"runtime"
	"testing"

	"github.com/vajra-go/vajra"
)

// TestStartReservesP: Start raises GOMAXPROCS to event loops + 1 (the loops
// hold their P while they wait in epoll_wait), unless KeepGOMAXPROCS; a
// second server in the same process leaves it to the first.
func TestStartReservesP(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, keep := range []bool{false, true} {
		runtime.GOMAXPROCS(1)
		startServer(t, func(c *vajra.Config) { c.Loops = 1; c.KeepGOMAXPROCS = keep })
		want := 2
		if keep {
			want = 1
		}
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("KeepGOMAXPROCS=%v: GOMAXPROCS after Start = %d, want %d", keep, got, want)
		}
		if keep {
			continue
		}
		startServer(t, func(c *vajra.Config) { c.Loops = 2 })
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("a second server changed GOMAXPROCS from %d to %d", want, got)
		}
	}
}
