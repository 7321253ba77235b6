package netio

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/metrics"
)

// Accepting connections. gnet v2.9.7 accepts on its main reactor and treats
// every accept(2) error but EAGAIN, EINTR, ECONNRESET and ECONNABORTED as
// fatal (acceptor_unix.go: ErrAcceptSocket ends the reactor, which shuts
// the whole engine down, every stream included). EMFILE and ENFILE are
// among them, so a burst of connections past the open-file limit would end
// the process's serving, and gnet has no hook in that loop.
//
// So Vajra accepts itself, on one goroutine (acceptLoop) blocked in Go's
// netpoller on its own listening socket, and hands each connection to a
// gnet loop with Engine.Register (gnet dups the descriptor into the loop,
// which then runs OnOpen; Vajra's copy is closed). gnet listens only on a
// private Unix socket whose path is removed as soon as gnet is up (an
// abstract socket with a random name when no temporary directory is
// writable), so its accept path never runs. Draining closes Vajra's listener, and the kernel
// refuses new connections from then on.
//
// Refusals happen in the acceptor, before gnet sees the connection, with a
// canned 503 and a close, each counted:
//   - beyond --max-connections (rejected{reason="max_connections"}), or after
//     Drain (reason "draining");
//   - when accept(2) fails with EMFILE or ENFILE (reason "descriptors"): the
//     acceptor keeps one spare descriptor open, and then closes it, accepts
//     the connection it frees room for, answers and closes that, and opens
//     the spare again: nginx's and libuv's way (uv__emfile_trick), so that a
//     client is told at once rather than left in the accept queue, and the
//     queue drains. Should the spare be lost too, the acceptor backs off
//     (5 ms, doubling up to 1 s) and the kernel queues, then refuses, new
//     connections until descriptors free up;
//   - when gnet cannot take the connection (its dup fails for want of a
//     descriptor): gnet closes it, and it is counted as "descriptors" too.
//
// Other accept errors (ENOBUFS, ENOMEM) back off the same way, as net/http
// does. None of them stops the server.
//
// Cost per connection: Go's accept (with its netpoller registration),
// gnet's dup and hand-off to the loop through its worker pool, and the
// close of Vajra's copy: three goroutine or thread wake-ups where gnet's
// own accept path had one. Measured on a 2-core VM (connect, GET /ping,
// close): p50 115-170 us before, 225-255 us after, at 1 client; 12,000 to
// 12,500 connections/s before, 8,700 to 10,300 after, at 16. Never per
// request or token. A way to keep gnet's accept path until descriptors
// run short and only then switch to this one (swapping gnet's listening
// descriptor for a stand-in with dup3) is left for later.

// gnetSocketSeq numbers the private Unix sockets gnet listens on.
var gnetSocketSeq atomic.Uint64

// enrollQueue bounds the hand-offs to gnet whose outcome is not yet known;
// beyond it the acceptor waits (and the kernel's accept queue holds the
// rest).
const enrollQueue = 1024

