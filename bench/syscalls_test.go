package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// perfOutput is `perf stat -x , -D -1 --control ...` output as perf 6.1
// writes it: its control messages land on the count lines.
const perfOutput = `# started on Tue Dec  1 20:25:18 2026

1107816,,raw_syscalls:sys_enter,998923115,100.00,,
100711,,syscalls:sys_enter_write,998918141,100.00,,
<not counted>,,syscalls:sys_enter_futex,0,100.00,,
0,,syscalls:sys_enter_epoll_wait,998906777,100.00,,Events disabled
Events enabled
Events enabled5000,,syscalls:sys_enter_epoll_pwait,998906777,100.00,,
Events disabled
`

func TestParsePerfStat(t *testing.T) {
	got, err := parsePerfStat([]byte(perfOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"": 1107816, "write": 100711, "futex": 0, "epoll_wait": 0, "epoll_pwait": 5000}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parsePerfStat([]byte("Error:\nNo permissions\n")); err == nil {
		t.Fatal("output without a total accepted")
	}
}

func TestSyscallStats(t *testing.T) {
	st := syscallStats(SyscallsPerf, map[string]float64{"": 1000, "write": 600, "epoll_pwait": 300, "futex": 0}, 500)
	if st.Total != 1000 || st.PerToken != 2 {
		t.Fatalf("total %v per token %v", st.Total, st.PerToken)
	}
	var names []string
	for _, k := range st.Kinds {
		names = append(names, k.Name)
	}
	// Most frequent first; zero kinds left out; the rest is "other".
	if strings.Join(names, " ") != "write epoll_pwait other" || st.Kinds[0].PerToken != 1.2 || st.Kinds[2].Count != 100 {
		t.Fatalf("kinds %+v", st.Kinds)
	}
	st = syscallStats(SyscallsProc, map[string]float64{"read-family (syscr)": 10, "write-family (syscw)": 30}, 0)
	if st.Total != 40 || st.PerToken != -1 || st.Kinds[0].Name != "write-family (syscw)" || st.Kinds[0].PerToken != -1 {
		t.Fatalf("proc stats %+v", st)
	}
}

func TestReadProcIO(t *testing.T) {
	old := procRoot
	t.Cleanup(func() { procRoot = old })
	procRoot = t.TempDir()
	if err := os.MkdirAll(filepath.Join(procRoot, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	io := "rchar: 100\nwchar: 200\nsyscr: 12\nsyscw: 34\nread_bytes: 0\n"
	if err := os.WriteFile(filepath.Join(procRoot, "7", "io"), []byte(io), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, err := readProcIO(7)
	if err != nil || r != 12 || w != 34 {
		t.Fatalf("readProcIO = %d, %d, %v", r, w, err)
	}
	if _, _, err := readProcIO(8); !errors.Is(err, ErrNoProc) {
		t.Fatalf("missing process: %v", err)
	}
}

// writeNull makes n write(2) calls.
func writeNull(t *testing.T, n int) {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{'x'}
	for i := 0; i < n; i++ {
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSyscallWatchProc(t *testing.T) {
	if _, _, err := readProcIO(os.Getpid()); err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	var s syscallWatch
	if err := s.start(SyscallsProc, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	s.mark(0)
	writeNull(t, 1000)
	s.mark(1)
	st, err := s.stats(100)
	if err != nil {
		t.Fatal(err)
	}
	var w float64
	for _, k := range st.Kinds {
		if strings.HasPrefix(k.Name, "write") {
			w = k.Count
		}
	}
	if st.Source != SyscallsProc || w < 1000 {
		t.Fatalf("write-family %v in %+v, want >= 1000", w, st)
	}
}

// TestSyscallWatchPerf counts this process's own write(2) calls with perf;
// it skips where perf is missing or may not count (not root, a
// restrictive perf_event_paranoid, no tracefs).
func TestSyscallWatchPerf(t *testing.T) {
	var s syscallWatch
	if err := s.start(SyscallsPerf, os.Getpid()); err != nil {
		t.Skipf("perf cannot count here: %v", err)
	}
	t.Cleanup(func() { s.stop() })
	writeNull(t, 100) // before the window: not counted
	s.mark(0)
	writeNull(t, 2000)
	s.mark(1)
	writeNull(t, 100_000) // after it: not counted either
	st, err := s.stats(1000)
	if err != nil {
		t.Fatal(err)
	}
	var w float64
	for _, k := range st.Kinds {
		if k.Name == "write" {
			w = k.Count
		}
	}
	// The Go runtime's own writes (few) may add to ours.
	if st.Source != SyscallsPerf || w < 2000 || w > 2000+1000 || st.Total < w {
		t.Fatalf("write %v total %v (%+v), want 2000 writes", w, st.Total, st.Kinds)
	}
	if math.Abs(st.PerToken-st.Total/1000) > 1e-9 {
		t.Fatalf("per token %v, total %v", st.PerToken, st.Total)
	}
	t.Logf("write %v, total %v: %+v", w, st.Total, st.Kinds)
}

func TestSyscallWatchAutoFallsBack(t *testing.T) {
	old := perfPath
	t.Cleanup(func() { perfPath = old })
	perfPath = filepath.Join(t.TempDir(), "no-such-perf")
	var s syscallWatch
	if err := s.start(SyscallsPerf, os.Getpid()); err == nil {
		t.Fatal("perf mode started without perf")
	}
	if _, _, err := readProcIO(os.Getpid()); err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	s = syscallWatch{}
	if err := s.start(SyscallsAuto, os.Getpid()); err != nil || s.mode != SyscallsProc {
		t.Fatalf("auto: mode %q, %v", s.mode, err)
	}
}

func TestRunSyscallsProc(t *testing.T) {
	if _, _, err := readProcIO(os.Getpid()); err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	fs := newFakeServer(t)
	cfg := quickConfig(fs.URL)
	cfg.ServerPID = os.Getpid() // the fake server is this process
	cfg.Syscalls = SyscallsProc
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Server == nil || res.Server.Syscalls == nil || res.Server.Syscalls.Total <= 0 || res.Server.Syscalls.PerToken <= 0 {
		t.Fatalf("syscalls %+v (%q)", res.Server.Syscalls, res.Server.SyscallsError)
	}
	var sb strings.Builder
	res.WriteText(&sb)
	if !strings.Contains(sb.String(), "server syscalls (proc):") {
		t.Fatal(sb.String())
	}
	cfg.ServerPID = 0
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("-syscalls without -server-pid: %v", err)
	}
}

func TestCompareSyscallFigures(t *testing.T) {
	mk := func(total, write float64) *Result {
		return &Result{TokensPerSec: 1, Server: &ProcStats{CPUSource: "schedstat",
			Syscalls: syscallStats(SyscallsPerf, map[string]float64{"": total, "write": write}, 100)}}
	}
	c := &Comparison{Rounds: 2, A: []*Result{mk(200, 100), mk(220, 100)}, B: []*Result{mk(100, 50), mk(110, 50)}}
	c.summarise()
	got := map[string]Figure{}
	for _, f := range c.Figures {
		got[f.Name] = f
	}
	if f := got["server syscalls/token"]; f.A != 2.1 || f.B != 1.05 || f.Ratio != 0.5 {
		t.Fatalf("total figure %+v", f)
	}
	if f := got["syscalls/token write"]; f.A != 1 || f.Ratio != 0.5 {
		t.Fatalf("write figure %+v", f)
	}
	if f := got["syscalls/token other"]; f.A != 1.1 || f.B != 0.55 {
		t.Fatalf("other figure %+v", f)
	}
}
