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
	handle  actors.Handle // the session of the exchange in flight (or its waiter)
	permit  bool          // the exchange holds an admission permit
	sent100 bool          // "100 Continue" sent for the request being read
	closing bool          // a close is under way: serve nothing more
	closed  bool          // OnClose ran
	paused  bool          // out of the loop's epoll read set (backpressure.go)

	// Keep-alives (keepalive.go): wrote is set by every flush that wrote
	// bytes, quiet counts the sweeps since.
	wrote bool
	quiet uint32

	// Timeouts (timeouts.go): reading is true while a request has started
	// arriving and is not complete; since is when that began or, when not
	// reading, when the connection last went idle (the loop's clock).
	reading            bool
	since              time.Time
	prevConn, nextConn *conn // the loop's list of connections

	// ws is the connection's WebSocket state once it upgraded (ws_conn.go):
	// from then on it is busy for good and parses no HTTP.
	ws *wsConn

	scratch []byte // inline responses
	cors    []byte // the CORS header lines of the request being served
}

// serve parses and answers the requests buffered on the connection until one
// goes to a session (busy), the input runs out, or the connection must
// close. It reports whether the caller must close the connection. Loop-only.
func (c *conn) serve() (closeConn bool) {
	for !c.busy && !c.closing && !c.closed {
		buf, _ := c.gc.Peek(-1)
		if len(buf) == 0 {
			break
		}
		if !c.reading {
			c.reading, c.since = true, c.loop.now
		}
		if c.parser == nil {
			c.parser = c.loop.takeParser(c.srv.opts.Limits)
		}
		n, err := c.parser.Parse(buf, &c.req)
		if err != nil {
			c.writeParseError(err)
			c.closing = true
			return true
		}
		if n == 0 {
			// Mid-request: the parser keeps its place for the next read,
			// which a paused connection must get.
			if c.paused {
				c.setReading(true)
			}
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
		c.reading = false
		closeAfter := c.dispatch(&c.req)
		_, _ = c.gc.Discard(n)
		if closeAfter {
			c.closing = true
			return true
		}
	}
	c.since = c.loop.now // idle from now (or busy: not timed)
	c.releaseParser()
	if c.ws != nil {
		c.ws.begin() // upgraded: from now on the input is frames
		return false
	}
	c.backpressure()
	return false
}

// releaseParser gives the parser back to the loop between requests: a
// connection that waits (idle keep-alive, or streaming a response) holds
// no parser, so its memory is a few hundred bytes, not the parser's ~8 KiB
// of header tables. Loop-only.
func (c *conn) releaseParser() {
	if c.parser == nil {
		return
	}
	c.req = httpparse.Request{} // drop views into the parser's tables
	c.loop.putParser(c.parser)
	c.parser = nil
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

// dispatch answers one complete request, inline, off the loop, or by
// starting a session. req's slices are valid only during the call. It
// reports whether the connection must close after the response. Loop-only.
func (c *conn) dispatch(req *httpparse.Request) (closeAfter bool) {
	s := c.srv
	var cors []byte
	if s.cors != nil {
		if isPreflight(req) {
			c.scratch = s.appendPreflight(c.scratch[:0], req)
			c.finishInline(notFound, req, statusOf(c.scratch), nil)
			return !req.KeepAlive
		}
		if o := req.Header("origin"); s.cors.allowed(o) {
			c.cors = appendAllowOrigin(c.cors[:0], o)
			cors = c.cors
		}
	}
	rt, status := s.precheck(req)
	if status != 0 {
		switch status {
		case 401:
			s.rejected.unauthorized.Inc()
		case 503:
			s.rejected.draining.Inc()
		}
		c.scratch = appendRouteError(c.scratch[:0], rt, status, req.Minor, req.KeepAlive)
		c.finishInline(rt, req, status, cors)
		return !req.KeepAlive || status == 503
	}
	if rt.websocket {
		return c.upgrade(rt, req)
	}
	if rt.inline != nil {
		c.scratch = rt.inline(s, c.scratch[:0], req)
		c.finishInline(rt, req, statusOf(c.scratch), cors)
		return !req.KeepAlive
	}
	// Off the loop: a session route, or /metrics.
	// Copy out what is needed, hand it over.
	c.out.mu.Lock()
	seq := c.out.seq
	c.out.mu.Unlock()
	t := &tracked{srv: s, rt: rt, start: time.Now()}
	rid := t.setRequestID(req)
	t.x = exchange{c: c, seq: seq, minor: req.Minor, keepAlive: req.KeepAlive, chunked: req.Minor == 1, requestID: rid, dialect: rt.dialect}
	if cors != nil {
		t.cors = append([]byte(nil), cors...)
	}
	if rt.endpoint == 0 {
		c.runOffloop(t, offloopRoutes[rt.name], req.Query, req.Body)
		return false
	}
	body := req.Body
	if rt.input != nil {
		c.scratch = rt.input(c.scratch[:0], req)
		body = c.scratch
	}
	newRequest := func() *actors.Request {
		r := &t.req
		actors.InitRequest(r, rt.endpoint, rid, body)
		r.Chunked = t.x.chunked
		r.Arrival = t.start
		r.SetRank(req.Header("x-data-parallel-rank"))
		r.SetPriority(req.Header("x-vllm-priority"))
		r.SetSessionID(req.Header("x-session-id"))
		r.ClientRequestID = saneRequestID(req.Header("x-request-id"))
		return r
	}
	if s.adm != nil && !rt.utility {
		res, w := s.adm.acquire(func() *waiter {
			return &waiter{adm: s.adm, sessions: s.sessions, conn: t, req: newRequest(), queuedAt: t.start}
		})
		switch res {
		case refusedFull:
			s.rejected.overloaded.Inc()
			c.scratch = s.appendOverloaded(c.scratch[:0], rt, req.Minor, req.KeepAlive, rid)
			c.finishInline(rt, req, statusOf(c.scratch), cors)
			return !req.KeepAlive
		case queued:
			c.beginExchange()
			c.handle = w
			return false
		}
		c.permit = true
	}
	c.beginExchange()
	c.handle = s.sessions.Start(t, newRequest())
	return false
}

// beginExchange marks the connection busy with an exchange that runs off
// the loop. Loop-only.
func (c *conn) beginExchange() {
	c.busy = true
	c.wrote, c.quiet = false, 0
	c.loop.busy.Add(1)
	c.loop.keepAwake()
	c.srv.inflight.Add(1)
}

// endExchange runs when the exchange off the loop ended (its end was
// flushed, or the connection closed): it returns the admission permit and
// lets a drain see the server idle. Loop-only.
func (c *conn) endExchange() {
	if !c.busy {
		return
	}
	owes := c.permit
	if w, ok := c.handle.(*waiter); ok {
		owes = w.settle()
	}
	c.busy, c.handle, c.permit = false, nil, false
	c.loop.busy.Add(-1)
	s := c.srv
	if owes {
		s.adm.release()
	}
	if s.inflight.Add(-1) == 0 && s.draining.Load() {
		s.signalIdle()
	}
}

// finishInline writes a response answered on the loop (in c.scratch) and
// records it. Loop-only.
func (c *conn) finishInline(rt *route, req *httpparse.Request, status int, cors []byte) {
	s := c.srv
	if cors != nil {
		c.scratch = insertHeaders(c.scratch, cors)
	}
	c.write(c.scratch)
	s.routeMetrics[rt].Inc(status)
	if s.access != nil {
		s.logAccess(rt, "", status, time.Now(), req.Method, req.Path, nil)
	}
}

// write writes b to the socket and counts it. Loop-only.
func (c *conn) write(b []byte) {
	c.srv.bytesWritten.Add(uint64(len(b)))
	_, _ = c.gc.Write(b)
}

// statusOf reads the status code of a response that starts "HTTP/1.x NNN".
func statusOf(resp []byte) int {
	if len(resp) < 12 {
		return 0
	}
	return int(resp[9]-'0')*100 + int(resp[10]-'0')*10 + int(resp[11]-'0')
}

// maxKeptPending is the largest pending buffer a connection keeps for its
// next batch: far above a streamed step's frames (a few KiB), so steady
// streams reuse theirs and allocate nothing.
const maxKeptPending = 1 << 20

// flushOutbox writes what sessions queued for this connection and acts on
// the end of an exchange. Loop-only. (A loop with a send batch does the same
// in two halves, around one submit for all its connections: sendbatch.go.)
func (c *conn) flushOutbox() {
	if buf, end, ok := c.takeOutbox(); ok {
		c.writeAndFinish(buf, end)
	}
}

// takeOutbox takes what sessions queued: the bytes (valid until the next
// take) and the end of the exchange, if it ended. ok is false when the
// connection is closing: gnet may close asynchronously, so OnClose (closed)
// can come after more wakes; nothing queued after the decision to close is
// written. Loop-only.
func (c *conn) takeOutbox() (buf []byte, end endKind, ok bool) {
	if c.closed || c.closing {
		return nil, endNone, false
	}
	o := &c.out
	o.mu.Lock()
	buf = o.pending
	o.pending = c.spare[:0]
	end = o.end
	o.end = endNone
	o.mu.Unlock()
	c.spare = buf
	if cap(buf) > maxKeptPending {
		// One big batch (a WebSocket session's large event) must not pin
		// its buffer for the rest of a connection that may live for hours.
		c.spare = nil
	}
	return buf, end, true
}

// writeAndFinish writes buf through gnet, then acts on end. Loop-only.
func (c *conn) writeAndFinish(buf []byte, end endKind) {
	if len(buf) > 0 {
		outBefore := c.gc.OutboundBuffered()
		c.write(buf) // on failure gnet closes the connection (OnClose runs)
		if !c.afterWrite(outBefore) {
			return
		}
	}
	c.finish(end)
}

// afterWrite runs once a flush's bytes went to the socket or to gnet's
// outbound buffer (outBefore is what that buffer held before). It reports
// whether the connection stays open: a client that does not read as fast as
// the engine produces is closed. Loop-only.
func (c *conn) afterWrite(outBefore int) bool {
	c.wrote = true
	if c.closed {
		return false
	}
	c.repause(outBefore)
	if c.gc.OutboundBuffered() > c.srv.opts.MaxOutboundBytes {
		// Slow consumer: close; OnClose aborts the session.
		c.srv.slowConsumers.Add(1)
		c.srv.log.Debug("slow consumer", zap.Int("outbound", c.gc.OutboundBuffered()))
		c.closing = true
		_ = c.gc.Close()
		return false
	}
	return true
}

// finish acts on the end of an exchange once its bytes are written.
// Loop-only.
func (c *conn) finish(end endKind) {
	switch end {
	case endNone:
	case endKeep:
		c.endExchange()
		if c.srv.draining.Load() {
			// Draining: a connection closes once its response is out.
			c.closing = true
			_ = c.gc.Close()
			return
		}
		if c.serve() {
			_ = c.gc.Close()
		}
	case endClose, endAbandon:
		c.endExchange()
		c.closing = true
		_ = c.gc.Close()
	case endWSClose:
		c.ws.closeWritten()
	}
}

// resumeWS lets a WebSocket connection whose reading was held read again if
// what its session sent means it caught up (ws_conn.go). Loop-only.
func (c *conn) resumeWS() {
	if c.ws != nil && c.ws.held {
		c.ws.resume()
	}
}

// onClose runs when gnet closed the connection. Loop-only.
func (c *conn) onClose() {
	c.closed = true
	c.out.mu.Lock()
	c.out.closed = true
	c.out.pending = c.out.pending[:0]
	c.out.mu.Unlock()
	h := c.handle
	if c.ws != nil {
		// A WebSocket session always ends with its connection; that is no
		// client abort.
		c.srv.wsOpen.Add(-1)
	} else if h != nil {
		c.srv.clientAborts.Add(1)
	}
	if w, ok := h.(*waiter); ok {
		// A parked request leaves the queue (or, if its session started,
		// the session is told) before the permit question is settled.
		w.ConnClosed()
		h = nil
	}
	// The permit goes back before the session hears of the close, so the
	// slot is free by the time the engine reports the abort.
	c.endExchange()
	if h != nil {
		h.ConnClosed()
	}
}

// writeParseError answers a request the parser refused, with Connection:
// close: after a framing error the next request's start is in doubt.
func (c *conn) writeParseError(err error) {
	c.srv.parseErrors.Add(1)
	c.scratch = appendParseError(c.scratch[:0], err)
	c.write(c.scratch)
}

// writeError answers with a canned error for route rt (its dialect's shape).
func (c *conn) writeError(rt *route, status int, keepAlive bool) {
	c.scratch = appendRouteError(c.scratch[:0], rt, status, c.req.Minor, keepAlive)
	c.write(c.scratch)
}
