package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFrontDoorFigures: front door = process CPU − engine CPU, per token
// and as a share of the engine's; -1 where a denominator is 0.
func TestFrontDoorFigures(t *testing.T) {
	f := func(cpu, engine float64, tokens int64, front, perTok, share float64) {
		t.Helper()
		st := ProcStats{CPUSeconds: cpu}
		st.frontDoor(engine, tokens)
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
		if !st.engineCPU || st.EngineCPUSeconds != engine || !near(st.FrontDoorCPUSeconds, front) ||
			!near(st.FrontDoorMicrosPerTok, perTok) || !near(st.FrontDoorShare, share) {
			t.Errorf("cpu %v engine %v tokens %d: got %+v", cpu, engine, tokens, st)
		}
	}
	f(10.5, 10, 1000, 0.5, 500, 0.05)
	f(2, 2, 10, 0, 0, 0)
	f(1, 0, 10, 1, 1e5, -1)  // the engine computed nothing: no share
	f(1, 0.5, 0, 0.5, -1, 1) // no tokens: no per-token figure
}

// TestEngineCPUWatch: the window's engine CPU is the difference of the
// counter at the two marks; unmeasured or failed marks give ok false.
func TestEngineCPUWatch(t *testing.T) {
	var v atomic.Int64 // milliseconds
	v.Store(1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE %[1]s counter\n%[1]s %.3f\nother 1\n", engineCPUMetric, float64(v.Load())/1e3)
	}))
	defer srv.Close()
	ctx := context.Background()
	e := engineCPUWatch{url: srv.URL}
	if err := e.check(ctx); err != nil {
		t.Fatal(err)
	}
	e.mark(ctx, 0)
	v.Add(2500)
	e.mark(ctx, 1)
	if s, ok := e.seconds(); !ok || math.Abs(s-2.5) > 1e-9 {
		t.Fatalf("seconds %v %v, want 2.5", s, ok)
	}
	if _, ok := (&engineCPUWatch{}).seconds(); ok {
		t.Fatal("an unmeasured watch reports seconds")
	}
	half := engineCPUWatch{url: srv.URL}
	half.mark(ctx, 0)
	if _, ok := half.seconds(); ok {
		t.Fatal("a watch with one mark reports seconds")
	}
}

// engineServer is the fake server with a /metrics whose engine CPU counter
// goes up by step seconds at every scrape (none when step < 0: the counter
// is missing). It counts scrapes.
func engineServer(t *testing.T, step float64) (url string, fs *fakeServer, scrapes *atomic.Int64) {
	t.Helper()
	fs = newFakeServer(t)
	scrapes = new(atomic.Int64)
	api := fs.Config.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			api.ServeHTTP(w, r)
			return
		}
		n := scrapes.Add(1)
		if step >= 0 {
			fmt.Fprintf(w, "%s %g\n", engineCPUMetric, step*float64(n))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, fs, scrapes
}

// TestRunEngineCPU: -engine-cpu checks the counter before load, reads it at
// the window's two ends and prints the front door's figures.
func TestRunEngineCPU(t *testing.T) {
	url, _, scrapes := engineServer(t, 0.25)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-url", url, "-c", "2", "-n", "8", "-warmup", "0s", "-max-tokens", "3", "-prompt-tokens", "8", "-quiet",
		"-server-pid", itoa(os.Getpid()), "-engine-cpu", "-out", filepath.Join(dir, "r.json")}
	if code := Main(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	if n := scrapes.Load(); n != 3 {
		t.Fatalf("%d scrapes, want 3 (check, start, end)", n)
	}
	var res Result
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("json: %v", err)
	}
	s := res.Server
	if s == nil || s.EngineCPUSeconds != 0.25 || math.Abs(s.FrontDoorCPUSeconds-(s.CPUSeconds-0.25)) > 1e-9 || s.FrontDoorMicrosPerTok == 0 {
		t.Fatalf("server stats %+v", s)
	}
	if !strings.Contains(out.String(), "server engine compute cpu 0.250s; front door") {
		t.Fatalf("no front-door line in %q", out.String())
	}
}

// TestRunEngineCPURefused: without the counter on /metrics, or without
// -server-pid, the run is refused before any request is sent.
func TestRunEngineCPURefused(t *testing.T) {
	url, fs, _ := engineServer(t, -1)
	cfg := quickConfig(url)
	cfg.ServerPID, cfg.EngineCPU = os.Getpid(), true
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), engineCPUMetric) {
		t.Fatalf("err %v, want one naming %s", err, engineCPUMetric)
	}
	cfg.ServerPID = 0
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "-server-pid") {
		t.Fatalf("err %v, want one naming -server-pid", err)
	}
	if n := fs.reqs.Load(); n != 0 {
		t.Fatalf("%d requests sent by refused runs", n)
	}
}
