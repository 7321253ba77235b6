package actors

import "time"

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
