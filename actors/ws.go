package actors

import (
	"sync"
	"sync/atomic"
	"time"
)

// WebSocket sessions. netio owns the protocol (RFC 6455: the handshake,
// frames, masking, fragments, ping/pong, the close handshake, limits) on
// the event loops; a session sees one upgraded connection as a WSConn and
// is fed each complete client text message through its WSHandle. What the
// session sends is whole server frames, framed once on the engine side (or
// by the session, for its own events) with codegen.FramingWebSocket, and
// forwarded untouched, as SSE frames are.

// WSConn is what a WebSocket session sees of its client: one upgraded
// connection. netio implements it. All methods are safe for concurrent use;
// none blocks. Calls after the connection closed are dropped silently: the
// session learns of a close through WSHandle.ConnClosed.
type WSConn interface {
	// Send queues whole, unmasked server frames (codegen.FramingWebSocket
	// text frames, one event each). p is copied before Send returns. The
	// connection's event loop writes everything queued in one pass, once
	// per wake.
	Send(p []byte)
	// Close starts the closing handshake after everything sent so far: a
	// close frame with code (RFC 6455 §7.4; 1000 normal, 1008 policy,
	// 1011 server error...) and a short reason, then the connection
	// closes once the client answers or after a bounded wait. ConnClosed
	// follows.
	Close(code int, reason string)
}

// WSHandle is what netio keeps of a WebSocket session.
type WSHandle interface {
	// ConnClosed (Handle) tells the session its client is gone: TCP
	// closed, the close handshake ended, or the client broke the protocol.
	// The session aborts its engine work and stops.
	Handle
	// Message hands the session one complete client text message, in
	// order. It is called on the event loop and must not block; p is valid
	// only during the call, so the session copies what it keeps.
	Message(p []byte)
}

// WSBacklog may be implemented by a WSHandle that queues client messages
// for later work (a mailbox). Backlogged reports whether it holds more
// unprocessed messages than it wants: netio then stops reading the
// connection (TCP flow control holds the client back) until Backlogged
// reports false, which it checks whenever the session sends and once a
// second. Called on the event loop after each Message; must not block.
type WSBacklog interface {
	Backlogged() bool
}

// WSRequest is what a WebSocket session needs of its upgrade request.
type WSRequest struct {
	Endpoint  Endpoint // EndpointRealtime or EndpointResponsesWS
	RequestID string
	// Query is the request target's raw query (model=..., intent=...).
	Query string
	// Beta is true when the client sent OpenAI-Beta: realtime=v1: the
	// Realtime session speaks the beta event names.
	Beta    bool
	Arrival time.Time
}

// StartWS spawns the session of one upgraded WebSocket connection; netio
// calls it on the event loop after writing the 101 response. It never
// blocks. Safe for concurrent use.
func (s *Sessions) StartWS(conn WSConn, req *WSRequest) WSHandle {
	switch req.Endpoint {
	case EndpointRealtime:
		return s.startRealtime(conn, req)
	case EndpointResponsesWS:
		return s.startResponsesWS(conn, req)
	}
	conn.Close(1011, "no such WebSocket endpoint")
	return closedWS{}
}

// closedWS is the handle of a WebSocket connection no session serves.
type closedWS struct{}

func (closedWS) ConnClosed()    {}
func (closedWS) Message([]byte) {}

// wsBase is the actor base of a WebSocket connection's session (the
// Realtime session, the Responses API over WebSocket): actorBase, the
// connection, its upgrade request, and the client-message inbox. Message
// copies each client message into a buffer of the request bodies' size
// classes (request.go) and posts it to the actor; the kind's receive hands
// each *clientMsg to done once handled. The inbox's two bounds make the
// session Backlogged (WSBacklog), and netio then stops reading the
// connection until the actor caught up: a client that sends faster than
// its session handles is held back by TCP flow control instead of growing
// the mailbox.
type wsBase struct {
	actorBase
	conn WSConn
	req  WSRequest
	// inbox and inboxBytes count the client messages (and their bytes)
	// posted to the actor and not yet handled.
	inbox, inboxBytes atomic.Int64
}

// The inbox bounds: a session with more than maxInboxMessages client
// messages, or more than maxInboxBytes of them, posted and not yet handled
// is Backlogged. Checked after each message, so a connection holds at most
// the bound plus one message.
const (
	// maxInboxBytes bounds the memory the copies hold: two of the largest
	// messages netio accepts by default (netio.DefaultMaxWSMessageBytes,
	// 16 MiB, room for the Realtime API's 15 MiB audio append), so that
	// one such message alone never pauses the connection.
	maxInboxBytes = 32 << 20
	// maxInboxMessages bounds the work queued ahead of the client's next
	// event: a session handles a small event in microseconds, so 256
	// waiting means the actor is stalled, not busy; it is 25 s of audio
	// in the 100 ms appends the Realtime guide suggests, and four times
	// the creates a Responses connection may have running or queued
	// (maxWSPending), so that a client's burst of creates is refused by
	// that bound, in its own error events, before it is held back.
	maxInboxMessages = 256
)

// clientMsg is one client message, copied off the event loop. It and its
// buffer are pooled: a message costs no allocation in steady state.
type clientMsg struct {
	p       []byte
	buf     *[]byte // p's pooled backing; nil when p was too large to pool
	arrival time.Time
}

var clientMsgs = sync.Pool{New: func() any { return new(clientMsg) }}

// spawnWS starts a, whose wsBase is w, as the session of one upgraded
// connection. Loop-only caller (StartWS).
func (w *wsBase) spawnWS(s *Sessions, a sessionActor, conn WSConn, req *WSRequest) {
	w.conn, w.req = conn, *req
	w.start(s, a, req.Endpoint, req.RequestID)
}

// Message implements WSHandle: it copies p and posts it to the actor.
// Called on the event loop; never blocks, and allocates nothing once the
// pools hold buffers.
func (w *wsBase) Message(p []byte) {
	m := clientMsgs.Get().(*clientMsg)
	m.p, m.buf = pooledCopy(p)
	m.arrival = time.Now()
	w.inbox.Add(1)
	w.inboxBytes.Add(int64(len(p)))
	w.owner.root.Send(w.pid, m)
}

// Backlogged implements WSBacklog: the actor has not caught up with the
// client's messages. Called on the event loop; two atomic loads.
func (w *wsBase) Backlogged() bool {
	return w.inbox.Load() > maxInboxMessages || w.inboxBytes.Load() > maxInboxBytes
}

// done takes a handled message out of the inbox and gives its memory back;
// m must not be used after. Runs in the actor.
func (w *wsBase) done(m *clientMsg) {
	w.inbox.Add(-1)
	w.inboxBytes.Add(-int64(len(m.p)))
	releasePooled(m.buf)
	*m = clientMsg{}
	clientMsgs.Put(m)
}
