package actors

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// The API-drift detector: request fields no dialect knows are accepted (as
// vLLM does) and counted per (endpoint, field). The first sighting of each
// pair is logged once at warn level, so a new SDK parameter shows up in the
// log the day clients start sending it.

// maxUnknownPairs bounds the distinct (endpoint, field) pairs tracked, so a
// client inventing field names cannot grow the table without end. Later
// pairs are counted under the field "(other)".
const maxUnknownPairs = 1024

type unknownKey struct {
	ep    Endpoint
	field string
}

type unknownFields struct {
	mu     sync.Mutex // taken only when a pair is first seen
	counts sync.Map   // unknownKey → *atomic.Uint64
	n      int
}

func (s *Sessions) reportUnknown(ep Endpoint, fields []string) {
	for _, f := range fields {
		s.unknown.count(s.log, ep, f)
	}
}

func (u *unknownFields) count(log *zap.Logger, ep Endpoint, field string) {
	k := unknownKey{ep, field}
	if c, ok := u.counts.Load(k); ok {
		c.(*atomic.Uint64).Add(1)
		return
	}
	u.mu.Lock()
	if u.n >= maxUnknownPairs {
		k.field = "(other)"
	}
	c, loaded := u.counts.LoadOrStore(k, new(atomic.Uint64))
	if !loaded {
		u.n++
		log.Warn("unknown request field", zap.Stringer("endpoint", ep), zap.String("field", k.field))
	}
	u.mu.Unlock()
	c.(*atomic.Uint64).Add(1)
}

// UnknownFields calls fn for every (endpoint, field) pair seen, with its count.
func (s *Sessions) UnknownFields(fn func(endpoint, field string, n uint64)) {
	s.unknown.counts.Range(func(k, v any) bool {
		key := k.(unknownKey)
		fn(key.ep.String(), key.field, v.(*atomic.Uint64).Load())
		return true
	})
}
