package vajra

import (
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/metrics"
)

// TestITLBucketsAgree: the engine counts gaps in the buckets the metric
// exports (both take them from internal/itl).
func TestITLBucketsAgree(t *testing.T) {
	m := metrics.ITLBuckets()
	if len(m) != len(engine.ITLBuckets) {
		t.Fatalf("metrics has %d ITL buckets, engine %d", len(m), len(engine.ITLBuckets))
	}
	for i, d := range engine.ITLBuckets {
		if time.Duration(m[i]*1e9+0.5) != d {
			t.Errorf("bucket %d: metrics %gs, engine %s", i, m[i], d)
		}
	}
}

// TestRequestObserverAllocs: reporting a finished request with its gap
// counts allocates nothing.
func TestRequestObserverAllocs(t *testing.T) {
	o := requestObserver{metrics.New([]string{"m"}, metrics.Sources{})}
	res := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}},
		Usage: engine.Usage{CompletionTokens: 4}, FirstToken: time.Millisecond, EndToEnd: time.Second}
	now := time.Now()
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 200 * time.Millisecond} {
		now = now.Add(d)
		res.Gaps.Step(now)
	}
	if n := testing.AllocsPerRun(100, func() { o.RequestDone(0, "m", res) }); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}
