package llama

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/allocs"
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

// streamTokens runs one streamed chat request of n tokens at temperature
// temp (0: greedy; above it, with no top-k, top-p or min-p, the fused draw).
func streamTokens(tb testing.TB, e *Engine, n int, temp float64) {
	streamTokensWith(tb, e, n, temp, 0)
}

// streamTokensWith is streamTokens with logprobs and top top logprobs
// per token when top > 0.
func streamTokensWith(tb testing.TB, e *Engine, n int, temp float64, top int) {
	ns := &nopStream{done: make(chan *engine.Result, 1)}
	req := chatReq("Tell me about the sea.", n)
	req.Sampling.IgnoreEOS, req.Stream, req.Formatter = true, true, ns
	req.Sampling.Temperature = temp
	req.Sampling.Logprobs, req.Sampling.TopLogprobs = top > 0, top
	if _, err := e.Start(req, ns); err != nil {
		tb.Fatal(err)
	}
	if res := <-ns.done; res.Err != nil || res.Usage.CompletionTokens != n {
		tb.Fatalf("err %v usage %+v", res.Err, res.Usage)
	}
}

// BenchmarkLlamaTokens: one streamed token through the scheduler, the
// tiny model's decode, sampling (greedy, and temperature 1: vLLM's
// defaults, the fused draw), parsing and formatting.
func BenchmarkLlamaTokens(b *testing.B) {
	e := newTestEngine(b, Config{Config: engine.Config{MaxModelLen: 2048}}, tinymodel.Config{})
	for _, temp := range []float64{0, 1} {
		b.Run(map[float64]string{0: "greedy", 1: "temperature"}[temp], func(b *testing.B) {
			b.ReportAllocs()
			for left := b.N; left > 0; left -= 1000 {
				streamTokens(b, e, min(left, 1000), temp)
			}
		})
	}
}

// TestTokenPathAllocations bounds the allocations a streamed token adds:
// a 1,200-token request against a 200-token one, so that the request's
// own setup (samplers, parser, result) cancels out and what is left is
// the per-token path (nothing in steady state; the output slices grow by
// doubling, a handful of times). Each length counts its fewest of three
// runs (allocs.Fewest): the runtime's own allocations on a loaded machine
// only ever add.
func TestTokenPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 1300}}, tinymodel.Config{})
	// Greedy, the fused draw, and logprobs with 5 alternatives (whose
	// strings go into the choice's arenas, grown by doubling).
	for _, c := range []struct {
		temp float64
		top  int
	}{{0, 0}, {1, 0}, {0, 5}} {
		mallocs := func(n int) uint64 {
			return allocs.Fewest(func() { streamTokensWith(t, e, n, c.temp, c.top) })
		}
		streamTokensWith(t, e, 1200, c.temp, c.top) // warm the engine's buffers
		short, long := mallocs(200), mallocs(1200)
		if per := (float64(long) - float64(short)) / 1000; per > 0.02 {
			t.Fatalf("temperature %v, top_logprobs %d: %.4f allocations per token: %d for 1,200 tokens, %d for 200", c.temp, c.top, per, long, short)
		}
		if testing.Verbose() {
			t.Logf("temperature %v, top_logprobs %d: %d allocations for 1,200 tokens, %d for 200", c.temp, c.top, long, short)
		}
	}
}
