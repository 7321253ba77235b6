package netio

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// The outbox is how bytes produced off the event loop reach a socket.
//
// Only a connection's event loop writes to its socket. A session (on some
// other goroutine) appends its bytes to the connection's pending buffer under
// the connection's own lock, then puts the connection on its loop's ready
// list (once: a flag says it is already there) and rings the loop's doorbell
// (once: a flag says it already rang). The loop, woken, takes the whole
// ready list and writes each connection's pending bytes with one write each.
// However many sessions produce in one engine step, each loop wakes once and
// each connection gets one write(2) per wake.
//
// Nothing here allocates in steady state: the ready list is intrusive, the
// pending buffers are swapped, not reallocated. Ringing the doorbell costs
// gnet's Execute (a task and a closure), once per loop per wake, not per
// token.

// loop is Vajra's state for one gnet event loop.
type loop struct {
	el   gnet.EventLoop
	srv  *Server
	head atomic.Pointer[conn] // ready list: a lock-free stack, taken whole
	rung atomic.Bool          // doorbell rung and not yet answered
	// wakes counts doorbell rings answered, for tests and metrics.
	wakes atomic.Uint64
}

// ready puts c on the loop's ready list unless it is already there, and rings
// the doorbell if nobody has. Safe for concurrent use.
func (l *loop) ready(c *conn) {
	if !c.queued.CompareAndSwap(false, true) {
		return
	}
	for {
		old := l.head.Load()
		c.nextReady = old
		if l.head.CompareAndSwap(old, c) {
			break
		}
	}
	if l.rung.CompareAndSwap(false, true) {
		if err := l.el.Execute(context.Background(), l); err != nil {
			// The engine is shutting down: nobody will write these bytes.
			l.rung.Store(false)
		}
	}
}

// Run answers the doorbell on the event loop: it writes every ready
// connection's pending bytes. Loop-only (gnet calls it there).
func (l *loop) Run(context.Context) error {
	l.wakes.Add(1)
	// Clear the bell before taking the list: a producer that queues after
	// the take finds the bell clear and rings again.
	l.rung.Store(false)
	c := l.head.Swap(nil)
	for c != nil {
		next := c.nextReady
		c.nextReady = nil
		c.queued.Store(false)
		c.flushOutbox()
		c = next
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
	// closed is set on the loop when the connection closed.
	closed bool
}

type endKind uint8

const (
	endNone    endKind = iota
	endKeep            // response complete; serve the next request
	endClose           // response complete; close after flushing
	endAbandon         // no clean end possible; close after flushing
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
}

// append runs fn on the pending buffer if this exchange may still write,
// then queues the connection for its loop. end, if set, finishes the exchange.
func (x *exchange) append(fn func(dst []byte) []byte, end endKind) {
	c := x.c
	o := &c.out
	o.mu.Lock()
	if o.closed || o.seq != x.seq {
		o.mu.Unlock()
		return
	}
	if fn != nil {
		o.pending = fn(o.pending)
	}
	if end != endNone {
		o.end = end
		o.seq++ // later calls of this exchange are dropped
	}
	o.mu.Unlock()
	c.loop.ready(c)
}

// Send implements actors.Conn.
func (x *exchange) Send(p []byte) {
	c := x.c
	o := &c.out
	o.mu.Lock()
	if o.closed || o.seq != x.seq {
		o.mu.Unlock()
		return
	}
	o.pending = append(o.pending, p...)
	o.mu.Unlock()
	c.loop.ready(c)
}

// Respond implements actors.Conn.
func (x *exchange) Respond(status int, contentType string, headers, body []byte) {
	end := endKeep
	if !x.keepAlive {
		end = endClose
	}
	x.append(func(dst []byte) []byte {
		return appendResponse(dst, x.minor, status, contentType, x.requestID, headers, body, !x.keepAlive)
	}, end)
}

// StartStream implements actors.Conn.
func (x *exchange) StartStream(contentType string, headers []byte) bool {
	x.append(func(dst []byte) []byte {
		return appendStreamHead(dst, x.minor, contentType, x.requestID, headers, x.chunked, !x.keepAlive || !x.chunked)
	}, endNone)
	return x.chunked
}

// EndStream implements actors.Conn.
func (x *exchange) EndStream() {
	end := endKeep
	if !x.keepAlive || !x.chunked {
		end = endClose
	}
	x.append(nil, end)
}

// Abandon implements actors.Conn.
func (x *exchange) Abandon() { x.append(nil, endAbandon) }
