package netio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Draining a node: /health answers 503 at once (load balancers stop
// sending), the listener closes (new connections are refused by the
// kernel), new requests on open connections get 503 with Connection:
// close, and a connection closes as soon as its exchange in flight ends.
// The caller then waits (WaitIdle) for the exchanges in flight, up to its
// shutdown timeout, and ends the rest through the engine (see vajra.Server.
// Shutdown).
//
// Closing only the listener: gnet v2.9.7 has no API for it (Engine.Stop
// closes everything), and the obvious trick, shutdown(2) on a dup of the
// listener (Engine.Dup), does stop the kernel from queueing connections but
// wakes gnet's main reactor, whose accept(2) then fails with EINVAL; gnet
// treats every accept error but EAGAIN/EINTR/ECONNRESET/ECONNABORTED as
// fatal (acceptor_unix.go: ErrAcceptSocket ends the reactor, which shuts
// the engine down and closes every connection, streams included). So
// Vajra replaces the listening socket under gnet instead: it finds gnet's
// descriptor of the listener (the one in /proc/self/fd that is the same
// socket as Engine.Dup's), dup3(2)s a fresh, non-blocking, unconnected
// listening socket on 127.0.0.1 (port 0) over it, and closes its own dup.
// The original socket loses its last reference: the kernel closes it
// (connections to the port are refused from then on, those in its accept
// queue are reset) and drops it from gnet's epoll set. If gnet's reactor
// was about to accept, it accepts on the stand-in and gets EAGAIN, which
// it handles. gnet closes the stand-in at Stop.
//
// Should that fail (no /proc, or the descriptor cannot be found), the
// fallback is the one gnet's API allows: the listener stays open and
// OnOpen answers every new connection with 503 and closes it.

// Drain starts draining: see above. Safe for concurrent use; idempotent.
func (s *Server) Drain() {
	if s.draining.Swap(true) {
		return
	}
	if err := s.closeListener(); err != nil {
		s.log.Warn("drain: the listener stays open; new connections are answered 503 and closed", zap.Error(err))
	}
	s.listenerOff.Store(true)
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

// closeListener swaps gnet's listening socket for a stand-in (see above).
func (s *Server) closeListener() error {
	if s.addr == nil {
		return errors.New("not started")
	}
	dup, err := s.eng.Dup()
	if err != nil {
		return fmt.Errorf("dup: %w", err)
	}
	defer unix.Close(dup)
	var want unix.Stat_t
	if err := unix.Fstat(dup, &want); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	target := -1
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd == dup {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			continue
		}
		if target >= 0 {
			return errors.New("the listener has more than one descriptor")
		}
		target = fd
	}
	if target < 0 {
		return errors.New("the listener's descriptor was not found")
	}
	standIn, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("stand-in socket: %w", err)
	}
	defer unix.Close(standIn)
	if err := unix.Bind(standIn, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("stand-in bind: %w", err)
	}
	if err := unix.Listen(standIn, 1); err != nil {
		return fmt.Errorf("stand-in listen: %w", err)
	}
	if err := unix.Dup3(standIn, target, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("dup3: %w", err)
	}
	return nil // the deferred close of dup drops the listener's last reference
}
