package netio

import (
	"testing"
	"time"
)

// TestKeepaliveFrames: the keep-alive of each dialect and framing, byte
// for byte (the chunk size is the payload's length in hex).
func TestKeepaliveFrames(t *testing.T) {
	f := func(d dialect, chunked bool, want string) {
		t.Helper()
		if got := string(keepaliveFrame(d, chunked)); got != want {
			t.Errorf("dialect %d chunked %v: %q, want %q", d, chunked, got, want)
		}
	}
	f(dialectOpenAI, true, "e\r\n: keep-alive\n\n\r\n")
	f(dialectOpenAI, false, ": keep-alive\n\n")
	f(dialectAnthropic, true, "23\r\nevent: ping\ndata: {\"type\":\"ping\"}\n\n\r\n")
	f(dialectAnthropic, false, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
}

// TestKeepaliveSweep: the sweep's period is half the keep-alive, at most
// a second, and the keep-alive is a whole number of sweeps, rounded up.
func TestKeepaliveSweep(t *testing.T) {
	f := func(k, period time.Duration, sweeps uint32) {
		t.Helper()
		if p, n := keepaliveSweep(k), keepaliveSweeps(k); p != period || n != sweeps {
			t.Errorf("keep-alive %v: sweep every %v, %d sweeps; want %v, %d", k, p, n, period, sweeps)
		}
	}
	f(15*time.Second, time.Second, 15)
	f(2500*time.Millisecond, time.Second, 3)
	f(2*time.Second, time.Second, 2)
	f(150*time.Millisecond, 75*time.Millisecond, 2)
	f(time.Millisecond, time.Millisecond, 1)
}
