// Package eventually is the tree's one way for a test to wait for a
// condition another goroutine or process makes true: poll it, with a time
// bound that is only a stall detector.
//
// CI runs the tests on a loaded two-core machine, so a bound is never an
// assertion on speed: it is about ten times what the wait takes there,
// and a test that needs to say how fast something is measures it in a
// benchmark instead.
package eventually

import (
	"testing"
	"time"
)

// Stall is the default bound of True: ten times the slowest wait the
// tests poll for with it (a worker's health back-off of at most 2 s, a
// store prober's 250 ms period, a drain).
const Stall = 20 * time.Second

// True polls cond until it holds, and fails tb (Fatalf, naming what)
// when it has not held within Stall. Polls start 1 ms apart and back off
// to 50 ms, so that a fast condition is seen at once and a slow one costs
// little CPU. Call it from the test's goroutine.
func True(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Within(tb, Stall, what, cond)
}

// Within is True with the stall bound limit.
func Within(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	poll(tb, limit, what, cond, nil)
}

// Report is True that adds report's text (the state the condition
// waited on, a goroutine dump) to the failure of a stall.
func Report(tb testing.TB, what string, cond func() bool, report func() string) {
	tb.Helper()
	poll(tb, Stall, what, cond, report)
}

func poll(tb testing.TB, limit time.Duration, what string, cond func() bool, report func() string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			if report != nil {
				tb.Fatalf("%s: not within %s (a stall): %s", what, limit, report())
			} else {
				tb.Fatalf("%s: not within %s (a stall)", what, limit)
			}
			return
		}
		time.Sleep(pause) // the poll's pace: cond is the synchronisation
		pause = min(2*pause, 50*time.Millisecond)
	}
}
