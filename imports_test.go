package vajra_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRootImportsOnlyWhatItUses: the module root, what an embedding
// program imports, builds without cgo and links neither the load
// generator, nor gRPC, nor llama.cpp, nor a worker protocol: a program
// links those by importing them (engine.Register, remote.Register), as it
// links database/sql drivers. It asks the go command for the root's
// dependencies with CGO_ENABLED=0, so a package that needs cgo shows as
// a package without Go files.
func TestRootImportsOnlyWhatItUses(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command:", err)
		}
	}
	cmd := exec.Command(goBin, "list", "-e", "-deps", "-f", "{{.ImportPath}}\t{{with .Error}}{{.}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/vajra-go/vajra"
	// A trailing "/..." forbids the packages below too. engine/llama/gguf,
	// the pure-Go GGUF reader engine/tokenizer uses, is not llama.cpp.
	forbidden := []string{
		module + "/bench/...",
		module + "/engine/llama",
		module + "/engine/llama/capi/...",
		module + "/engine/remote/llamaserver/...",
		module + "/engine/remote/sglang/...",
		module + "/engine/remote/vllm/...",
		"google.golang.org/grpc/...",
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, errText, _ := strings.Cut(line, "\t")
		n++
		if errText != "" {
			t.Errorf("%s does not build with CGO_ENABLED=0: %s", path, errText)
		}
		for _, f := range forbidden {
			base, tree := strings.CutSuffix(f, "/...")
			if path == base || tree && strings.HasPrefix(path, base+"/") {
				t.Errorf("the root links %s", path)
			}
		}
	}
	if n < 50 {
		t.Fatalf("go list gave %d packages, want the root's dependencies:\n%s", n, out)
	}
}
