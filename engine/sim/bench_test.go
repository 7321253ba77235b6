package sim

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// nopFormatter appends a few bytes per call, like a pre-framed SSE event
// with no work behind it.
type nopFormatter struct{}

func (nopFormatter) AppendStart(dst []byte, _ *engine.Start) []byte { return append(dst, "s\n"...) }
func (nopFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, d.Text...)
	return append(dst, "\n\n"...)
}
func (nopFormatter) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte {
	return append(dst, "c\n"...)
}
func (nopFormatter) AppendEnd(dst []byte, _ *engine.Result) []byte  { return append(dst, "e\n"...) }
func (nopFormatter) AppendError(dst []byte, _ *engine.Error) []byte { return append(dst, "x\n"...) }

// countSink counts bytes and signals when the last of n finals arrives.
type countSink struct {
	bytes  atomic.Int64
	finals *atomic.Int64
	n      int64
	done   chan struct{}
}

func (s *countSink) Deliver(frames []byte, final *engine.Result) {
	s.bytes.Add(int64(len(frames)))
	if final != nil && s.finals.Add(1) == s.n {
		close(s.done)
	}
}

// BenchmarkEngineTokens measures the engine's CPU per generated token with
// 1,000 sequences running at once (ITL 0: steps back to back), streaming
// through a formatter that appends a few bytes. One op is one token.
func BenchmarkEngineTokens(b *testing.B) {
	for _, bc := range []struct {
		name      string
		logprobs  bool
		penalties bool
		stops     bool // two stop strings that never match: the hold-back path
	}{{"plain", false, false, false}, {"logprobs5", true, false, false}, {"penalties", false, true, false}, {"stops", false, false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			const seqs = 1000
			per := (b.N + seqs - 1) / seqs
			e, err := New(Config{Config: engine.Config{MaxNumSeqs: seqs, MaxModelLen: per + 64, KVCacheTokens: seqs * (per + 80)}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			var finals atomic.Int64
			sink := &countSink{finals: &finals, n: seqs, done: make(chan struct{})}
			reqs := make([]*engine.Request, seqs)
			for i := range reqs {
				reqs[i] = &engine.Request{PromptTokens: []int32{1, 2, 3, int32(i)}, Stream: true, Formatter: nopFormatter{},
					Sampling: engine.Sampling{MaxTokens: per, IgnoreEOS: true, Temperature: 0.7, Seed: int64(i), HasSeed: true,
						Logprobs: bc.logprobs, TopLogprobs: 5 * b2i(bc.logprobs)}}
				if bc.penalties {
					shapeSampling(&reqs[i].Sampling)
				}
				if bc.stops {
					reqs[i].Sampling.Stop = []string{"\x00never", "the seaweed zebra"}
				}
				if err := e.Prepare(reqs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			t0, c0 := time.Now(), cpuTime()
			for _, r := range reqs {
				if _, err := e.Start(r, sink); err != nil {
					b.Fatal(err)
				}
			}
			<-sink.done
			b.StopTimer()
			tokens := float64(per * seqs)
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/tokens, "ns/token")
			// CPU time of the process (scheduler, GC, sink) per token: the
			// figure that matters on a shared machine.
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/tokens, "cpu-ns/token")
			b.ReportMetric(float64(sink.bytes.Load())/tokens, "B/token")
		})
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// shapeSampling sets every penalty, min_p and a logit bias (on ",").
func shapeSampling(s *engine.Sampling) {
	s.FrequencyPenalty, s.PresencePenalty, s.RepetitionPenalty, s.MinP = 0.3, 0.5, 1.2, 0.05
	s.LogitBias = []engine.TokenBias{{TokenID: 11, Bias: -5}}
}

// TestStepAllocs drives scheduler passes by hand over 1,000 decoding
// sequences, every fourth with penalties and a logit bias, and checks that
// a steady-state pass allocates nothing.
func TestStepAllocs(t *testing.T) {
	e, err := newEngineNoLoop(Config{Config: engine.Config{MaxNumSeqs: 1000, MaxModelLen: 512, KVCacheTokens: 1000 * 512}})
	if err != nil {
		t.Fatal(err)
	}
	var finals atomic.Int64
	sink := &countSink{finals: &finals, n: 1000, done: make(chan struct{})}
	for i := range 1000 {
		req := &engine.Request{Prompt: "Allocation test number " + itoaT(i), Stream: true, Formatter: nopFormatter{},
			StreamInterval: 1 + i%3, Sampling: engine.Sampling{MaxTokens: 250, IgnoreEOS: true, Temperature: 1,
				TopP: 0.9, Stop: []string{"never ever"}}}
		if i%4 == 0 {
			shapeSampling(&req.Sampling)
		}
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		e.waiting = append(e.waiting, e.newGroup(req, req.Prepared.(*prepared), sink))
		e.waitingN.Add(1)
	}
	now := time.Now()
	e.admit(now)
	for range 20 { // first tokens, buffers grown
		e.pass(now)
	}
	allocs := testing.AllocsPerRun(100, func() { e.pass(now); e.publish() })
	if allocs != 0 {
		t.Fatalf("%v allocations per pass over 1,000 sequences", allocs)
	}
	if e.runningSeqs != 1000 || e.genTokens != 1000*121 {
		t.Fatalf("running %d, generated %d", e.runningSeqs, e.genTokens)
	}
}
