package integration_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
)

// fleetServer runs a real server on a free loopback port, with the engine
// wrapped so a test can wait for each request's final result. Stopped at
// cleanup (unless the test already shut it down).
func fleetServer(t *testing.T, mutate func(*vajra.Config)) (*vajra.Server, *observed, string) {
	t.Helper()
	srv, obs, base := startServer(t, mutate)
	return srv, obs, strings.TrimPrefix(base, "http://")
}

func TestMetricsDuringAndAfterStream(t *testing.T) {
	_, obs, addr := fleetServer(t, func(c *vajra.Config) { c.Sim.ITL = 2 * time.Millisecond })
	const maxTokens = 40
	body := fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"ignore_eos":true,"stream":true,"surprise_field":1}`, maxTokens)
	_, r, head := rawStream(t, addr, body, "X-Request-Id: fleet-test-1\r\n")
	if !strings.Contains(head, "X-Request-Id: fleet-test-1\r\n") {
		t.Fatalf("request id not echoed: %q", head)
	}
	var during map[string]*dto.MetricFamily
	tokens, done, errs := readEvents(t, r, func(n int) {
		if n == 5 {
			during = scrape(t, addr)
		}
	})
	if tokens != maxTokens || !done || errs != 0 {
		t.Fatalf("stream: %d tokens, done %v, %d errors", tokens, done, errs)
	}
	if got := value(during, "vllm:num_requests_running", "model_name", "vajra-sim"); got != 1 {
		t.Errorf("running mid-stream = %v, want 1", got)
	}
	if got := value(during, "vllm:generation_tokens_total", "model_name", "vajra-sim"); got < 5 || got > maxTokens {
		t.Errorf("generation tokens mid-stream = %v, want 5..%d", got, maxTokens)
	}
	if got := value(during, "vajra_open_connections"); got < 1 {
		t.Errorf("open connections mid-stream = %v", got)
	}
	select {
	case <-obs.finals:
	case <-time.After(10 * time.Second):
		t.Fatal("no final result")
	}
	after := scrape(t, addr)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vllm:generation_tokens_total", []string{"model_name", "vajra-sim"}, maxTokens},
		{"vllm:num_requests_running", nil, 0},
		{"vllm:num_requests_waiting", nil, 0},
		{"vllm:request_success_total", []string{"finished_reason", "length"}, 1},
		{"vllm:request_success_total", []string{"finished_reason", "stop"}, 0},
		{"vllm:time_to_first_token_seconds", []string{"model_name", "vajra-sim"}, 1},
		{"vllm:e2e_request_latency_seconds", nil, 1},
		{"vllm:request_queue_time_seconds", nil, 1},
		{"vllm:inter_token_latency_seconds", nil, maxTokens - 1}, // one per gap
		{"vajra_http_requests_total", []string{"route", "chat_completions", "status", "200"}, 1},
		{"vajra_http_requests_total", []string{"route", "metrics", "status", "200"}, 1}, // the first scrape
		{"vajra_unknown_request_fields_total", []string{"endpoint", "chat_completions", "field", "surprise_field"}, 1},
		{"vajra_client_disconnect_aborts_total", nil, 0},
	} {
		if got := value(after, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(after, "vllm:prompt_tokens_total"); got < 1 {
		t.Errorf("prompt tokens = %v", got)
	}
	if got := value(after, "vajra_bytes_written_total"); got < 1000 {
		t.Errorf("bytes written = %v", got)
	}
	for _, name := range []string{"vllm:kv_cache_usage_perc", "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
		"vllm:prefix_cache_hits_total", "vajra_slow_consumer_aborts_total", "vajra_parse_errors_total"} {
		if after[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	// The ITL sum is the time between first and last token.
	h := after["vllm:inter_token_latency_seconds"].Metric[0].Histogram
	if h.GetSampleSum() <= 0 || h.GetSampleSum() > 10 {
		t.Errorf("ITL sum %v", h.GetSampleSum())
	}
}

func TestClientDisconnectCounted(t *testing.T) {
	_, obs, addr := fleetServer(t, func(c *vajra.Config) { c.Sim.ITL = 5 * time.Millisecond })
	conn, r, _ := rawStream(t, addr, `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`)
	for n := 0; n < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"`) {
			n++
		}
	}
	conn.Close()
	select {
	case <-obs.finals:
	case <-time.After(10 * time.Second):
		t.Fatal("no final result")
	}
	mfs := scrape(t, addr)
	if got := value(mfs, "vajra_client_disconnect_aborts_total"); got != 1 {
		t.Errorf("client aborts = %v, want 1", got)
	}
	if got := value(mfs, "vllm:request_success_total", "finished_reason", "abort"); got != 1 {
		t.Errorf("aborted requests = %v, want 1", got)
	}
}

