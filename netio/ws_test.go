package netio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/netio"
	"github.com/vajra-go/vajra/netio/wsproto"
)

// TestWSHandshake: the 101 carries RFC 6455's accept value for its example
// key, declines the deflate extension the client offered (no
// Sec-WebSocket-Extensions), and the frames sent with the request (in the
// same write) are the first WebSocket bytes.
func TestWSHandshake(t *testing.T) {
	s := startWSServer(t, nil)
	c := dialRawWS(t, s.addr, "/v1/realtime?model=vajra-sim", clientText("first"),
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n", "OpenAI-Beta: realtime=v1\r\n")
	for _, want := range []string{"101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade", "Sec-Websocket-Accept: " + rfcAccept} {
		if !strings.Contains(c.head, want) {
			t.Fatalf("101 head lacks %q:\n%s", want, c.head)
		}
	}
	if strings.Contains(strings.ToLower(c.head), "sec-websocket-extensions") || strings.Contains(strings.ToLower(c.head), "sec-websocket-protocol") {
		t.Fatalf("101 head negotiates something:\n%s", c.head)
	}
	if _, op, p := c.readFrame(); op != wsproto.OpText || string(p) != "first" {
		t.Fatalf("echo of the first frame: op %d %q", op, p)
	}
	es := s.session(t)
	if es.req.Endpoint != actors.EndpointRealtime || es.req.Query != "model=vajra-sim" || !es.req.Beta || es.req.RequestID == "" {
		t.Fatalf("WSRequest %+v", es.req)
	}
	// RSV1 after a declined deflate: a protocol error.
	c.write([]byte{0xc1, 0x80, 1, 2, 3, 4})
	if code := c.readClose(); code != wsproto.CloseProtocolError {
		t.Fatalf("RSV1: close %d, want 1002", code)
	}
	c.expectEOF()
	es.waitGone(t)
}

// TestWSHandshakeRefused: a GET on a WebSocket route that is no valid
// upgrade gets a clear error in OpenAI's shape, and the connection stays
// HTTP.
func TestWSHandshakeRefused(t *testing.T) {
	s := startWSServer(t, nil)
	head := func(path string, lines ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(lines, "") + "Connection: close\r\n\r\n"
	}
	const (
		up   = "Upgrade: websocket\r\n"
		conn = "Connection: Upgrade\r\n"
		ver  = "Sec-WebSocket-Version: 13\r\n"
		key  = "Sec-WebSocket-Key: " + rfcKey + "\r\n"
	)
	f := func(name, req string, wantStatus int, wantCode, wantHeader string) {
		t.Helper()
		status, h, body := rawExchange(t, s.addr, req)
		if status != wantStatus {
			t.Fatalf("%s: status %d, want %d: %s", name, status, wantStatus, body)
		}
		var e struct {
			Error struct{ Message, Code string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != wantCode || e.Error.Message == "" {
			t.Fatalf("%s: body %s, want code %s", name, body, wantCode)
		}
		if wantHeader != "" && !strings.Contains(h, wantHeader) {
			t.Fatalf("%s: head lacks %q:\n%s", name, wantHeader, h)
		}
	}
	// The parser folds Connection lines; these requests carry their own
	// Connection: upgrade line plus the helper's close.
	f("plain GET", head("/v1/realtime"), 426, "websocket_upgrade_required", "Upgrade: websocket\r\nConnection: Upgrade")
	f("plain GET responses", head("/v1/responses"), 426, "websocket_upgrade_required", "Sec-WebSocket-Version: 13")
	f("wrong version", head("/v1/realtime", up, conn, "Sec-WebSocket-Version: 8\r\n", key), 426, "unsupported_websocket_version", "Sec-WebSocket-Version: 13")
	f("wrong version names the upgrade", head("/v1/realtime", up, conn, "Sec-WebSocket-Version: 8\r\n", key), 426, "unsupported_websocket_version", "Upgrade: websocket")
	f("no version", head("/v1/realtime", up, conn, key), 400, "invalid_websocket_version", "Sec-WebSocket-Version: 13")
	f("no key", head("/v1/realtime", up, conn, ver), 400, "invalid_websocket_key", "")
	f("short key", head("/v1/realtime", up, conn, ver, "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA\r\n"), 400, "invalid_websocket_key", "")
	f("key of 17 bytes", head("/v1/realtime", up, conn, ver, "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAA=\r\n"), 400, "invalid_websocket_key", "")
	f("not websocket", head("/v1/realtime", "Upgrade: h2c\r\n", conn, ver, key), 400, "invalid_upgrade", "")
	f("no Connection: upgrade", head("/v1/realtime", up, ver, key), 400, "invalid_upgrade", "")
	f("HTTP/1.0", "GET /v1/realtime HTTP/1.0\r\nHost: x\r\n"+up+conn+ver+key+"\r\n", 400, "invalid_upgrade", "")
	// The POST route of /v1/responses is untouched by its WebSocket GET.
	status, _, _ := rawExchange(t, s.addr, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	if status != 415 {
		t.Fatalf("POST /v1/responses: %d, want 415", status)
	}
}

// TestWSAuth: a WebSocket route needs a key as any API route: Bearer, or
// the browser's subprotocol form, which gets "realtime" echoed.
func TestWSAuth(t *testing.T) {
	s := startWSServer(t, func(o *netio.Options) { o.APIKeys = []string{"test-key"} })
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws://"+s.addr+"/v1/realtime", nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("no key: %v %v", err, resp)
	}
	_, resp, err = websocket.Dial(ctx, "ws://"+s.addr+"/v1/realtime", &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key.wrong"}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("wrong subprotocol key: %v %v", err, resp)
	}

	c := s.dial(t, "/v1/realtime", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer test-key"}}})
	if c.Subprotocol() != "" {
		t.Fatalf("subprotocol %q chosen though none was offered", c.Subprotocol())
	}
	echo(t, c, "bearer")

	c = s.dial(t, "/v1/realtime", &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key.test-key", "openai-beta.realtime-v1"}})
	if c.Subprotocol() != "realtime" {
		t.Fatalf("subprotocol %q, want realtime", c.Subprotocol())
	}
	echo(t, c, "subprotocol key")
	s.session(t)
	if es := s.session(t); !es.req.Beta {
		t.Fatal("openai-beta.realtime-v1 did not set Beta")
	}
}

// TestWSRoutes: both WebSocket endpoints, also under /openai/v1/.
func TestWSRoutes(t *testing.T) {
	s := startWSServer(t, nil)
	for path, want := range map[string]actors.Endpoint{
		"/v1/realtime": actors.EndpointRealtime, "/openai/v1/realtime": actors.EndpointRealtime,
		"/v1/responses": actors.EndpointResponsesWS, "/openai/v1/responses": actors.EndpointResponsesWS,
	} {
		echo(t, s.dial(t, path, nil), path)
		if es := s.session(t); es.req.Endpoint != want {
			t.Fatalf("%s: endpoint %v, want %v", path, es.req.Endpoint, want)
		}
	}
}

// TestWSEchoSizes: messages around each length form's boundaries, one
// frame each (coder/websocket), with deflate offered and declined
// (CompressionContextTakeover must still work uncompressed).
func TestWSEchoSizes(t *testing.T) {
	s := startWSServer(t, nil)
	c := s.dial(t, "/v1/realtime", &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
	c.SetReadLimit(4 << 20)
	for _, n := range []int{0, 1, 125, 126, 127, 65535, 65536, 65537, 1 << 20} {
		echo(t, c, strings.Repeat("é", n/2)+strings.Repeat("x", n%2))
	}
}

// TestWSFragmentedWithPing: a masked message in three fragments with a
// ping between the first two is answered with the pong first, then the
// whole message; each piece written separately.
func TestWSFragmentedWithPing(t *testing.T) {
	s := startWSServer(t, nil)
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	c.write(clientFrame(false, wsproto.OpText, []byte("hello ")))
	c.write(clientFrame(true, wsproto.OpPing, []byte("ping!")))
	c.write(clientFrame(false, wsproto.OpContinuation, []byte("wide ")))
	c.write(clientFrame(true, wsproto.OpContinuation, []byte("sea")))
	if fin, op, p := c.readFrame(); !fin || op != wsproto.OpPong || string(p) != "ping!" {
		t.Fatalf("got op %d %q, want the pong", op, p)
	}
	if fin, op, p := c.readFrame(); !fin || op != wsproto.OpText || string(p) != "hello wide sea" {
		t.Fatalf("got op %d %q, want the message", op, p)
	}
	// An unsolicited pong is ignored; a lone ping answered.
	c.write(clientFrame(true, wsproto.OpPong, nil), clientFrame(true, wsproto.OpPing, nil))
	if _, op, p := c.readFrame(); op != wsproto.OpPong || len(p) != 0 {
		t.Fatalf("got op %d %q, want an empty pong", op, p)
	}
}

// TestWSPing: coder/websocket's Ping gets its pong.
func TestWSPing(t *testing.T) {
	s := startWSServer(t, nil)
	c := s.dial(t, "/v1/realtime", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	c.CloseRead(ctx) // a reader must run for the pong to be seen
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWSClientClose: the client's close is echoed with its code (1000 for
// none), then the server closes TCP and the session hears of it once.
func TestWSClientClose(t *testing.T) {
	s := startWSServer(t, nil)
	for _, tc := range []struct {
		frame []byte
		want  int
	}{
		{clientClose(4001, "done"), 4001},
		{clientClose(1000, ""), 1000},
		{clientFrame(true, wsproto.OpClose, nil), 1000},
	} {
		c := dialRawWS(t, s.addr, "/v1/realtime", nil)
		es := s.session(t)
		c.write(clientText("before"), tc.frame, clientText("after the close: ignored"))
		if _, op, p := c.readFrame(); op != wsproto.OpText || string(p) != "before" {
			t.Fatalf("got op %d %q", op, p)
		}
		if code := c.readClose(); code != tc.want {
			t.Fatalf("echoed %d, want %d", code, tc.want)
		}
		c.expectEOF()
		es.waitGone(t)
		if n := es.msgs.Load(); n != 1 {
			t.Fatalf("%d messages delivered, want 1", n)
		}
	}
	// coder/websocket's own close handshake.
	c := s.dial(t, "/v1/realtime", nil)
	es := s.session(t)
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("close handshake: %v", err)
	}
	es.waitGone(t)
}

// TestWSServerClose: the session's Close(1008) reaches the client after
// what was sent before it; the connection closes once the client answers.
func TestWSServerClose(t *testing.T) {
	s := startWSServer(t, nil)
	c := s.dial(t, "/v1/realtime", nil)
	es := s.session(t)
	echo(t, c, "one")
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("close 1008")); err != nil {
		t.Fatal(err)
	}
	if code := closeStatus(t, c); code != websocket.StatusPolicyViolation {
		t.Fatalf("close %d, want 1008", code)
	}
	es.waitGone(t)
	if st := s.net.ServerStats(); st.WebSocketConnections != 0 {
		t.Fatalf("%d WebSocket connections open", st.WebSocketConnections)
	}
}

// TestWSServerCloseSilentClient: a client that never answers the close
// frame is disconnected after the bounded wait.
func TestWSServerCloseSilentClient(t *testing.T) {
	s := startWSServer(t, nil)
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	es := s.session(t)
	start := time.Now()
	c.write(clientText("close 1011"), clientText("dropped: the server is closing"))
	if code := c.readClose(); code != wsproto.CloseInternalError {
		t.Fatalf("close %d", code)
	}
	c.expectEOF()
	if d := time.Since(start); d < time.Second {
		t.Fatalf("closed after %v, before the close wait", d)
	}
	es.waitGone(t)
	if n := es.msgs.Load(); n != 1 {
		t.Fatalf("%d messages delivered after the close", n-1)
	}
}

// TestWSProtocolErrors: each breach closes its connection with its code,
// and another connection carries on.
func TestWSProtocolErrors(t *testing.T) {
	s := startWSServer(t, func(o *netio.Options) { o.MaxWSMessageBytes = 1000 })
	other := s.dial(t, "/v1/realtime", nil)
	s.session(t)
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  int
	}{
		{"unmasked", clientFrame(true, wsproto.OpText, []byte("hi"), true), wsproto.CloseProtocolError},
		{"binary", clientFrame(true, wsproto.OpBinary, []byte{1, 2, 3}), wsproto.CloseUnsupportedData},
		{"invalid utf-8", clientFrame(true, wsproto.OpText, []byte("\xc3\x28")), wsproto.CloseInvalidPayload},
		{"oversize", clientFrame(true, wsproto.OpText, bytes.Repeat([]byte("a"), 1001)), wsproto.CloseMessageTooBig},
		{"oversize fragmented", append(clientFrame(false, wsproto.OpText, bytes.Repeat([]byte("a"), 600)),
			clientFrame(true, wsproto.OpContinuation, bytes.Repeat([]byte("a"), 600))...), wsproto.CloseMessageTooBig},
		{"bad opcode", clientFrame(true, 0x5, nil), wsproto.CloseProtocolError},
		{"lone continuation", clientFrame(true, wsproto.OpContinuation, []byte("x")), wsproto.CloseProtocolError},
		{"long ping", clientFrame(true, wsproto.OpPing, bytes.Repeat([]byte("p"), 126)), wsproto.CloseProtocolError},
		{"bad close code", clientClose(1006, ""), wsproto.CloseProtocolError},
	} {
		c := dialRawWS(t, s.addr, "/v1/realtime", nil)
		es := s.session(t)
		c.write(tc.bytes, clientText("never delivered"))
		if code := c.readClose(); code != tc.want {
			t.Fatalf("%s: close %d, want %d", tc.name, code, tc.want)
		}
		c.expectEOF()
		es.waitGone(t)
		if n := es.msgs.Load(); n != 0 {
			t.Fatalf("%s: %d messages delivered", tc.name, n)
		}
	}
	echo(t, other, "still here")
	// coder/websocket sees the same codes.
	c := s.dial(t, "/v1/realtime", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageBinary, []byte{1})
	if code := closeStatus(t, c); code != websocket.StatusUnsupportedData {
		t.Fatalf("binary via coder/websocket: %d", code)
	}
	c = s.dial(t, "/v1/realtime", nil)
	_ = c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte("a"), 2000))
	if code := closeStatus(t, c); code != websocket.StatusMessageTooBig {
		t.Fatalf("oversize via coder/websocket: %d", code)
	}
	if st := s.net.ServerStats(); st.WebSocketProtocolErrors < 11 {
		t.Fatalf("protocol errors counted: %d", st.WebSocketProtocolErrors)
	}
}

// TestWSTCPDrop: a client that just disconnects ends its session once.
func TestWSTCPDrop(t *testing.T) {
	s := startWSServer(t, nil)
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	es := s.session(t)
	c.write(clientText("hi"))
	c.readFrame()
	c.conn.Close()
	es.waitGone(t)
}

// TestWSKeepalive: a connection that sends nothing gets ping frames every
// StreamKeepalive; one with traffic flowing gets none; and IdleTimeout
// never closes a WebSocket.
func TestWSKeepalive(t *testing.T) {
	s := startWSServer(t, func(o *netio.Options) {
		o.StreamKeepalive = 2 * time.Second
		o.IdleTimeout = time.Second
	})
	quiet := dialRawWS(t, s.addr, "/v1/realtime", nil)
	busy := dialRawWS(t, s.addr, "/v1/realtime", nil)
	start := time.Now()
	// The busy connection echoes a message every 200 ms for 4.5 s, and
	// must see nothing but its echoes.
	for i := 0; time.Since(start) < 4500*time.Millisecond; i++ {
		busy.write(clientText("tick"))
		if _, op, p := busy.readFrame(); op != wsproto.OpText || string(p) != "tick" {
			t.Fatalf("busy connection got op %d %q at %v", op, p, time.Since(start))
		}
		time.Sleep(200 * time.Millisecond) // the traffic's pace, not a synchronisation
	}
	// The quiet one has two pings by now (at ~2-3 s and ~4-5 s), and is
	// still open though idle far past IdleTimeout.
	for i := 0; i < 2; i++ {
		if _, op, _ := quiet.readFrame(); op != wsproto.OpPing {
			t.Fatalf("quiet connection got op %d, want a ping", op)
		}
	}
	quiet.write(clientText("alive"))
	if _, op, p := quiet.readFrame(); op != wsproto.OpText || string(p) != "alive" {
		t.Fatalf("quiet connection: op %d %q", op, p)
	}
}

// TestWSSlowConsumer: a client that stops reading is cut off at
// MaxOutboundBytes, as an SSE client is.
func TestWSSlowConsumer(t *testing.T) {
	s := startWSServer(t, func(o *netio.Options) { o.MaxOutboundBytes = 256 << 10 })
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	es := s.session(t)
	c.write(clientText("flood 4000")) // 128 MiB, never read
	es.waitGone(t)
	if st := s.net.ServerStats(); st.SlowConsumers != 1 {
		t.Fatalf("slow consumers %d, want 1", st.SlowConsumers)
	}
}

// TestWSDrain: a drain sends 1001 to WebSocket connections, which count as
// in flight until they close.
func TestWSDrain(t *testing.T) {
	s := startWSServer(t, nil)
	c := s.dial(t, "/v1/realtime", nil)
	es := s.session(t)
	echo(t, c, "before the drain")
	if n := s.net.InFlight(); n != 1 {
		t.Fatalf("in flight %d, want 1", n)
	}
	s.net.Drain()
	if code := closeStatus(t, c); code != websocket.StatusGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	if err := s.net.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	es.waitGone(t)
}

// TestWSOpenAISDK: openai-go's own WebSocket clients (Realtime and
// Responses, which dial with coder/websocket, compression disabled) connect
// with their API key and exchange events with the echo session.
func TestWSOpenAISDK(t *testing.T) {
	s := startWSServer(t, func(o *netio.Options) { o.APIKeys = []string{"test-key"} })
	client := newClient("http://" + s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()

	rt, err := client.Realtime.Connect(ctx, realtime.RealtimeConnectionOptions{}, option.WithQuery("model", modelName))
	if err != nil {
		t.Fatalf("realtime connect: %v", err)
	}
	defer rt.Close()
	if es := s.session(t); es.req.Endpoint != actors.EndpointRealtime || es.req.Query != "model="+modelName {
		t.Fatalf("WSRequest %+v", es.req)
	}
	if err := rt.SendRaw(ctx, json.RawMessage(`{"type":"session.updated","event_id":"e1"}`)); err != nil {
		t.Fatal(err)
	}
	ev, err := rt.Recv(ctx)
	if err != nil || ev.Type != "session.updated" {
		t.Fatalf("realtime recv: %v %q", err, ev.Type)
	}

	rs, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("responses connect: %v", err)
	}
	defer rs.Close()
	if es := s.session(t); es.req.Endpoint != actors.EndpointResponsesWS {
		t.Fatalf("WSRequest %+v", es.req)
	}
	if err := rs.SendRaw(ctx, json.RawMessage(`{"type":"response.created","sequence_number":1}`)); err != nil {
		t.Fatal(err)
	}
	raw, err := rs.RecvRaw(ctx)
	if err != nil || !strings.Contains(string(raw), `"response.created"`) {
		t.Fatalf("responses recv: %v %s", err, raw)
	}
}

// TestWSInboundBackpressure: a session that reports a backlog stops the
// reading of its connection: of 300 messages sent in one write, it gets
// exactly as many as its backlog bound and the connection is paused; once
// it works them off, reading resumes and every message is echoed, in
// order.
func TestWSInboundBackpressure(t *testing.T) {
	const backlog = 4
	s := startEchoServer(t, &echoStarter{backlogAt: backlog}, nil)
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	es := s.session(t)
	var burst []byte
	for i := 0; i < 300; i++ {
		burst = append(burst, clientText(strconv.Itoa(i))...)
	}
	pausesBefore := s.net.ReadPauses()
	c.write(burst)
	eventually.Report(t, "the loop pauses reading the backlogged connection", func() bool {
		return s.net.ReadPauses() != pausesBefore && len(es.queue) >= backlog
	}, func() string {
		return fmt.Sprintf("%d pauses, %d queued", s.net.ReadPauses()-pausesBefore, len(es.queue))
	})
	if n := len(es.queue); n != backlog {
		t.Fatalf("%d messages delivered while backlogged, want %d", n, backlog)
	}
	go es.work()
	for i := 0; i < 300; i++ {
		if _, op, p := c.readFrame(); op != wsproto.OpText || string(p) != strconv.Itoa(i) {
			t.Fatalf("echo %d: op %d %q", i, op, p)
		}
	}
	if m := es.maxQueued.Load(); m > backlog {
		t.Fatalf("the session held %d messages, over its backlog bound %d", m, backlog)
	}
}

// TestWSMetrics: open WebSocket connections, close frames sent by code,
// protocol errors and the 101s are counted on /metrics.
func TestWSMetrics(t *testing.T) {
	s := startWSServer(t, nil)
	c := s.dial(t, "/v1/realtime", nil)
	es := s.session(t)
	echo(t, c, "counted")
	mfs := scrape(t, s.addr)
	if v := value(mfs, "vajra_websocket_connections"); v != 1 {
		t.Fatalf("vajra_websocket_connections %v, want 1", v)
	}
	if v := value(mfs, "vajra_http_requests_total", "route", "realtime", "status", "101"); v != 1 {
		t.Fatalf("101s counted: %v", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageText, []byte("close 1008"))
	closeStatus(t, c)
	es.waitGone(t)

	raw := dialRawWS(t, s.addr, "/v1/responses", nil)
	es = s.session(t)
	raw.write(clientFrame(true, wsproto.OpBinary, []byte{0}))
	raw.readClose()
	raw.expectEOF()
	es.waitGone(t)

	mfs = scrape(t, s.addr)
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vajra_websocket_connections", nil, 0},
		{"vajra_websocket_closes_total", []string{"code", "1008"}, 1},
		{"vajra_websocket_closes_total", []string{"code", "1003"}, 1},
		{"vajra_websocket_protocol_errors_total", nil, 1},
	} {
		if v := value(mfs, m.name, m.labels...); v != m.want {
			t.Fatalf("%s%v = %v, want %v", m.name, m.labels, v, m.want)
		}
	}
}

// TestWSPipelinedUpgrade: an upgrade pipelined behind a generation request,
// with a frame right behind it, all in one write: the response comes
// first, then the 101, then the echo, though the client sends nothing
// more.
func TestWSPipelinedUpgrade(t *testing.T) {
	s := startWSServer(t, nil)
	conn := dialRaw(t, s.addr)
	body := `{"model":"` + modelName + `","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	chat := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write(append([]byte(chat+upgradeRequest("/v1/realtime")), clientText("behind the upgrade")...)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(wsWait))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp, err = http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	c := &rawWS{t: t, conn: conn, r: r}
	if _, op, p := c.readFrame(); op != wsproto.OpText || string(p) != "behind the upgrade" {
		t.Fatalf("got op %d %q", op, p)
	}
}

// TestWSManyConnections: connections on both loops echo concurrently, each
// its own messages in its own order.
func TestWSManyConnections(t *testing.T) {
	s := startWSServer(t, nil)
	const conns, msgs = 40, 25
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		c := s.dial(t, "/v1/realtime", nil)
		go func(i int, c *websocket.Conn) {
			ctx, cancel := context.WithTimeout(context.Background(), wsWait)
			defer cancel()
			for j := 0; j < msgs; j++ {
				want := strconv.Itoa(i) + "/" + strconv.Itoa(j) + strings.Repeat("~", i*j)
				if err := c.Write(ctx, websocket.MessageText, []byte(want)); err != nil {
					errs <- err
					return
				}
				if _, got, err := c.Read(ctx); err != nil || string(got) != want {
					errs <- fmt.Errorf("connection %d message %d: %v %.20q", i, j, err, got)
					return
				}
			}
			errs <- c.Close(websocket.StatusNormalClosure, "")
		}(i, c)
	}
	for i := 0; i < conns; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
