package llamaserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/allocs"
)

// streamServer is a loopback server that answers every /completion with
// a prebuilt stream of n token events (chunked, one event per chunk, as
// llama-server's cpp-httplib writes them), so that what a client costs
// per token can be measured without a model.
type streamServer struct {
	l      net.Listener
	n      int
	mu     sync.Mutex
	reqs   []string
	bodies []string
}

func startStreamServer(tb testing.TB, n int) *streamServer {
	tb.Helper()
	return startBodyServer(tb, n, streamBytes(n))
}

// startBodyServer is startStreamServer with the stream given: pre, the
// chunked body of a stream of n tokens.
func startBodyServer(tb testing.TB, n int, pre []byte) *streamServer {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &streamServer{l: l, n: n}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c, pre)
		}
	}()
	tb.Cleanup(func() { l.Close() })
	return s
}

// streamBytes is the chunked body of a stream of n one-token events and
// the final event.
func streamBytes(n int) []byte {
	var b []byte
	chunk := func(s string) {
		b = append(b, strconv.FormatInt(int64(len(s)), 16)...)
		b = append(b, "\r\n"...)
		b = append(b, s...)
		b = append(b, "\r\n"...)
	}
	for i := 0; i < n; i++ {
		chunk(fmt.Sprintf("data: {\"index\":0,\"content\":\" the\",\"tokens\":[%d],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%d,\"tokens_evaluated\":5}\n\n", 100+i%50, i+1))
	}
	chunk(fmt.Sprintf("data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,\"tokens_predicted\":%d,\"tokens_evaluated\":5,\"stop_type\":\"limit\",\"timings\":{\"cache_n\":4}}\n\n", n))
	return append(b, "0\r\n\r\n"...)
}

func (s *streamServer) serve(c net.Conn, body []byte) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		s.mu.Lock()
		s.reqs = append(s.reqs, req.URL.Path)
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100000\r\n\r\n"
		if _, err := c.Write(append([]byte(head), body...)); err != nil {
			return
		}
	}
}

// countRx counts what it receives.
type countRx struct {
	tokens int
	end    chan *remote.End
}

func (r *countRx) Tokens(c *remote.Chunk) { r.tokens += len(c.TokenIDs) + c.Missing }
func (r *countRx) End(e *remote.End)      { r.end <- e }

func runStream(tb testing.TB, c remote.Client, n int) {
	rx := &countRx{end: make(chan *remote.End, 1)}
	sp := &engine.Sampling{}
	if _, err := c.Generate(context.Background(), &remote.Generate{ID: "x", Prompt: []int32{1, 2, 3}, Sampling: sp, MaxTokens: n}, rx); err != nil {
		tb.Fatal(err)
	}
	select {
	case e := <-rx.end:
		if e.Err != nil || rx.tokens != n || e.Choices[0].FinishReason != "length" || e.CachedTokens != 4 {
			tb.Fatalf("end %+v, %d tokens, want %d", e, rx.tokens, n)
		}
	case <-time.After(10 * time.Second):
		tb.Fatal("no End within 10 s")
	}
}

// TestClientStream: a stream's events become chunks and its final event
// the End; the connection is reused for the next request.
func TestClientStream(t *testing.T) {
	s := startStreamServer(t, 300)
	c, err := Dial("llama-server://"+s.l.Addr().String(), remote.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runStream(t, c, 300)
	runStream(t, c, 300)
}

// TestClientTokenAllocs: reading a stream allocates nothing per token:
// a 2,000-token stream against a 200-token one, so that the request's own
// cost (net/http's request and response, the goroutine) cancels out.
func TestClientTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	short, long := startStreamServer(t, 200), startStreamServer(t, 2000)
	cs, _ := Dial("llama-server://"+short.l.Addr().String(), remote.DialOptions{})
	cl, _ := Dial("llama-server://"+long.l.Addr().String(), remote.DialOptions{})
	defer cs.Close()
	defer cl.Close()
	runStream(t, cs, 200)
	runStream(t, cl, 2000)
	mallocs := func(c remote.Client, n int) uint64 {
		return allocs.Fewest(func() { runStream(t, c, n) })
	}
	a, b := mallocs(cs, 200), mallocs(cl, 2000)
	if per := (float64(b) - float64(a)) / 1800; per > 0.01 {
		t.Fatalf("%.4f allocations per token: %d for 2,000 tokens, %d for 200", per, b, a)
	}
	t.Logf("%d allocations for a 2,000-token stream, %d for 200", b, a)
}

// BenchmarkClientStream: the client's CPU per token, reading a
// llama-server stream over loopback HTTP (the server's writes included:
// one prebuilt body per request).
func BenchmarkClientStream(b *testing.B) {
	const n = 1000
	s := startStreamServer(b, n)
	c, _ := Dial("llama-server://"+s.l.Addr().String(), remote.DialOptions{})
	defer c.Close()
	runStream(b, c, n)
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= n {
		runStream(b, c, n)
	}
}
