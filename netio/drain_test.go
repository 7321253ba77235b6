package netio_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDrainFinishesOrEndsEveryStream: on shutdown (Drain, WaitIdle until
// the deadline, then the engine closed, as the root's Shutdown does),
// /health turns 503 at once, the listener closes, a new request on an open connection gets 503
// with Connection: close, a stream that can finish before the deadline
// finishes normally, and a stream still running at the deadline ends with
// its terminal error event and [DONE]: no stream is cut.
func TestDrainFinishesOrEndsEveryStream(t *testing.T) {
	srv := startServer(t, 5*time.Millisecond, nil)
	addr := srv.addr
	stream := func(maxTokens int) *bufio.Reader {
		body := fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, maxTokens)
		_, r, head := rawStream(t, addr, body)
		if !strings.HasPrefix(head, "HTTP/1.1 200") {
			t.Fatalf("stream head %q", head)
		}
		return r
	}
	long, short := stream(4000), stream(60)
	// Two idle keep-alive connections, opened before the drain.
	idle := make([]net.Conn, 2)
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprint(c, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
		if st, _ := readResponse(t, bufio.NewReader(c)); st != 200 {
			t.Fatal(st)
		}
		idle[i] = c
	}

	srv.net.Drain()
	deadline, expire := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- srv.shutdown(deadline) }()

	// /health answers 503 at once.
	fmt.Fprint(idle[0], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	if st, _ := readResponse(t, bufio.NewReader(idle[0])); st != 503 {
		t.Fatalf("/health while draining: %d", st)
	}
	// A new request on an open connection: 503, Connection: close.
	fmt.Fprint(idle[1], "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\n")
	raw, _ := io.ReadAll(idle[1])
	if !strings.HasPrefix(string(raw), "HTTP/1.1 503") || !strings.Contains(string(raw), "Connection: close\r\n") {
		t.Fatalf("request while draining: %q", raw)
	}
	// The listener is closed: the kernel refuses new connections.
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a new connection was accepted while draining")
	}

	// The short stream finishes normally.
	if tokens, done, errs := readEvents(t, short, nil); tokens != 60 || !done || errs != 0 {
		t.Fatalf("short stream: %d tokens, done %v, %d errors", tokens, done, errs)
	}
	// The deadline passes: the long stream ends with its error event.
	expire()
	tokens, done, errs := readEvents(t, long, nil)
	if !done || errs != 1 || tokens == 0 || tokens >= 4000 {
		t.Fatalf("long stream: %d tokens, done %v, %d error events", tokens, done, errs)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown did not return")
	}
}
