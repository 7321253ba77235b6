package llama

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestCPUBackendNotAMX: from an npm build's CPU variants the engine loads
// one, never the Sapphire Rapids variant whose AMX kernels segfault on the
// machines that have AMX (this project's CI crashed in them), and llama.cpp
// then reports no AMX in use. On a machine without AMX that variant scores
// 0 anyway; on one with it, this test fails if the variant is chosen.
func TestCPUBackendNotAMX(t *testing.T) {
	newTestEngine(t, Config{}, tinymodel.Config{}) // loads the libraries
	dir := needLib(t)
	variants, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	got := capi.CPUBackend()
	t.Logf("CPU backend %q of %d variants; %s", filepath.Base(got), len(variants), capi.SystemInfo())
	if len(variants) > 0 && got == "" {
		t.Fatalf("%s has %d CPU variants but none was loaded", dir, len(variants))
	}
	if strings.Contains(filepath.Base(got), "sapphirerapids") {
		t.Fatalf("loaded %s, whose AMX kernels crash", got)
	}
	if strings.Contains(capi.SystemInfo(), "AMX_INT8 = 1") {
		t.Fatalf("llama.cpp reports AMX in use: %s", capi.SystemInfo())
	}
}
