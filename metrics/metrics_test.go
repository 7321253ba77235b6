package metrics

import (
	"strings"
	"testing"
	"time"
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

// BenchmarkObserveRequest is the whole per-request metrics cost.
func BenchmarkObserveRequest(b *testing.B) {
	m := New([]string{"m"}, Sources{})
	r := &Request{Model: "m", FinishReason: "stop", Queue: time.Millisecond, TTFT: 10 * time.Millisecond, E2E: time.Second, Tokens: 100}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(r)
	}
}
