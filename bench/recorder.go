package bench

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// clock gives monotonic nanoseconds since the run's epoch.
type clock struct{ epoch time.Time }

func (c *clock) now() int64 { return int64(time.Since(c.epoch)) }

// Error kinds, in report order.
var errorKinds = []error{ErrDial, ErrStatus, ErrInStream, ErrTruncated, ErrTimeout, ErrProtocol}

func errorKindName(err error) string {
	switch {
	case errors.Is(err, ErrDial):
		return "dial"
	case errors.Is(err, ErrStatus):
		return "status"
	case errors.Is(err, ErrInStream):
		return "in_stream"
	case errors.Is(err, ErrTruncated):
		return "truncated"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrProtocol):
		return "protocol"
	}
	return "other"
}

// maxErrorSamples bounds the error messages kept for the report.
const maxErrorSamples = 8

// maxTimelineBins bounds the throughput timeline's memory (160 KiB).
const maxTimelineBins = 20_000

// recorder gathers the measurements of one run. Safe for concurrent use by
// all stream goroutines: every hot-path update is an atomic add.
//
// The measured window is [warmEnd, stopAt). Gaps and tokens count when they
// arrive inside it; a request's head time, TTFT and end-to-end time count
// when the request started inside it (a measured request).
type recorder struct {
	warmEnd int64
	stopAt  atomic.Int64 // math.MaxInt64 until known

	ttft, gapH, e2e, head Histogram

	tokensAll, tokensWin, bytesAll atomic.Int64
	measuredTokens, usageTokens    atomic.Int64
	okReqs, okReqsWin, warmReqs    atomic.Int64
	warmErrs, dropped, aborted     atomic.Int64
	errs                           [7]atomic.Int64 // by errorKinds index; last is "other"
	lastDone                       atomic.Int64    // end of the latest measured request
	active                         atomic.Int64

	binW     int64
	binTok   []atomic.Int64
	binReq   []atomic.Int64
	binErr   []atomic.Int64
	mu       sync.Mutex
	samples  []string
	firstErr error
}

func newRecorder(warmEnd, stopAt int64, maxTime time.Duration) *recorder {
	r := &recorder{warmEnd: warmEnd}
	r.stopAt.Store(stopAt)
	r.binW = int64(250 * time.Millisecond)
	for int64(maxTime)/r.binW > maxTimelineBins {
		r.binW *= 2
	}
	n := int(int64(maxTime)/r.binW) + 2
	r.binTok = make([]atomic.Int64, n)
	r.binReq = make([]atomic.Int64, n)
	r.binErr = make([]atomic.Int64, n)
	return r
}

func (r *recorder) inWindow(now int64) bool { return now >= r.warmEnd && now < r.stopAt.Load() }

func (r *recorder) bin(now int64) int {
	i := now / r.binW
	if i < 0 || i >= int64(len(r.binTok)) {
		return -1
	}
	return int(i)
}

// token counts one token arriving at now.
func (r *recorder) token(now int64) { r.tokens(now, 1) }

func (r *recorder) tokens(now int64, n int) {
	r.tokensAll.Add(int64(n))
	if r.inWindow(now) {
		r.tokensWin.Add(int64(n))
	}
	if i := r.bin(now); i >= 0 {
		r.binTok[i].Add(int64(n))
	}
}

// gap records the gap g between two tokens, the later arriving at now.
func (r *recorder) gap(now, g int64) {
	if r.inWindow(now) {
		r.gapH.Record(g)
	}
}

func (r *recorder) bytes(n int) { r.bytesAll.Add(int64(n)) }

// finish records one completed request.
func (r *recorder) finish(s *stream, err error) {
	now := s.end
	if now == 0 {
		now = s.clk.now()
	}
	if i := r.bin(now); i >= 0 {
		if err != nil {
			r.binErr[i].Add(1)
		} else {
			r.binReq[i].Add(1)
		}
	}
	if err == nil && r.inWindow(now) {
		// Throughput counts every completion inside the window, whichever
		// phase the request started in, as it counts every token.
		r.okReqsWin.Add(1)
	}
	if !s.measured {
		if err != nil {
			r.warmErrs.Add(1)
		} else {
			r.warmReqs.Add(1)
		}
		return
	}
	for {
		l := r.lastDone.Load()
		if now <= l || r.lastDone.CompareAndSwap(l, now) {
			break
		}
	}
	if err != nil {
		k := len(errorKinds)
		for i, e := range errorKinds {
			if errors.Is(err, e) {
				k = i
				break
			}
		}
		r.errs[k].Add(1)
		r.mu.Lock()
		if len(r.samples) < maxErrorSamples {
			r.samples = append(r.samples, err.Error())
		}
		r.mu.Unlock()
		return
	}
	r.okReqs.Add(1)
	r.measuredTokens.Add(int64(s.tokens))
	if s.usage > 0 {
		r.usageTokens.Add(int64(s.usage))
	}
	if s.head > 0 {
		r.head.Record(s.head - s.start)
	}
	if s.tokens > 0 && s.first > 0 {
		r.ttft.Record(s.first - s.start)
	}
	r.e2e.Record(now - s.start)
}

func (r *recorder) errCount() int64 {
	var n int64
	for i := range r.errs {
		n += r.errs[i].Load()
	}
	return n
}

const noStop = math.MaxInt64
