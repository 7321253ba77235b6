package vajra_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// handEngine is an engine the test drives by hand: Start hands the session's
// request (with its Formatter) and sink to the test, which then plays the
// engine's part one token at a time.
type handEngine struct {
	started chan handSession
}

type handSession struct {
	req  *engine.Request
	sink engine.Sink
}

func (e *handEngine) Prepare(req *engine.Request) error {
	req.PromptTokens = []int{1, 2, 3}
	return nil
}

func (e *handEngine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	e.started <- handSession{req, sink}
	return handAbort{}, nil
}

func (e *handEngine) Tokenize(string) []int   { return nil }
func (e *handEngine) Detokenize([]int) string { return "" }
func (e *handEngine) Stats() engine.Stats     { return engine.Stats{Healthy: true} }
func (e *handEngine) Close() error            { return nil }

type handAbort struct{}

func (handAbort) Abort() {}

// benchServer starts a server with one event loop, changed by mutate, and
// returns a connection to it; both close when the benchmark ends.
func benchServer(b *testing.B, mutate func(*vajra.Config)) net.Conn {
	b.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port = 0
	cfg.Loops = 1
	mutate(&cfg)
	srv, err := vajra.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop(context.Background()) })
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkStreamedToken measures one streamed token through the whole hot
// path of a real server: the engine-side frame writer (the chat Formatter),
// the sink, the session actor's forward (through its mailbox and worker),
// the connection's outbox, the loop's doorbell and write(2), until the client
// has read the token's bytes. Each op is one token of one stream, with a
// wake of the actor and of the loop per token: the worst case. Steady state
// must not allocate.
func BenchmarkStreamedToken(b *testing.B) {
	eng := &handEngine{started: make(chan handSession, 1)}
	conn := benchServer(b, func(c *vajra.Config) { c.Engine = eng })
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	hs := <-eng.started
	// Read the response head.
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}

	tok := []byte(" hello")
	ids := []int{42}
	frames := make([]byte, 0, 1024)
	rbuf := make([]byte, 4096)
	var d engine.Delta // reused, as the engine does
	step := func(first bool) {
		d = engine.Delta{Text: tok, TokenIDs: ids, First: first}
		frames = hs.req.Formatter.AppendDelta(frames[:0], &d)
		hs.sink.Deliver(frames, nil)
		if _, err := io.ReadFull(r, rbuf[:len(frames)]); err != nil {
			b.Fatal(err)
		}
	}
	step(true)
	for i := 0; i < 100; i++ { // warm the buffers up to their steady size
		step(false)
	}
	if !strings.Contains(string(rbuf[:len(frames)]), `"content":" hello"`) {
		b.Fatalf("unexpected frame %q", rbuf[:len(frames)])
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(frames)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step(false)
	}
	b.StopTimer()
	final := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}}}
	frames = hs.req.Formatter.AppendEnd(frames[:0], final)
	hs.sink.Deliver(frames, final)
}

// BenchmarkNonStreamRequest measures one whole non-streamed chat completion
// on a real server with the embedded engine (16 tokens, instant steps), from
// a raw keep-alive client that allocates nothing itself: allocs/op is what
// the server allocates per request (decode, tokenize, actor spawn, engine
// session, response). It guards the per-request path; the per-token path is
// BenchmarkStreamedToken's.
func BenchmarkNonStreamRequest(b *testing.B) {
	conn := benchServer(b, func(c *vajra.Config) {
		c.KeepGOMAXPROCS = true
		c.Sim.ITL, c.Sim.TTFT, c.Sim.PrefillTPS = 0, 0, 0
	})
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	body := `{"model":"vajra-sim","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		prompt + `"}],"max_tokens":16,"ignore_eos":true}`
	req := []byte(fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	buf := make([]byte, 64<<10)
	endOfHead := []byte("\r\n\r\n")
	roundTrip := func() []byte {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := conn.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
			head, rest, ok := bytes.Cut(buf[:n], endOfHead)
			if !ok {
				continue
			}
			cl := contentLength(head)
			if cl < 0 {
				b.Fatalf("no Content-Length in %q", head)
			}
			if len(rest) >= cl {
				return rest[:cl]
			}
		}
	}
	for i := 0; i < 200; i++ { // warm the pools up
		roundTrip()
	}
	if out := roundTrip(); !strings.Contains(string(out), `"completion_tokens":16`) {
		b.Fatalf("unexpected response %q", out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip()
	}
}

// contentLength reads the Content-Length of a response head; -1 if absent.
func contentLength(head []byte) int {
	const name = "\r\ncontent-length:"
	for i := 0; i+len(name) <= len(head); i++ {
		if !strings.EqualFold(string(head[i:i+len(name)]), name) {
			continue
		}
		n, j := 0, i+len(name)
		for j < len(head) && head[j] == ' ' {
			j++
		}
		for ; j < len(head) && head[j] >= '0' && head[j] <= '9'; j++ {
			n = n*10 + int(head[j]-'0')
		}
		return n
	}
	return -1
}
