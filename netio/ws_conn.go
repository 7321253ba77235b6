package netio

import (
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/metrics"
	"github.com/vajra-go/vajra/netio/wsproto"
)

// A connection in WebSocket mode. After the 101 the connection never
// parses HTTP again: every byte, starting with those buffered after the
// upgrade request's head, goes to the connection's wsproto.Reader on its
// event loop, and each complete text message to the session's
// WSHandle.Message, on the loop. What the session sends (whole server
// frames, WSConn.Send) goes through the connection's outbox exactly as an
// HTTP exchange's bytes do: appended to the pending buffer under the
// connection's lock, written by the loop once per wake. The loop's own
// frames (pong, keep-alive ping, close) are appended to the same buffer,
// so they always fall between whole frames.
//
// Closing, three ways, each ending in a TCP close and so in OnClose, which
// calls the session's ConnClosed exactly once (as for a TCP drop):
//
//   - the client sends a close frame: the loop echoes its code (1000 when
//     it had none), unless a close was sent already, flushes, and closes
//     TCP (RFC 6455 §5.5.1, §7.1.1: the server closes the TCP connection
//     first);
//   - the session (WSConn.Close) or a drain (1001) closes: the close
//     frame goes out after everything queued before it,
//     later frames are dropped, data messages from the client are no
//     longer delivered, and TCP closes when the client's close frame
//     arrives or after wsCloseWait (the once-a-second sweep);
//   - the client breaks the protocol (wsproto's errors: 1002, 1003, 1007,
//     1009): the loop sends the close frame with the error's code, stops
//     reading frames (the stream's framing is in doubt), half-closes the
//     socket once the frame is out so that the client sees its end at
//     once, and closes TCP when the client closes its side or after
//     wsCloseWait. Other connections are untouched.
//
// A WebSocket connection is a live session, not an idle keep-alive
// connection: IdleTimeout never closes it. While it sends nothing for
// StreamKeepalive the loop's sweep sends a ping frame, by the same
// mechanism as an SSE stream's keep-alive (keepalive.go: the ping is the
// connection's keep-alive frame from the 101 until a close is queued),
// which keeps proxies from timing it out; a client that stops reading is
// caught by MaxOutboundBytes, as an SSE stream is.
//
// Lifetime: the connection counts as an exchange in flight from the 101
// until it closes (Drain and WaitIdle see it; Drain sends it a 1001 close,
// see drain.go), and the connection itself holds no admission permit: it
// may be open for hours with nothing running. Each Responses-over-WebSocket
// create takes one (actors.Admitter); a Realtime response goes through the
// engine's own queue.

// wsCloseWait is how long the server waits for the client's close frame
// after sending its own, before it closes TCP anyway (RFC 6455 §7.1.1
// leaves the wait to the server). Checked by the sweep (once a second, or
// faster with short keep-alives), so a silent client is dropped 2-3 s
// after the close frame.
const wsCloseWait = 2 * time.Second

// wsConn is a connection's WebSocket state. It implements actors.WSConn
// (Send and Close, safe for concurrent use); the rest is loop-only.
type wsConn struct {
	c *conn
	h actors.WSHandle
	r wsproto.Reader
	// backlog is h's actors.WSBacklog, if it has one; held is true while
	// reading is paused because it reported a backlog (inbound
	// back-pressure, like backpressure.go's for pipelined HTTP).
	backlog actors.WSBacklog
	held    bool
	inRead  bool // traffic is running: flushes do not re-enter it

	// closeQueued is set with outbox.wsClosing, for the loop to read
	// without the lock: once a close is queued (by the session too), the
	// client's messages are no longer delivered.
	closeQueued atomic.Bool
	closeSent   bool      // our close frame is out (or going out this flush)
	closeAt     time.Time // when it went out (wsCloseWait runs from here)
	peerClosed  bool      // the client's close frame arrived
	broken      bool      // the client broke the protocol: input is dropped
	flush       bool      // the loop queued frames of its own: flush after reading
}

// wsPing is a WebSocket connection's keep-alive frame: an empty ping.
var wsPing = wsproto.AppendFrame(nil, wsproto.OpPing, nil)

// startWS switches c to WebSocket mode after its 101 was written and
// starts its session. Loop-only.
func (c *conn) startWS(req *actors.WSRequest) {
	s := c.srv
	w := &wsConn{c: c}
	w.r.Init(s.opts.MaxWSMessageBytes)
	c.ws = w
	c.beginExchange()
	s.wsOpen.Add(1)
	c.out.mu.Lock()
	c.out.keepalive = wsPing
	c.out.mu.Unlock()
	w.h = s.webSockets.StartWS(w, req)
	w.backlog, _ = w.h.(actors.WSBacklog)
	c.handle = w.h
}

