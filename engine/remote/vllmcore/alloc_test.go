package vllmcore

import (
	"context"
	"testing"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
)

// signal is a Receiver that counts chunks on a channel.
type signal struct{ got chan int }

func (s *signal) Tokens(c *remote.Chunk) { s.got <- len(c.TokenIDs) }
func (s *signal) End(*remote.End)        { close(s.got) }

// streamRig is an engine attached to a fake whose one request streams the
// same pre-encoded output message (one token, with logprobs when asked)
// again and again: the fake's side allocates nothing, so what a run
// allocates is the front end's receive path (read, decode, deliver).
type streamRig struct {
	fe  *fakeEngine
	sig *signal
	msg [][]byte
}

func newStreamRig(tb testing.TB, logprobs bool) *streamRig {
	f := listen(tb, Options{})
	fe, e := attach(tb, f, 0)
	r := &streamRig{fe: fe, sig: &signal{got: make(chan int, 1)}}
	g := greedy("stream-0123456789", 1)
	g.MaxTokens = 1 << 20
	g.Sampling.Logprobs, g.Sampling.TopLogprobs = logprobs, 5
	if _, err := e.Generate(context.Background(), g, r.sig); err != nil {
		tb.Fatal(err)
	}
	fe.request()
	out := v032.OutputMsg{RequestID: "stream-0123456789", TokenIDs: []int32{1234}, FinishReason: v032.NoFinish, StopToken: -1}
	if logprobs {
		out.Logprobs = v032.Logprobs{Rows: 1, Cols: 6, TokenIDs: []int32{1234, 1, 2, 3, 4, 5}, Logprobs: []float32{-0.5, -1, -2, -3, -4, -5}, Ranks: []int32{1}}
	}
	b, aux := v032.AppendOutputs(nil, nil, &v032.OutputsMsg{Outputs: []v032.OutputMsg{out}, Stats: &v032.Stats{Running: 1}, Timestamp: 1})
	r.msg = append([][]byte{b}, aux...)
	r.step(tb) // grow the buffers
	return r
}

func (r *streamRig) step(tb testing.TB) {
	if err := r.fe.out.WriteMsg(r.msg...); err != nil {
		tb.Fatal(err)
	}
	if n := <-r.sig.got; n != 1 {
		tb.Fatalf("chunk of %d tokens", n)
	}
}

// BenchmarkReceive measures one output message through the front end's
// receive path over a loopback ipc connection (the fake engine's write
// included).
func BenchmarkReceive(b *testing.B) {
	for _, lp := range []bool{false, true} {
		name := "tokens"
		if lp {
			name = "logprobs"
		}
		b.Run(name, func(b *testing.B) {
			r := newStreamRig(b, lp)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.step(b)
			}
		})
	}
}
