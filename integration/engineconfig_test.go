package integration_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/eventually"
)

// The settings every engine shares are set once, in
// vajra.Config.EngineConfig, by a program embedding Vajra, and reach the
// engine that runs: the llama.cpp engine through its driver, the remote
// workers' engine. Before, they lived in the simulated engine's config
// and only the command line copied them to the others, so an embedder's
// values were silently replaced by the engines' defaults.

// embedderTemplate is a chat template no model ships, so that reading it
// back proves it is the embedder's.
const embedderTemplate = "{% for m in messages %}<<{{ m.content }}>>{% endfor %}"

// longPrompt is more tokens than 256 for the tiny model's vocabulary.
var longPrompt = strings.Repeat("the sea and the sky ", 200)

// contextTooLong posts a chat request whose prompt cannot fit a 256-token
// context and returns its status and body.
func contextTooLong(t *testing.T, base string) (int, string) {
	t.Helper()
	body := `{"model":"` + tinyName + `","messages":[{"role":"user","content":"` + longPrompt + `"}],"max_tokens":4}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestEmbedderEngineConfigReachesLlama(t *testing.T) {
	srv, base := startLlama(t, func(c *vajra.Config) {
		c.EngineConfig = engine.Config{MaxModelLen: 256, MaxNumSeqs: 3, KVCacheTokens: 3 * 256, Seed: 7,
			ChatTemplate: embedderTemplate, StreamInterval: 2}
	})
	e, ok := srv.Engine().(*llama.Engine)
	if !ok {
		t.Fatalf("engine %T", srv.Engine())
	}
	if info := e.ModelInfo(); info.NCtx != 256 || info.Slots != 3 || info.ChatTemplate != embedderTemplate {
		t.Fatalf("llama engine got n_ctx %d, slots %d, template %q; the embedder set 256, 3, %q",
			info.NCtx, info.Slots, info.ChatTemplate, embedderTemplate)
	}
	_, list := getJSON(t, base+"/v1/models")
	if got := dig(list, "data", 0, "max_model_len"); got != 256.0 {
		t.Fatalf("/v1/models max_model_len %v, want 256", got)
	}
	if st, body := contextTooLong(t, base); st != http.StatusBadRequest || !strings.Contains(body, "256") {
		t.Fatalf("a prompt over the embedder's 256 tokens: %d %s", st, body)
	}
}

func TestEmbedderEngineConfigReachesRemote(t *testing.T) {
	w := startWorker(t)
	srv, base := startRemote(t, func(c *vajra.Config) {
		c.EngineConfig = engine.Config{MaxModelLen: 256, ChatTemplate: embedderTemplate, ToolCallParser: "hermes"}
	}, workerURL(w))
	e, ok := srv.Engine().(*remote.Engine)
	if !ok {
		t.Fatalf("engine %T", srv.Engine())
	}
	// The worker's own context is 1024 tokens per slot: the embedder's
	// 256 caps it.
	eventually.True(t, "the worker answers", func() bool { return e.MaxModelLen() > 0 })
	if got := e.MaxModelLen(); got != 256 {
		t.Fatalf("remote engine's context length %d, the embedder set 256 (the worker's is 1024)", got)
	}
	if st, body := contextTooLong(t, base); st != http.StatusBadRequest || !strings.Contains(body, "256") {
		t.Fatalf("a prompt over the embedder's 256 tokens: %d %s", st, body)
	}
}

// TestEngineConfigRefusals: a shared setting the engine cannot honour,
// or one given in an engine's own config instead of EngineConfig, fails
// New with an error naming it.
func TestEngineConfigRefusals(t *testing.T) {
	f := func(name string, mutate func(*vajra.Config), want error, wantText string) {
		t.Helper()
		cfg := vajra.DefaultConfig()
		cfg.Port = 0
		mutate(&cfg)
		srv, err := vajra.New(cfg)
		if err == nil {
			_ = srv.Stop(t.Context())
			t.Fatalf("%s: New accepted it", name)
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), wantText) {
			t.Fatalf("%s: %v, want %v naming %q", name, err, want, wantText)
		}
	}
	f("sim with a chat template", func(c *vajra.Config) { c.EngineConfig.ChatTemplate = embedderTemplate },
		engine.ErrUnsupportedSetting, "--chat-template")
	f("workers with a seed", func(c *vajra.Config) {
		c.Remote.Workers = []string{"llama-server://127.0.0.1:1"}
		c.EngineConfig.Seed = 3
	}, engine.ErrUnsupportedSetting, "--seed")
	f("shared settings in Sim", func(c *vajra.Config) { c.Sim.MaxNumSeqs = 4 }, vajra.ErrEngineConfig, "EngineConfig")
	f("an engine of the caller's with a KV cache size", func(c *vajra.Config) {
		e, err := sim.New(sim.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		c.Engine = e
		c.EngineConfig.KVCacheTokens = 1 << 10
	}, vajra.ErrEngineConfig, "--kv-cache-tokens")
}
