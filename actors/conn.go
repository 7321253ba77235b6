package actors

// Conn is what a session sees of its client: one HTTP exchange on a
// connection. netio implements it. All methods are safe for concurrent use;
// none blocks. Calls after the exchange ended (or the connection closed) are
// dropped silently: the session learns of a close through Handle.ConnClosed.
type Conn interface {
	// Respond sends a complete response with a body and ends the exchange.
	// body is copied before Respond returns. headers are extra response
	// header lines ("Name: value\r\n" each), copied too; may be nil.
	Respond(status int, contentType string, headers []byte, body []byte)

	// StartStream sends the head of a streamed 200 response with the given
	// content type. It reports whether the body is chunked (HTTP/1.1); if
	// not, the body is close-delimited and the connection closes at
	// EndStream. Frames passed to Send must already be framed to match.
	StartStream(contentType string, headers []byte) (chunked bool)

	// Send queues framed bytes of the stream. p is copied before Send
	// returns. The connection's event loop writes everything queued in one
	// pass, once per wake.
	Send(p []byte)

	// EndStream queues last, the stream's final frames (may be empty;
	// copied before EndStream returns), and ends the streamed response
	// after everything sent so far; the connection then serves its next
	// request (or closes, if the request or the framing said so). The last
	// frames go with the end so that the request is recorded as done
	// before its last byte can reach the client.
	EndStream(last []byte)

	// Abandon ends the exchange by closing the connection after what was
	// queued so far: for failures where no clean end can be written.
	Abandon()
}

// Handle is what netio keeps of a session to tell it about its connection.
type Handle interface {
	// ConnClosed tells the session its client is gone: the session aborts
	// its engine work and stops. Safe for concurrent use; idempotent.
	ConnClosed()
}
