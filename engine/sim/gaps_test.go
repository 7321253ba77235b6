package sim

import (
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// TestResultGaps drives scheduler passes by hand at chosen times: decode
// steps 1 ms apart, but one 200 ms late (a stalled engine). The Result's
// gaps hold one gap per step with output after the first (two choices of
// one step are one gap; a pass with no step is none), 28 of them at 1 ms
// and the late one in (0.15, 0.2], summing to the time from first to last
// token. Their mean (7.9 ms) would put every gap in (0.005, 0.01].
func TestResultGaps(t *testing.T) {
	e, err := newEngineNoLoop(Config{ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const tokens = 30
	req := chatReq("Gaps, please.", tokens)
	req.Sampling.IgnoreEOS, req.Sampling.N = true, 2
	req.Stream, req.Formatter = true, &recFormatter{}
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	t0 := time.Now()
	e.waiting = append(e.waiting, e.newGroup(req, req.Prepared.(*prepared), sink))
	e.waitingN.Add(1)
	e.admit(t0)
	now := t0
	e.pass(now) // first tokens
	for i := 1; i < tokens; i++ {
		e.pass(now.Add(500 * time.Microsecond)) // not due: no step
		now = now.Add(time.Millisecond)
		if i == 15 {
			now = now.Add(199 * time.Millisecond)
		}
		e.pass(now)
	}
	res := sink.wait(t)
	if res.Usage.CompletionTokens != 2*tokens {
		t.Fatalf("%d tokens, want %d", res.Usage.CompletionTokens, 2*tokens)
	}
	g := &res.Gaps
	if !g.Recorded() || g.Count() != tokens-1 {
		t.Fatalf("%d gaps, want %d: %v", g.Count(), tokens-1, g.Counts)
	}
	want := [len(engine.ITLBuckets) + 1]uint32{}
	want[1] = tokens - 2 // le=0.001
	want[10] = 1         // le=0.2
	if g.Counts != want {
		t.Errorf("counts %v, want %v", g.Counts, want)
	}
	if g.Sum != now.Sub(t0) {
		t.Errorf("sum %s, want %s", g.Sum, now.Sub(t0))
	}
}
