package engine

import (
	"time"

	"github.com/vajra-go/vajra/internal/itl"
)

// ITLBuckets are the upper bounds (inclusive, as Prometheus' le) of the
// buckets of Gaps, defined once in internal/itl, which the metrics
// package exports in seconds: vLLM's vllm:inter_token_latency_seconds
// bounds (10 ms to 80 s) and 0.5, 1, 2.5 and 5 ms below them.
var ITLBuckets = itl.Bounds

// Gaps is the histogram of one request's inter-token latencies: the time
// between successive engine steps in which the request produced output, as
// vLLM's inter-token latency counts them (one gap per step, not per token:
// a step that yields several tokens of the request, one per choice, is one
// gap). The engine keeps it in its per-request state and copies it into
// the Result; the server merges it into the metric once, at the request's
// end. Counting a gap is a bucket search and two adds in this fixed
// array: no allocation, no lock, no atomic.
//
// The zero value is empty. Loop-only: one goroutine (the engine's) writes
// it; after the final Deliver it is the sink's.
type Gaps struct {
	// Counts holds the gaps per bucket of ITLBuckets, not cumulative; the
	// last bucket is +Inf.
	Counts [len(ITLBuckets) + 1]uint32
	// Sum is the total of the gaps: the time from the first step with
	// output to the last one.
	Sum time.Duration

	last time.Time // the previous Step, zero before the first
}

// Step records that the request produced output in the engine step that
// ended at now. The first call only starts the clock; each later call
// observes the gap since the previous one. A call with the same now as
// the previous one belongs to the same step and observes nothing, so an
// engine may call Step once per choice with the step's one timestamp.
// Times going backwards count as a zero gap.
func (g *Gaps) Step(now time.Time) {
	if g.last.IsZero() {
		g.last = now
		return
	}
	if now.Equal(g.last) {
		return
	}
	g.Observe(max(0, now.Sub(g.last)))
	g.last = now
}

// Observe counts one gap of d, for an engine that measures its gaps
// itself (Step does it from timestamps).
func (g *Gaps) Observe(d time.Duration) {
	// Binary search for the first bound >= d over the fixed bounds; a
	// sort.Search closure would cost a call per probe.
	lo, hi := 0, len(ITLBuckets)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ITLBuckets[mid] < d {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	g.Counts[lo]++
	g.Sum += d
}

// Count returns the number of gaps counted.
func (g *Gaps) Count() uint64 {
	var n uint64
	for _, c := range g.Counts {
		n += uint64(c)
	}
	return n
}

// Recorded reports whether the engine measured the request's gaps (Step or
// Observe was called): false for an engine that does not, whose metrics
// then fall back to an estimate from the request's timings.
func (g *Gaps) Recorded() bool { return !g.last.IsZero() || g.Count() > 0 }

// Reset empties g for reuse.
func (g *Gaps) Reset() { *g = Gaps{} }
