package integration_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/fixture"
)

// The Node SDKs (openai 6.x, @anthropic-ai/sdk 1.x, pinned in
// integration/node, installed by `make node-sdks`) against the real
// server on the real model: TestNodeSDKs starts the server and runs
// integration/node's suite (node --test) against it.

// nodeSuite returns the node binary and the suite's folder, or skips
// (fails with VAJRA_REQUIRE_NODE set) when `make node-sdks` has not
// installed the SDKs.
func nodeSuite(t *testing.T) (node, dir string) {
	t.Helper()
	p, err := fixture.Find("", filepath.Join("integration", "node", "node_modules", "openai", "package.json"),
		"the Node SDKs are not installed: run `make node-sdks`")
	p = fixture.Need(t, "VAJRA_REQUIRE_NODE", p, err)
	node, err = exec.LookPath("node")
	if err != nil {
		fixture.Need(t, "VAJRA_REQUIRE_NODE", "", err)
	}
	return node, filepath.Dir(filepath.Dir(filepath.Dir(p)))
}

// runNodeSuite runs the suite against base; pattern, when not "", runs
// only the tests whose names match it.
func runNodeSuite(t *testing.T, base, key, model, pattern string) {
	t.Helper()
	node, dir := nodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a stall detector
	defer cancel()
	args := []string{"--test", "--test-reporter=spec"}
	if pattern != "" {
		args = append(args, "--test-name-pattern="+pattern)
	}
	cmd := exec.CommandContext(ctx, node, append(args, "sdk.test.mjs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VAJRA_BASE_URL="+base, "VAJRA_API_KEY="+key, "VAJRA_MODEL="+model, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}

func TestNodeSDKs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Node SDK suite on the real model")
	}
	nodeSuite(t)
	_, base := startReal(t, func(cfg *vajra.Config) {
		cfg.APIKeys = []string{pythonKey}
		// Stream against non-stream compares greedy outputs: without the
		// prefix cache each prompt is computed whole (TestPythonSDKs).
		llamaConfig(cfg).PrefixCaching = false
	})
	runNodeSuite(t, base, pythonKey, realModelName, "")
}
