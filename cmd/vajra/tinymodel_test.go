package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/gguf"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

func TestTinyModelCommand(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.gguf")
	var out, errb bytes.Buffer
	if code := run([]string{"tiny-model", "-o", p, "--layers", "3", "--dim", "32", "--heads", "2", "--kv-heads", "1", "--ff", "64", "--ctx", "256", "--seed", "9", "--f16"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "wrote "+p) {
		t.Errorf("stdout %q", out.String())
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := tinymodel.Write(&want, tinymodel.Config{Layers: 3, Dim: 32, Heads: 2, KVHeads: 1, FF: 64, Context: 256, Seed: 9, F16: true}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("the command wrote other bytes than tinymodel.Write")
	}
	if f, err := gguf.Read(bytes.NewReader(got)); err != nil || len(f.Tensors) != 3+3*9 {
		t.Errorf("read back: %v", err)
	}

	f := func(args []string, code int, msg string) {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(append([]string{"tiny-model"}, args...), &out, &errb); got != code || !strings.Contains(errb.String(), msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", args, got, errb.String(), code, msg)
		}
	}
	f(nil, 2, "Usage: vajra tiny-model")
	f([]string{"-o", p, "--dim", "30"}, 2, "invalid config")
	f([]string{"-o", filepath.Join(dir, "no", "such", "dir.gguf")}, 1, "vajra tiny-model:")
	f([]string{"-h"}, 0, "-kv-heads")
}
