package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// startWSTokenStream is startTokenStream over the Responses API's
// WebSocket: a raw client (which allocates nothing per token) upgrades,
// sends one response.create with a stream_id (so that the exchange's
// rewrite is on the path), and step makes the engine (the test, through
// the request's own Formatter) deliver one token and waits until the
// client has read its frames. frame returns the last frame's payload.
// The Responses formatter's own per-response buffers are left out (see
// step).
func startWSTokenStream(tb testing.TB) (step func(), frame func() []byte) {
	tb.Helper()
	eng := &handEngine{started: make(chan handSession, 1)}
	conn := hotServer(tb, func(c *vajra.Config) { c.Engine = eng })
	fmt.Fprintf(conn, "GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	r := bufio.NewReaderSize(conn, 64<<10)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 101") {
		tb.Fatalf("handshake: %q %v", status, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tb.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	create := `{"type":"response.create","stream_id":"hot","model":"vajra-sim","input":"hi"}`
	// A masked text frame (RFC 6455 §5.3) with a zero masking key: the
	// payload goes as it is.
	msg := append([]byte{0x81, 0x80 | byte(len(create)), 0, 0, 0, 0}, create...)
	if _, err := conn.Write(msg); err != nil {
		tb.Fatal(err)
	}
	hs := <-eng.started

	payload := make([]byte, 64<<10)
	var hdr [8]byte
	var last []byte
	// readFrame reads one server frame (unmasked, RFC 6455 §5.2).
	readFrame := func() {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			tb.Fatal(err)
		}
		if hdr[0] != 0x81 || hdr[1]&0x80 != 0 {
			tb.Fatalf("frame header %x", hdr[:2])
		}
		n := int(hdr[1])
		switch n {
		case 126:
			if _, err := io.ReadFull(r, hdr[:2]); err != nil {
				tb.Fatal(err)
			}
			n = int(hdr[0])<<8 | int(hdr[1])
		case 127:
			tb.Fatal("frame over 64 KiB")
		}
		if _, err := io.ReadFull(r, payload[:n]); err != nil {
			tb.Fatal(err)
		}
		last = payload[:n]
	}
	// frameCount counts the frames the engine wrote (the client reads as
	// many).
	frameCount := func(b []byte) int {
		k := 0
		for len(b) >= 2 {
			n, h := int(b[1]), 2
			if n == 126 {
				n, h = int(b[2])<<8|int(b[3]), 4
			}
			b = b[h+n:]
			k++
		}
		return k
	}

	tok := []byte(" hello")
	ids := []int{42}
	frames := make([]byte, 0, 4096)
	var d engine.Delta
	first := true
	frames = hs.req.Formatter.AppendStart(frames[:0], &engine.Start{PromptTokens: 3, N: 1})
	hs.sink.Deliver(frames, nil)
	for range frameCount(frames) {
		readFrame()
	}
	// The first token opens the message item; every later one is one
	// response.output_text.delta, delivered as the Formatter wrote the
	// second. (The Formatter itself keeps the item's text for the .done
	// events, a buffer that grows with the answer, amortised: that is
	// codegen's cost, measured by its own benchmarks; this measures the
	// forwarding path, which must not allocate at all.)
	var delta []byte
	step = func() {
		if delta == nil {
			d = engine.Delta{Text: tok, TokenIDs: ids, First: first}
			frames = hs.req.Formatter.AppendDelta(frames[:0], &d)
			if !first {
				delta = append([]byte(nil), frames...)
			}
			first = false
		} else {
			frames = append(frames[:0], delta...)
		}
		hs.sink.Deliver(frames, nil)
		for range frameCount(frames) {
			readFrame()
		}
	}
	frame = func() []byte { return last }
	tb.Cleanup(func() {
		final := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}}}
		frames = hs.req.Formatter.AppendEnd(frames[:0], final)
		hs.sink.Deliver(frames, final)
	})
	for range 101 { // the first token, then warm the buffers up
		step()
	}
	if s := string(frame()); !strings.HasPrefix(s, `{"type":"response.output_text.delta","stream_id":"hot",`) || !strings.Contains(s, `"delta":" hello"`) {
		tb.Fatalf("unexpected frame %s", s)
	}
	return step, frame
}

// BenchmarkResponsesWSToken is BenchmarkStreamedToken over the Responses
// API's WebSocket, stream_id rewrite included: one token from the engine's
// Formatter through the sink, the session, the wsExchange, netio's
// WebSocket outbox and write(2) to the client.
func BenchmarkResponsesWSToken(b *testing.B) {
	step, frame := startWSTokenStream(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.StopTimer()
}

// TestResponsesWSTokenAllocs: a token forwarded over the Responses API's
// WebSocket allocates nothing in steady state, the whole server counted.
func TestResponsesWSTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	step, _ := startWSTokenStream(t)
	got := processAllocsPerRun(2000, step)
	t.Logf("%.4f allocations per token", got)
	if got > maxTokenAllocs {
		t.Errorf("a token over WebSocket allocates %.4f times, want 0 (at most %v)", got, maxTokenAllocs)
	}
}