// begin reads the frames that came behind the upgrade request's head,
// once serve has discarded the head. A connection that was paused while an
// earlier exchange ran (the upgrade was pipelined behind it) is read
// again: a WebSocket takes its input as it comes. Loop-only.
func (w *wsConn) begin() {
	if w.c.paused {
		w.c.setReading(true)
	}
	if w.c.gc.InboundBuffered() > 0 {
		w.traffic()
	}
}

// Send implements actors.WSConn: p (whole server frames) is appended to
// the connection's pending bytes for its loop to write. It allocates
// nothing once the pending buffers have grown to the connection's usual
// batch. Safe for concurrent use.
func (w *wsConn) Send(p []byte) {
	o := &w.c.out
	o.mu.Lock()
	if o.closed || o.wsClosing {
		o.mu.Unlock()
		return
	}
	o.pending = append(o.pending, p...)
	o.mu.Unlock()
	w.c.loop.ready(w.c)
}

// Close implements actors.WSConn: the close frame goes out after
// everything sent so far. Safe for concurrent use.
func (w *wsConn) Close(code int, reason string) {
	if w.queueClose(code, reason) {
		w.c.loop.ready(w.c)
	}
}

// queueClose appends a close frame to the pending bytes unless one is
// queued already or the connection is gone, and reports whether it did.
// Later frames are dropped (§5.5.1: nothing after a close frame). Safe for
// concurrent use.
func (w *wsConn) queueClose(code int, reason string) bool {
	o := &w.c.out
	o.mu.Lock()
	if o.closed || o.wsClosing {
		o.mu.Unlock()
		return false
	}
	o.wsClosing = true
	o.keepalive = nil
	w.closeQueued.Store(true)
	o.pending = wsproto.AppendClose(o.pending, code, reason)
	o.end = endWSClose
	o.mu.Unlock()
	if !wsproto.ValidCloseCode(code) {
		code = wsproto.CloseInternalError // what AppendClose sent
	}
	w.c.srv.countWSClose(code)
	return true
}

// queueControl appends a control frame of the loop's own (a pong) unless a
// close is queued. Loop-only.
func (w *wsConn) queueControl(op byte, payload []byte) {
	o := &w.c.out
	o.mu.Lock()
	if !o.closed && !o.wsClosing {
		o.pending = wsproto.AppendFrame(o.pending, op, payload)
		w.flush = true
	}
	o.mu.Unlock()
}

// traffic reads the client's frames: everything buffered is fed to the
// reader at once (one Peek, one Discard: gnet copies its buffer on every
// Peek once it wraps). Loop-only.
func (w *wsConn) traffic() {
	c := w.c
	if w.held {
		if w.backlog.Backlogged() {
			c.setReading(false) // gnet re-armed reading: pause again
			return
		}
		w.release()
	}
	w.inRead = true
	buf, _ := c.gc.Peek(-1)
	off := 0
	for off < len(buf) && !c.closing && !c.closed {
		if w.broken {
			off = len(buf) // the framing is in doubt: drop the rest
			break
		}
		n, more := w.frame(buf[off:])
		off += n
		if !more {
			break
		}
	}
	_, _ = c.gc.Discard(off)
	w.inRead = false
	if w.flush && !c.closing && !c.closed {
		w.flush = false
		c.flushOutbox()
	}
}

// frame reads what it can of in, up to one message or control frame, and
// acts on it. It returns the bytes consumed and whether to read on (false:
// a partial frame waits for more, or reading is held). Loop-only.
func (w *wsConn) frame(in []byte) (n int, more bool) {
	n, k, p, err := w.r.Next(in)
	if err != nil {
		// Next's errors are all *wsproto.Error.
		w.fail(err.(*wsproto.Error))
		return n, true
	}
	switch k {
	case wsproto.None:
		return n, n > 0
	case wsproto.Message:
		if w.closeQueued.Load() {
			return n, true // closing: data is no longer delivered
		}
		w.h.Message(p)
		if w.backlog != nil && w.backlog.Backlogged() {
			// The session is behind: leave the rest in gnet's buffer and
			// stop reading until it catches up (resume).
			w.held = true
			w.c.setReading(false)
			return n, false
		}
	case wsproto.Ping:
		w.queueControl(wsproto.OpPong, p) // §5.5.3: the same payload
	case wsproto.Pong:
		// §5.5.3: an unsolicited pong is a heartbeat; nothing to do.
	case wsproto.Close:
		w.peerClose(p)
	}
	return n, true
}

// resume reads on if reading was held for a backlog that has cleared:
// checked after each flush of what the session sent and at each sweep.
// Loop-only.
func (w *wsConn) resume() {
	if !w.held || w.inRead || w.c.closing || w.c.closed || w.backlog.Backlogged() {
		return
	}
	w.release()
	if w.c.gc.InboundBuffered() > 0 {
		w.traffic()
	}
}

