package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ProcSample is one reading of a process's CPU time and memory from /proc.
type ProcSample struct {
	At time.Time
	// CPU is user+system time of all the process's threads. From the sum of
	// /proc/PID/task/*/schedstat (ns precision) when every thread has one,
	// else from utime+stime of /proc/PID/stat (clock-tick precision).
	CPU       time.Duration
	TickCPU   time.Duration // utime+stime from /proc/PID/stat, always read
	Precise   bool          // CPU came from schedstat
	RSSBytes  int64         // VmRSS
	HWMBytes  int64         // VmHWM: peak RSS over the process's life
	NumThread int
}

// ErrNoProc reports that a process's /proc entries could not be read.
var ErrNoProc = errors.New("bench: cannot read /proc for the process")

// procRoot is /proc; tests may point it elsewhere.
var procRoot = "/proc"

// clockTicks is USER_HZ, the unit of utime and stime. It is read from the
// AT_CLKTCK entry of the auxiliary vector (what sysconf(_SC_CLK_TCK) returns
// in libc) and is 100 when that cannot be read.
var clockTicks = readClockTicks()

func readClockTicks() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	const atClkTck = 17 // AT_CLKTCK, <elf.h>
	for i := 0; i+16 <= len(b); i += 16 {
		k := binary.NativeEndian.Uint64(b[i:])
		v := binary.NativeEndian.Uint64(b[i+8:])
		if k == atClkTck && v > 0 && v < 1_000_000 {
			return int64(v)
		}
		if k == 0 {
			break
		}
	}
	return 100
}

// ReadProc samples process pid. It reads /proc/PID/stat, /proc/PID/status
// and every /proc/PID/task/*/schedstat.
func ReadProc(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return s, fmt.Errorf("%w %d: %w", ErrNoProc, pid, err)
	}
	ticks, threads, err := parseStat(stat)
	if err != nil {
		return s, fmt.Errorf("%w %d: %w", ErrNoProc, pid, err)
	}
	s.TickCPU = time.Duration(ticks * int64(time.Second) / clockTicks)
	s.NumThread = threads
	s.CPU = s.TickCPU
	if ns, ok := readSchedstat(dir); ok {
		s.CPU, s.Precise = time.Duration(ns), true
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return s, fmt.Errorf("%w %d: %w", ErrNoProc, pid, err)
	}
	s.RSSBytes = statusKB(status, "VmRSS:") * 1024
	s.HWMBytes = statusKB(status, "VmHWM:") * 1024
	return s, nil
}

// parseStat returns utime+stime (clock ticks) and num_threads from the text
// of /proc/PID/stat (proc(5)): fields 14, 15 and 20. The comm field (2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(b []byte) (ticks int64, threads int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' in stat")
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 18 {
		return 0, 0, fmt.Errorf("stat has %d fields after comm", len(f))
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	nt, err3 := strconv.Atoi(string(f[17]))
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, err
	}
	return ut + st, nt, nil
}

// readSchedstat sums the on-CPU time (first field, ns) of every thread's
// /proc/PID/task/TID/schedstat. /proc/PID/schedstat alone covers only the
// main thread. Threads that already exited are missing from the sum (Go
// rarely ends threads); ok is false when schedstat is absent
// (CONFIG_SCHED_INFO off) or unreadable.
func readSchedstat(dir string) (ns int64, ok bool) {
	tasks, err := os.ReadDir(filepath.Join(dir, "task"))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var buf [128]byte
	for _, t := range tasks {
		f, err := os.Open(filepath.Join(dir, "task", t.Name(), "schedstat"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited while we listed
			}
			return 0, false
		}
		n, _ := f.Read(buf[:])
		f.Close()
		sp := bytes.IndexByte(buf[:n], ' ')
		if sp <= 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(string(buf[:sp]), 10, 64)
		if err != nil {
			return 0, false
		}
		ns += v
	}
	return ns, true
}

// statusKB returns the kB value of a /proc/PID/status line such as
// "VmRSS:   1234 kB", or 0.
func statusKB(b []byte, key string) int64 {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0
	}
	rest := b[i+len(key):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	f := bytes.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return v
}
