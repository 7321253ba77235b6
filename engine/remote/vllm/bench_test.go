package vllm

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
	"github.com/vajra-go/vajra/internal/testworker"
)

// cpuTime is this process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countRx counts tokens and does nothing else.
type countRx struct {
	tokens int
	done   chan struct{}
	err    error
}

func (r *countRx) Tokens(c *remote.Chunk) { r.tokens += len(c.TokenIDs) }
func (r *countRx) End(e *remote.End)      { r.err = e.Err; close(r.done) }

// BenchmarkReceive measures the client's cost per streamed token (one
// token per GenerateResponse, as vLLM streams at one step per message):
// one op is one message received, decoded and handed to a Receiver. The
// worker is a child process, so the allocations counted are this
// process's: the client's and grpc's own. "client" is this package's path
// (in-place decode into reused buffers); "generated" the generated
// client's Recv, which allocates a new GenerateResponse per message, for
// comparison in the same run. cpu-ns/msg is this process's CPU time (all
// its threads, getrusage) per message.
func BenchmarkReceive(b *testing.B) {
	p := testworker.StartChild(b, testworker.Config{}, "127.0.0.1:0")
	c, err := Dial("vllm://"+p.Addr, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("client", func(b *testing.B) {
		rx := &countRx{done: make(chan struct{})}
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuTime()
		if _, err := c.Generate(context.Background(), gen("b", 1, b.N), rx); err != nil {
			b.Fatal(err)
		}
		<-rx.done
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/msg")
		if rx.err != nil || rx.tokens != b.N {
			b.Fatalf("%d tokens of %d: %v", rx.tokens, b.N, rx.err)
		}
	})
	b.Run("generated", func(b *testing.B) {
		api := vllmpb.NewVllmEngineClient(c.s.Conn)
		g := gen("g", 1, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuTime()
		st, err := api.Generate(context.Background(), &vllmpb.GenerateRequest{RequestId: "g",
			Input:          &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: uint32s(g.Prompt)}},
			SamplingParams: Sampling(g), Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(m.GetChunk().GetTokenIds())
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/msg")
		if n != b.N {
			b.Fatalf("%d tokens of %d", n, b.N)
		}
	})
}