// listen binds the public listener (or takes Options.Listener) and names
// gnet's private socket.
func (s *Server) listen() (gnetAddr string, err error) {
	if s.opts.Listener != nil {
		s.ln = s.opts.Listener
	} else {
		// KeepAlive -1: no TCP keep-alive probes (gnet's default and
		// nginx's: idle connections are the idle timeout's business).
		lc := net.ListenConfig{KeepAlive: -1}
		ln, err := lc.Listen(context.Background(), "tcp", s.opts.Addr)
		if err != nil {
			return "", fmt.Errorf("netio: listen: %w", err)
		}
		s.ln = ln.(*net.TCPListener)
	}
	s.addr = s.ln.Addr()
	name := fmt.Sprintf("vajra-gnet-%d-%d.sock", os.Getpid(), gnetSocketSeq.Add(1))
	s.gnetSock = filepath.Join(os.TempDir(), name)
	if len(s.gnetSock) >= 100 || !writableDir(os.TempDir()) {
		// No usable temporary directory: an abstract socket (Linux), which
		// cannot be unlinked but is not in any directory either.
		s.gnetSock = "@" + name + "-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	_ = os.Remove(s.gnetSock)
	return "unix://" + s.gnetSock, nil
}

// writableDir reports whether files can be created in dir.
func writableDir(dir string) bool {
	f, err := os.CreateTemp(dir, "vajra-probe-")
	if err != nil {
		return false
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return true
}

// OnTick runs once gnet's loops are up (gnet starts its ticker after them):
// the acceptor may hand connections over from then on. Called by gnet.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.loopsUpOnce.Do(func() { close(s.loopsUp) })
	return 24 * time.Hour, gnet.None
}

// startAccepting removes gnet's private socket's path (nobody can reach
// gnet's own accept path from then on) and starts the acceptor.
func (s *Server) startAccepting() {
	if s.gnetSock[0] != '@' {
		_ = os.Remove(s.gnetSock)
	}
	s.enrolls = make(chan (<-chan gnet.RegisteredResult), enrollQueue)
	go s.acceptLoop()
	go s.reapEnrolls()
}

// acceptLoop accepts until the listener closes (Drain or Stop).
func (s *Server) acceptLoop() {
	defer close(s.enrolls)
	spare := openSpare()
	defer func() {
		if spare >= 0 {
			_ = unix.Close(spare)
		}
	}()
	var backoff time.Duration
	accept := s.ln.AcceptTCP
	if s.acceptHook != nil {
		accept = s.acceptHook
	}
	for {
		c, err := accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && spare >= 0 {
				_ = unix.Close(spare)
				if c, err := s.ln.AcceptTCP(); err == nil {
					s.refuse(c, s.rejected.descriptors)
				}
				spare = openSpare()
				continue
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; backing off", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-time.After(backoff):
			case <-s.stopped:
				return
			}
			if spare < 0 { // lost to an EMFILE above: open it again
				spare = openSpare()
			}
			continue
		}
		backoff = 0
		if n := s.openConns.Add(1); n > s.maxConns || s.listenerOff.Load() {
			s.openConns.Add(-1)
			if n > s.maxConns {
				s.refuse(c, s.rejected.maxConns)
			} else {
				s.refuse(c, s.rejected.draining)
			}
			continue
		}
		ch, err := s.eng.Register(gnet.NewNetConnContext(context.Background(), c))
		if err != nil { // the engine is stopping
			s.openConns.Add(-1)
			_ = c.Close()
			continue
		}
		// reapEnrolls stops reading once gnet stopped: never block then.
		select {
		case s.enrolls <- ch:
		case <-s.stopped:
			return
		}
	}
}

// reapEnrolls learns the outcome of each hand-off to gnet, in order: a
// connection gnet could not take (gnet closed it) is uncounted and counted
// as refused.
func (s *Server) reapEnrolls() {
	for ch := range s.enrolls {
		select {
		case res, ok := <-ch:
			if !ok || res.Err != nil {
				s.openConns.Add(-1)
				s.rejected.descriptors.Inc()
			}
		case <-s.stopped:
			return
		}
	}
}

// refuse answers a connection the acceptor will not serve with a canned
// 503, closes it, and counts it. The answer is one non-blocking write into
// an empty send buffer: it never waits.
func (s *Server) refuse(c *net.TCPConn, counter *metrics.Counter) {
	counter.Inc()
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Write(func(fd uintptr) bool {
			if n, err := unix.Write(int(fd), busyResponse); err == nil {
				s.bytesWritten.Add(uint64(n))
			}
			return true
		})
	}
	_ = c.Close()
}

// openSpare opens the spare descriptor, or returns -1.
func openSpare() int {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// closeListener stops accepting: the kernel refuses new connections (and
// resets those still in the accept queue). Idempotent.
func (s *Server) closeListener() error {
	if s.ln == nil {
		return errors.New("not started")
	}
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
