package integration_test

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// slowStep wraps an engine so that one step of every stream is slow: its
// sink holds the engine's goroutine for stall after the stallAt-th delivery,
// as a step that took that long would. (Sink.Deliver must not block; here
// blocking is the point: it is the slow step under test.)
type slowStep struct {
	engine.Engine
	stallAt int
	stall   time.Duration
}

func (e slowStep) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	return e.Engine.Start(req, &slowSink{Sink: sink, e: e})
}

type slowSink struct {
	engine.Sink
	e slowStep
	n int
}

func (s *slowSink) Deliver(frames []byte, final *engine.Result) {
	s.Sink.Deliver(frames, final)
	if s.n++; s.n == s.e.stallAt && final == nil {
		time.Sleep(s.e.stall)
	}
}

// TestMetricsITLTail: a stream whose steps are 1 ms apart but for one
// step of 1.5 s shows that gap in vllm:inter_token_latency_seconds' tail:
// exactly one gap above 1 s (the rest are far below it even on a loaded
// machine under the race detector), and one gap counted per step after
// the first. The mean-based histogram (one mean of about 5.6 ms counted per
// gap) put every gap below 10 ms.
func TestMetricsITLTail(t *testing.T) {
	const maxTokens = 40
	_, obs, base := startServerWrapped(t, func(c *vajra.Config) { c.Sim.ITL = time.Millisecond },
		func(e engine.Engine) engine.Engine {
			return slowStep{Engine: e, stallAt: 20, stall: 1500 * time.Millisecond}
		})
	addr := base[len("http://"):]
	body := fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, maxTokens)
	_, r, _ := rawStream(t, addr, body)
	if tokens, done, errs := readEvents(t, r, nil); tokens != maxTokens || !done || errs != 0 {
		t.Fatalf("stream: %d tokens, done %v, %d errors", tokens, done, errs)
	}
	select {
	case <-obs.finals:
	case <-time.After(10 * time.Second):
		t.Fatal("no final result")
	}
	mf := scrape(t, addr)["vllm:inter_token_latency_seconds"]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("ITL histogram: %v", mf)
	}
	h := mf.Metric[0].Histogram
	if got := h.GetSampleCount(); got != maxTokens-1 {
		t.Fatalf("ITL count %d, want %d: one gap per step after the first", got, maxTokens-1)
	}
	le := func(ub float64) uint64 {
		for _, b := range h.Bucket {
			if b.GetUpperBound() == ub {
				return b.GetCumulativeCount()
			}
		}
		t.Fatalf("no bucket le=%v", ub)
		return 0
	}
	if got := le(1.0); got != maxTokens-2 {
		t.Errorf("gaps <= 1s: %d, want %d (all but the slow step's)\n%s", got, maxTokens-2, buckets(h))
	}
	if got := le(2.5); got != maxTokens-1 {
		t.Errorf("gaps <= 2.5s: %d, want %d\n%s", got, maxTokens-1, buckets(h))
	}
	// The sum is the time from the first token to the last, stall included.
	if s := h.GetSampleSum(); s < 1.5 || s > 20 {
		t.Errorf("ITL sum %vs, want at least the 1.5s stall", s)
	}
}

// buckets renders a histogram's cumulative buckets for a failure message.
func buckets(h *dto.Histogram) string {
	s := ""
	for _, b := range h.Bucket {
		s += fmt.Sprintf("le=%g: %d\n", b.GetUpperBound(), b.GetCumulativeCount())
	}
	return s
}
