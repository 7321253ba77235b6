package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
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
	lc := st.cfg.Llama
	if lc.ModelPath != model || lc.MaxModelLen != 4096 || lc.MaxNumSeqs != 4 || lc.Threads != 1 || lc.GPULayers != 0 ||
		lc.MaxNumBatchedTokens != 512 || lc.ChatTemplate != "tmpl.jinja" || len(st.cfg.ServedModelNames) != 1 || st.cfg.ServedModelNames[0] != "mine" {
		t.Fatalf("llama %+v, models %v", lc, st.cfg.ServedModelNames)
	}
	// Without the alias, the flag's environment variable applies.
	st, err = parseServe([]string{"-m", model}, envOf(map[string]string{"VAJRA_MAX_MODEL_LEN": "1024"}), io.Discard)
	if err != nil || st.cfg.Llama.MaxModelLen != 1024 {
		t.Fatalf("env: %v %d", err, st.cfg.Llama.MaxModelLen)
	}
}
