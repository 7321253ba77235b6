package netio

import (
	"os"
	"reflect"
	"strconv"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Back-pressure on inbound bytes. While an exchange is in flight the
// connection parses nothing more (responses stay in order), and gnet keeps
// reading: every readable event appends up to its read buffer (64 KiB) to
// the connection's inbound buffer, so a client pipelining behind a long
// stream could make the server hold its whole input (up to the old hard
// limit, header plus body limits, ~32 MiB). So a busy connection that holds
// more than MaxPipelinedBytes of input stops being read: its descriptor is
// taken out of the loop's epoll read set, the kernel's receive buffer fills,
// TCP flow control stops the client, and the bytes wait on the client's
// side. Reading resumes when the exchange ends and the buffered requests
// have been served down to the bound (or the connection is idle). A
// connection therefore holds at most the request it is reading (up to the
// parser's header and body limits) or, while busy, MaxPipelinedBytes plus
// one read.
//
// gnet has no pause API. Its event loop polls with level-triggered epoll
// and sets a connection's events itself with EPOLL_CTL_MOD: EPOLLIN (and
// EPOLLPRI), plus EPOLLOUT while its outbound buffer is not empty
// (netpoll.ReadEvents, ModRead and ModReadWrite in gnet v2.9.7). Vajra makes
// the same call on the same epoll descriptor, found once per loop (epollOf),
// with EPOLLRDHUP instead of EPOLLIN while paused, so that a client that
// leaves (FIN; errors and RST are always reported) still closes the
// connection and aborts its session at once. (A client's FIN travels behind
// the bytes it sent, so one queued behind input the paused server has not
// taken is seen when reading resumes; a client that leaves a stream with
// response bytes unread resets the connection, which is seen at once.) When gnet re-arms EPOLLIN on
// its own (its write path does, when the outbound buffer drains or starts
// filling), the next read reaches OnTraffic, which pauses again: each
// re-arm costs at most one more read. The hard limit (maxBuffered) stays as
// the last resort. Should the epoll descriptor not be found (another gnet
// version), nothing pauses and the hard limit alone applies.

// DefaultMaxPipelinedBytes is how much pipelined input a busy connection
// may hold before it is no longer read: room for a few hundred typical
// request heads or a few chat requests, so a pipelining client loses no
// round trip, while ten thousand connections that write ahead hold at most
// ~1.3 GiB together (64 KiB plus one 64 KiB read each) instead of ~32 MiB
// each. Override with Options.MaxPipelinedBytes.
const DefaultMaxPipelinedBytes = 64 << 10

// Epoll event sets of a connection, as gnet v2.9.7 sets them
// (netpoll.ReadEvents) and while paused.
const (
	readingEvents = unix.EPOLLIN | unix.EPOLLPRI
	pausedEvents  = unix.EPOLLRDHUP
)

// epollOf returns the epoll descriptor of a gnet event loop, or -1: gnet
// v2.9.7's eventloop holds it as poller.fd. The descriptor is checked to be
// an epoll instance, so a change of gnet's layout turns pausing off instead
// of touching a wrong descriptor. Called once per loop.
func epollOf(el gnet.EventLoop) int {
	v := reflect.ValueOf(el)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return -1
	}
	p := v.Elem().FieldByName("poller")
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return -1
	}
	f := p.Elem().FieldByName("fd")
	if f.Kind() != reflect.Int {
		return -1
	}
	fd := int(f.Int())
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || link != "anon_inode:[eventpoll]" {
		return -1
	}
	return fd
}

// backpressure pauses or resumes reading c after its input or its state
// changed: a busy connection holding more than the bound is paused (again,
// if gnet re-armed it), any other paused one resumes. Loop-only.
func (c *conn) backpressure() {
	held := c.gc.InboundBuffered()
	if !c.busy || held <= c.srv.maxPipelined {
		if c.paused {
			c.setReading(true)
		}
		return
	}
	c.loop.notePipelined(held)
	c.setReading(false)
}

// repause re-applies a pause after a write: gnet's write path sets
// EPOLLIN|EPOLLOUT when its outbound buffer starts filling. Loop-only.
func (c *conn) repause(outBefore int) {
	if c.paused && outBefore == 0 && c.gc.OutboundBuffered() > 0 {
		c.setReading(false)
	}
}

// setReading puts c's descriptor in or out of its loop's epoll read set,
// keeping EPOLLOUT as gnet wants it (set while output waits). Loop-only.
func (c *conn) setReading(on bool) {
	ep := c.loop.epfd
	if ep < 0 || c.closed {
		// Closed: gnet closed the descriptor, whose number may already
		// be another connection's.
		return
	}
	var ev uint32 = pausedEvents
	if on {
		ev = readingEvents
	}
	if c.gc.OutboundBuffered() > 0 {
		ev |= unix.EPOLLOUT
	}
	fd := c.gc.Fd()
	if unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)}) != nil {
		return
	}
	if !on && !c.paused {
		c.srv.readPauses.Add(1)
	}
	c.paused = !on
}

// notePipelined records the most input a busy connection of the loop held
// when it was paused. Loop-only (the loop is the only writer).
func (l *loop) notePipelined(held int) {
	if int64(held) > l.peakPipelined.Load() {
		l.peakPipelined.Store(int64(held))
	}
}

// ReadPauses is how many times a busy connection stopped being read because
// it held more than MaxPipelinedBytes of pipelined input. Safe for
// concurrent use.
func (s *Server) ReadPauses() uint64 { return s.readPauses.Load() }

// PeakPipelinedBytes is the most pipelined input any busy connection held
// when it was paused: at most MaxPipelinedBytes plus one read (64 KiB).
// Safe for concurrent use.
func (s *Server) PeakPipelinedBytes() int64 {
	var peak int64
	s.loops.Range(func(_, v any) bool {
		peak = max(peak, v.(*loop).peakPipelined.Load())
		return true
	})
	return peak
}
