package netio

import (
	"context"

	"go.uber.org/zap"
)

// Draining a node: /health answers 503 at once (load balancers stop
// sending), the listener closes (new connections are refused by the
// kernel; Vajra owns it, see accept.go), new requests on open connections
// get 503 with Connection: close, and a connection closes as soon as its
// exchange in flight ends. The caller then waits (WaitIdle) for the
// exchanges in flight, up to its shutdown timeout, and ends the rest
// through the engine (see vajra.Server.Shutdown). A connection accepted
// just before the listener closed is answered 503 and closed.
//
// A WebSocket connection is an exchange in flight for as long as it is
// open; Drain sends each a close frame 1001 ("going away") through its
// loop, and the connection closes when the client answers it (or after
// the close wait, ws_conn.go), which ends its session. Its session's own
// engine work is not waited for separately: a drain's deadline ends it
// as it ends any stream.

// Drain starts draining: see above. Safe for concurrent use; idempotent.
func (s *Server) Drain() {
	if s.draining.Swap(true) {
		return
	}
	s.listenerOff.Store(true)
	if err := s.closeListener(); err != nil {
		s.log.Warn("drain: closing the listener", zap.Error(err))
	}
	s.loops.Range(func(_, v any) bool {
		l := v.(*loop)
		l.drainDue.Store(true)
		l.wake()
		return true
	})
	if s.inflight.Load() == 0 {
		s.signalIdle()
	}
}

// signalIdle tells WaitIdle that inflight reached zero. idle holds one
// signal, so a drop to zero is never missed; WaitIdle re-checks the count.
func (s *Server) signalIdle() {
	select {
	case s.idle <- struct{}{}:
	default:
	}
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// WaitIdle blocks until no exchange is in flight (every response ended
// and was handed to the socket) or ctx ends. Meant for after Drain.
// Safe for concurrent use.
func (s *Server) WaitIdle(ctx context.Context) error {
	for s.inflight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// InFlight is the number of exchanges in flight (sessions, parked
// requests, off-loop answers). Safe for concurrent use.
func (s *Server) InFlight() int64 { return s.inflight.Load() }
