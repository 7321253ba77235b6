package netio

import (
	"time"

	"github.com/vajra-go/vajra/httpparse"
)

// Connection timeouts. gnet has no deadlines, so the server keeps its own,
// at one-second resolution: once a second a goroutine asks each loop (by
// its doorbell) to sweep its connections, and the loop closes
//
//   - a connection idle between requests for longer than IdleTimeout, and
//   - one whose request has started arriving but is not complete after
//     RequestReadTimeout (a slow or stalled client: slowloris), with a 408.
//
// A connection whose exchange is in flight (a session is answering it, for
// however long a stream lasts) is never timed out here: a client that stops
// reading a stream is the slow-consumer limit's business. The exception is
// a request parked in the admission queue (admission.go) for longer than
// MaxQueueWait: it is refused with 429 (529 on Anthropic routes) and
// Retry-After, as a full queue refuses, and the connection stays open.
// The same sweep writes the stream keep-alives (keepalive.go), and then
// runs at their pace.

// Defaults of the timeouts.
const (
	DefaultIdleTimeout        = 90 * time.Second // above the usual 60 s of load balancers, which then close first
	DefaultRequestReadTimeout = 60 * time.Second
	// DefaultMaxQueueWait bounds a request's wait in the admission queue:
	// the OpenAI and Anthropic SDKs time a request out after 10 minutes, a
	// load balancer's idle timeout is usually 60 s, and a client that has
	// waited a minute for its first byte is better told to retry (perhaps
	// elsewhere) than kept waiting.
	DefaultMaxQueueWait = 60 * time.Second
)

// sweepPeriod is how often the loops look for timed-out connections.
const sweepPeriod = time.Second

// trackConn puts c on its loop's list of connections. Loop-only.
func (l *loop) trackConn(c *conn) {
	c.nextConn = l.conns
	if l.conns != nil {
		l.conns.prevConn = c
	}
	l.conns = c
	c.since = l.now
}

// untrackConn takes c off its loop's list. Loop-only.
func (l *loop) untrackConn(c *conn) {
	if c.prevConn != nil {
		c.prevConn.nextConn = c.nextConn
	} else if l.conns == c {
		l.conns = c.nextConn
	}
	if c.nextConn != nil {
		c.nextConn.prevConn = c.prevConn
	}
	c.prevConn, c.nextConn = nil, nil
}

// sweep closes the loop's timed-out connections. Loop-only.
func (l *loop) sweep(now time.Time) {
	l.now = now
	s := l.srv
	for c := l.conns; c != nil; {
		next := c.nextConn
		switch {
		case c.closing || c.closed:
		case c.ws != nil || c.busy:
			// A stream, or a WebSocket (never idle: a live session): one
			// keep-alive mechanism for both (keepalive.go).
			open := true
			if c.ws != nil {
				open = c.ws.sweep(now)
			} else if w, ok := c.handle.(*waiter); ok {
				l.sweepWaiter(w, now)
			}
			if open && s.keepSweeps > 0 {
				c.keepalive(s.keepSweeps)
			}
		case c.reading:
			if t := s.opts.RequestReadTimeout; t > 0 && now.Sub(c.since) > t {
				s.rejected.timeout.Inc()
				c.write(httpparse.ErrorResponse(408))
				c.closing = true
				_ = c.gc.Close()
			}
		default:
			if t := s.opts.IdleTimeout; t > 0 && now.Sub(c.since) > t {
				s.idleClosed.Add(1)
				c.closing = true
				_ = c.gc.Close()
			}
		}
		c = next
	}
}

// sweepWaiter refuses a request parked in the admission queue past
// MaxQueueWait (its held session refuses it, if it has one), and gives
// one that has waited StreamKeepalive its session before its permit
// (admission.go). Loop-only (the sweep).
func (l *loop) sweepWaiter(w *waiter, now time.Time) {
	s := l.srv
	waited := now.Sub(w.queuedAt)
	if t := s.opts.MaxQueueWait; t > 0 && waited > t {
		if expired, answer := w.expire(); expired {
			s.rejected.queueTimeout.Inc()
			if answer {
				w.conn.refuseQueued()
			}
		}
		return
	}
	if k := s.opts.StreamKeepalive; k > 0 && waited >= k {
		w.hold()
	}
}

// sweeper asks every loop to sweep once per sweepPeriod until the server
// stops. With stream keep-alives on it ticks at their sweep's pace
// (keepaliveSweep, which is sweepPeriod unless the keep-alive is under two
// seconds), but wakes a loop that has no exchange in flight only once per
// sweepPeriod, as before: an idle loop has no stream to keep alive.
func (s *Server) sweeper() {
	every := sweepPeriod
	if k := s.opts.StreamKeepalive; k > 0 {
		every = keepaliveSweep(k)
	}
	perFull := max(1, int(sweepPeriod/every))
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
		full := n%perFull == 0
		s.loops.Range(func(_, v any) bool {
			l := v.(*loop)
			if full || l.busy.Load() > 0 {
				l.sweepDue.Store(true)
				l.wake()
			}
			return true
		})
	}
}
