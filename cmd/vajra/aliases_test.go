package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
)

// A llama-server command line parses into the same settings as Vajra's
// own flags, and an alias given on the command line wins over the
// environment variable of its flag.
func TestLlamaServerAliases(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-m", model, "-c", "4096", "-np", "4", "-t", "1", "-ngl", "0", "-b", "512", "--alias", "mine",
		"--jinja", "--cont-batching", "--metrics", "--embeddings", "--chat-template-file", "tmpl.jinja"}
	st, err := parseServe(args, envOf(map[string]string{"VAJRA_MAX_MODEL_LEN": "1024", "VAJRA_C": "77"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lc, ec := st.cfg.DriverConfig.(llama.Config), st.cfg.EngineConfig
	// -c 4096 -np 4: llama-server's four slots of 1024 tokens, 4096 in all.
	if lc.ModelPath != model || ec.MaxModelLen != 1024 || ec.KVCacheTokens != 4096 || ec.MaxNumSeqs != 4 || lc.Threads != 1 || lc.GPULayers != 0 ||
		lc.MaxNumBatchedTokens != 512 || ec.ChatTemplate != "tmpl.jinja" || len(st.cfg.ServedModelNames) != 1 || st.cfg.ServedModelNames[0] != "mine" {
		t.Fatalf("llama %+v, engine %+v, models %v", lc, ec, st.cfg.ServedModelNames)
	}
	// Without the alias, the flag's environment variable applies.
	st, err = parseServe([]string{"-m", model}, envOf(map[string]string{"VAJRA_MAX_MODEL_LEN": "1024"}), io.Discard)
	if err != nil || st.cfg.EngineConfig.MaxModelLen != 1024 {
		t.Fatalf("env: %v %d", err, st.cfg.EngineConfig.MaxModelLen)
	}
}

// TestLlamaServerKnobs: llama.cpp's own settings under llama-server's
// names and Vajra's, and -c without -np as one request's context.
func TestLlamaServerKnobs(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := func(args []string, check func(vajra.Config) bool) {
		t.Helper()
		st, err := parseServe(append([]string{"-m", model}, args...), envOf(nil), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !check(st.cfg) {
			t.Fatalf("%v: %+v %+v", args, st.cfg.EngineConfig, st.cfg.DriverConfig)
		}
	}
	f(nil, func(c vajra.Config) bool {
		lc := c.DriverConfig.(llama.Config)

		return lc.FlashAttn == "auto" && lc.CacheTypeK == "f16" && lc.CacheTypeV == "f16" && !lc.MLock && !lc.NoMMap &&
			lc.LoadMode == "auto" && lc.ThreadsBatch == 0
	})
	f([]string{"-fa", "on", "-ctk", "q8_0", "-ctv", "q4_0", "-tb", "2", "--mlock", "--no-mmap", "-lm", "mmap"}, func(c vajra.Config) bool {
		lc := c.DriverConfig.(llama.Config)

		return lc.FlashAttn == "on" && lc.CacheTypeK == "q8_0" && lc.CacheTypeV == "q4_0" && lc.ThreadsBatch == 2 && lc.MLock && lc.NoMMap && lc.LoadMode == "mmap"
	})
	f([]string{"--flash-attn", "off", "--cache-type-k", "bf16", "--threads-batch", "3"}, func(c vajra.Config) bool {
		lc := c.DriverConfig.(llama.Config)

		return lc.FlashAttn == "off" && lc.CacheTypeK == "bf16" && lc.ThreadsBatch == 3
	})
	f([]string{"-c", "2048"}, func(c vajra.Config) bool {
		ec := c.EngineConfig
		return ec.MaxModelLen == 2048 && ec.KVCacheTokens == 0
	})
	f([]string{"--ctx-size", "2048", "--parallel", "2"}, func(c vajra.Config) bool {
		ec := c.EngineConfig
		return ec.MaxModelLen == 1024 && ec.KVCacheTokens == 2048
	})
	// Vajra's own names keep their meaning: a context per sequence.
	f([]string{"--max-model-len", "2048", "--max-num-seqs", "2"}, func(c vajra.Config) bool {
		ec := c.EngineConfig
		return ec.MaxModelLen == 2048 && ec.KVCacheTokens == 0
	})
	f([]string{"-c", "4096", "-np", "4", "--kv-cache-tokens", "8192"}, func(c vajra.Config) bool {
		ec := c.EngineConfig
		return ec.MaxModelLen == 4096 && ec.KVCacheTokens == 8192
	})
}
