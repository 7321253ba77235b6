package netio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/netio"
	"github.com/vajra-go/vajra/netio/wsproto"
)

// The WebSocket transport's tests run a real netio.Server whose WebSocket
// sessions are echoSessions (netio.Options.WebSockets): what they test is
// the protocol on the loops, not a session.

// wsWait bounds every wait of the WebSocket tests.
const wsWait = 10 * time.Second

// echoStarter starts an echoSession per upgraded connection and hands
// each to the test.
type echoStarter struct {
	sessions chan *echoSession
	// backlogAt, when set, makes the sessions queue messages (for the test
	// to work off) and report a backlog from that many on.
	backlogAt int
}

func (e *echoStarter) StartWS(conn actors.WSConn, req *actors.WSRequest) actors.WSHandle {
	s := &echoSession{conn: conn, req: *req, gone: make(chan struct{}), backlogAt: e.backlogAt}
	if e.backlogAt > 0 {
		s.queue = make(chan []byte, 1024)
	}
	select {
	case e.sessions <- s:
	default:
	}
	return s
}

// echoSession echoes each text message in one text frame, except the
// commands:
//
//	"close CODE"  the session closes the connection with CODE
//	"flood N"     the session sends N 32 KiB frames from its own goroutine
type echoSession struct {
	conn   actors.WSConn
	req    actors.WSRequest
	buf    []byte
	closes atomic.Int32
	gone   chan struct{} // closed by the first ConnClosed
	msgs   atomic.Int64

	backlogAt int
	queue     chan []byte  // messages not yet worked off (backlogAt > 0)
	maxQueued atomic.Int64 // the longest the queue was
}

// Backlogged implements actors.WSBacklog.
func (s *echoSession) Backlogged() bool { return s.backlogAt > 0 && len(s.queue) >= s.backlogAt }

// work echoes the queued messages, as a session's actor works off its
// mailbox, until the connection closes.
func (s *echoSession) work() {
	for {
		select {
		case p := <-s.queue:
			s.conn.Send(wsproto.AppendFrame(nil, wsproto.OpText, p))
		case <-s.gone:
			return
		}
	}
}

func (s *echoSession) Message(p []byte) {
	s.msgs.Add(1)
	if s.queue != nil {
		s.queue <- append([]byte(nil), p...) // cap 1024: a test bug if full
		if n := int64(len(s.queue)); n > s.maxQueued.Load() {
			s.maxQueued.Store(n)
		}
		return
	}
	if code, ok := bytes.CutPrefix(p, []byte("close ")); ok {
		n, _ := strconv.Atoi(string(code))
		s.conn.Close(n, "closed by the session")
		return
	}
	if n, ok := bytes.CutPrefix(p, []byte("flood ")); ok {
		count, _ := strconv.Atoi(string(n))
		go s.flood(count)
		return
	}
	s.buf = wsproto.AppendFrame(s.buf[:0], wsproto.OpText, p)
	s.conn.Send(s.buf)
}

func (s *echoSession) flood(n int) {
	frame := wsproto.AppendFrame(nil, wsproto.OpText, bytes.Repeat([]byte("f"), 32<<10))
	for i := 0; i < n; i++ {
		select {
		case <-s.gone:
			return
		default:
		}
		s.conn.Send(frame)
	}
}

func (s *echoSession) ConnClosed() {
	if s.closes.Add(1) == 1 {
		close(s.gone)
	}
}

// waitGone waits for the session's ConnClosed and checks it came once.
func (s *echoSession) waitGone(t *testing.T) {
	t.Helper()
	select {
	case <-s.gone:
	case <-time.After(wsWait):
		t.Fatal("ConnClosed was not called")
	}
	if n := s.closes.Load(); n != 1 {
		t.Fatalf("ConnClosed called %d times", n)
	}
}

// wsServer is a test server whose WebSocket sessions echo.
type wsServer struct {
	*testServer
	echo *echoStarter
}

func startWSServer(t testing.TB, mutate func(*netio.Options)) *wsServer {
	t.Helper()
	return startEchoServer(t, &echoStarter{}, mutate)
}

// startEchoServer is startWSServer with an echoStarter set up by the test.
func startEchoServer(t testing.TB, echo *echoStarter, mutate func(*netio.Options)) *wsServer {
	t.Helper()
	echo.sessions = make(chan *echoSession, 16)
	s := startServer(t, 0, func(o *netio.Options) {
		o.WebSockets = echo
		if mutate != nil {
			mutate(o)
		}
	})
	return &wsServer{s, echo}
}

