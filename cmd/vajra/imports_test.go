package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// linked are the module's packages the binary may import besides the
// root: the engines and worker protocols it links (registered by their
// init, as database/sql drivers), the load generator and the tiny-model
// writer. The server itself is the root's API.
var linked = map[string]bool{
	"bench":                     true,
	"engine/llama":              true,
	"engine/llama/tinymodel":    true,
	"engine/remote/llamaserver": true,
	"engine/remote/sglang":      true,
	"engine/remote/vllm":        true,
	// vajra frontend: the engines vLLM's launcher hands over, served as
	// remote workers with the tokenizer of the model folder.
	"engine/remote":          true,
	"engine/remote/vllmcore": true,
	"engine/tokenizer":       true,
}

// TestPublicAPIOnly: the binary is built on the module root's public API
// and the packages it links (linked); no non-test file imports another
// package of the module (netio, actors, an internal package...).
func TestPublicAPIOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/vajra-go/vajra"
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok && !linked[rel] {
				t.Errorf("%s imports %s: use the root package's API", name, p)
			}
		}
	}
}
