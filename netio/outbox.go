package netio

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
)

// The outbox is how bytes produced off the event loop reach a socket.
//
// Only a connection's event loop writes to its socket. A session (on some
// other goroutine) appends its bytes to the connection's pending buffer under
// the connection's own lock, then puts the connection on its loop's ready
// list (once: a flag says it is already there) and rings the loop's doorbell
// (once: a flag says it already rang). The loop, woken, takes the whole
// ready list and writes each connection's pending bytes with one write each.
// However many sessions produce in one engine step, each connection gets one
// write(2) per wake, and a loop wakes once per step when the loop and the
// sessions take turns on one P. With the spare P (internal/spareproc) on
// one core, the OS alternates the loop's thread and the sessions': a
// session's stream frames therefore leave the ring to its mailbox worker
// (SendDeferred), which rings each loop once per batch of sessions
// (vajra_event_loop_wakes_total; bench/RESULTS.md).
//
// Nothing here allocates in steady state: the ready list is intrusive, the
// pending buffers are swapped, not reallocated, and the doorbell is a byte
// written to a socket pair whose other end is a connection of the loop
// itself (see doorbell). gnet's own way to run code on a loop, Execute,
// costs a closure and a queue node per call; it is used only until the
// loop's doorbell is installed.

// loop is Vajra's state for one gnet event loop.
type loop struct {
	el   gnet.EventLoop
	srv  *Server
	head atomic.Pointer[conn] // ready list: a lock-free stack, taken whole
	rung atomic.Bool          // doorbell rung and not yet answered
	// bell is the writer end of the loop's doorbell socket pair, -1 until
	// the loop has enrolled the reader end.
	bell atomic.Int32
	// wakes counts doorbell rings answered, for tests and metrics.
	wakes atomic.Uint64
	// busy counts the loop's connections with an exchange in flight, so
	// that the sweeper wakes a loop at the keep-alive sweep's pace only
	// when it has streams to keep alive (timeouts.go).
	busy atomic.Int32
	// The nudge timer (nudge.go), loop-only: its timerfd (-1 until
	// enrolled), when it was last armed (monoNow; 0: disarmed), and
	// whether a P was spare when GOMAXPROCS was last read, at spareAt.
	timer   int
	armedAt int64
	spare   bool
	spareAt int64

	// parsers is the loop's free list of request parsers (loop-only).
	parsers []*httpparse.Parser

	// Timeouts (timeouts.go). conns lists the loop's connections and now is
	// the loop's clock, set at each sweep (loop-only); sweepDue asks the
	// next Run to sweep.
	conns    *conn
	now      time.Time
	sweepDue atomic.Bool
	// drainDue asks the next Run to send the loop's WebSocket connections
	// a 1001 close (drain.go).
	drainDue atomic.Bool

	// batch, when set, sends the ready connections' bytes with one
	// io_uring submit per wake (sendbatch.go); nil: write(2) each.
	// ringSubmits and ringSends count its submits and sends (metrics).
	batch                  *sendBatch
	ringSubmits, ringSends atomic.Uint64

	// Back-pressure (backpressure.go): the loop's epoll descriptor (-1:
	// unknown, nothing pauses) and the most input a busy connection held.
	epfd          int
	peakPipelined atomic.Int64
}

// maxFreeParsers bounds each loop's free list: enough for the connections
// that parse at the same moment, so a burst does not pin memory after it.
const maxFreeParsers = 64

// takeParser returns a parser from the loop's free list, or a new one.
// Loop-only.
func (l *loop) takeParser(lim httpparse.Limits) *httpparse.Parser {
	if n := len(l.parsers); n > 0 {
		p := l.parsers[n-1]
		l.parsers[n-1] = nil
		l.parsers = l.parsers[:n-1]
		return p
	}
	return httpparse.NewParser(lim)
}

// putParser resets p and keeps it for reuse. Loop-only.
func (l *loop) putParser(p *httpparse.Parser) {
	if len(l.parsers) < maxFreeParsers {
		p.Reset()
		l.parsers = append(l.parsers, p)
	}
}

// ready puts c on the loop's ready list unless it is already there, and rings
// the doorbell if nobody has. Safe for concurrent use.
func (l *loop) ready(c *conn) {
	if l.enqueue(c) {
		l.wake()
	}
}

// enqueue puts c on the loop's ready list unless it is already there, and
// reports whether it did: the caller then owes the loop a wake (the one
// who queued it before rang, or will). Safe for concurrent use.
func (l *loop) enqueue(c *conn) bool {
	if !c.queued.CompareAndSwap(false, true) {
		return false
	}
	for {
		old := l.head.Load()
		c.nextReady = old
		if l.head.CompareAndSwap(old, c) {
			return true
		}
	}
}

