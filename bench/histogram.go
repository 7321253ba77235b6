package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Histogram is a log-bucketed latency histogram in the manner of HDR
// Histogram: values below 2^histSubBits nanoseconds are counted exactly;
// above, each power-of-two range is split into 2^(histSubBits-1) linear
// buckets, so any recorded value is known to within 1/2^(histSubBits-1)
// (0.8 %). Memory is fixed (histBuckets counters, 35 KiB) and Record does
// not allocate.
//
// Safe for concurrent use: Record uses atomic adds, so many stream
// goroutines can share one Histogram. Readers (Quantile, Snapshot) should run
// after the writers are done, or accept a slightly torn view.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // ns; 2^64 ns is 584 years, no overflow in a run
	max    atomic.Uint64
	min    atomic.Uint64 // stored as ^min so that the zero value means "none"
}

const (
	// histSubBits sets the precision: 2^(histSubBits-1) = 128 buckets per
	// power of two.
	histSubBits = 8
	histSub     = 1 << histSubBits
	histHalf    = histSub / 2
	// histMaxBits caps the range at 2^40 ns (18 minutes); larger values land
	// in the last bucket (max still records them exactly).
	histMaxBits = 40
	histBuckets = histSub + (histMaxBits-histSubBits)*histHalf
)

// bucketOf returns the bucket index of v (ns).
func bucketOf(v uint64) int {
	if v < histSub {
		return int(v)
	}
	l := bits.Len64(v)
	if l > histMaxBits {
		return histBuckets - 1
	}
	shift := l - histSubBits
	top := v >> uint(shift) // in [histHalf, histSub)
	return histSub + (shift-1)*histHalf + int(top-histHalf)
}

// bucketBounds returns the lowest value of bucket i and its width.
func bucketBounds(i int) (lo, width uint64) {
	if i < histSub {
		return uint64(i), 1
	}
	j := i - histSub
	shift := j/histHalf + 1
	top := uint64(j%histHalf + histHalf)
	return top << uint(shift), 1 << uint(shift)
}

// Record adds one value in nanoseconds; negative values count as zero.
// Safe for concurrent use.
func (h *Histogram) Record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	v := uint64(ns)
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.min.Load() // ^min
		if ^v <= m || h.min.CompareAndSwap(m, ^v) {
			break
		}
	}
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max returns the largest value recorded, exactly.
func (h *Histogram) Max() int64 { return int64(h.max.Load()) }

// Min returns the smallest value recorded, exactly (0 when empty).
func (h *Histogram) Min() int64 { return h.minValue() }

// Mean returns the arithmetic mean in nanoseconds (0 when empty).
func (h *Histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the value at quantile q (0..1) in nanoseconds: the
// midpoint of the bucket holding the ceil(q*n)-th smallest value, clamped to
// the exact min and max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank >= n {
		return h.Max()
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			lo, w := bucketBounds(i)
			v := int64(lo + (w-1)/2)
			return min(max(v, h.minValue()), h.Max())
		}
	}
	return h.Max()
}

func (h *Histogram) minValue() int64 {
	if h.n.Load() == 0 {
		return 0
	}
	return int64(^h.min.Load())
}

// Merge adds o's counts into h. Safe for concurrent use with Record on h; o
// should be quiescent.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if o.n.Load() > 0 {
		for m := o.Max(); ; {
			cur := h.max.Load()
			if uint64(m) <= cur || h.max.CompareAndSwap(cur, uint64(m)) {
				break
			}
		}
		for m := o.min.Load(); ; {
			cur := h.min.Load()
			if m <= cur || h.min.CompareAndSwap(cur, m) {
				break
			}
		}
	}
}

// Reset clears h. Not safe for concurrent use with Record.
func (h *Histogram) Reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.n.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
	h.min.Store(0)
}

// HistBin is one bin of a coarse histogram view, for reports.
type HistBin struct {
	LoNs  int64  `json:"lo_ns"`
	HiNs  int64  `json:"hi_ns"` // exclusive
	Count uint64 `json:"count"`
}

// Bins returns a coarse view: non-empty bins whose bounds grow by factor
// (e.g. 1.1 for 10 % wide bins), at least 1 µs wide.
func (h *Histogram) Bins(factor float64) []HistBin {
	if factor <= 1 {
		factor = 1.1
	}
	var out []HistBin
	var cur HistBin
	have := false
	for i := range h.counts {
		c := h.counts[i].Load()
		if c == 0 {
			continue
		}
		lo, w := bucketBounds(i)
		if have && int64(lo) < cur.HiNs {
			cur.Count += c
			if hi := int64(lo + w); hi > cur.HiNs {
				cur.HiNs = hi
			}
			continue
		}
		if have {
			out = append(out, cur)
		}
		hi := max(int64(float64(lo)*factor), int64(lo+w), int64(lo)+1000)
		cur = HistBin{LoNs: int64(lo), HiNs: hi, Count: c}
		have = true
	}
	if have {
		out = append(out, cur)
	}
	return out
}
