package actors

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/vajra-go/vajra/codegen"
)

// wsExchange is the Conn of one response.create over WebSocket: the
// response runs as an ordinary POST /v1/responses session (validation,
// previous_response_id, the store, usage and metrics are the Responses
// dialect's, unchanged) whose stream goes out on the socket instead of an
// HTTP body.
//
//   - StartStream writes nothing: a WebSocket has no response head.
//   - Send and EndStream forward the engine's events, already framed as
//     WebSocket text frames (Request.ws), untouched; when the create
//     named a stream_id, each event gets "stream_id" after its "type", as
//     OpenAI echoes it, in a buffer the exchange reuses.
//   - Respond, which a session calls only when the request failed before
//     its stream (validation, previous_response_not_found, the engine's
//     429), sends the error body as one WebSocket "error" event.
//   - Abandon (a failure with no clean end) sends a server_error event.
//
// The end of the exchange (EndStream, Respond, Abandon) is posted to the
// connection's actor, which then starts the next create of the lane. The
// mutex is the exchange's own and never contended in practice: its
// session calls the methods one at a time; it is there because Conn
// promises safety for concurrent use.
type wsExchange struct {
	ws       *responsesWS
	lane     *wsLane
	streamID string
	// handle is the session's, for ConnClosed; admission (when the server
	// has admission control) holds the create's permit and tells its
	// session instead, and req is the request until admission started it.
	// All three are written and read by the connection's actor only.
	handle    Handle
	admission Admission
	req       *Request
	// done is set once the exchange ended or its connection closed: later
	// calls are dropped, and the connection's actor does not tell an
	// ended session about the close.
	done  atomic.Bool
	mu    sync.Mutex
	out   []byte // stream_id rewrites and error events, reused
	ended wsExchangeEnded
	// prev is the connection-local response the create's
	// previous_response_id names, when it names one (responses_ws_chain.go);
	// last is this response's, for the connection to keep, when it was not
	// stored. The connection's actor writes prev before the session starts
	// and reads last after the exchange ended; the session the other way.
	prev, last *wsRecent
}

// wsExchangeEnded tells the connection's actor an exchange ended.
type wsExchangeEnded struct{ ex *wsExchange }

var _ Conn = (*wsExchange)(nil)

// Respond implements Conn: the request ended before its stream, with an
// error (status >= 400; a streamed create never gets a 2xx body). Safe for
// concurrent use.
func (ex *wsExchange) Respond(status int, _ string, _ []byte, body []byte) {
	ex.mu.Lock()
	if !ex.done.Load() {
		if status < 400 {
			status, body = 500, wsUnexpectedBody
		}
		ex.out = appendWSErrorEvent(ex.out[:0], status, body, ex.streamID)
		ex.ws.conn.Send(ex.out)
	}
	ex.mu.Unlock()
	ex.end()
}

// wsUnexpectedBody answers a create whose session answered without a
// stream and without an error, which a forced stream never does.
var wsUnexpectedBody = []byte(`{"error":{"message":"The response ended without a stream; see the server log.","type":"server_error","param":null,"code":null}}`)

// wsAbandonedBody ends an exchange abandoned mid-stream.
var wsAbandonedBody = []byte(`{"error":{"message":"The response failed; see the server log.","type":"server_error","param":null,"code":null}}`)

// StartStream implements Conn: nothing goes on the wire. Safe for
// concurrent use.
func (ex *wsExchange) StartStream(string, []byte) bool { return false }

// Send implements Conn. It allocates nothing once the exchange's buffer
// has grown to a batch's size. Safe for concurrent use.
func (ex *wsExchange) Send(p []byte) {
	ex.mu.Lock()
	ex.send(p)
	ex.mu.Unlock()
}

// send forwards p; ex.mu is held.
func (ex *wsExchange) send(p []byte) {
	if ex.done.Load() || len(p) == 0 {
		return
	}
	if ex.streamID == "" {
		ex.ws.conn.Send(p)
		return
	}
	ex.out = appendWithStreamID(ex.out[:0], p, ex.streamID)
	ex.ws.conn.Send(ex.out)
}

// EndStream implements Conn. Safe for concurrent use.
func (ex *wsExchange) EndStream(last []byte) {
	ex.mu.Lock()
	ex.send(last)
	ex.mu.Unlock()
	ex.end()
}

