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

// llamaLike is an engine with the llama engine's own figures.
type llamaLike struct{ engine.Engine }

func (llamaLike) Stats() engine.Stats                 { return engine.Stats{Running: 2} }
func (llamaLike) KVTransfers() (moves, copies uint64) { return 3, 1 }
func (llamaLike) ComputeThreads() int                 { return 2 }
func (llamaLike) ComputeCPU() time.Duration           { return time.Second }

// statsOnly is an engine without them.
type statsOnly struct{ engine.Engine }

func (statsOnly) Stats() engine.Stats { return engine.Stats{} }

// wrapped holds an engine as the server's capability wrappers do.
type wrapped struct {
	engine.Engine
	e engine.Engine
}

func (w wrapped) Unwrap() engine.Engine { return w.e }
func (w wrapped) Stats() engine.Stats   { return w.e.Stats() }

// TestEngineStatsLlama: the llama engine's KV moves, stream copies and
// compute threads reach the metrics (through a wrapper too); another
// engine's do not.
func TestEngineStatsLlama(t *testing.T) {
	for _, e := range []engine.Engine{llamaLike{}, wrapped{e: llamaLike{}}} {
		st := engineStats(e)
		if !st.Llama || st.KVMoves != 3 || st.KVStreamCopies != 1 || st.ComputeThreads != 2 || st.ComputeCPU != time.Second || st.Running != 2 {
			t.Errorf("%T: %+v", e, st)
		}
	}
	if st := engineStats(wrapped{e: statsOnly{}}); st.Llama || st.ComputeThreads != 0 {
		t.Errorf("an engine without them: %+v", st)
	}
}
