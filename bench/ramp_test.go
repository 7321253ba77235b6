package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseRampPlan(t *testing.T) {
	for _, c := range []struct {
		in   string
		res  int
		want RampPlan
	}{
		{"500:8000:500", 0, RampPlan{From: 500, To: 8000, Step: 500}},
		{"500:16000", 0, RampPlan{From: 500, To: 16000, Resolution: 250}},
		{"500:16000", 100, RampPlan{From: 500, To: 16000, Resolution: 100}},
		{"1:1", 0, RampPlan{From: 1, To: 1, Resolution: 1}},
	} {
		got, err := ParseRampPlan(c.in, c.res)
		if err != nil || got != c.want {
			t.Errorf("ParseRampPlan(%q, %d) = %+v, %v; want %+v", c.in, c.res, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "500", "500:", "a:1000", "0:1000", "1000:500", "1:2:3:4", "1:1000:-5", "1:200000", "1:1000:1"} {
		if _, err := ParseRampPlan(bad, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseRampPlan(%q) err = %v, want ErrConfig", bad, err)
		}
	}
	if _, err := ParseRampPlan("1:10", -1); !errors.Is(err, ErrConfig) {
		t.Errorf("negative resolution accepted: %v", err)
	}
}

// fakeLevels is a measurer whose server-added p99 is a function of the
// streams, recording the levels it was asked for.
type fakeLevels struct {
	p99    func(streams int) float64 // ms
	errors func(streams int) int64
	asked  []int
	client float64 // client CPU cores per level
}

func (f *fakeLevels) measure(_ context.Context, streams int) (*Result, error) {
	f.asked = append(f.asked, streams)
	res := &Result{TokensPerSec: float64(streams) * 50, Gap: Latency{Count: uint64(streams) * 100, P50: 20.1, P99: 20 + f.p99(streams)},
		Server: &ProcStats{CPUSource: "schedstat", CPUMicrosPerTok: 10, CPUUtilization: float64(streams) * 50 * 10e-6},
		Client: &ProcStats{CPUSource: "schedstat", CPUUtilization: f.client}}
	res.ServerAdded = res.Gap.minus(20e6)
	if f.errors != nil {
		res.Errors = f.errors(streams)
	}
	return res, nil
}

// linearP99 is 1 ms per 1,000 streams: a 5 ms threshold's knee is 5,000.
func linearP99(streams int) float64 { return float64(streams) / 1000 }

func runFakeRamp(t *testing.T, spec string, f *fakeLevels) *Ramp {
	t.Helper()
	plan, err := ParseRampPlan(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rampAll(context.Background(), []rampTarget{{label: "x", url: "u", itl: 20e6, measure: f.measure}}, plan, 5, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs[0]
}

func TestRampLinearStopsAfterFirstFailure(t *testing.T) {
	f := &fakeLevels{p99: linearP99}
	r := runFakeRamp(t, "500:8000:500", f)
	want := []int{500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500}
	if !reflect.DeepEqual(f.asked, want) {
		t.Fatalf("levels %v, want %v", f.asked, want)
	}
	if r.Knee != 5000 || r.FirstFail != 5500 {
		t.Fatalf("knee %d first fail %d, want 5000 5500", r.Knee, r.FirstFail)
	}
	if l := r.Levels[len(r.Levels)-1]; l.Pass || l.Streams != 5500 || l.ServerAddedP99Ms < 5.49 || l.ServerAddedP99Ms > 5.51 {
		t.Fatalf("last level %+v", l)
	}
	if !strings.Contains(r.KneeText(), "5000 streams (5500 failed)") {
		t.Fatal(r.KneeText())
	}
}

func TestRampLinearAllPass(t *testing.T) {
	f := &fakeLevels{p99: func(int) float64 { return 1 }}
	r := runFakeRamp(t, "100:1000:300", f)
	if !reflect.DeepEqual(f.asked, []int{100, 400, 700, 1000}) || r.Knee != 1000 || r.FirstFail != 0 {
		t.Fatalf("asked %v knee %d first fail %d", f.asked, r.Knee, r.FirstFail)
	}
	if !strings.Contains(r.KneeText(), "at least") {
		t.Fatal(r.KneeText())
	}
}

func TestRampSearchDoublesThenBisects(t *testing.T) {
	f := &fakeLevels{p99: func(n int) float64 { return float64(n) / 660 }} // passes up to 3,300
	r := runFakeRamp(t, "500:16000", f)
	// Doubling to the first failure (4,000), then bisecting (2,000, 4,000)
	// until the bracket is 250 wide.
	want := []int{500, 1000, 2000, 4000, 3000, 3500, 3250}
	if !reflect.DeepEqual(f.asked, want) {
		t.Fatalf("levels %v, want %v", f.asked, want)
	}
	if r.Knee != 3250 || r.FirstFail != 3500 {
		t.Fatalf("knee %d first fail %d, want 3250 3500", r.Knee, r.FirstFail)
	}
	for i := 1; i < len(r.Levels); i++ {
		if r.Levels[i].Streams <= r.Levels[i-1].Streams {
			t.Fatalf("levels not sorted by streams: %+v", r.Levels)
		}
	}
	if r.Levels[0].Seq != 1 || r.Levels[len(r.Levels)-1].Seq != 4 { // 4,000 was measured fourth
		t.Fatalf("seq %d..%d", r.Levels[0].Seq, r.Levels[len(r.Levels)-1].Seq)
	}
}

func TestRampSearchClampsToTo(t *testing.T) {
	f := &fakeLevels{p99: func(int) float64 { return 0 }}
	r := runFakeRamp(t, "500:3000", f)
	if !reflect.DeepEqual(f.asked, []int{500, 1000, 2000, 3000}) || r.Knee != 3000 || r.FirstFail != 0 {
		t.Fatalf("asked %v knee %d first fail %d", f.asked, r.Knee, r.FirstFail)
	}
}

func TestRampEveryLevelFails(t *testing.T) {
	f := &fakeLevels{p99: func(int) float64 { return 100 }}
	r := runFakeRamp(t, "8:64", f)
	if !reflect.DeepEqual(f.asked, []int{8, 16, 32, 64}) || r.Knee != 0 || r.FirstFail != 0 || !strings.Contains(r.KneeText(), "every level from 8 to 64 streams failed") {
		t.Fatalf("asked %v knee %d first fail %d %q", f.asked, r.Knee, r.FirstFail, r.KneeText())
	}
	f = &fakeLevels{p99: func(int) float64 { return 100 }}
	r = runFakeRamp(t, "10:40:10", f)
	if !reflect.DeepEqual(f.asked, []int{10, 20, 30, 40}) || r.Knee != 0 {
		t.Fatalf("linear: asked %v knee %d", f.asked, r.Knee)
	}
}

// TestRampFailsAtLightLoad: a server whose gaps are worse at a light load
// than at a heavier one (the floor with GOMAXPROCS=1) still gets its knee.
func TestRampFailsAtLightLoad(t *testing.T) {
	p99 := func(n int) float64 {
		if n < 1000 {
			return 20 // light load: late timer
		}
		return float64(n) / 660 // passes up to 3,300
	}
	f := &fakeLevels{p99: p99}
	r := runFakeRamp(t, "500:16000", f)
	want := []int{500, 1000, 2000, 4000, 3000, 3500, 3250}
	if !reflect.DeepEqual(f.asked, want) || r.Knee != 3250 || r.FirstFail != 3500 {
		t.Fatalf("asked %v (want %v) knee %d first fail %d", f.asked, want, r.Knee, r.FirstFail)
	}
	if !reflect.DeepEqual(r.FailedBelow, []int{500}) || !strings.Contains(r.KneeText(), "failed below the knee at [500]") {
		t.Fatalf("failed below %v, %q", r.FailedBelow, r.KneeText())
	}
	f = &fakeLevels{p99: p99}
	r = runFakeRamp(t, "250:8000:250", f)
	if r.Knee != 3250 || r.FirstFail != 3500 || len(r.FailedBelow) != 3 || f.asked[len(f.asked)-1] != 3500 {
		t.Fatalf("linear: asked %v knee %d first fail %d below %v", f.asked, r.Knee, r.FirstFail, r.FailedBelow)
	}
}

func TestRampErrorsFailALevel(t *testing.T) {
	f := &fakeLevels{p99: func(int) float64 { return 0 }, errors: func(n int) int64 {
		if n >= 300 {
			return 1
		}
		return 0
	}}
	r := runFakeRamp(t, "100:1000:100", f)
	if r.Knee != 200 || r.FirstFail != 300 {
		t.Fatalf("knee %d first fail %d, want 200 300", r.Knee, r.FirstFail)
	}
}

func TestRampNoGapsFails(t *testing.T) {
	l := levelOf(10, &Result{}, 5, 1)
	if l.Pass {
		t.Fatal("a level without gaps passed")
	}
	if l.ServerCPUPerTokenUs != -1 || l.ClientCPUCores != -1 {
		t.Fatalf("unmeasured CPU shown as %v, %v", l.ServerCPUPerTokenUs, l.ClientCPUCores)
	}
}

func TestRampClientBound(t *testing.T) {
	f := &fakeLevels{p99: linearP99, client: 0.95}
	r := runFakeRamp(t, "1000:8000:1000", f)
	if !r.ClientBound || !r.Levels[0].ClientBound || !strings.Contains(r.KneeText(), "client") {
		t.Fatalf("client-bound not flagged: %+v %q", r.Levels[0], r.KneeText())
	}
	f = &fakeLevels{p99: linearP99, client: 0.5}
	if r := runFakeRamp(t, "1000:8000:1000", f); r.ClientBound {
		t.Fatal("client-bound at half a core")
	}
}

func TestRampAlternatesServers(t *testing.T) {
	var order []string
	mk := func(name string, kneeAt int) rampTarget {
		return rampTarget{label: name, measure: func(_ context.Context, n int) (*Result, error) {
			order = append(order, fmt.Sprintf("%s%d", name, n))
			p := 1.0
			if n > kneeAt {
				p = 9
			}
			return &Result{Gap: Latency{Count: 1, P99: p}, ServerAdded: Latency{Count: 1, P99: p}}, nil
		}}
	}
	plan, _ := ParseRampPlan("1:4:1", 0)
	var prog bytes.Buffer
	rs, err := rampAll(context.Background(), []rampTarget{mk("a", 1), mk("b", 3)}, plan, 5, 1, &prog)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a1", "b1", "a2", "b2", "b3", "b4"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if rs[0].Knee != 1 || rs[1].Knee != 3 {
		t.Fatalf("knees %d %d", rs[0].Knee, rs[1].Knee)
	}
	if strings.Count(prog.String(), "-- ramp ") != 6 {
		t.Fatalf("progress %q", prog.String())
	}
	rep := &RampReport{ThresholdMs: 5, Ramps: rs}
	var txt bytes.Buffer
	rep.WriteText(&txt)
	if !strings.Contains(txt.String(), "knee ratio b/a: 3.000 (3 / 1 streams)") {
		t.Fatal(txt.String())
	}
}

func TestRampMeasureErrorEndsRamp(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	plan, _ := ParseRampPlan("1:10:1", 0)
	rs, err := rampAll(context.Background(), []rampTarget{{label: "a", measure: func(context.Context, int) (*Result, error) {
		n++
		if n == 3 {
			return nil, boom
		}
		return &Result{Gap: Latency{Count: 1}}, nil
	}}}, plan, 5, 1, nil)
	if !errors.Is(err, boom) || len(rs) != 1 || len(rs[0].Levels) != 2 || rs[0].Knee != 2 {
		t.Fatalf("err %v, ramps %+v", err, rs)
	}
}

func TestRampReportOutputs(t *testing.T) {
	f := &fakeLevels{p99: linearP99}
	a := runFakeRamp(t, "1000:8000:1000", f)
	a.Label = `floor <&>`
	a.Levels[1].Syscalls = syscallStats(SyscallsPerf, map[string]float64{"": 150, "write": 100}, 100)
	b := runFakeRamp(t, "1000:8000:2000", &fakeLevels{p99: func(n int) float64 { return float64(n) / 1500 }})
	b.Label = "vajra"
	rep := &RampReport{ThresholdMs: 5, Ramps: []*Ramp{a, b}}
	var txt bytes.Buffer
	rep.WriteText(&txt)
	for _, want := range []string{"== ramp floor <&>", "knee floor <&>: 5000 streams (6000 failed)", "knee vajra: 7000 streams, at least",
		"knee ratio vajra/floor <&>: 1.400", "syscalls/token 1.500 (perf: write 1.000 other 0.500)"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
	dir := t.TempDir()
	jp, hp := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	if err := writeRampOutputs(rep, jp, hp); err != nil {
		t.Fatal(err)
	}
	var back RampReport
	if b, err := os.ReadFile(jp); err != nil || json.Unmarshal(b, &back) != nil {
		t.Fatalf("json: %v", err)
	}
	if len(back.Ramps) != 2 || back.Ramps[0].Knee != 5000 || len(back.Ramps[0].Levels) != 6 {
		t.Fatalf("json round trip: %+v", back)
	}
	checkXMLPlots(t, hp, 3)
	h, _ := os.ReadFile(hp)
	for _, want := range []string{"floor &lt;&amp;&gt; (knee 5000)", "threshold 5 ms", "Server CPU per token by streams"} {
		if !bytes.Contains(h, []byte(want)) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// TestMainRamp runs ramp mode end to end against the fake server.
func TestMainRamp(t *testing.T) {
	if testing.Short() {
		t.Skip("timed run")
	}
	fs := newFakeServer(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-url", fs.URL, "-label", "fake", "-ramp-streams", "1:4", "-warmup", "0s", "-duration", "150ms",
		"-max-tokens", "3", "-server-pid", itoa(os.Getpid()), "-knee-p99", "1h",
		"-out", filepath.Join(dir, "r.json"), "-html", filepath.Join(dir, "r.html")}
	if code := Main(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	var rep RampReport
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("json: %v", err)
	}
	r := rep.Ramps[0]
	if len(r.Levels) != 3 || r.Knee != 4 || r.Levels[2].Streams != 4 || r.Levels[2].ServerCPUPerTokenUs <= 0 {
		t.Fatalf("ramp %+v", r)
	}
	if !strings.Contains(out.String(), "-- ramp fake: 2 streams") || !strings.Contains(out.String(), "knee fake: 4 streams, at least") {
		t.Fatal(out.String())
	}
	checkXMLPlots(t, filepath.Join(dir, "r.html"), 3)
}

func TestMainRampUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-ramp-streams", "10:1"},
		{"-ramp-streams", "1:10", "-knee-p99", "0s"},
		{"-compare", "http://127.0.0.1:1", "-compare", "http://127.0.0.1:2"}, // repeatable only in ramp mode
		{"-compare", "http://127.0.0.1:1", "-compare-pid", "1", "-compare-pid", "2"},
		{"-ramp-streams", "1:10", "-rate", "5"},
		{"-ramp-streams", "1:10", "-stream=false"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), append(args, "-url", "http://127.0.0.1:1"), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

// TestRunNoDrainCutsAtWindowEnd: a server that sends one token and then
// holds the stream open would keep a drained run waiting for the request
// timeout; with CutAtStop the run ends with the window and its requests
// count as aborted, not as errors.
func TestRunNoDrainCutsAtWindowEnd(t *testing.T) {
	first := strings.SplitAfter(dialectStreams[DialectChat], "\n\n")[0]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	cfg := quickConfig(srv.URL)
	cfg.Requests, cfg.Duration, cfg.CutAtStop = 0, 100*time.Millisecond, true
	cfg.RequestTimeout = time.Minute
	start := time.Now()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("run took %v: not cut", d)
	}
	if res.Aborted != int64(cfg.Concurrency) || res.Errors != 0 {
		t.Fatalf("aborted %d errors %d, want %d and 0", res.Aborted, res.Errors, cfg.Concurrency)
	}
}

// TestRampRetriesFailingLevels: a failing level is measured again and its
// best try counts; a passing level is measured once.
func TestRampRetriesFailingLevels(t *testing.T) {
	tries := map[int]int{}
	f := &fakeLevels{p99: func(n int) float64 {
		tries[n]++
		if n <= 3000 && tries[n] == 1 {
			return 50 // a noisy first window
		}
		if n <= 3000 {
			return float64(n) / 1000
		}
		return 9 + float64(tries[n]) // fails every try, worse each time
	}}
	plan, err := ParseRampPlan("1000:4000:1000", 0)
	if err != nil {
		t.Fatal(err)
	}
	plan.Retries = 1
	var prog bytes.Buffer
	rs, err := rampAll(context.Background(), []rampTarget{{label: "x", measure: f.measure}}, plan, 5, 1, &prog)
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	want := []int{1000, 1000, 2000, 2000, 3000, 3000, 4000, 4000}
	if !reflect.DeepEqual(f.asked, want) || r.Knee != 3000 || r.FirstFail != 4000 {
		t.Fatalf("asked %v knee %d first fail %d", f.asked, r.Knee, r.FirstFail)
	}
	last := r.Levels[len(r.Levels)-1]
	if last.Tries != 2 || last.Pass || last.ServerAddedP99Ms < 9.99 || last.ServerAddedP99Ms > 10.01 {
		t.Fatalf("4,000: %+v, want the better try (p99 10 ms) of 2", last)
	}
	if strings.Count(prog.String(), "-- ramp x:") != 8 {
		t.Fatalf("progress %q", prog.String())
	}
	var txt bytes.Buffer
	(&RampReport{ThresholdMs: 5, Ramps: rs}).WriteText(&txt)
	if !strings.Contains(txt.String(), "pass (best of 2)") {
		t.Fatal(txt.String())
	}
	// Without retries the noisy first window ends the ramp at once.
	tries = map[int]int{}
	f.asked = nil
	plan.Retries = 0
	rs, _ = rampAll(context.Background(), []rampTarget{{label: "x", measure: f.measure}}, plan, 5, 1, nil)
	if rs[0].Knee != 0 {
		t.Fatalf("no retries: knee %d", rs[0].Knee)
	}
}
