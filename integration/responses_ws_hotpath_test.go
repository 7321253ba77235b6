package integration_test

import (
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
	ws := upgradeRaw(tb, conn, "/v1/responses")
	ws.write(`{"type":"response.create","stream_id":"hot","model":"vajra-sim","input":"hi"}`)
	hs := <-eng.started
	var last []byte
	readFrames := func(frames []byte) {
		for range countFrames(frames) {
			last = ws.read()
		}
	}

	tok := []byte(" hello")
	ids := []int{42}
	frames := make([]byte, 0, 4096)
	var d engine.Delta
	first := true
	frames = hs.req.Formatter.AppendStart(frames[:0], &engine.Start{PromptTokens: 3, N: 1})
	hs.sink.Deliver(frames, nil)
	readFrames(frames)
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
		readFrames(frames)
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
