package netio

import (
	"bytes"
	"time"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
	"github.com/vajra-go/vajra/netio/wsproto"
)

// The WebSocket opening handshake (RFC 6455 §4.2). GET /v1/realtime and
// GET /v1/responses (with /openai/v1 forms) are WebSocket routes: precheck
// has done auth (a Bearer key, or the browser's subprotocol form, see
// keySet.allowedSubprotocol) and draining; upgrade checks the handshake
// itself and either refuses it with an OpenAI-shaped error, the connection
// staying HTTP, or answers 101 and switches the connection to WebSocket
// mode for good (ws_conn.go).
//
// No extension is negotiated: a client that offers permessage-deflate
// gets a 101 without Sec-WebSocket-Extensions and so must send
// uncompressed frames (RSV1 set is then a protocol error). Compression
// would cost CPU per frame on both sides for JSON events that are mostly
// short, and openai-go disables it anyway.

// WSStarter starts the session of an upgraded WebSocket connection:
// actors.Sessions in production (Options.WebSockets defaults to
// Options.Sessions), anything in tests. StartWS is called on the event
// loop right after the 101 is written and must not block.
type WSStarter interface {
	StartWS(conn actors.WSConn, req *actors.WSRequest) actors.WSHandle
}

var _ WSStarter = (*actors.Sessions)(nil)

// DefaultMaxWSMessageBytes bounds one client WebSocket message after
// reassembly: the Realtime API accepts audio appends of up to 15 MiB
// (base64 in JSON), and a bit more leaves room for the JSON around them.
// Override with Options.MaxWSMessageBytes (--max-ws-message-bytes).
const DefaultMaxWSMessageBytes = 16 << 20

// Subprotocol tokens of the browser form of the Realtime API, which cannot
// set headers: "realtime, openai-insecure-api-key.KEY[, openai-beta.realtime-v1]".
const (
	subprotocolRealtime = "realtime"
	subprotocolKey      = "openai-insecure-api-key."
	subprotocolBeta     = "openai-beta.realtime-v1"
)

// upgrade answers a request on a WebSocket route. Loop-only; req's slices
// are valid only during the call. It reports whether the connection must
// close after the answer (only a refused handshake can say so).
func (c *conn) upgrade(rt *route, req *httpparse.Request) (closeAfter bool) {
	if status, code, msg, hdrs := checkHandshake(req); status != 0 {
		body := appendErrorBody(nil, dialectOpenAI, status, code, msg)
		c.scratch = appendResponse(c.scratch[:0], req.Minor, status, contentTypeJSON, "", []byte(hdrs), body, !req.KeepAlive)
		c.finishInline(rt, req, status, nil)
		return !req.KeepAlive
	}
	sp := subprotocolsOf(req)
	wr := &actors.WSRequest{
		Endpoint:  rt.endpoint,
		RequestID: requestID(req),
		Query:     string(req.Query),
		Beta:      sp.beta || bytes.Contains(req.Header("openai-beta"), []byte("realtime=v1")),
		Arrival:   time.Now(),
	}
	var h [160]byte
	hdrs := append(h[:0], "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	hdrs = wsproto.AppendAccept(hdrs, req.Header("sec-websocket-key"))
	hdrs = append(hdrs, "\r\n"...)
	if sp.realtime {
		// A client that offers subprotocols fails the connection unless
		// the server picks one of them (§4.1 item 6 of the client's
		// checks); never echo the key token.
		hdrs = append(hdrs, "Sec-WebSocket-Protocol: realtime\r\n"...)
	}
	c.scratch = appendHead(c.scratch[:0], 1, 101, "", wr.RequestID, hdrs, false)
	c.scratch = append(c.scratch, "\r\n"...)
	c.finishInline(rt, req, 101, nil)
	c.startWS(wr)
	return false
}

// checkHandshake checks a WebSocket upgrade request (RFC 6455 §4.2.1; the
// method, Host and auth were checked by the parser and precheck). It
// returns 0, or the refusal: status, error code, message and extra header
// lines.
func checkHandshake(req *httpparse.Request) (status int, code, msg, headers string) {
	const (
		versionHeader = "Sec-WebSocket-Version: 13\r\n"
		// RFC 9110 §15.5.22, §7.8: a 426 names the protocol to upgrade to
		// in Upgrade, which Connection must then list.
		upgrade426 = "Upgrade: websocket\r\nConnection: Upgrade\r\n" + versionHeader
	)
	up := req.Header("upgrade")
	switch {
	case up == nil:
		return 426, "websocket_upgrade_required",
			"This endpoint speaks WebSocket only: send GET with Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key.",
			upgrade426
	case !hasToken(up, "websocket"):
		return 400, "invalid_upgrade", "Upgrade must be websocket.", ""
	case req.Upgrade == nil:
		// The parser sets Upgrade only for HTTP/1.1 with Connection: upgrade.
		return 400, "invalid_upgrade", "A WebSocket handshake needs HTTP/1.1 and Connection: Upgrade.", ""
	}
	switch v := req.Header("sec-websocket-version"); {
	case v == nil:
		return 400, "invalid_websocket_version", "Sec-WebSocket-Version is missing; this server speaks version 13.", versionHeader
	case string(v) != "13":
		// §4.2.2: answer a version we do not speak with the ones we do.
		return 426, "unsupported_websocket_version", "Unsupported Sec-WebSocket-Version; this server speaks version 13.", upgrade426
	}
	if !wsproto.ValidKey(req.Header("sec-websocket-key")) {
		return 400, "invalid_websocket_key", "Sec-WebSocket-Key must be the base64 encoding of 16 bytes.", ""
	}
	return 0, "", "", ""
}

// hasToken reports whether a comma-separated header value lists tok
// (ASCII case-insensitive, surrounding whitespace ignored).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte{','})
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(tok)) {
			return true
		}
	}
	return false
}

// subprotocols is what a handshake's Sec-WebSocket-Protocol offers.
type subprotocols struct {
	realtime bool   // "realtime": echoed in the 101
	beta     bool   // "openai-beta.realtime-v1"
	key      []byte // after "openai-insecure-api-key.", a slice of the request
}

// subprotocolsOf reads every Sec-WebSocket-Protocol line of req.
func subprotocolsOf(req *httpparse.Request) subprotocols {
	var sp subprotocols
	for i := range req.Headers {
		h := &req.Headers[i]
		if !bytes.EqualFold(h.Name, []byte("sec-websocket-protocol")) {
			continue
		}
		for v := h.Value; len(v) > 0; {
			var t []byte
			t, v, _ = bytes.Cut(v, []byte{','})
			t = bytes.TrimSpace(t)
			switch {
			case string(t) == subprotocolRealtime:
				sp.realtime = true
			case string(t) == subprotocolBeta:
				sp.beta = true
			case bytes.HasPrefix(t, []byte(subprotocolKey)):
				sp.key = t[len(subprotocolKey):]
			}
		}
	}
	return sp
}