// session returns the session of the connection upgraded last.
func (s *wsServer) session(t testing.TB) *echoSession {
	t.Helper()
	select {
	case es := <-s.echo.sessions:
		return es
	case <-time.After(wsWait):
		t.Fatal("no WebSocket session started")
		return nil
	}
}

// dial opens a WebSocket with coder/websocket (the library openai-go
// dials with) on path.
func (s *wsServer) dial(t *testing.T, path string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+s.addr+path, opts)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", path, err, status)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// rfcKey is the example key of RFC 6455 §1.3 and rfcAccept its answer.
const (
	rfcKey    = "dGhlIHNhbXBsZSBub25jZQ=="
	rfcAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
)

// upgradeRequest is a valid handshake for path, plus extra header lines.
func upgradeRequest(path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + rfcKey + "\r\n" + strings.Join(extra, "") + "\r\n"
}

// rawWS is a hand-driven WebSocket client: frames written byte by byte as
// the test wants them, server frames read back raw.
type rawWS struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	head string // the 101's head
}

// dialRawWS upgrades a raw connection on path; more is written right
// after the request, in the same write (the first frames).
func dialRawWS(t testing.TB, addr, path string, more []byte, extra ...string) *rawWS {
	t.Helper()
	conn := dialRaw(t, addr)
	req := append([]byte(upgradeRequest(path, extra...)), more...)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(wsWait))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	_ = resp.Header.Write(&head)
	if resp.StatusCode != 101 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want 101: %s %s", resp.StatusCode, head.String(), body)
	}
	return &rawWS{t: t, conn: conn, r: r, head: resp.Status + "\r\n" + head.String()}
}

// write sends raw bytes.
func (c *rawWS) write(b ...[]byte) {
	c.t.Helper()
	if _, err := c.conn.Write(bytes.Join(b, nil)); err != nil {
		c.t.Fatal(err)
	}
}

// readFrame reads one server frame, which must be unmasked.
func (c *rawWS) readFrame() (fin bool, op byte, payload []byte) {
	c.t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	if h[1]&0x80 != 0 {
		c.t.Fatal("the server masked a frame")
	}
	if h[0]&0x70 != 0 {
		c.t.Fatal("the server set RSV bits")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, _ = io.ReadFull(c.r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, _ = io.ReadFull(c.r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.r, payload); err != nil {
		c.t.Fatalf("reading a payload: %v", err)
	}
	return h[0]&0x80 != 0, h[0] & 0x0f, payload
}

// readClose reads frames up to a close frame and returns its code.
func (c *rawWS) readClose() int {
	c.t.Helper()
	for i := 0; i < 1000; i++ {
		_, op, p := c.readFrame()
		if op == wsproto.OpClose {
			return wsproto.CloseCode(p)
		}
	}
	c.t.Fatal("no close frame in 1000 frames")
	return 0
}

// expectEOF checks that the server ends the stream (within the deadline)
// after what was read, then closes the client's side, as a client does.
func (c *rawWS) expectEOF() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(wsWait))
	b, err := io.ReadAll(c.r)
	if err != nil {
		c.t.Fatalf("waiting for the server to close: %v (after %d bytes)", err, len(b))
	}
	_ = c.conn.Close()
}

var maskKey = [4]byte{0xa1, 0x07, 0x5c, 0xe2}

// clientFrame builds a client frame, masked unless unmasked.
func clientFrame(fin bool, op byte, payload []byte, unmasked ...bool) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	m := byte(0x80)
	if len(unmasked) > 0 && unmasked[0] {
		m = 0
	}
	var b []byte
	switch n := len(payload); {
	case n < 126:
		b = append(b, b0, m|byte(n))
	case n <= 0xffff:
		b = append(b, b0, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, b0, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if m == 0 {
		return append(b, payload...)
	}
	b = append(b, maskKey[:]...)
	for i, c := range payload {
		b = append(b, c^maskKey[i&3])
	}
	return b
}

func clientText(s string) []byte { return clientFrame(true, wsproto.OpText, []byte(s)) }

func clientClose(code int, reason string) []byte {
	return clientFrame(true, wsproto.OpClose, append([]byte{byte(code >> 8), byte(code)}, reason...))
}

// closeStatus is the close code a coder/websocket read ended with.
func closeStatus(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	for i := 0; i < 1000; i++ {
		if _, _, err := c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
	t.Fatal("no close in 1000 messages")
	return 0
}

// echo sends msg with coder/websocket and reads the echo.
func echo(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsWait)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	typ, got, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if typ != websocket.MessageText || string(got) != msg {
		t.Fatalf("echo of %d bytes: got %v of %d bytes", len(msg), typ, len(got))
	}
}
