package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/bits"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

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
	req.PromptTokens = []int32{1, 2, 3}
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

// hotServer starts a server with one event loop, changed by mutate, and
// returns a connection to it; both close when the test or benchmark ends.
func hotServer(tb testing.TB, mutate func(*vajra.Config)) net.Conn {
	tb.Helper()
	_, conn := hotServerOf(tb, mutate)
	return conn
}

// hotServerOf is hotServer that returns the server too.
func hotServerOf(tb testing.TB, mutate func(*vajra.Config)) (*vajra.Server, net.Conn) {
	tb.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port = 0
	cfg.Loops = 1
	mutate(&cfg)
	srv, err := vajra.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Stop(context.Background()) })
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return srv, conn
}

// startTokenStream starts a chat stream on a real server whose engine the
// caller plays (handEngine) and returns step, which makes the engine
// format and deliver one token and waits until the client has read its
// bytes, and frame, the bytes of the last token read. The buffers are warmed
// up to their steady size before it returns. The stream ends at cleanup.
func startTokenStream(tb testing.TB) (step func(), frame func() []byte) {
	tb.Helper()
	step, frame = startStreamOf(tb, "/v1/chat/completions", `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"stream":true}`, false)
	if !strings.Contains(string(frame()), `"content":" hello"`) {
		tb.Fatalf("unexpected frame %q", frame())
	}
	return step, frame
}

// startStreamOf is startTokenStream for any streamed request: body to
// path. sessionChunks says the session, not the engine, wraps each batch
// in its HTTP chunk (a background response's events are logged raw).
func startStreamOf(tb testing.TB, path, body string, sessionChunks bool) (step func(), frame func() []byte) {
	tb.Helper()
	eng := &handEngine{started: make(chan handSession, 1)}
	conn := hotServer(tb, func(c *vajra.Config) { c.Engine = eng })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	hs := <-eng.started
	// Read the response head.
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tb.Fatal(err)
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
	first := true
	last := 0
	step = func() {
		d = engine.Delta{Text: tok, TokenIDs: ids, First: first}
		first = false
		frames = hs.req.Formatter.AppendDelta(frames[:0], &d)
		hs.sink.Deliver(frames, nil)
		n := len(frames)
		if sessionChunks {
			n += (bits.Len(uint(n))+3)/4 + 4 // hex size, its CRLF, the trailing CRLF
		}
		if _, err := io.ReadFull(r, rbuf[:n]); err != nil {
			tb.Fatal(err)
		}
		last = n
	}
	frame = func() []byte { return rbuf[:last] }
	tb.Cleanup(func() {
		final := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}}}
		frames = hs.req.Formatter.AppendEnd(frames[:0], final)
		hs.sink.Deliver(frames, final)
	})
	for i := 0; i < 101; i++ { // the first token, then warm the buffers up
		step()
	}
	return step, frame
}

