package netio

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/eventually"
)

// startTestServer runs a netio server over the simulated engine with the
// given ITL, one event loop.
func startTestServer(t *testing.T, itl time.Duration, mutate func(*Options)) *Server {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.ITL = itl
	eng, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := actors.NewSessions(actors.Config{Engine: eng, Models: []string{"vajra-sim"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Addr: "127.0.0.1:0", Loops: 1, KeepGOMAXPROCS: true, Models: []string{"vajra-sim"}, Sessions: sessions, Engine: eng}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
		s.Release()
		sessions.Close()
		_ = eng.Close()
	})
	return s
}

// TestPipelinedInputBounded: a client pipelines ~4 MiB of requests behind
// a streamed one that lasts about a second. The server stops reading the
// connection once it holds MaxPipelinedBytes (the pause is counted) and
// never holds more than that plus one read; every pipelined request still
// gets its response, in order, once the stream ends. Before back-pressure
// the connection buffered the whole 4 MiB.
func TestPipelinedInputBounded(t *testing.T) {
	s := startTestServer(t, 2*time.Millisecond, nil)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))

	const n = 500
	pad := strings.Repeat("p", 8<<10)
	path := func(i int) string {
		if i%5 == 0 {
			return "/v1/models"
		}
		return "/ping"
	}
	werr := make(chan error, 1)
	go func() {
		body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":400,"ignore_eos":true,"stream":true}`
		w := bufio.NewWriterSize(c, 64<<10)
		fmt.Fprintf(w, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "GET %s HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", path(i), pad)
		}
		werr <- w.Flush()
	}()

	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("stream: %d %v %.200s", res.StatusCode, err, b)
	}
	for i := 0; i < n; i++ {
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || (path(i) == "/v1/models") != strings.Contains(string(b), `"object":"list"`) {
			t.Fatalf("response %d (%s): %d %.100s", i, path(i), res.StatusCode, b)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	const oneRead = 64 << 10 // gnet's read buffer
	peak, pauses := s.PeakPipelinedBytes(), s.ReadPauses()
	t.Logf("pauses %d, peak held %d bytes", pauses, peak)
	if pauses == 0 || peak > DefaultMaxPipelinedBytes+oneRead {
		t.Fatalf("pauses %d, peak held %d bytes, want at most %d", pauses, peak, DefaultMaxPipelinedBytes+oneRead)
	}
}

// TestPausedConnectionDisconnect: a connection paused for holding too much
// pipelined input still sees its client leave (EPOLLRDHUP stays armed),
// and the stream in flight is aborted at once, not at its end. (gnet
// closes a connection on a FIN even with pipelined requests unanswered:
// it does not support half-closed clients, paused or not.)
func TestPausedConnectionDisconnect(t *testing.T) {
	s := startTestServer(t, 2*time.Millisecond, nil)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":8000,"ignore_eos":true,"stream":true}`
	w := bufio.NewWriterSize(c, 64<<10)
	fmt.Fprintf(w, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	pad := strings.Repeat("p", 8<<10)
	// 12 x 8 KiB: past the bound, and within what the server's kernel
	// takes, so that the FIN is not queued behind unsent data.
	for i := 0; i < 12; i++ {
		fmt.Fprintf(w, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", pad)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the connection's reading pauses with its request in flight", func() bool {
		return s.ReadPauses() != 0 && s.InFlight() == 1
	})
	start := time.Now()
	// A FIN alone (a reset would be reported whatever the event set).
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the stream of a paused connection is aborted when its client leaves", func() bool { return s.InFlight() == 0 })
	t.Logf("aborted %v after the FIN", time.Since(start))
}
