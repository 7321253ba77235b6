package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/eventually"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestConfigPrecedence: flag > environment > config file > default, per
// setting, for scalars, lists and the config file's own name.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "vajra.yaml", `
port: 9001
max-concurrent-requests: 7
max-queued-requests: 3
retry-after: 250ms
api-key: [file-key-1, file-key-2]
served-model-name: file-model
allowed-origins: ["https://a.example", "https://b.example"]
protect-metrics: true
shutdown-timeout: 5s
`)
	f := func(args []string, env map[string]string, check func(st *serveSettings)) {
		t.Helper()
		st, err := parseServe(args, envOf(env), io.Discard)
		if err != nil {
			t.Fatalf("%v %v: %v", args, env, err)
		}
		check(st)
	}
	// Defaults.
	f(nil, nil, func(st *serveSettings) {
		if st.cfg.Port != 8000 || st.cfg.MaxConcurrentRequests != 0 || len(st.cfg.APIKeys) != 0 || st.shutdown != 30*time.Second {
			t.Errorf("defaults: %+v", st.cfg)
		}
	})
	// The file over the defaults.
	f([]string{"--config", file}, nil, func(st *serveSettings) {
		c := st.cfg
		if c.Port != 9001 || c.MaxConcurrentRequests != 7 || c.MaxQueuedRequests != 3 || c.RetryAfter != 250*time.Millisecond ||
			strings.Join(c.APIKeys, ",") != "file-key-1,file-key-2" || strings.Join(c.ServedModelNames, ",") != "file-model" ||
			strings.Join(c.AllowedOrigins, ",") != "https://a.example,https://b.example" || !c.ProtectMetrics || st.shutdown != 5*time.Second {
			t.Errorf("file: %+v", c)
		}
	})
	// The environment over the file (the file itself named by VAJRA_CONFIG).
	env := map[string]string{"VAJRA_CONFIG": file, "VAJRA_PORT": "9002", "VAJRA_API_KEY": "env-key", "VAJRA_ALLOWED_ORIGINS": "https://c.example, https://d.example"}
	f(nil, env, func(st *serveSettings) {
		c := st.cfg
		if c.Port != 9002 || strings.Join(c.APIKeys, ",") != "env-key" || c.MaxConcurrentRequests != 7 ||
			strings.Join(c.AllowedOrigins, ",") != "https://c.example,https://d.example" {
			t.Errorf("env over file: %+v", c)
		}
	})
	// Flags over both.
	f([]string{"--port", "9003", "--api-key", "flag-key", "--max-concurrent-requests", "9"}, env, func(st *serveSettings) {
		c := st.cfg
		if c.Port != 9003 || strings.Join(c.APIKeys, ",") != "flag-key" || c.MaxConcurrentRequests != 9 || c.MaxQueuedRequests != 3 {
			t.Errorf("flags over env and file: %+v", c)
		}
	})
	// A key file adds to --api-key.
	keys := writeFile(t, "keys", "# fleet keys\nk1\n\n  k2  \n")
	f([]string{"--api-key", "k0", "--api-key-file", keys}, nil, func(st *serveSettings) {
		if strings.Join(st.cfg.APIKeys, ",") != "k0,k1,k2" {
			t.Errorf("key file: %v", st.cfg.APIKeys)
		}
	})
}

// TestStreamKeepaliveSetting: --stream-keepalive defaults to 15s and is
// set by the config file, VAJRA_STREAM_KEEPALIVE and the flag, 0 turning it
// off.
func TestStreamKeepaliveSetting(t *testing.T) {
	file := writeFile(t, "vajra.yaml", "stream-keepalive: 5s\n")
	f := func(args []string, env map[string]string, want time.Duration) {
		t.Helper()
		st, err := parseServe(args, envOf(env), io.Discard)
		if err != nil {
			t.Fatalf("%v %v: %v", args, env, err)
		}
		if st.cfg.StreamKeepalive != want {
			t.Errorf("%v %v: StreamKeepalive %v, want %v", args, env, st.cfg.StreamKeepalive, want)
		}
	}
	f(nil, nil, 15*time.Second)
	f([]string{"--config", file}, nil, 5*time.Second)
	f([]string{"--config", file}, map[string]string{"VAJRA_STREAM_KEEPALIVE": "2s"}, 2*time.Second)
	f([]string{"--config", file, "--stream-keepalive", "0"}, map[string]string{"VAJRA_STREAM_KEEPALIVE": "2s"}, 0)
}

// TestResponseStoreSettings: the store's flags reach Config.ResponseStore,
// from the command line and the environment alike.
func TestResponseStoreSettings(t *testing.T) {
	st, err := parseServe([]string{"--response-store", "redis://127.0.0.1:6379/2", "--response-store-ttl", "1h",
		"--max-background-responses", "7", "--response-store-key-prefix", "fleet1:"},
		envOf(map[string]string{"VAJRA_RESPONSE_STORE_MAX_ENTRY_BYTES": "1024", "VAJRA_BACKGROUND_EVENT_LOG_BYTES": "4096"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.cfg.ResponseStore
	if rs.URL != "redis://127.0.0.1:6379/2" || rs.TTL != time.Hour || rs.MaxBackground != 7 || rs.KeyPrefix != "fleet1:" ||
		rs.MaxEntryBytes != 1024 || rs.MaxEventLogBytes != 4096 || rs.MaxResponses != vajra.DefaultStoreMaxResponses {
		t.Fatalf("ResponseStore %+v", rs)
	}
	if st, err := parseServe(nil, envOf(nil), io.Discard); err != nil || !st.cfg.ResponseStore.IsMemory() {
		t.Fatalf("default store: %v %+v", err, st.cfg.ResponseStore)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, text := range map[string]string{
		"unknown key":   "no-such-flag: 1\n",
		"list for one":  "port: [1, 2]\n",
		"bad value":     "port: eighty\n",
		"bad duration":  "retry-after: 30\n",
		"not a mapping": "- port\n",
	} {
		file := writeFile(t, "c.yaml", text)
		if _, err := parseServe([]string{"--config", file}, envOf(nil), io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := parseServe(nil, envOf(map[string]string{"VAJRA_PORT": "x"}), io.Discard); err == nil {
		t.Error("bad environment value: no error")
	}
	empty := writeFile(t, "keys", "# none\n")
	if _, err := parseServe([]string{"--api-key-file", empty}, envOf(nil), io.Discard); err == nil {
		t.Error("empty key file: no error")
	}
}

// TestServeHelpDocumentsPrecedence: --help says how settings combine and
// lists every flag.
func TestServeHelpDocumentsPrecedence(t *testing.T) {
	var out bytes.Buffer
	_, err := parseServe([]string{"--help"}, envOf(nil), &out)
	if err != flag.ErrHelp {
		t.Fatal(err)
	}
	for _, want := range []string{"flag > environment variable > config file >", "VAJRA_", "--config", "-max-concurrent-requests", "-api-key-file", "-allowed-origins"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	got chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if strings.Contains(b.buf.String(), "serving on") {
		select {
		case b.got <- struct{}{}:
		default:
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeExitsZeroOnSignal: `vajra serve` drains and returns 0 when its
// context ends (main wires SIGTERM and SIGINT to it).
func TestServeExitsZeroOnSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{got: make(chan struct{}, 1)}
	var logs bytes.Buffer
	rc := make(chan int, 1)
	go func() {
		rc <- serve(ctx, []string{"--port", "0", "--shutdown-timeout", "2s", "--access-log"}, out, &logs)
	}()
	select {
	case <-out.got:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	addr := strings.TrimSpace(strings.TrimPrefix(out.String(), "vajra serving on "))
	res, err := http.Get(addr + "/version")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cancel()
	select {
	case code := <-rc:
		if code != 0 {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return")
	}
	if !strings.Contains(logs.String(), "route") || !strings.Contains(logs.String(), "version") {
		t.Errorf("no access-log line for GET /version in:\n%s", logs.String())
	}
}

// TestServeReloadsWorkersOnSIGHUP: SIGHUP re-reads the config file's
// workers; a removed worker drains and leaves GET /workers, an added one
// is listed.
func TestServeReloadsWorkersOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "vajra.yaml")
	write := func(workers ...string) {
		body := "port: 0\nworkers:\n"
		for _, w := range workers {
			body += "  - " + w + "\n"
		}
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing listens on these ports (1, 2, 3 need root to bind): the
	// workers stay down, which is all the reload needs.
	write("llama-server://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{got: make(chan struct{}, 1)}
	var logs bytes.Buffer
	rc := make(chan int, 1)
	go func() { rc <- serve(ctx, []string{"--config", conf, "--shutdown-timeout", "1s"}, out, &logs) }()
	select {
	case <-out.got:
	case code := <-rc:
		t.Fatalf("serve returned %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	addr := strings.TrimSpace(strings.TrimPrefix(out.String(), "vajra serving on "))
	urls := func() []string {
		res, err := http.Get(addr + "/workers")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Workers []struct {
				URL string `json:"url"`
			} `json:"workers"`
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range body.Workers {
			out = append(out, w.URL)
		}
		return out
	}
	if got := urls(); len(got) != 1 || got[0] != "llama-server://127.0.0.1:1" {
		t.Fatalf("/workers at start: %v", got)
	}
	write("llama-server://127.0.0.1:2", "llama-server://127.0.0.1:3")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "/workers lists the reloaded workers after SIGHUP", func() bool {
		got := urls()
		return len(got) == 2 && got[0] == "llama-server://127.0.0.1:2" && got[1] == "llama-server://127.0.0.1:3"
	})
	cancel()
	if code := <-rc; code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
