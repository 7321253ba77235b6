package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestServeModel runs `vajra tiny-model` then `vajra serve --model` as a
// user would, and asks the model for a chat completion; a bad flag value
// is refused at start.
func TestServeModel(t *testing.T) {
	lib, err := llama.FindLibDir()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	var out, errb bytes.Buffer
	if code := run([]string{"tiny-model", "-o", model}, &out, &errb); code != 0 {
		t.Fatalf("tiny-model: %d %s", code, errb.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sout := &syncBuffer{got: make(chan struct{}, 1)}
	var logs bytes.Buffer
	rc := make(chan int, 1)
	go func() {
		rc <- serve(ctx, []string{"--port", "0", "--model", model, "--llama-lib", lib, "--threads", "1",
			"--max-model-len", "512", "--max-num-seqs", "4", "--shutdown-timeout", "2s"}, sout, &logs)
	}()
	select {
	case <-sout.got:
	case code := <-rc:
		t.Fatalf("serve exited %d: %s", code, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("server did not start")
	}
	addr := strings.TrimSpace(strings.TrimPrefix(sout.String(), "vajra serving on "))
	res, err := http.Get(addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// The model is served under its file name, as vLLM serves a path.
	if !strings.Contains(string(body), `"id":"tiny"`) || !strings.Contains(string(body), `"max_model_len":512`) {
		t.Fatalf("/v1/models: %s", body)
	}
	res, err = http.Post(addr+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"tiny","max_tokens":8,"ignore_eos":true,"messages":[{"role":"user","content":"Hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	err = json.NewDecoder(res.Body).Decode(&cc)
	res.Body.Close()
	if res.StatusCode != 200 || err != nil || cc.Usage.CompletionTokens != 8 {
		t.Fatalf("chat: %d %v %+v", res.StatusCode, err, cc)
	}
	cancel()
	select {
	case code := <-rc:
		if code != 0 {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return")
	}

	// A model file that is not there, and a parser that does not exist.
	for _, args := range [][]string{
		{"--model", filepath.Join(t.TempDir(), "none.gguf")},
		{"--model", model, "--llama-lib", lib, "--tool-call-parser", "nope"},
	} {
		var o, l bytes.Buffer
		if code := serve(context.Background(), append([]string{"--port", "0"}, args...), &o, &l); code != 1 {
			t.Errorf("%v: exit %d, want 1; log %s", args, code, l.String())
		}
	}
}

// TestServeModelLoRAAndKnobs: `vajra serve --model` with llama-server's
// knobs and a --lora adapter serves the base and the adapter (named after
// its file) and answers both; a quantized V cache with flash attention
// off, and an adapter of another model, stop the start with a message.
func TestServeModelLoRAAndKnobs(t *testing.T) {
	lib, err := llama.FindLibDir()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	var out, errb bytes.Buffer
	if code := run([]string{"tiny-model", "-o", model}, &out, &errb); code != 0 {
		t.Fatalf("tiny-model: %d %s", code, errb.String())
	}
	adapter := filepath.Join(dir, "style.gguf")
	f, err := os.Create(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.WriteLoRA(f, tinymodel.LoRAConfig{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sout := &syncBuffer{got: make(chan struct{}, 1)}
	var logs bytes.Buffer
	rc := make(chan int, 1)
	go func() {
		rc <- serve(ctx, []string{"--port", "0", "-m", model, "--llama-lib", lib, "-t", "1", "-tb", "1", "-c", "512",
			"-fa", "on", "-ctk", "f16", "-ctv", "f32", "--no-mmap", "--lora", adapter + ":0.5", "--shutdown-timeout", "2s"}, sout, &logs)
	}()
	select {
	case <-sout.got:
	case code := <-rc:
		t.Fatalf("serve exited %d: %s", code, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("server did not start")
	}
	addr := strings.TrimSpace(strings.TrimPrefix(sout.String(), "vajra serving on "))
	res, err := http.Get(addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"id":"tiny"`) || !strings.Contains(string(body), `"id":"style"`) {
		t.Fatalf("/v1/models: %s", body)
	}
	for _, m := range []string{"tiny", "style"} {
		res, err = http.Post(addr+"/v1/chat/completions", "application/json", strings.NewReader(
			`{"model":"`+m+`","max_tokens":8,"ignore_eos":true,"messages":[{"role":"user","content":"Hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("chat with %s: %d", m, res.StatusCode)
		}
	}
	cancel()
	select {
	case <-rc:
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return")
	}

	other := filepath.Join(dir, "other.gguf")
	f, err = os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.WriteLoRA(f, tinymodel.LoRAConfig{Base: tinymodel.Config{Dim: 128, FF: 256}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-fa", "off", "-ctv", "q8_0"}, "needs flash attention"},
		{[]string{"--lora", other}, "could not load the LoRA adapter"},
	} {
		var o, l bytes.Buffer
		args := append([]string{"--port", "0", "-m", model, "--llama-lib", lib, "-t", "1", "-c", "512"}, c.args...)
		if code := serve(context.Background(), args, &o, &l); code != 1 || !strings.Contains(l.String(), c.want) {
			t.Errorf("%v: exit %d, want 1 and %q; log %s", c.args, code, c.want, l.String())
		}
	}
}
