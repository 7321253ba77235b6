package llama

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// childEnv marks the copy of this test binary that TestCPUBackendNotAMX
// runs on an npm build's libraries.
const childEnv = "VAJRA_TEST_CPU_VARIANTS_CHILD"

// TestCPUBackendNotAMX: from an npm build's CPU variants the engine loads
// one, never the Sapphire Rapids variant whose AMX kernels segfault on the
// machines that have AMX (this project's CI crashed in them), and llama.cpp
// then reports no AMX in use. On a machine without AMX that variant scores
// 0 anyway; on one with it, this test fails if the variant is chosen.
//
// The libraries load once per process and the default search finds only
// the native build (.llama/server/bin, no variants), so when this process
// loaded that one the variant checks run again in a child process pointed
// at the npm build beside it (.llama/linux-x64, make llama-prebuilt).
func TestCPUBackendNotAMX(t *testing.T) {
	newTestEngine(t, Config{}, tinymodel.Config{}) // loads the libraries
	dir := needLib(t)
	variants, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	got := capi.CPUBackend()
	t.Logf("%s: CPU backend %q of %d variants; %s", dir, filepath.Base(got), len(variants), capi.SystemInfo())
	if len(variants) > 0 && got == "" {
		t.Fatalf("%s has %d CPU variants but none was loaded", dir, len(variants))
	}
	if strings.Contains(filepath.Base(got), "sapphirerapids") {
		t.Fatalf("loaded %s, whose AMX kernels crash", got)
	}
	if strings.Contains(capi.SystemInfo(), "AMX_INT8 = 1") {
		t.Fatalf("llama.cpp reports AMX in use: %s", capi.SystemInfo())
	}
	if os.Getenv(childEnv) != "" {
		if len(variants) == 0 {
			t.Fatalf("the child was pointed at %s, which has no CPU variants", dir)
		}
		return
	}
	if len(variants) > 0 {
		return
	}
	// The prebuilt libraries are not searched by default: they are beside
	// the native build, in .llama/linux-x64 (make llama-prebuilt).
	npm := filepath.Join(dir, "..", "..", "linux-x64")
	if v, _ := filepath.Glob(filepath.Join(npm, "libggml-cpu-*.so")); len(v) == 0 {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			t.Fatalf("no npm build of the llama.cpp libraries in %s (make llama-prebuilt) to check the CPU variant choice on", npm)
		}
		t.Skipf("no npm build of the llama.cpp libraries in %s (make llama-prebuilt) to check the CPU variant choice on", npm)
	}
	abs, err := filepath.Abs(npm)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUBackendNotAMX$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "VAJRA_LLAMA_LIB="+abs)
	out, err := cmd.CombinedOutput()
	t.Logf("on %s:\n%s", abs, out)
	if err != nil {
		t.Fatalf("the check on %s failed: %v", abs, err)
	}
	if !strings.Contains(string(out), "--- PASS: TestCPUBackendNotAMX") {
		t.Fatalf("the check on %s did not run", abs)
	}
}