// BenchmarkStreamedToken measures one streamed token through the whole hot
// path of a real server: the engine-side frame writer (the chat Formatter),
// the sink, the session actor's forward (through its mailbox and worker),
// the connection's outbox, the loop's doorbell and write(2), until the client
// has read the token's bytes. Each op is one token of one stream, with a
// wake of the actor and of the loop per token: the worst case. Steady state
// must not allocate (TestStreamedTokenAllocs).
func BenchmarkStreamedToken(b *testing.B) {
	step, frame := startTokenStream(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.StopTimer()
}

// startNonStream starts a real server on the embedded engine (instant
// steps) and returns roundTrip, which sends one whole non-streamed chat
// completion (16 tokens) from a raw keep-alive client that allocates
// nothing itself and returns the response body (valid until the next
// call). The server's pools are warmed up before it returns.
func startNonStream(tb testing.TB) (roundTrip func() []byte) {
	_, roundTrip = startNonStreamOf(tb)
	return roundTrip
}

// startNonStreamOf is startNonStream that returns the server too.
func startNonStreamOf(tb testing.TB) (srv *vajra.Server, roundTrip func() []byte) {
	tb.Helper()
	srv, conn := hotServerOf(tb, func(c *vajra.Config) {
		c.KeepGOMAXPROCS = true
		c.Sim.ITL, c.Sim.TTFT, c.Sim.PrefillTPS = 0, 0, 0
	})
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	body := `{"model":"vajra-sim","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		prompt + `"}],"max_tokens":16,"ignore_eos":true}`
	req := []byte(fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	buf := make([]byte, 64<<10)
	endOfHead := []byte("\r\n\r\n")
	roundTrip = func() []byte {
		if _, err := conn.Write(req); err != nil {
			tb.Fatal(err)
		}
		n := 0
		for {
			m, err := conn.Read(buf[n:])
			if err != nil {
				tb.Fatal(err)
			}
			n += m
			head, rest, ok := bytes.Cut(buf[:n], endOfHead)
			if !ok {
				continue
			}
			cl := contentLength(head)
			if cl < 0 {
				tb.Fatalf("no Content-Length in %q", head)
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
		tb.Fatalf("unexpected response %q", out)
	}
	return srv, roundTrip
}

// BenchmarkNonStreamRequest measures one whole non-streamed chat completion
// on a real server with the embedded engine (16 tokens, instant steps):
// allocs/op is what the server allocates per request (decode, tokenize,
// actor spawn, engine session, response). It guards the per-request path
// (TestNonStreamRequestAllocs bounds it); the per-token path is
// BenchmarkStreamedToken's. protoactor's registry is warmed first
// (warmRegistry), so that allocs/op is steady state's whatever b.N.
func BenchmarkNonStreamRequest(b *testing.B) {
	srv, roundTrip := startNonStreamOf(b)
	warmRegistry(b, srv.ActorSystem().ProcessRegistry)
	for i := 0; i < 500; i++ { // the pools again, after warmRegistry's garbage
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip()
	}
}

// maxRequestAllocs bounds the heap allocations of one whole non-streamed
// chat completion through the real server in steady state, everything in
// the process counted: issue 15 asks for at most 12 (it was 25). The test
// measures 10.00, all of them made once per request by design or by a
// dependency:
//   - protoactor, per actor it spawns: its actor context, its process, the
//     PID, and the Terminated notice the session's guardian gets when it
//     stops (4; the props, producer, mailbox and id are the session's own:
//     actors/spawn.go);
//   - the engine: the prompt's token ids, the prepared state (which carries
//     the engine session's memory), the Result, and one copy of its text
//     and ids (4);
//   - the session with its dialect, mailbox, registry id and response id
//     (1), and the connection's exchange with its actors.Request and
//     request id (1).
//
// The decoded request, its engine messages, the body, the response body
// and the tokenizer's scratch come from pools; message contents are views
// of the pooled body. The bound leaves one allocation per request for a
// stray allocation of the runtime or a background goroutine during the
// window (1,000 requests, so a few strays add thousandths). Lower it when
// the count drops; raise it only with the reason in the commit message.
const maxRequestAllocs = 11

// maxTokenAllocs bounds the average heap allocations per streamed token in
// steady state: 0, with room for a stray allocation of the runtime or a
// background goroutine, 1 per 200 tokens.
const maxTokenAllocs = 0.005

// TestNonStreamRequestAllocs holds the per-request allocation claim:
// BenchmarkNonStreamRequest's request, measured as a test so that make test
// enforces it.
func TestNonStreamRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	srv, roundTrip := startNonStreamOf(t)
	warmRegistry(t, srv.ActorSystem().ProcessRegistry)
	for i := 0; i < 500; i++ { // the pools again, after warmRegistry's garbage
		roundTrip()
	}
	got := processAllocsPerRun(1000, func() { roundTrip() })
	t.Logf("%.2f allocations per request", got)
	if got > maxRequestAllocs {
		t.Errorf("a non-streamed request allocates %.2f times, want at most %v", got, maxRequestAllocs)
	}
}

// TestStreamedTokenAllocs holds the per-token claim: a streamed token
// through the real server (BenchmarkStreamedToken's path) allocates nothing
// in steady state.
func TestStreamedTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	step, _ := startTokenStream(t)
	got := processAllocsPerRun(2000, step)
	t.Logf("%.4f allocations per token", got)
	if got > maxTokenAllocs {
		t.Errorf("a streamed token allocates %.4f times, want 0 (at most %v)", got, maxTokenAllocs)
	}
}

// TestBackgroundStreamedTokenAllocs: a token of a streamed background
// response (logged, then sent to its subscriber in a chunk of the
// session's) costs no allocation beyond a foreground Responses stream's
// (whose formatter keeps the open item's text in a growing buffer), but
// for the event log's growth: it doubles, a few times per response.
func TestBackgroundStreamedTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	const runs = 2000
	var per [2]float64
	for i, body := range []string{
		`{"model":"vajra-sim","input":"hi","stream":true}`,
		`{"model":"vajra-sim","input":"hi","stream":true,"background":true}`,
	} {
		step, frame := startStreamOf(t, "/v1/responses", body, i == 1)
		if !strings.Contains(string(frame()), `"delta":" hello"`) {
			t.Fatalf("unexpected frame %q", frame())
		}
		per[i] = processAllocsPerRun(runs, step)
	}
	t.Logf("%.4f allocations per token in the foreground, %.4f in the background", per[0], per[1])
	// The log doubles from 64 KiB to the ~600 KiB 2,100 tokens take (4
	// times); the whole process's count varies by a few allocations a run
	// (timers, the loops' sweeps): at most one per hundred tokens, far
	// below the one per token a per-token allocation would add.
	if extra := per[1] - per[0]; extra > 0.01 {
		t.Errorf("a background token allocates %.4f times more than a foreground one, want at most 0.01", extra)
	}
}

// warmRegistry touches each of the maps of protoactor's process registry
// once, as a server that has run for a while has: the registry spreads
// actor ids over 1,024 buckets of 32 maps, and each map allocates its
// storage the first time an id lands in it and keeps it (a map that
// becomes empty keeps its storage). Spawning every actor under a new id,
// a fresh server pays that allocation on almost every request of its
// first thousands (0.75 per request over BenchmarkNonStreamRequest's
// first 20,000), and only about 350,000 requests in has every map met an
// id: steady state allocates nothing there. The keys are put and removed
// through the registry's public buckets; no actor is registered.
func warmRegistry(tb testing.TB, reg *actor.ProcessRegistryValue) {
	tb.Helper()
	want := len(reg.LocalPIDs.LocalPIDs) * len(reg.LocalPIDs.LocalPIDs[0]) // buckets x their maps
	seen := make(map[any]bool, want)
	var buf [32]byte
	for i := 0; len(seen) < want; i++ {
		if i == 100*want { // each key lands in a map at random: far more than enough
			tb.Fatalf("warmRegistry: %d of %d maps after %d keys", len(seen), want, i)
		}
		key := string(strconv.AppendInt(append(buf[:0], "warm$"...), int64(i), 36))
		b := reg.LocalPIDs.GetBucket(key)
		if sh := b.GetShard(key); !seen[sh] {
			seen[sh] = true
			b.Set(key, nil)
			b.Remove(key)
		}
	}
}

// processAllocsPerRun returns the average number of heap allocations the
// whole process (the server's goroutines included) makes per call of f,
// over runs calls. Unlike testing.AllocsPerRun it leaves GOMAXPROCS alone:
// the server's event loop and actors must run as they do in production.
func processAllocsPerRun(runs int, f func()) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
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
