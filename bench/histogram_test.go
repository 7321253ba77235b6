package bench

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestHistogramBuckets(t *testing.T) {
	// Every bucket's bounds map back to it, and buckets tile the range.
	next := uint64(0)
	for i := 0; i < histBuckets; i++ {
		lo, w := bucketBounds(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if bucketOf(lo) != i || bucketOf(lo+w-1) != i {
			t.Fatalf("bucket %d [%d,+%d) maps to %d..%d", i, lo, w, bucketOf(lo), bucketOf(lo+w-1))
		}
		next = lo + w
	}
	if bucketOf(math.MaxUint64) != histBuckets-1 {
		t.Fatal("huge values must land in the last bucket")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	// f records values and checks a quantile within the histogram's
	// relative precision.
	f := func(values []int64, q float64, want int64) {
		t.Helper()
		var h Histogram
		for _, v := range values {
			h.Record(v)
		}
		got := h.Quantile(q)
		tol := math.Max(1, float64(want)/float64(histHalf))
		if math.Abs(float64(got-want)) > tol {
			t.Errorf("Quantile(%v) = %d, want %d ± %.0f", q, got, want, tol)
		}
	}
	seq := func(from, to, step int64) []int64 {
		var v []int64
		for x := from; x <= to; x += step {
			v = append(v, x)
		}
		return v
	}
	us := seq(1000, 10_000_000, 1000) // 1 µs .. 10 ms, 10,000 values
	f(us, 0.5, 5_000_000)
	f(us, 0.9, 9_000_000)
	f(us, 0.99, 9_900_000)
	f(us, 0.999, 9_990_000)
	f(us, 1, 10_000_000)
	f(us, 0, 1000)
	f([]int64{42}, 0.5, 42)
	f([]int64{42}, 0.999, 42)
	f([]int64{1, 2, 3, 4}, 0.5, 2) // exact below 256 ns
	f([]int64{-5, 0}, 1, 0)        // negatives count as zero
	f([]int64{20_000_000, 20_000_000, 20_000_000, 900_000_000}, 0.5, 20_000_000)
	f([]int64{20_000_000, 20_000_000, 20_000_000, 900_000_000}, 0.99, 900_000_000)
}

func TestHistogramStats(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Min() != 0 || h.Max() != 0 {
		t.Fatal("an empty histogram reports zeros")
	}
	for _, v := range []int64{300, 100, 200} {
		h.Record(v)
	}
	if h.Count() != 3 || h.Min() != 100 || h.Max() != 300 || h.Mean() != 200 {
		t.Fatalf("count %d min %d max %d mean %v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
	var o Histogram
	o.Record(50)
	o.Record(1000)
	h.Merge(&o)
	if h.Count() != 5 || h.Min() != 50 || h.Max() != 1000 {
		t.Fatalf("after merge: count %d min %d max %d", h.Count(), h.Min(), h.Max())
	}
	h.Reset()
	if h.Count() != 0 || h.Max() != 0 {
		t.Fatal("reset")
	}
}

func TestHistogramConcurrent(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 10_000; i++ {
				h.Record(int64(r.IntN(1_000_000)))
			}
		}()
	}
	wg.Wait()
	if h.Count() != 80_000 {
		t.Fatalf("count %d", h.Count())
	}
	var sum uint64
	for _, b := range h.Bins(1.1) {
		sum += b.Count
	}
	if sum != 80_000 {
		t.Fatalf("bins hold %d", sum)
	}
}

func TestHistogramRecordAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(12345) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	v := int64(20_000_000)
	for b.Loop() {
		h.Record(v)
		v ^= 0x5555
	}
}
