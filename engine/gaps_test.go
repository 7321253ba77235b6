package engine

import (
	"testing"
	"time"
)

// TestGapsBuckets: a gap lands in the first bucket whose bound is >= it
// (Prometheus' le), a bound itself included; beyond the last, +Inf.
func TestGapsBuckets(t *testing.T) {
	f := func(d time.Duration, want int) {
		t.Helper()
		var g Gaps
		g.Observe(d)
		if g.Counts[want] != 1 || g.Count() != 1 || g.Sum != d {
			t.Errorf("%s: counts %v, want bucket %d", d, g.Counts, want)
		}
	}
	f(0, 0)
	f(500*time.Microsecond, 0)
	f(500*time.Microsecond+1, 1)
	f(time.Millisecond, 1)
	f(180*time.Millisecond, 10) // (0.15, 0.2]
	f(200*time.Millisecond, 10)
	f(200*time.Millisecond+1, 11)
	f(80*time.Second, len(ITLBuckets)-1)
	f(time.Hour, len(ITLBuckets)) // +Inf
	for i, ub := range ITLBuckets {
		f(ub, i)
		if i > 0 && ub <= ITLBuckets[i-1] {
			t.Fatalf("ITLBuckets not increasing at %d", i)
		}
	}
}

// TestGapsStep: steps 1 ms apart with one 200 ms step give one gap per
// step after the first, the slow one in its own bucket; a second call in
// the same step (another choice) and the first call count nothing.
func TestGapsStep(t *testing.T) {
	var g Gaps
	if g.Recorded() {
		t.Fatal("empty Gaps recorded")
	}
	t0 := time.Now()
	now := t0
	const steps = 50
	for i := range steps {
		if i == 20 {
			now = now.Add(200 * time.Millisecond)
		} else if i > 0 {
			now = now.Add(time.Millisecond)
		}
		g.Step(now)
		g.Step(now) // a second choice of the same step
		if i == 0 && (!g.Recorded() || g.Count() != 0) {
			t.Fatalf("first step: recorded %v, %d gaps", g.Recorded(), g.Count())
		}
	}
	if g.Count() != steps-1 || g.Counts[1] != steps-2 || g.Counts[10] != 1 || g.Sum != now.Sub(t0) {
		t.Fatalf("count %d, counts %v, sum %s", g.Count(), g.Counts, g.Sum)
	}
	g.Step(now.Add(-time.Second)) // backwards: a zero gap
	if g.Counts[0] != 1 || g.Sum != now.Sub(t0) {
		t.Fatalf("backwards step: counts %v, sum %s", g.Counts, g.Sum)
	}
	g.Reset()
	if g.Recorded() {
		t.Fatal("Reset left Gaps recorded")
	}
}

// TestGapsStepAllocs: counting a gap allocates nothing.
func TestGapsStepAllocs(t *testing.T) {
	var g Gaps
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(3 * time.Millisecond)
		g.Step(now)
	}); n != 0 {
		t.Fatalf("%v allocations per Step", n)
	}
}

// BenchmarkGapsStep is the per-step, per-request cost of counting a gap.
func BenchmarkGapsStep(b *testing.B) {
	var g Gaps
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Duration(i%97) * 100 * time.Microsecond)
		g.Step(now)
	}
}
