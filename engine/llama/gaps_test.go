package llama

import (
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// stallSink is a recorder whose stallAt-th step delivery holds the
// engine's goroutine for stall, as a slow step would. (Sink.Deliver must
// not block; here blocking is the point: it is the slow step under test.)
type stallSink struct {
	*recorder
	stallAt int
	stall   time.Duration
	n       int
}

func (s *stallSink) Deliver(frames []byte, final *engine.Result) {
	s.recorder.Deliver(frames, final)
	if s.n++; s.n == s.stallAt && final == nil {
		time.Sleep(s.stall)
	}
}

// TestResultGaps: a stream of two choices whose 10th step is held 1.2 s
// has one gap per step after the first (the two choices' tokens of a step
// are one gap), exactly one of them above 1 s (the others are far below it
// even on a loaded machine), and the gaps sum to at least the stall.
func TestResultGaps(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	const tokens = 20
	req := chatReq("Tell me about the sea.", tokens)
	req.Sampling.IgnoreEOS, req.Sampling.N, req.Stream = true, 2, true
	rec := newRecorder()
	req.Formatter = rec
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(req, &stallSink{recorder: rec, stallAt: 10, stall: 1200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	<-rec.done
	res := rec.res
	if res.Err != nil || res.Usage.CompletionTokens != 2*tokens {
		t.Fatalf("err %v, %d tokens", res.Err, res.Usage.CompletionTokens)
	}
	g := &res.Gaps
	if g.Count() != tokens-1 {
		t.Fatalf("%d gaps for %d steps with tokens: %v", g.Count(), tokens, g.Counts)
	}
	var slow uint32
	for i, ub := range engine.ITLBuckets {
		if ub >= time.Second {
			slow += g.Counts[i+1] // the buckets above 1 s
		}
	}
	if slow != 1 {
		t.Errorf("%d gaps above 1s, want 1: %v", slow, g.Counts)
	}
	if g.Sum < 1200*time.Millisecond || g.Sum > res.EndToEnd {
		t.Errorf("gaps sum to %s (end to end %s), want at least the 1.2s stall", g.Sum, res.EndToEnd)
	}
}
