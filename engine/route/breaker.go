package route

import (
	"sync"
	"time"
)

// BreakerState is a circuit breaker's state.
type BreakerState uint8

const (
	// Closed: the worker takes requests.
	Closed BreakerState = iota
	// Open: the worker takes none until the cool-down has passed.
	Open
	// HalfOpen: the cool-down has passed; a few trial requests go to the
	// worker, and the first outcome closes or reopens the circuit.
	HalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "closed"
}

// BreakerConfig configures each worker's circuit breaker.
type BreakerConfig struct {
	// Failures is the number of consecutive failed requests that open
	// the circuit (0: no breaker).
	Failures int
	// CoolDown is how long the circuit stays open before trial requests.
	CoolDown time.Duration
	// Probes is how many trial requests may run at once while half open
	// (0: 1).
	Probes int
}

// breaker is one worker's circuit breaker. Safe for concurrent use: a
// mutex held for a few instructions per request (never per token).
type breaker struct {
	cfg BreakerConfig

	mu       sync.Mutex
	state    BreakerState
	fails    int   // consecutive failures
	openedAt int64 // ns
	probing  int   // trial requests in flight while half open
	opens    uint64
}

// available says whether a request may go to the worker at now, without
// taking a trial slot (see acquire).
func (b *breaker) available(now int64) bool {
	if b.cfg.Failures <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		return now-b.openedAt >= int64(b.cfg.CoolDown)
	case HalfOpen:
		return b.probing < max(b.cfg.Probes, 1)
	}
	return true
}

// acquire is called for the worker a request goes to: past the cool-down
// the circuit turns half open and the request is a trial (the next
// outcome decides). It reports whether the request is a trial.
func (b *breaker) acquire(now int64) bool {
	if b.cfg.Failures <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && now-b.openedAt >= int64(b.cfg.CoolDown) {
		b.state, b.probing = HalfOpen, 0
	}
	if b.state == HalfOpen {
		b.probing++
		return true
	}
	return false
}

// record takes a request's outcome: ok resets the failure count and
// closes a half-open circuit; a failure counts, and opens the circuit at
// the threshold or when half open. A canceled request (the client left)
// only frees its trial slot.
func (b *breaker) record(now int64, ok, canceled bool) {
	if b.cfg.Failures <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	half := b.state == HalfOpen
	if half && b.probing > 0 {
		b.probing--
	}
	switch {
	case canceled:
	case ok:
		b.fails = 0
		if half {
			b.state = Closed
		}
	default:
		b.fails++
		if half || b.state == Closed && b.fails >= b.cfg.Failures {
			b.state, b.openedAt = Open, now
			b.opens++
		}
	}
}

// State is the breaker's state at now (Open turns HalfOpen only on the
// next request; State reports it as HalfOpen once the cool-down passed).
func (b *breaker) State(now int64) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && now-b.openedAt >= int64(b.cfg.CoolDown) {
		return HalfOpen
	}
	return b.state
}