// release ends a hold: the connection is read again. Loop-only.
func (w *wsConn) release() {
	w.held = false
	w.c.setReading(true)
}

// fail answers a protocol breach: the close frame with the breach's code,
// then no more reading. Loop-only.
func (w *wsConn) fail(err *wsproto.Error) {
	w.broken = true
	w.c.srv.wsProtocolErrors.Add(1)
	if w.queueClose(err.Code, err.Reason) {
		w.flush = true
	}
}

// peerClose answers the client's close frame: echo its code unless a
// close was sent already, flush, close TCP. Loop-only.
func (w *wsConn) peerClose(payload []byte) {
	w.peerClosed = true
	c := w.c
	if !w.closeSent {
		code := wsproto.CloseCode(payload)
		if code == wsproto.CloseNoStatus {
			code = wsproto.CloseNormal // §7.4.1: 1005 is never sent
		}
		w.queueClose(code, "")
		c.flushOutbox()
	}
	if !c.closed && !c.closing {
		c.closing = true
		_ = c.gc.Close()
	}
}

// closeWritten runs when the flush that wrote our close frame is done.
// Loop-only.
func (w *wsConn) closeWritten() {
	c := w.c
	w.closeSent, w.closeAt = true, time.Now()
	if w.peerClosed {
		return // peerClose closes TCP next
	}
	if w.broken && c.gc.OutboundBuffered() == 0 {
		// Half-close: the client reads the close frame, then the end of
		// the stream, and need not wait for us to time out. (With output
		// still in gnet's buffer the sweep closes instead.)
		_ = unix.Shutdown(c.gc.Fd(), unix.SHUT_WR)
	}
}

// sweep runs at the loop's sweep: a close past its wait closes TCP. It
// reports whether the connection is open with no close sent, for the
// loop's sweep to keep it alive exactly as it does an SSE stream
// (conn.keepalive; the connection's keep-alive frame is a ping).
// Loop-only.
func (w *wsConn) sweep(now time.Time) (open bool) {
	c := w.c
	w.resume()
	if c.closing || c.closed {
		return false
	}
	if w.closeSent {
		if now.Sub(w.closeAt) > wsCloseWait {
			c.closing = true
			_ = c.gc.Close()
		}
		return false
	}
	return true
}

// goingAway closes the connection for a drain: 1001. Loop-only.
func (w *wsConn) goingAway() {
	if w.queueClose(wsproto.CloseGoingAway, "server going away") {
		w.c.flushOutbox()
	}
}

// wsCloseCodes are the close codes counted by code in
// vajra_websocket_closes_total; any other (a client's own 3000-4999 code
// echoed back) counts as "other", so the label stays bounded.
var wsCloseCodes = [...]int{
	wsproto.CloseNormal, wsproto.CloseGoingAway, wsproto.CloseProtocolError, wsproto.CloseUnsupportedData,
	wsproto.CloseInvalidPayload, wsproto.ClosePolicyViolation, wsproto.CloseMessageTooBig, wsproto.CloseInternalError,
}

// wsCloseCounts counts the close frames the server sent, by code: one slot
// per wsCloseCodes entry, then "other".
type wsCloseCounts [len(wsCloseCodes) + 1]atomic.Uint64

// countWSClose counts one close frame sent. Safe for concurrent use.
func (s *Server) countWSClose(code int) {
	for i, c := range wsCloseCodes {
		if c == code {
			s.wsCloses[i].Add(1)
			return
		}
	}
	s.wsCloses[len(wsCloseCodes)].Add(1)
}

// webSocketStats renders the WebSocket counters for metrics.
func (s *Server) webSocketStats(st *metrics.ServerStats) {
	st.WebSocketConnections = s.wsOpen.Load()
	st.WebSocketProtocolErrors = s.wsProtocolErrors.Load()
	for i := range s.wsCloses {
		n := s.wsCloses[i].Load()
		if n == 0 {
			continue
		}
		code := "other"
		if i < len(wsCloseCodes) {
			code = strconv.Itoa(wsCloseCodes[i])
		}
		st.WebSocketCloses = append(st.WebSocketCloses, metrics.CodeCount{Code: code, N: n})
	}
}

// goAway sends every WebSocket connection of the loop a 1001 close: the
// loop's part of a drain. Loop-only.
func (l *loop) goAway() {
	for c := l.conns; c != nil; c = c.nextConn {
		if c.ws != nil && !c.closing && !c.closed {
			c.ws.goingAway()
		}
	}
}

// WebSocketConnections is the number of open WebSocket connections. Safe
// for concurrent use.
func (s *Server) WebSocketConnections() int64 { return s.wsOpen.Load() }
