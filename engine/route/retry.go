package route

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// RetryConfig bounds the retries of requests refused before their first
// byte.
type RetryConfig struct {
	// Max is the number of retries of one request.
	Max int
	// Backoff is the wait before the first retry, doubling for each
	// next one up to MaxBackoff; each wait is drawn at random from its
	// upper half (jitter), so refused requests do not come back in step.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Ratio is the retry budget: retries may add at most this fraction
	// of the requests to the load (0.2: one retry per five requests),
	// plus MinPerSecond, so that a failing fleet is not hit by a storm
	// of retries. A retry beyond the budget is not made.
	Ratio        float64
	MinPerSecond int
}

// budget is a token bucket in milli-retries: each request deposits
// Ratio, time deposits MinPerSecond per second, a retry takes one. The
// bucket holds at most cap. Deposits are one atomic add (per request);
// retries take a mutex.
type budget struct {
	perReq int64 // milli-tokens per request
	perSec int64 // milli-tokens per second
	cap    int64
	tokens atomic.Int64

	mu   sync.Mutex
	last int64 // ns of the last time refill
}

func newBudget(c RetryConfig, now int64) *budget {
	b := &budget{perReq: int64(c.Ratio * 1000), perSec: int64(c.MinPerSecond) * 1000, last: now}
	b.cap = max(b.perSec, 10_000) + b.perReq*100
	b.tokens.Store(b.perSec)
	return b
}

func (b *budget) deposit() {
	if b.perReq > 0 && b.tokens.Load() < b.cap {
		b.tokens.Add(b.perReq)
	}
}

// take withdraws one retry, or reports the budget spent.
func (b *budget) take(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := now - b.last; d > 0 && b.perSec > 0 {
		add := b.perSec * d / int64(time.Second)
		if add > 0 {
			b.last = now
			b.tokens.Add(add)
		}
	} else if b.perSec == 0 {
		b.last = now
	}
	if t := b.tokens.Load(); t > b.cap {
		b.tokens.Store(b.cap)
	}
	if b.tokens.Load() < 1000 {
		return false
	}
	b.tokens.Add(-1000)
	return true
}

// backoff is the jittered wait before retry attempt (from 1).
func backoff(c RetryConfig, attempt int) time.Duration {
	if c.Backoff <= 0 {
		return 0
	}
	d := c.Backoff
	for i := 1; i < attempt && d < c.MaxBackoff; i++ {
		d *= 2
	}
	if c.MaxBackoff > 0 && d > c.MaxBackoff {
		d = c.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}
