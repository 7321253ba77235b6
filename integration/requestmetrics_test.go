package integration_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/eventually"
)

// The per-request histograms vLLM exports, and vllm:num_requests_running
// counting requests rather than their choices, scraped from /metrics after
// requests with n=2, on every engine: the simulated one, llama.cpp in
// process and a remote llama-server.

// requestMetricsEngines starts a server per engine; each returns the base
// URL and the served model name, or skips when its engine is missing.
var requestMetricsEngines = []struct {
	name  string
	start func(t *testing.T) (base, model string)
}{
	{"sim", func(t *testing.T) (string, string) {
		_, _, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 2 * time.Millisecond })
		return base, "vajra-sim"
	}},
	{"llama", func(t *testing.T) (string, string) {
		_, base := startLlama(t, nil)
		return base, tinyName
	}},
	{"remote", func(t *testing.T) (string, string) {
		w := startWorker(t)
		_, base := startRemote(t, nil, workerURL(w))
		return base, tinyName
	}},
}

// TestRequestHistogramsWithN: three requests of n=2 and 8 tokens each give
// each per-request histogram three observations (one per request, not per
// choice) whose sums are what the responses reported: usage.prompt_tokens
// and usage.completion_tokens added up, n added up, and prefill plus decode
// time equal to the inference time, within e2e latency.
func TestRequestHistogramsWithN(t *testing.T) {
	for _, eng := range requestMetricsEngines {
		t.Run(eng.name, func(t *testing.T) {
			base, model := eng.start(t)
			addr := strings.TrimPrefix(base, "http://")
			const requests, n, maxTokens = 3, 2, 8
			var prompt, completion int
			for i := range requests {
				body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"request %d: tell me a story"}],`+
					`"n":%d,"max_tokens":%d,"ignore_eos":true,"temperature":0.7}`, model, i, n, maxTokens)
				var res struct {
					Choices []json.RawMessage
					Usage   struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					}
				}
				post(t, base+"/v1/chat/completions", body, &res)
				if len(res.Choices) != n || res.Usage.CompletionTokens != n*maxTokens || res.Usage.PromptTokens == 0 {
					t.Fatalf("request %d: %d choices, usage %+v", i, len(res.Choices), res.Usage)
				}
				prompt += res.Usage.PromptTokens
				completion += res.Usage.CompletionTokens
			}
			// The observer runs when the session ends, which may be just
			// after the response was written: poll for it, bounded.
			var mfs map[string]*dto.MetricFamily
			eventually.True(t, fmt.Sprintf("the e2e histogram counts %d requests", requests), func() bool {
				mfs = scrape(t, addr)
				return histogram(mfs, "vllm:e2e_request_latency_seconds").GetSampleCount() == requests
			})
			for _, c := range []struct {
				name string
				sum  float64
			}{
				{"vllm:request_prompt_tokens", float64(prompt)},
				{"vllm:request_generation_tokens", float64(completion)},
				{"vllm:request_params_n", requests * n},
			} {
				h := histogram(mfs, c.name)
				if h.GetSampleCount() != requests || h.GetSampleSum() != c.sum {
					t.Errorf("%s: count %d sum %v, want %d and %v", c.name, h.GetSampleCount(), h.GetSampleSum(), requests, c.sum)
				}
			}
			if b := bucketBounds(histogram(mfs, "vllm:request_prompt_tokens")); len(b) < 4 || b[0] != 1 || b[1] != 2 || b[2] != 5 || b[3] != 10 {
				t.Errorf("prompt-token buckets %v, want vLLM's 1, 2, 5, 10, ...", b)
			}
			times := map[string]float64{}
			for _, name := range []string{"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
				"vllm:request_inference_time_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"} {
				h := histogram(mfs, name)
				if h.GetSampleCount() != requests {
					t.Errorf("%s: count %d, want %d", name, h.GetSampleCount(), requests)
				}
				times[name] = h.GetSampleSum()
			}
			prefill, decode := times["vllm:request_prefill_time_seconds"], times["vllm:request_decode_time_seconds"]
			inference, e2e := times["vllm:request_inference_time_seconds"], times["vllm:e2e_request_latency_seconds"]
			if prefill <= 0 || decode <= 0 || math.Abs(prefill+decode-inference) > 1e-6 || inference > e2e+1e-9 ||
				math.Abs(inference+times["vllm:request_queue_time_seconds"]-e2e) > 1e-6 {
				t.Errorf("times: prefill %v + decode %v vs inference %v; inference + queue vs e2e %v", prefill, decode, inference, e2e)
			}
		})
	}
}

// TestNumRequestsRunningCountsRequests: while one streamed request of n=2
// runs, vllm:num_requests_running is 1, not 2 (its sequences).
func TestNumRequestsRunningCountsRequests(t *testing.T) {
	for _, eng := range requestMetricsEngines {
		t.Run(eng.name, func(t *testing.T) {
			base, model := eng.start(t)
			addr := strings.TrimPrefix(base, "http://")
			// Long enough to be scraped while it runs: 600 tokens are over a
			// second on the simulated engine and on the tiny model at one
			// thread on a loaded machine; a run that ends before a scrape
			// saw it is retried, a bounded number of times.
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"go"}],"n":2,"max_tokens":600,"ignore_eos":true,"stream":true}`, model)
			for attempt := 0; attempt < 5; attempt++ {
				resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				rd := bufio.NewReader(resp.Body)
				if _, err := rd.ReadString('\n'); err != nil { // the first event: the request runs
					t.Fatal(err)
				}
				seen := 0.0
				for deadline := time.Now().Add(5 * time.Second); seen == 0 && time.Now().Before(deadline); {
					running := gaugeValue(scrape(t, addr), "vllm:num_requests_running")
					if running > 1 {
						t.Fatalf("vllm:num_requests_running %v with one request of n=2 running, want 1", running)
					}
					seen = running
				}
				// Did the request outlive the scrape that saw it? Drain it.
				var rest bytes.Buffer
				_, _ = rest.ReadFrom(rd)
				resp.Body.Close()
				if !strings.Contains(rest.String(), "[DONE]") {
					t.Fatalf("stream did not end with [DONE]: %.200q", rest.String())
				}
				if seen == 1 {
					return
				}
				t.Logf("attempt %d: the request ended before a scrape saw it running", attempt)
			}
			t.Fatal("no scrape saw the request running in 5 attempts")
		})
	}
}

// post posts a JSON body and decodes a 200 answer into out.
func post(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, raw.String())
	}
	if err := json.Unmarshal(raw.Bytes(), out); err != nil {
		t.Fatalf("%v: %s", err, raw.String())
	}
}

// histogram returns the only series of a histogram family (an empty one
// when the family is missing, so that the caller's count check fails).
func histogram(mfs map[string]*dto.MetricFamily, name string) *dto.Histogram {
	if mf := mfs[name]; mf != nil && len(mf.Metric) == 1 && mf.Metric[0].Histogram != nil {
		return mf.Metric[0].Histogram
	}
	return &dto.Histogram{}
}

func bucketBounds(h *dto.Histogram) []float64 {
	var b []float64
	for _, x := range h.Bucket {
		b = append(b, x.GetUpperBound())
	}
	return b
}

// gaugeValue returns the only series of a gauge family (-1 when missing).
func gaugeValue(mfs map[string]*dto.MetricFamily, name string) float64 {
	if mf := mfs[name]; mf != nil && len(mf.Metric) == 1 && mf.Metric[0].Gauge != nil {
		return mf.Metric[0].Gauge.GetValue()
	}
	return -1
}
