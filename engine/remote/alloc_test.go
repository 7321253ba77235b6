package remote

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// nopStream is a Formatter and a Sink that keep nothing: what remains is
// the engine's own per-chunk cost.
type nopStream struct{ final *engine.Result }

func (n *nopStream) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		n.final = final
	}
}
func (n *nopStream) AppendStart(dst []byte, _ *engine.Start) []byte         { return append(dst, 's') }
func (n *nopStream) AppendDelta(dst []byte, d *engine.Delta) []byte         { return append(dst, d.Text...) }
func (n *nopStream) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte { return dst }
func (n *nopStream) AppendEnd(dst []byte, _ *engine.Result) []byte          { return dst }
func (n *nopStream) AppendError(dst []byte, _ *engine.Error) []byte         { return dst }

// tokenRequest starts a long streamed request on a fake worker and returns
// its Receiver, warmed up by warm tokens.
func tokenRequest(tb testing.TB, logprobs bool, warm int) (*request, *Chunk) {
	e, f := newFakeCtx(tb, Config{}, false, 1<<24)
	ns := &nopStream{}
	req := chat("hi", 0)
	req.Formatter = ns
	req.Sampling.Stop = []string{"never-generated"}
	if logprobs {
		req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 2
	}
	if err := e.Prepare(req); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Start(req, ns); err != nil {
		tb.Fatal(err)
	}
	c := <-f.gens
	ck := &Chunk{TokenIDs: []int32{'a'}, Logprobs: []float32{-0.5}, Top: [][]TopLogprob{{{TokenID: 'a', Logprob: -0.5}, {TokenID: 'b', Logprob: -1}}}}
	if !logprobs {
		ck.Logprobs, ck.Top = nil, nil
	}
	r := c.rx.(*request)
	for range warm {
		r.Tokens(ck)
	}
	return r, ck
}

// TestTokenAllocs: a chunk of one token through receive, detokenize, stop
// check, parse, frame and Deliver allocates nothing in steady state (the
// choice's output slices grow by doubling; warmed past what is measured).
func TestTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rx, ck := tokenRequest(t, false, 20000)
	if n := testing.AllocsPerRun(5000, func() { rx.Tokens(ck) }); n != 0 {
		t.Fatalf("%.3f allocations per token", n)
	}
	if got := rx.out.Generated(0); rx.out.Done() || got != 25001 {
		t.Fatalf("done %v, %d tokens taken, want 25001", rx.out.Done(), got)
	}
}

// BenchmarkTokens is the engine's own cost per streamed token (one token
// per chunk, as llama-server sends them), without the client.
func BenchmarkTokens(b *testing.B) {
	for _, lp := range []bool{false, true} {
		name := "plain"
		if lp {
			name = "logprobs"
		}
		b.Run(name, func(b *testing.B) {
			rx, ck := tokenRequest(b, lp, 1000)
			b.ReportAllocs()
			for b.Loop() {
				rx.Tokens(ck)
			}
		})
	}
}
