package metrics

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestObserveRequestAndRender(t *testing.T) {
	m := New([]string{"m1", "m2"}, Sources{Engine: func() EngineStats {
		return EngineStats{Running: 3, GenerationTokens: 42, KVUsage: 0.25, ComputeCPU: 1500 * time.Millisecond}
	}})
	m.ObserveRequest(&Request{Model: "m2", FinishReason: "length", Queue: time.Millisecond, TTFT: 10 * time.Millisecond, E2E: 110 * time.Millisecond, Tokens: 11})
	m.ObserveRequest(&Request{Model: "other", FinishReason: "weird", E2E: time.Millisecond})
	m.Route("chat").Inc(200)
	m.Rejected("overloaded").Inc()
	out, err := m.AppendText(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		`vllm:num_requests_running{model_name="m1"} 3`,
		`vllm:generation_tokens_total{model_name="m1"} 42`,
		`vllm:kv_cache_usage_perc{model_name="m1"} 0.25`,
		`vajra_engine_compute_cpu_seconds_total 1.5`,
		`vllm:request_success_total{finished_reason="length",model_name="m2"} 1`,
		`vllm:request_success_total{finished_reason="error",model_name="m1"} 1`, // unknown model and reason
		// Ten gaps of 10ms each: counted ten times, summing to 100ms.
		`vllm:inter_token_latency_seconds_count{model_name="m2"} 10`,
		`vllm:inter_token_latency_seconds_sum{model_name="m2"} 0.1`,
		`vllm:inter_token_latency_seconds_bucket{model_name="m2",le="0.01"} 10`,
		`vllm:inter_token_latency_seconds_bucket{model_name="m2",le="0.005"} 0`,
		`vllm:time_to_first_token_seconds_count{model_name="m2"} 1`,
		`vajra_http_requests_total{route="chat",status="200"} 1`,
		`vajra_rejected_requests_total{reason="overloaded"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %q", want)
		}
	}
}

// TestComputeCPUZero: an engine that does not measure its compute time
// still exports the counter, at 0, so that a scrape always finds it.
func TestComputeCPUZero(t *testing.T) {
	m := New([]string{"m"}, Sources{Engine: func() EngineStats { return EngineStats{} }})
	out, err := m.AppendText(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		"# TYPE vajra_engine_compute_cpu_seconds_total counter\n",
		"\nvajra_engine_compute_cpu_seconds_total 0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q", want)
		}
	}
}

// gapCounts counts gaps into buckets as an engine does (engine.Gaps):
// per bucket of ITLBuckets, the first bound >= the gap.
func gapCounts(gaps ...time.Duration) ([]uint32, time.Duration) {
	ub := ITLBuckets()
	counts := make([]uint32, len(ub)+1)
	var sum time.Duration
	for _, g := range gaps {
		counts[sort.SearchFloat64s(ub, g.Seconds())]++
		sum += g
	}
	return counts, sum
}

// TestITLGapsTail: a request with 49 gaps of 1 ms and one of 180 ms shows
// the slow one in the (0.15, 0.2] bucket, and _count is the number of
// gaps. The mean-based estimate of the same request (4.58 ms, 50 times)
// puts every gap in (0.0025, 0.005].
func TestITLGapsTail(t *testing.T) {
	gaps := make([]time.Duration, 50)
	for i := range gaps {
		gaps[i] = time.Millisecond
	}
	gaps[30] = 180 * time.Millisecond
	counts, sum := gapCounts(gaps...)
	r := Request{Model: "m", FinishReason: "length", TTFT: 10 * time.Millisecond, E2E: 10*time.Millisecond + sum, Tokens: 51}
	f := func(name string, r Request, want ...string) {
		t.Helper()
		m := New([]string{"m"}, Sources{})
		m.ObserveRequest(&r)
		out, err := m.AppendText(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), "vllm:inter_token_latency_seconds"+w+"\n") {
				t.Errorf("%s: missing %q", name, w)
			}
		}
	}
	withGaps := r
	withGaps.Gaps, withGaps.GapSum = counts, sum
	f("counted gaps", withGaps,
		`_bucket{model_name="m",le="0.0005"} 0`,
		`_bucket{model_name="m",le="0.001"} 49`,
		`_bucket{model_name="m",le="0.15"} 49`,
		`_bucket{model_name="m",le="0.2"} 50`,
		`_bucket{model_name="m",le="+Inf"} 50`,
		`_count{model_name="m"} 50`,
		`_sum{model_name="m"} 0.229`)
	// Without counted gaps (an engine that does not count them): the
	// mean, with the same count and sum but no tail.
	f("mean fallback", r,
		`_bucket{model_name="m",le="0.0025"} 0`,
		`_bucket{model_name="m",le="0.005"} 50`,
		`_bucket{model_name="m",le="0.15"} 50`,
		`_count{model_name="m"} 50`,
		`_sum{model_name="m"} 0.229`)
	// Counted gaps win over the mean, even when there are none (one token).
	one := Request{Model: "m", FinishReason: "stop", TTFT: time.Millisecond, E2E: time.Second, Tokens: 2, Gaps: make([]uint32, len(counts))}
	f("no gaps", one, `_count{model_name="m"} 0`)
}

// TestObserveRequestAllocs: merging a request's gap counts allocates
// nothing.
func TestObserveRequestAllocs(t *testing.T) {
	m := New([]string{"m"}, Sources{})
	counts, sum := gapCounts(time.Millisecond, 2*time.Millisecond, 200*time.Millisecond)
	r := &Request{Model: "m", FinishReason: "stop", TTFT: time.Millisecond, E2E: time.Second, Tokens: 4, Gaps: counts, GapSum: sum}
	if n := testing.AllocsPerRun(100, func() { m.ObserveRequest(r) }); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// BenchmarkObserveRequest is the whole per-request metrics cost: with the
// gap counts an engine measured (a merge), and with the mean estimate.
func BenchmarkObserveRequest(b *testing.B) {
	m := New([]string{"m"}, Sources{})
	gaps := make([]time.Duration, 99)
	for i := range gaps {
		gaps[i] = time.Duration(i%7+1) * time.Millisecond
	}
	counts, sum := gapCounts(gaps...)
	base := Request{Model: "m", FinishReason: "stop", Queue: time.Millisecond, TTFT: 10 * time.Millisecond, E2E: time.Second, Tokens: 100}
	b.Run("gaps", func(b *testing.B) {
		r := base
		r.Gaps, r.GapSum = counts, sum
		b.ReportAllocs()
		for b.Loop() {
			m.ObserveRequest(&r)
		}
	})
	b.Run("mean", func(b *testing.B) {
		r := base
		b.ReportAllocs()
		for b.Loop() {
			m.ObserveRequest(&r)
		}
	})
}

// BenchmarkPrometheusObserve checks that client_golang's Histogram.Observe
// is allocation-free (atomic adds): the alternative to merging counts,
// one call per gap.
func BenchmarkPrometheusObserve(b *testing.B) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: itlBuckets})
	b.ReportAllocs()
	for b.Loop() {
		h.Observe(0.0123)
	}
}

// TestTokenBuckets: vLLM's build_1_2_5_buckets, bounded by the context.
func TestTokenBuckets(t *testing.T) {
	f := func(max int, want ...float64) {
		t.Helper()
		got := TokenBuckets(max)
		if len(got) != len(want) {
			t.Fatalf("TokenBuckets(%d) = %v, want %v", max, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("TokenBuckets(%d) = %v, want %v", max, got, want)
			}
		}
	}
	f(0)
	f(1, 1)
	f(100, 1, 2, 5, 10, 20, 50, 100)
	f(4096, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
}

// TestRequestPhaseHistograms: one request's phases as vLLM splits them
// (prefill from admission to the first token, decode from there to the
// end) and its sizes, observed once whatever its n.
func TestRequestPhaseHistograms(t *testing.T) {
	m := New([]string{"m"}, Sources{}, MaxModelLen(1000))
	m.ObserveRequest(&Request{Model: "m", FinishReason: "length", Queue: 100 * time.Millisecond, TTFT: 400 * time.Millisecond,
		E2E: 1400 * time.Millisecond, Tokens: 5, PromptTokens: 7, GenerationTokens: 10, N: 2})
	// Refused before the engine: no phases, no sizes.
	m.ObserveRequest(&Request{Model: "m", FinishReason: "error", E2E: time.Millisecond})
	out, err := m.AppendText(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		`vllm:request_prefill_time_seconds_sum{model_name="m"} 0.3`,
		`vllm:request_prefill_time_seconds_count{model_name="m"} 1`,
		`vllm:request_decode_time_seconds_sum{model_name="m"} 1`,
		`vllm:request_inference_time_seconds_sum{model_name="m"} 1.3`,
		`vllm:request_inference_time_seconds_bucket{model_name="m",le="1.5"} 1`,
		`vllm:request_inference_time_seconds_bucket{model_name="m",le="1"} 0`,
		`vllm:e2e_request_latency_seconds_count{model_name="m"} 2`,
		`vllm:request_prompt_tokens_sum{model_name="m"} 7`,
		`vllm:request_prompt_tokens_count{model_name="m"} 1`,
		`vllm:request_prompt_tokens_bucket{model_name="m",le="5"} 0`,
		`vllm:request_prompt_tokens_bucket{model_name="m",le="10"} 1`,
		`vllm:request_prompt_tokens_bucket{model_name="m",le="1000"} 1`,
		`vllm:request_generation_tokens_sum{model_name="m"} 10`,
		`vllm:request_params_n_sum{model_name="m"} 2`,
		`vllm:request_params_n_bucket{model_name="m",le="1"} 0`,
		`vllm:request_params_n_bucket{model_name="m",le="2"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(text, `vllm:request_prompt_tokens_bucket{model_name="m",le="2000"}`) {
		t.Error("a token bucket above MaxModelLen")
	}
}

// TestLlamaFigures: the llama engine's KV moves, stream copies and
// compute threads are exported when it runs, and absent otherwise.
func TestLlamaFigures(t *testing.T) {
	lines := []string{"vajra_llama_kv_moves_total 3\n", "vajra_llama_kv_stream_copies_total 1\n", "vajra_llama_compute_threads 2\n"}
	for _, llama := range []bool{true, false} {
		m := New([]string{"m"}, Sources{Engine: func() EngineStats {
			return EngineStats{Llama: llama, KVMoves: 3, KVStreamCopies: 1, ComputeThreads: 2}
		}})
		out, err := m.AppendText(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range lines {
			if strings.Contains(string(out), want) != llama {
				t.Errorf("llama %v: %q present %v", llama, want, !llama)
			}
		}
	}
}
