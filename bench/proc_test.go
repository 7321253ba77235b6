package bench

import (
	"os"
	"testing"
	"time"
)

func TestReadProcSelf(t *testing.T) {
	a, err := ReadProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Burn some CPU so the counters move.
	x := 0
	for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); {
		x++
	}
	_ = x
	b, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if a.RSSBytes <= 0 || a.HWMBytes < a.RSSBytes || a.NumThread < 1 {
		t.Fatalf("implausible sample %+v", a)
	}
	if b.CPU <= a.CPU || b.CPU-a.CPU > 10*time.Second {
		t.Fatalf("CPU went from %v to %v", a.CPU, b.CPU)
	}
	if b.TickCPU < a.TickCPU {
		t.Fatalf("tick CPU went backwards: %v -> %v", a.TickCPU, b.TickCPU)
	}
	if clockTicks <= 0 {
		t.Fatalf("clockTicks %d", clockTicks)
	}
}

func TestReadProcMissing(t *testing.T) {
	if _, err := ReadProc(1 << 30); err == nil {
		t.Fatal("no error for a pid that cannot exist")
	}
}

func TestParseStat(t *testing.T) {
	// A comm with spaces and parentheses must not shift the fields.
	line := "4242 (we ird) (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 1000 200 18446744073709551615"
	ticks, threads, err := parseStat([]byte(line))
	if err != nil || ticks != 300 || threads != 7 {
		t.Fatalf("parseStat = %d, %d, %v; want 300, 7", ticks, threads, err)
	}
	if _, _, err := parseStat([]byte("4242 (short) S 1")); err == nil {
		t.Fatal("short stat accepted")
	}
}

func TestStatusKB(t *testing.T) {
	st := []byte("Name:\tx\nVmHWM:\t    4000 kB\nVmRSS:\t    3960 kB\nThreads:\t1\n")
	if got := statusKB(st, "VmRSS:"); got != 3960 {
		t.Fatalf("VmRSS %d", got)
	}
	if got := statusKB(st, "VmHWM:"); got != 4000 {
		t.Fatalf("VmHWM %d", got)
	}
	if got := statusKB(st, "VmSwap:"); got != 0 {
		t.Fatalf("VmSwap %d", got)
	}
}
