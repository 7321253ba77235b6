package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/vllmserver"
)

// chatAnswer is what a user checks of a chat completion.
type chatAnswer struct {
	Model   string
	Content string
	Finish  string
	Prompt  int
	Output  int
}

// chat asks the server at addr for a chat completion (plain HTTP, the
// OpenAI wire format) with the sampling fields given as JSON members.
func chat(t *testing.T, addr, prompt, sampling string) chatAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": %q}], "max_tokens": 16, %s}`, vllmserver.ServedName, prompt, sampling)
	c := http.Client{Timeout: 2 * time.Minute} // a stall detector: a step takes milliseconds
	resp, err := c.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
	}
	var r struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %v", b, err)
	}
	return chatAnswer{r.Model, r.Choices[0].Message.Content, r.Choices[0].FinishReason, r.Usage.Prompt, r.Usage.Completion}
}

func up(addr string) func() bool {
	return func() bool {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + addr + "/v1/models")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
}

// TestVLLMStartsVajraAsItsFrontEnd: `vllm serve` with
// VLLM_USE_RUST_FRONTEND=1 and VLLM_RUST_FRONTEND_PATH=vajra serves
// through Vajra, which answers greedy and seeded chat completions as
// vLLM's own OpenAI server does on the same engine, and ends with `vllm
// serve`.
func TestVLLMStartsVajraAsItsFrontEnd(t *testing.T) {
	vllmserver.Need(t)
	bin := filepath.Join(t.TempDir(), "vajra")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	asks := []struct{ prompt, sampling string }{
		{"Hello, who are you?", `"temperature": 0`},
		{"Write a poem about the sea.", `"temperature": 1, "seed": 7`},
		{"Write a poem about the sea.", `"temperature": 0.8, "top_p": 0.9, "seed": 1234`},
	}
	// vLLM's own OpenAI server first, on the same engine and model.
	ref := vllmserver.Start(t, false)
	ref.Wait(t, 15*time.Minute, up(ref.Addr))
	var want []chatAnswer
	for _, a := range asks {
		want = append(want, chat(t, ref.Addr, a.prompt, a.sampling))
	}
	ref.Kill()

	srv := vllmserver.StartFrontend(t, bin)
	srv.Wait(t, 15*time.Minute, up(srv.Addr))
	// The socket vLLM hands over answers as soon as Vajra's loops run;
	// Vajra's line comes just after, through the log's pipe. A minute is
	// a stall detector.
	srv.Wait(t, time.Minute, func() bool { return strings.Contains(srv.Log(), "as vLLM's front end") })
	for i, a := range asks {
		got := chat(t, srv.Addr, a.prompt, a.sampling)
		if got != want[i] {
			t.Errorf("%s with %s:\nVajra: %+v\nvLLM:  %+v", a.prompt, a.sampling, got, want[i])
		}
	}
	// The model list names the served model and the engine's context.
	resp, err := http.Get("http://" + srv.Addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"id":"tiny"`)) || !bytes.Contains(b, []byte(`"max_model_len":2048`)) {
		t.Errorf("/v1/models: %s", b)
	}
	// vLLM's X-data-parallel-rank: launched with one data-parallel rank,
	// rank 0 runs and rank 1 is vLLM's 400, in its words.
	for _, c := range []struct {
		rank   string
		status int
		body   string
	}{{"0", 200, `"finish_reason"`}, {"1", 400, `data_parallel_rank 1 is out of range [0, 1).`}} {
		req, _ := http.NewRequest("POST", "http://"+srv.Addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-data-parallel-rank", c.rank)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !bytes.Contains(b, []byte(c.body)) {
			t.Errorf("rank %s: %d %s", c.rank, resp.StatusCode, b)
		}
	}
	// vllm serve's SIGTERM ends Vajra (its launcher's SIGTERM), then vLLM.
	srv.Terminate()
	select {
	case <-srv.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("vllm serve did not end after SIGTERM:\n%s", srv.Log())
	}
	if log := srv.Log(); !strings.Contains(log, "shutting down") {
		t.Errorf("Vajra did not shut down on vLLM's SIGTERM:\n%s", log)
	}
}
