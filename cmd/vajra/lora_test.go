package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine/llama"
)

// TestLoRAFlags: llama-server's --lora (FILE, FILE:SCALE, comma lists)
// and --lora-scaled (FILE:SCALE and the older FILE SCALE), and vLLM's
// --lora-modules (NAME=FILE, JSON, several after one flag) give the
// adapters in order, named after their file or as given.
func TestLoRAFlags(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-m", model, "--lora", "/a/sql.gguf", "--lora", "/a/chat.gguf:0.5,/a/code.gguf",
		"--lora-scaled", "/b/old.gguf", "0.25", "--lora-scaled", "/b/new.gguf:2",
		"--lora-modules", "alpha=/c/a.gguf", `{"name":"beta","path":"/c/b.gguf","base_model_name":"x"}`, "--port", "0",
		"--lora-modules", "gamma=/c/g.gguf"}
	st, err := parseServe(args, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []llama.Adapter{
		{Name: "sql", Path: "/a/sql.gguf"}, {Name: "chat", Path: "/a/chat.gguf", Scale: 0.5}, {Name: "code", Path: "/a/code.gguf"},
		{Name: "old", Path: "/b/old.gguf", Scale: 0.25}, {Name: "new", Path: "/b/new.gguf", Scale: 2},
		{Name: "alpha", Path: "/c/a.gguf"}, {Name: "beta", Path: "/c/b.gguf"}, {Name: "gamma", Path: "/c/g.gguf"},
	}
	if got := st.cfg.DriverConfig.(llama.Config).Adapters; !reflect.DeepEqual(got, want) {
		t.Fatalf("adapters\n  %+v\nwant\n  %+v", got, want)
	}
	// The config file takes lists.
	cfgFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgFile, []byte("lora: [/d/x.gguf:1.5]\nlora-modules: [y=/d/y.gguf]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = parseServe([]string{"-m", model, "--config", cfgFile}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.cfg.DriverConfig.(llama.Config).Adapters; len(got) != 2 || got[0] != (llama.Adapter{Name: "x", Path: "/d/x.gguf", Scale: 1.5}) || got[1].Name != "y" {
		t.Fatalf("config file adapters %+v", got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", model, "--lora-modules", "noequals"}, "want NAME=FILE"},
		{[]string{"-m", model, "--lora-scaled", "/x.gguf"}, "want FILE:SCALE"},
		{[]string{"-m", model, "--lora", "/x.gguf:0"}, "a scale of 0"},
		{[]string{"--worker", "llama-server://127.0.0.1:1", "--lora", "/x.gguf"}, "--lora serves adapters of --model"},
	} {
		if _, err := parseServe(c.args, envOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