func TestFleetRoutes(t *testing.T) {
	srv, _, addr := fleetServer(t, nil)
	status, _, body := get(t, addr, "GET", "/load", "")
	var load struct {
		ServerLoad *int     `json:"server_load"`
		Running    *int     `json:"running"`
		Waiting    *int     `json:"waiting"`
		KV         *float64 `json:"kv_cache_usage_perc"`
	}
	if err := json.Unmarshal([]byte(body), &load); status != 200 || err != nil || load.Running == nil || load.Waiting == nil || load.KV == nil || load.ServerLoad == nil {
		t.Fatalf("/load: %d %s (%v)", status, body, err)
	}
	status, _, body = get(t, addr, "GET", "/version", "")
	var ver struct{ Version string }
	if err := json.Unmarshal([]byte(body), &ver); status != 200 || err != nil || ver.Version != vajra.Version() || ver.Version == "" {
		t.Fatalf("/version: %d %s", status, body)
	}

	// tokenize a prompt, then the same text back.
	status, _, body = get(t, addr, "POST", "/tokenize", `{"model":"vajra-sim","prompt":"Hello, sea!"}`)
	var tok struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(body), &tok); status != 200 || err != nil || tok.Count == 0 || tok.Count != len(tok.Tokens) {
		t.Fatalf("/tokenize: %d %s", status, body)
	}
	if want := srv.Engine().Tokenize("Hello, sea!"); fmt.Sprint(want) != fmt.Sprint(tok.Tokens) || tok.MaxModelLen != sim.DefaultMaxModelLen {
		t.Fatalf("/tokenize: %+v, want tokens %v", tok, want)
	}
	ids, _ := json.Marshal(tok.Tokens)
	status, _, body = get(t, addr, "POST", "/detokenize", `{"model":"vajra-sim","tokens":`+string(ids)+`}`)
	if status != 200 || body != `{"prompt":"Hello, sea!"}` {
		t.Fatalf("/detokenize: %d %s", status, body)
	}

	// Chat messages are counted as the engine renders them: the same
	// count as a generation's prompt_tokens.
	msgs := []engine.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: question}}
	status, _, body = get(t, addr, "POST", "/tokenize",
		`{"model":"vajra-sim","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"`+question+`"}]}]}`)
	if err := json.Unmarshal([]byte(body), &tok); status != 200 || err != nil || tok.Count != promptTokens(t, msgs) {
		t.Fatalf("/tokenize messages: %d %s, want count %d", status, body, promptTokens(t, msgs))
	}

	for _, c := range []struct{ path, body string }{
		{"/tokenize", `{"model":"other","prompt":"x"}`},
		{"/tokenize", `{"model":"vajra-sim"}`},
		{"/tokenize", `not json`},
		{"/detokenize", `{"model":"vajra-sim","tokens":[-1]}`},
		{"/detokenize", `{"model":"vajra-sim","tokens":"abc"}`},
	} {
		status, _, body = get(t, addr, "POST", c.path, c.body)
		if status != 400 && status != 404 || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: %d %s", c.path, c.body, status, body)
		}
	}
}

// TestOffLoopRoutesPipelined sends /metrics and /tokenize pipelined between
// inline routes on one connection: the answers come back in order.
func TestOffLoopRoutesPipelined(t *testing.T) {
	_, _, addr := fleetServer(t, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tb := `{"prompt":"one two"}`
	req := "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /version HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(tb)) + "\r\n\r\n" + tb +
		"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	for i, want := range []string{"# HELP", `"version"`, `"tokens"`, ""} {
		status, got := readResponse(t, r)
		if status != 200 || !strings.Contains(got, want) {
			t.Fatalf("response %d: %d %q, want %q in it", i, status, got, want)
		}
	}
}