// Wake implements actors.Waker: a session's worker wakes the loop once
// for the frames its sessions queued (exchange.SendDeferred).
func (l *loop) Wake() { l.wake() }

// wake rings the loop's doorbell unless it is rung and not yet answered.
// Safe for concurrent use.
func (l *loop) wake() {
	if l.rung.CompareAndSwap(false, true) {
		l.ring()
	}
}

// ring wakes the loop: a byte on the doorbell, or gnet's Execute before the
// doorbell is in place.
func (l *loop) ring() {
	if fd := l.bell.Load(); fd >= 0 {
		_, err := unix.Write(int(fd), bellByte[:])
		if err == nil || err == unix.EAGAIN {
			// EAGAIN: the pair is full of unread rings; the loop wakes anyway.
			return
		}
	}
	if err := l.el.Execute(context.Background(), l); err != nil {
		// The engine is shutting down: nobody will write these bytes.
		l.rung.Store(false)
	}
}

var bellByte = [1]byte{1}

// doorbell is the gnet context of a loop's doorbell connection: the reader
// end of a socket pair enrolled in that loop. A byte written to the other
// end wakes the loop in OnTraffic, which answers it (Run).
type doorbell struct {
	l    *loop
	peer int // writer end
}

// installDoorbell creates l's doorbell. It blocks until gnet enrolled the
// reader end (which needs the loop to run), so it runs on its own goroutine.
func (s *Server) installDoorbell(l *loop) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.log.Warn("doorbell: socketpair", zap.Error(err))
		return
	}
	_ = unix.SetNonblock(fds[1], true)
	f := os.NewFile(uintptr(fds[0]), "vajra-doorbell")
	nc, err := net.FileConn(f) // dups the fd; gnet dups it again and closes nc
	_ = f.Close()
	if err != nil {
		_ = unix.Close(fds[1])
		s.log.Warn("doorbell: conn", zap.Error(err))
		return
	}
	d := &doorbell{l: l, peer: fds[1]}
	ch, err := l.el.Enroll(gnet.NewContext(context.Background(), d), nc)
	if err == nil {
		if res := <-ch; res.Err != nil {
			err = res.Err
		}
	}
	if err != nil {
		_ = unix.Close(fds[1])
		s.log.Warn("doorbell: enroll", zap.Error(err))
		return
	}
	s.bellMu.Lock()
	s.bells = append(s.bells, fds[1])
	s.bellMu.Unlock()
}

// doorbellOpened arms the doorbell once gnet opened its connection.
// Loop-only.
func (d *doorbell) opened() { d.l.bell.Store(int32(d.peer)) }

// answer drains the rings and answers them. Loop-only.
func (d *doorbell) answer(gc gnet.Conn) {
	_, _ = gc.Next(-1)
	_ = d.l.Run(context.Background())
}

// closed disarms the doorbell (the engine is stopping). Loop-only.
func (d *doorbell) closed() { d.l.bell.Store(-1) }

// closeBells closes the writer ends of the doorbells and the nudge
// timers (nudge.go). Call only after the gnet engine stopped and no
// session can ring any more.
func (s *Server) closeBells() {
	s.bellMu.Lock()
	defer s.bellMu.Unlock()
	for _, fd := range append(s.bells, s.timers...) {
		_ = unix.Close(fd)
	}
	s.bells, s.timers = nil, nil
}

// Run answers the doorbell on the event loop: it writes every ready
// connection's pending bytes. Loop-only (gnet calls it there).
func (l *loop) Run(context.Context) error {
	l.wakes.Add(1)
	l.keepAwake()
	if l.sweepDue.Load() && l.sweepDue.Swap(false) {
		l.sweep(time.Now())
	}
	if l.drainDue.Load() && l.drainDue.Swap(false) {
		l.goAway()
	}
	// Clear the bell before taking the list: a producer that queues after
	// the take finds the bell clear and rings again.
	l.rung.Store(false)
	// The list is a stack: reverse it so connections are written in the
	// order their bytes were queued. Within an engine step that order is the
	// engine's order of sessions, the same every step, so a stream's place
	// in the step (and so its inter-token gap) does not jitter when a step's
	// batch reaches the loop in several wakes.
	var c *conn
	for n := l.head.Swap(nil); n != nil; {
		next := n.nextReady
		n.nextReady = c
		c, n = n, next
	}
	for c != nil {
		next := c.nextReady
		c.nextReady = nil
		c.queued.Store(false)
		if b := l.batch; b != nil {
			b.add(c) // written at the batch's flush, below or when it fills
		} else {
			c.flushOutbox()
			c.resumeWS()
		}
		c = next
	}
	if b := l.batch; b != nil {
		b.flush()
	}
	return nil
}

