package llama

import (
	"runtime"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// nopStream is a Formatter and a Sink that keep nothing: what remains is
// the engine's own per-token cost.
type nopStream struct{ done chan *engine.Result }

func (n *nopStream) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		n.done <- final
	}
}
func (n *nopStream) AppendStart(dst []byte, _ *engine.Start) []byte         { return append(dst, 's') }
func (n *nopStream) AppendDelta(dst []byte, d *engine.Delta) []byte         { return append(dst, d.Text...) }
func (n *nopStream) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte { return dst }
func (n *nopStream) AppendEnd(dst []byte, _ *engine.Result) []byte          { return dst }
func (n *nopStream) AppendError(dst []byte, _ *engine.Error) []byte         { return dst }

// streamTokens runs one streamed chat request of n tokens.
func streamTokens(tb testing.TB, e *Engine, n int) {
	ns := &nopStream{done: make(chan *engine.Result, 1)}
	req := chatReq("Tell me about the sea.", n)
	req.Sampling.IgnoreEOS, req.Stream, req.Formatter = true, true, ns
	if _, err := e.Start(req, ns); err != nil {
		tb.Fatal(err)
	}
	if res := <-ns.done; res.Err != nil || res.Usage.CompletionTokens != n {
		tb.Fatalf("err %v usage %+v", res.Err, res.Usage)
	}
}

// BenchmarkLlamaTokens: one streamed token through the scheduler, the
// tiny model's decode, sampling, parsing and formatting.
func BenchmarkLlamaTokens(b *testing.B) {
	e := newTestEngine(b, Config{MaxModelLen: 2048}, tinymodel.Config{})
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= 1000 {
		streamTokens(b, e, min(left, 1000))
	}
}

// TestTokenPathAllocations bounds the allocations a streamed token adds:
// a 1,200-token request against a 200-token one, so that the request's
// own setup (samplers, parser, result) cancels out and what is left is
// the per-token path (nothing in steady state; the output slices grow by
// doubling, a handful of times).
func TestTokenPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newTestEngine(t, Config{MaxModelLen: 1300}, tinymodel.Config{})
	mallocs := func(n int) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		streamTokens(t, e, n)
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	streamTokens(t, e, 1200) // warm the engine's buffers
	short, long := mallocs(200), mallocs(1200)
	if per := (float64(long) - float64(short)) / 1000; per > 0.02 {
		t.Fatalf("%.4f allocations per token: %d for 1,200 tokens, %d for 200", per, long, short)
	}
	if testing.Verbose() {
		t.Logf("%d allocations for 1,200 tokens, %d for 200", long, short)
	}
}
