//go:build !race

package vllmcore

import "testing"

// TestReceivePathAllocs guards the output path: a message from the
// engine, one token of one request, costs the front end no allocation.
func TestReceivePathAllocs(t *testing.T) {
	for _, lp := range []bool{false, true} {
		r := newStreamRig(t, lp)
		if a := testing.AllocsPerRun(200, func() { r.step(t) }); a > 0 {
			t.Fatalf("logprobs %v: %.1f allocations per output message (want 0)", lp, a)
		}
	}
}