// outbox is the part of a connection that producers touch, guarded by mu.
type outbox struct {
	mu      sync.Mutex
	pending []byte
	// seq is the number of the exchange that may append; calls from any
	// other (finished) exchange are dropped.
	seq uint64
	// end is set by the exchange that finished, for the loop to act on
	// after it wrote pending.
	end endKind
	// wsClosing is set when a WebSocket close frame is queued: every frame
	// after it is dropped (RFC 6455 §5.5.1).
	wsClosing bool
	// closed is set on the loop when the connection closed.
	closed bool
	// keepalive is the keep-alive frame of the exchange's stream
	// (keepalive.go) from its head to its end; nil when no stream is open.
	keepalive []byte
}

type endKind uint8

const (
	endNone    endKind = iota
	endKeep            // response complete; serve the next request
	endClose           // response complete; close after flushing
	endAbandon         // no clean end possible; close after flushing
	endWSClose         // a WebSocket close frame was queued (ws_conn.go)
)

// exchange is one request/response on a connection, as seen by a session.
// It implements actors.Conn. Every method is safe for concurrent use.
type exchange struct {
	c   *conn
	seq uint64
	// Fixed at creation, read-only afterwards.
	minor     int
	keepAlive bool
	chunked   bool
	requestID string
	dialect   dialect // the route's: which keep-alive its stream takes
}

// lock locks the outbox and returns it if this exchange may still write;
// otherwise it returns nil, unlocked. A caller that got the outbox appends
// to its pending buffer and calls unlock. The pair is written out as two
// plain calls, not one taking a closure: Send runs once per frame batch and
// must not allocate (BenchmarkStreamedToken guards it).
func (x *exchange) lock() *outbox {
	o := &x.c.out
	o.mu.Lock()
	if o.closed || o.seq != x.seq {
		o.mu.Unlock()
		return nil
	}
	return o
}

// unlock releases o, which lock returned, and queues the connection for its
// loop. end, if set, finishes the exchange: later calls of it are dropped.
func (x *exchange) unlock(o *outbox, end endKind) {
	if end != endNone {
		o.end = end
		o.seq++
		o.keepalive = nil
	}
	o.mu.Unlock()
	x.c.loop.ready(x.c)
}

// Send implements actors.Conn.
func (x *exchange) Send(p []byte) {
	if o := x.lock(); o != nil {
		o.pending = append(o.pending, p...)
		x.unlock(o, endNone)
	}
}

// SendDeferred implements actors.DeferredSender: Send, with the loop's
// wake returned to the caller (nil when none is owed) instead of rung.
func (x *exchange) SendDeferred(p []byte) actors.Waker {
	o := x.lock()
	if o == nil {
		return nil
	}
	o.pending = append(o.pending, p...)
	o.mu.Unlock()
	if l := x.c.loop; l.enqueue(x.c) {
		return l
	}
	return nil
}

// Respond implements actors.Conn.
func (x *exchange) Respond(status int, contentType string, headers, body []byte) {
	end := endKeep
	if !x.keepAlive {
		end = endClose
	}
	if o := x.lock(); o != nil {
		o.pending = appendResponse(o.pending, x.minor, status, contentType, x.requestID, headers, body, !x.keepAlive)
		x.unlock(o, end)
	}
}

// StartStream implements actors.Conn.
func (x *exchange) StartStream(contentType string, headers []byte) bool {
	if o := x.lock(); o != nil {
		o.pending = appendStreamHead(o.pending, x.minor, contentType, x.requestID, headers, x.chunked, !x.keepAlive || !x.chunked)
		o.keepalive = keepaliveFrame(x.dialect, x.chunked)
		x.unlock(o, endNone)
	}
	return x.chunked
}

// EndStream implements actors.Conn: last and the end in one step.
func (x *exchange) EndStream(last []byte) {
	end := endKeep
	if !x.keepAlive || !x.chunked {
		end = endClose
	}
	if o := x.lock(); o != nil {
		o.pending = append(o.pending, last...)
		x.unlock(o, end)
	}
}

// Abandon implements actors.Conn.
func (x *exchange) Abandon() {
	if o := x.lock(); o != nil {
		x.unlock(o, endAbandon)
	}
}
