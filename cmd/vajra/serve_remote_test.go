package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestWorkerSettings: --worker (repeatable), VAJRA_WORKER (comma-separated)
// and a workers: list in the config file select the remote engine, with
// the usual precedence; its timeouts and the llama engine's text settings
// reach Config.Remote; without --served-model-name the name is left to
// the workers.
func TestWorkerSettings(t *testing.T) {
	file := writeFile(t, "vajra.yaml", "workers: [llama-server://10.0.0.1:8080, llama-server://10.0.0.2:8080]\nworker-inter-token-timeout: 5s\n")
	f := func(args []string, env map[string]string, want string, check func(st *serveSettings) bool) {
		t.Helper()
		st, err := parseServe(args, envOf(env), io.Discard)
		if err != nil {
			t.Fatalf("%v %v: %v", args, env, err)
		}
		if got := strings.Join(st.cfg.Remote.Workers, ","); got != want || (check != nil && !check(st)) {
			t.Errorf("%v %v: workers %q, want %q; remote %+v, engine %+v", args, env, got, want, st.cfg.Remote, st.cfg.EngineConfig)
		}
	}
	f(nil, nil, "", func(st *serveSettings) bool { return len(st.cfg.ServedModelNames) == 1 })
	f([]string{"--config", file}, nil, "llama-server://10.0.0.1:8080,llama-server://10.0.0.2:8080", func(st *serveSettings) bool {
		return st.cfg.Remote.InterTokenTimeout == 5*time.Second && st.cfg.Remote.FirstTokenTimeout == 120*time.Second &&
			st.cfg.ServedModelNames == nil
	})
	env := map[string]string{"VAJRA_WORKER": "llama-server://a:1, llama-server://b:2", "VAJRA_CONFIG": file}
	f(nil, env, "llama-server://a:1,llama-server://b:2", nil)
	f([]string{"--worker", "llama-server://c:3", "--served-model-name", "m", "--tool-call-parser", "hermes", "--max-model-len", "512"}, env,
		"llama-server://c:3", func(st *serveSettings) bool {
			ec := st.cfg.EngineConfig // the settings every engine shares: vajra.New hands them to the workers' engine
			return strings.Join(st.cfg.ServedModelNames, ",") == "m" && ec.ToolCallParser == "hermes" && ec.MaxModelLen == 512
		})
	if _, err := parseServe([]string{"--worker", "llama-server://c:3", "--model", "x.gguf"}, envOf(nil), io.Discard); err == nil {
		t.Error("--worker with --model was accepted")
	}
}