// Abandon implements Conn. Safe for concurrent use.
func (ex *wsExchange) Abandon() {
	ex.Respond(500, contentTypeJSON, nil, wsAbandonedBody)
}

// end marks the exchange done and, the first time, tells the connection's
// actor, unless the connection closed first (the actor then dropped the
// lane already).
func (ex *wsExchange) end() {
	if !ex.done.Swap(true) {
		ex.ws.owner.root.Send(ex.ws.pid, &ex.ended)
	}
}

// appendWSErrorEvent appends, in one WebSocket text frame, the error event
// of a create that failed before its stream, built from the dialect's
// error body {"error":{...}}:
//
//	{"type":"error","stream_id":"…","status":400,"error":{...}}
//
// (openai-go's ResponsesServerEventResponseWsError; stream_id only when the
// create named one).
func appendWSErrorEvent(dst []byte, status int, body []byte, streamID string) []byte {
	if len(body) < 3 || body[0] != '{' || body[len(body)-1] != '}' {
		body = wsUnexpectedBody
	}
	dst, mark := codegen.BeginEvent(dst, codegen.FramingWebSocket, "error")
	if streamID != "" {
		dst = append(dst, `,"stream_id":"`...)
		dst = append(dst, streamID...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"status":`...)
	dst = codegen.AppendInt(dst, int64(status))
	dst = append(dst, ',')
	dst = append(dst, body[1:len(body)-1]...)
	return codegen.EndEvent(dst, codegen.FramingWebSocket, mark)
}

// eventTypeStart is how every event a codegen frame writer begins opens
// (codegen.BeginEvent over WebSocket).
var eventTypeStart = []byte(`{"type":"`)

// appendWithStreamID appends frames, whole unmasked server text frames of
// one event each, with "stream_id":"id" added to each event after its
// "type" member (or first, for an event that does not begin with its
// type), and each frame's header rewritten for the longer payload. Bytes
// that are not such a frame are appended as they are. id is a valid
// stream_id (validStreamID), which needs no escaping.
func appendWithStreamID(dst, frames []byte, id string) []byte {
	for len(frames) > 0 {
		payload, rest, ok := cutTextFrame(frames)
		if !ok || len(payload) < 2 || payload[0] != '{' {
			return append(dst, frames...)
		}
		var mark int
		dst, mark = codegen.BeginFrame(dst, codegen.FramingWebSocket)
		if bytes.HasPrefix(payload, eventTypeStart) {
			if q := bytes.IndexByte(payload[len(eventTypeStart):], '"'); q >= 0 {
				at := len(eventTypeStart) + q + 1
				dst = append(dst, payload[:at]...)
				dst = append(dst, `,"stream_id":"`...)
				dst = append(dst, id...)
				dst = append(dst, '"')
				dst = append(dst, payload[at:]...)
				dst = codegen.EndFrame(dst, codegen.FramingWebSocket, mark)
				frames = rest
				continue
			}
		}
		dst = append(dst, `{"stream_id":"`...)
		dst = append(dst, id...)
		dst = append(dst, `",`...)
		dst = append(dst, payload[1:]...)
		dst = codegen.EndFrame(dst, codegen.FramingWebSocket, mark)
		frames = rest
	}
	return dst
}

// cutTextFrame splits the first frame off b: a final, unmasked text frame
// (RFC 6455 §5.2), as codegen.EndFrame writes them. ok is false when b
// does not begin with a whole one.
func cutTextFrame(b []byte) (payload, rest []byte, ok bool) {
	const finText = 0x81
	if len(b) < 2 || b[0] != finText || b[1]&0x80 != 0 {
		return nil, nil, false
	}
	n, h := uint64(b[1]), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return nil, nil, false
		}
		n, h = uint64(b[2])<<8|uint64(b[3]), 4
	case 127:
		if len(b) < 10 {
			return nil, nil, false
		}
		n = 0
		for _, c := range b[2:10] {
			n = n<<8 | uint64(c)
		}
		h = 10
	}
	if uint64(len(b)-h) < n {
		return nil, nil, false
	}
	end := h + int(n)
	return b[h:end], b[end:], true
}
