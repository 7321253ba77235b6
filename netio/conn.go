package netio

import (
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
)

// conn is Vajra's state for one client connection. Everything but out,
// queued and nextReady is loop-only.
type conn struct {
	gc   gnet.Conn
	loop *loop
	srv  *Server

	parser *httpparse.Parser
	req    httpparse.Request

	out       outbox
	queued    atomic.Bool // on the loop's ready list
	nextReady *conn       // ready-list link, owned by whoever holds the list
	spare     []byte      // the other half of the pending buffer

	// busy is true while an exchange runs in a session: pipelined requests
	// wait in gnet's inbound buffer until it ends, so responses stay in order.
	busy    bool
	handle  actors.Handle // the session of the exchange in flight
	sent100 bool          // "100 Continue" sent for the request being read
	closing bool          // a close is under way: serve nothing more
	closed  bool          // OnClose ran

	scratch []byte // inline responses
}

// serve parses and answers the requests buffered on the connection until one
// goes to a session (busy), the input runs out, or the connection must
// close. It reports whether the caller must close the connection. Loop-only.
func (c *conn) serve() (closeConn bool) {
	for !c.busy && !c.closing && !c.closed {
		buf, _ := c.gc.Peek(-1)
		if len(buf) == 0 {
			return false
		}
		n, err := c.parser.Parse(buf, &c.req)
		if err != nil {
			c.writeParseError(err)
			c.closing = true
			return true
		}
		if n == 0 {
			if c.parser.HeadersDone() && c.req.Expect100 && !c.sent100 {
				return c.answerExpect()
			}
			if c.gc.InboundBuffered() > c.srv.maxBuffered {
				c.closing = true
				return true
			}
			return false
		}
		c.sent100 = false
		closeAfter := c.dispatch(&c.req)
		_, _ = c.gc.Discard(n)
		if closeAfter {
			c.closing = true
			return true
		}
	}
	return false
}

// answerExpect handles "Expect: 100-continue" (RFC 9110 §10.1.1) once the
// head is in: a request that will be refused anyway gets its final status at
// once (and the connection closes, since its body was never read);
// otherwise the client is told to send the body.
func (c *conn) answerExpect() (closeConn bool) {
	c.sent100 = true
	if rt, status := c.srv.precheck(&c.req); status != 0 {
		c.writeError(rt, status, false)
		c.closing = true
		return true
	}
	_, _ = c.gc.Write(continue100)
	return false
}

var continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// dispatch answers one complete request, inline or by starting a session.
// req's slices are valid only during the call. It reports whether the
// connection must close after the response. Loop-only.
func (c *conn) dispatch(req *httpparse.Request) (closeAfter bool) {
	s := c.srv
	rt, status := s.precheck(req)
	if status != 0 {
		c.writeError(rt, status, req.KeepAlive)
		return !req.KeepAlive
	}
	if rt.inline != nil {
		c.scratch = rt.inline(s, c.scratch[:0], req)
		_, _ = c.gc.Write(c.scratch)
		return !req.KeepAlive
	}
	// A session route: copy out what the session needs, hand it over.
	rid := requestID(req)
	c.out.mu.Lock()
	seq := c.out.seq
	c.out.mu.Unlock()
	x := &exchange{c: c, seq: seq, minor: req.Minor, keepAlive: req.KeepAlive, chunked: req.Minor == 1, requestID: rid}
	body := req.Body
	if rt.input != nil {
		c.scratch = rt.input(c.scratch[:0], req)
		body = c.scratch
	}
	r := actors.NewRequest(rt.endpoint, rid, body)
	r.Chunked = x.chunked
	r.Arrival = time.Now()
	c.busy = true
	c.handle = s.sessions.Start(x, r)
	return false
}

// flushOutbox writes what sessions queued for this connection and acts on
// the end of an exchange. Loop-only.
func (c *conn) flushOutbox() {
	if c.closed {
		return
	}
	o := &c.out
	o.mu.Lock()
	buf := o.pending
	o.pending = c.spare[:0]
	end := o.end
	o.end = endNone
	o.mu.Unlock()
	c.spare = buf
	if len(buf) > 0 {
		_, _ = c.gc.Write(buf) // on failure gnet closes the connection (OnClose runs)
		if c.closed {
			return
		}
		if c.gc.OutboundBuffered() > c.srv.opts.MaxOutboundBytes {
			// Slow consumer: the client does not read as fast as the
			// engine produces. Close; OnClose aborts the session.
			c.srv.slowConsumers.Add(1)
			c.srv.log.Debug("slow consumer", zap.Int("outbound", c.gc.OutboundBuffered()))
			c.closing = true
			_ = c.gc.Close()
			return
		}
	}
	switch end {
	case endNone:
	case endKeep:
		c.busy, c.handle = false, nil
		if c.serve() {
			_ = c.gc.Close()
		}
	case endClose, endAbandon:
		c.busy, c.handle = false, nil
		c.closing = true
		_ = c.gc.Close()
	}
}

// onClose runs when gnet closed the connection. Loop-only.
func (c *conn) onClose() {
	c.closed = true
	c.out.mu.Lock()
	c.out.closed = true
	c.out.pending = c.out.pending[:0]
	c.out.mu.Unlock()
	if c.handle != nil {
		c.handle.ConnClosed()
		c.handle = nil
	}
}

// writeParseError answers a request the parser refused, with Connection:
// close: after a framing error the next request's start is in doubt.
func (c *conn) writeParseError(err error) {
	c.srv.parseErrors.Add(1)
	c.scratch = appendParseError(c.scratch[:0], err)
	_, _ = c.gc.Write(c.scratch)
}

// writeError answers with a canned error for route rt (its dialect's shape).
func (c *conn) writeError(rt *route, status int, keepAlive bool) {
	c.scratch = appendRouteError(c.scratch[:0], rt, status, c.req.Minor, keepAlive)
	_, _ = c.gc.Write(c.scratch)
}
