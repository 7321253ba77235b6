package vllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// BenchmarkVLLMFrontDoors compares, on one tiny model and one machine,
// vLLM's own OpenAI server (`vllm serve`, /v1/completions with token-id
// prompts, streamed) with `vllm serve --grpc` driven by this package's
// client (the path Vajra's remote engine takes, without its
// detokenize-and-frame step): the server process tree's CPU per token
// (every process of its group, /proc), TTFT and ITL percentiles, at 1 and
// 8 concurrent streams, the two servers up side by side and measured in
// alternating rounds. It needs `make vllm` (skips otherwise).
//
//	go test -run '^$' -bench VLLMFrontDoors -benchtime 1x ./engine/remote/vllm/
func BenchmarkVLLMFrontDoors(b *testing.B) {
	grpcSrv := vllmserver.Start(b, true, "--disable-log-stats")
	httpSrv := vllmserver.Start(b, false, "--disable-log-stats", "--disable-uvicorn-access-log")
	c, err := Dial("vllm://"+grpcSrv.Addr, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	grpcSrv.Wait(b, 20*time.Minute, func() bool { return c.Health(ctx) == nil })
	httpSrv.Wait(b, 20*time.Minute, func() bool {
		r, err := http.Get("http://" + httpSrv.Addr + "/health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == 200
	})
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(1000 + 37*i)
	}
	const tokens = 64
	// warm both
	runGRPC(b, c, prompt, 1, tokens)
	runHTTP(b, httpSrv.Addr, prompt, 1, tokens)
	for _, streams := range []int{1, 8} {
		var g, h result
		for round := 0; round < 3; round++ {
			cpu := grpcSrv.CPU()
			r := runGRPC(b, c, prompt, streams, tokens)
			r.serverCPU = grpcSrv.CPU() - cpu
			g.add(r)
			cpu = httpSrv.CPU()
			r = runHTTP(b, httpSrv.Addr, prompt, streams, tokens)
			r.serverCPU = httpSrv.CPU() - cpu
			h.add(r)
		}
		b.Logf("streams=%d grpc: %s", streams, g)
		b.Logf("streams=%d http: %s", streams, h)
		b.ReportMetric(g.cpuPerToken(), fmt.Sprintf("grpc-s%d-server-us/token", streams))
		b.ReportMetric(h.cpuPerToken(), fmt.Sprintf("openai-s%d-server-us/token", streams))
	}
}

type result struct {
	tokens    int
	serverCPU time.Duration
	ttft, itl []time.Duration
	wall      time.Duration
}

func (r *result) add(o result) {
	r.tokens += o.tokens
	r.serverCPU += o.serverCPU
	r.ttft = append(r.ttft, o.ttft...)
	r.itl = append(r.itl, o.itl...)
	r.wall += o.wall
}

func (r *result) cpuPerToken() float64 {
	return float64(r.serverCPU.Microseconds()) / float64(r.tokens)
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (r result) String() string {
	return fmt.Sprintf("%d tokens, server CPU %.0f us/token, %.0f tokens/s, TTFT p50 %v p99 %v, ITL p50 %v p99 %v",
		r.tokens, r.cpuPerToken(), float64(r.tokens)/r.wall.Seconds(),
		pct(r.ttft, 0.5).Round(10*time.Microsecond), pct(r.ttft, 0.99).Round(10*time.Microsecond),
		pct(r.itl, 0.5).Round(10*time.Microsecond), pct(r.itl, 0.99).Round(10*time.Microsecond))
}

// timing is a Receiver that records arrival times.
type timing struct {
	start  time.Time
	last   time.Time
	ttft   time.Duration
	itl    []time.Duration
	tokens int
	done   chan error
}

func (t *timing) Tokens(c *remote.Chunk) {
	now := time.Now()
	if t.tokens == 0 {
		t.ttft = now.Sub(t.start)
	} else {
		t.itl = append(t.itl, now.Sub(t.last))
	}
	t.last = now
	t.tokens += len(c.TokenIDs)
}

func (t *timing) End(e *remote.End) { t.done <- e.Err }

func runGRPC(b *testing.B, c *Client, prompt []int32, streams, tokens int) result {
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	start := time.Now()
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &timing{start: time.Now(), done: make(chan error, 1)}
			g := &remote.Generate{ID: fmt.Sprintf("cmp-%d-%d", time.Now().UnixNano(), i), Prompt: prompt, MaxTokens: tokens,
				Sampling: &engine.Sampling{IgnoreEOS: true}}
			if _, err := c.Generate(context.Background(), g, t); err != nil {
				b.Error(err)
				return
			}
			if err := <-t.done; err != nil {
				b.Error(err)
			}
			mu.Lock()
			res.tokens += t.tokens
			res.ttft = append(res.ttft, t.ttft)
			res.itl = append(res.itl, t.itl...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

func runHTTP(b *testing.B, addr string, prompt []int32, streams, tokens int) result {
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": tokens, "temperature": 0,
		"ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	start := time.Now()
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			var ttft time.Duration
			var itl []time.Duration
			var last time.Time
			n, events := 0, 0
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				var ev struct {
					Choices []struct {
						Text string `json:"text"`
					} `json:"choices"`
					Usage *struct {
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if json.Unmarshal([]byte(line), &ev) != nil {
					continue
				}
				if ev.Usage != nil {
					n = ev.Usage.CompletionTokens
				}
				if len(ev.Choices) == 0 {
					continue
				}
				now := time.Now()
				if events == 0 {
					ttft = now.Sub(t0)
				} else {
					itl = append(itl, now.Sub(last))
				}
				last = now
				events++
			}
			mu.Lock()
			res.tokens += n
			res.ttft = append(res.ttft, ttft)
			res.itl = append(res.itl, itl...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}
