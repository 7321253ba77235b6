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

// nopStaged is a nopStream whose sink stages frames: its chunks go
// through the worker's step gate.
type nopStaged struct{ nopStream }

func (*nopStaged) Stage([]byte) {}
func (*nopStaged) Notify()      {}

// tokenRequest starts a long streamed request on a fake worker and returns
// its Receiver, warmed up by warm tokens; staged: its sink stages frames.
func tokenRequest(tb testing.TB, logprobs, staged bool, warm int) (*request, *Chunk) {
	e, f := newFakeCtx(tb, Config{}, false, 1<<24)
	ns := &nopStream{}
	var sink engine.Sink = ns
	if staged {
		s := &nopStaged{}
		ns, sink = &s.nopStream, s
	}
	req := chat("hi", 0)
	req.Formatter = ns
	req.Sampling.Stop = []string{"never-generated"}
	if logprobs {
		req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 2
	}
	if err := e.Prepare(req); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Start(req, sink); err != nil {
		tb.Fatal(err)
	}
	c := <-f.gens
	ck := &Chunk{TokenIDs: []int32{'a'}, Logprobs: []float32{-0.5}, Top: [][]TopLogprob{{{'a', -0.5}, {'b', -1}}}}
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
// check, parse, frame and Deliver (or the step gate, to a sink that
// stages) allocates nothing in steady state (the choice's output slices
// grow by doubling; warmed past what is measured).
func TestTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, staged := range []bool{false, true} {
		rx, ck := tokenRequest(t, false, staged, 20000)
		if n := testing.AllocsPerRun(5000, func() { rx.Tokens(ck) }); n != 0 {
			t.Fatalf("staged %v: %.3f allocations per token", staged, n)
		}
		if got := rx.choices[0].n; rx.done || got != 25001 || (rx.gw != nil) != staged {
			t.Fatalf("staged %v: done %v, %d tokens taken, want 25001; gated %v", staged, rx.done, got, rx.gw != nil)
		}
	}
}

// BenchmarkTokens is the engine's own cost per streamed token (one token
// per chunk, as llama-server sends them), without the client.
func BenchmarkTokens(b *testing.B) {
	for _, c := range []struct {
		name             string
		logprobs, staged bool
	}{{"plain", false, false}, {"logprobs", true, false}, {"gated", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			rx, ck := tokenRequest(b, c.logprobs, c.staged, 1000)
			b.ReportAllocs()
			for b.Loop() {
				rx.Tokens(ck)
			}
		})
	}
}
