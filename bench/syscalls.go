package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// System calls per token. What a streaming server costs per token is
// mostly the system calls it makes (one write(2) per token per connection
// for a server that writes each frame as it comes), so -syscalls counts
// them over the measured window, by kind, to make the cause of the CPU
// per token visible.
//
// Two sources:
//
//   - perf: `perf stat` counting the kernel's syscall tracepoints
//     (raw_syscalls:sys_enter for the total, syscalls:sys_enter_NAME per
//     kind) on the server's pid. perf is started before the run with its
//     events disabled (-D -1) and enabled and disabled through its control
//     pipe (--control) at the window's two ends, so the counts cover the
//     window exactly. Counting happens in the kernel; perf itself sleeps.
//     Enabling the tracepoints puts the server's threads on the kernel's
//     slow syscall path: each system call costs about 0.1-0.3 µs more
//     (measured with dd bs=1 on this machine), so the CPU figures of a run
//     with -syscalls perf are a little high: count in a separate run.
//   - proc: /proc/PID/io's syscr and syscw, the read- and write-family
//     calls (read, readv, recvfrom... and write, writev, sendto...), at the
//     window's two ends. It costs the server nothing but sees nothing else:
//     not epoll_wait, futex or io_uring_enter (io_uring's submissions are
//     not counted as writes either).
//
// "auto" uses perf when it runs and can count the server, else proc.

// SyscallStats is a process's system calls in the measured window.
type SyscallStats struct {
	Source   string        `json:"source"` // "perf" or "proc"
	Total    float64       `json:"total"`
	PerToken float64       `json:"per_token"` // -1 with no tokens
	Kinds    []SyscallKind `json:"kinds"`     // most frequent first; "other" (perf) is the total's rest
}

// SyscallKind is one kind of system call.
type SyscallKind struct {
	Name     string  `json:"name"`
	Count    float64 `json:"count"`
	PerToken float64 `json:"per_token"` // -1 with no tokens
}

// Syscall counting modes (-syscalls).
const (
	SyscallsOff  = ""
	SyscallsAuto = "auto"
	SyscallsPerf = "perf"
	SyscallsProc = "proc"
)

func parseSyscallMode(s string) (string, error) {
	switch s {
	case SyscallsOff, SyscallsAuto, SyscallsPerf, SyscallsProc:
		return s, nil
	}
	return "", fmt.Errorf("%w: -syscalls %q: want auto, perf or proc", ErrConfig, s)
}

// syscallKinds are the system calls counted one by one with perf: those a
// network server's hot path makes (and their variants), so that "other"
// stays small. A kind whose tracepoint this kernel lacks is left out.
var syscallKinds = []string{
	"write", "writev", "sendto", "sendmsg", "sendmmsg",
	"read", "readv", "recvfrom", "recvmsg",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl",
	"io_uring_enter",
	"futex", "nanosleep", "clock_nanosleep", "sched_yield",
	"accept4", "close", "shutdown", "setsockopt", "getsockopt",
	"mmap", "munmap", "madvise",
	"rt_sigreturn", "rt_sigprocmask", "tgkill", "getpid",
}

// tracefsDirs are where the syscall tracepoints are listed.
var tracefsDirs = []string{"/sys/kernel/tracing/events/syscalls", "/sys/kernel/debug/tracing/events/syscalls"}

// perfPath is the perf binary; tests may point it elsewhere.
var perfPath = "perf"

// syscallWatch counts a process's system calls over the window.
type syscallWatch struct {
	mode string // SyscallsPerf or SyscallsProc once started; "" off
	pid  int
	// perf
	cmd      *exec.Cmd
	ctl, ack *os.File // our ends of perf's control and ack pipes
	out      string   // perf's output file
	dir      string
	enabled  bool
	failed   error
	// proc
	io [2][2]int64 // syscr, syscw at the window's two ends
	ok [2]bool
}

// start prepares counting for pid in mode (auto, perf or proc). With perf
// it starts perf, events disabled, and waits until perf answers on its
// control pipe. auto falls back to proc when perf cannot start.
func (s *syscallWatch) start(mode string, pid int) error {
	s.pid = pid
	if mode == SyscallsOff || pid <= 0 {
		return nil
	}
	if mode == SyscallsProc {
		if _, _, err := readProcIO(pid); err != nil {
			return err
		}
		s.mode = SyscallsProc
		return nil
	}
	err := s.startPerf()
	if err == nil {
		s.mode = SyscallsPerf
		return nil
	}
	if mode == SyscallsPerf {
		return err
	}
	if _, _, err2 := readProcIO(pid); err2 != nil {
		return errors.Join(err, err2)
	}
	s.mode = SyscallsProc
	return nil
}

// perfEvents returns the perf events to count: the total and each kind
// this kernel has a tracepoint for (all kinds if tracefs is not readable:
// perf then refuses the unknown ones itself).
func perfEvents() []string {
	ev := []string{"raw_syscalls:sys_enter"}
	var dir string
	for _, d := range tracefsDirs {
		if _, err := os.Stat(d); err == nil {
			dir = d
			break
		}
	}
	for _, k := range syscallKinds {
		if dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "sys_enter_"+k)); err != nil {
				continue
			}
		}
		ev = append(ev, "syscalls:sys_enter_"+k)
	}
	return ev
}

// perfReadyTimeout bounds perf's start and each control command's answer.
const perfReadyTimeout = 10 * time.Second

func (s *syscallWatch) startPerf() (err error) {
	path, err := exec.LookPath(perfPath)
	if err != nil {
		return fmt.Errorf("bench: -syscalls perf: %w", err)
	}
	s.dir, err = os.MkdirTemp("", "vajra-bench-perf")
	if err != nil {
		return err
	}
	s.out = filepath.Join(s.dir, "stat.csv")
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return err
	}
	s.ctl, s.ack = ctlW, ackR
	defer func() {
		ctlR.Close() // perf holds its own copies
		ackW.Close()
		if err != nil {
			s.stop()
		}
	}()
	// fd 3: control (perf reads), fd 4: ack (perf writes).
	s.cmd = exec.Command(path, "stat", "-x", ",", "--no-big-num", "-D", "-1", "--control", "fd:3,4",
		"-e", strings.Join(perfEvents(), ","), "-p", strconv.Itoa(s.pid), "-o", s.out)
	s.cmd.ExtraFiles = []*os.File{ctlR, ackW}
	var stderr bytes.Buffer
	s.cmd.Stderr = &stderr
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("bench: -syscalls perf: %w", err)
	}
	// ping answers once perf has opened its events: then it can count.
	if err := s.command("ping"); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// command sends one control command to perf and waits for its ack.
func (s *syscallWatch) command(c string) error {
	if _, err := s.ctl.WriteString(c + "\n"); err != nil {
		return fmt.Errorf("bench: -syscalls perf %s: %w", c, err)
	}
	_ = s.ack.SetReadDeadline(time.Now().Add(perfReadyTimeout))
	var buf [16]byte
	n, err := s.ack.Read(buf[:])
	if err != nil {
		return fmt.Errorf("bench: -syscalls perf %s: no answer: %w", c, err)
	}
	if !bytes.HasPrefix(buf[:n], []byte("ack")) {
		return fmt.Errorf("bench: -syscalls perf %s: answer %q", c, buf[:n])
	}
	return nil
}

// mark opens (i = 0) or closes (1) the counting window.
func (s *syscallWatch) mark(i int) {
	switch s.mode {
	case SyscallsPerf:
		c := "enable"
		if i == 1 {
			c = "disable"
		}
		if i == 1 && !s.enabled {
			return
		}
		if err := s.command(c); err != nil {
			s.failed = err
			return
		}
		s.enabled = i == 0
	case SyscallsProc:
		r, w, err := readProcIO(s.pid)
		s.io[i], s.ok[i] = [2]int64{r, w}, err == nil
	}
}

// stop ends perf (its counts stay in its output file) and returns its
// error, if any.
func (s *syscallWatch) stop() error {
	var err error
	if s.cmd != nil {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- s.cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(perfReadyTimeout):
				_ = s.cmd.Process.Kill()
				err = <-done
			}
		}
		s.cmd = nil
	}
	if s.ctl != nil {
		s.ctl.Close()
		s.ack.Close()
		s.ctl, s.ack = nil, nil
	}
	return err
}

// stats stops counting and returns the window's system calls per token,
// or nil when they were not counted.
func (s *syscallWatch) stats(tokens int64) (*SyscallStats, error) {
	switch s.mode {
	case SyscallsPerf:
		s.mode = ""
		stopErr := s.stop()
		defer os.RemoveAll(s.dir)
		if s.failed != nil {
			return nil, s.failed
		}
		b, err := os.ReadFile(s.out)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("bench: -syscalls perf: %w", err), stopErr)
		}
		counts, err := parsePerfStat(b)
		if err != nil {
			return nil, err
		}
		return syscallStats(SyscallsPerf, counts, tokens), nil
	case SyscallsProc:
		s.mode = ""
		if !s.ok[0] || !s.ok[1] {
			return nil, fmt.Errorf("%w %d: io", ErrNoProc, s.pid)
		}
		return syscallStats(SyscallsProc, map[string]float64{
			"read-family (syscr)":  float64(s.io[1][0] - s.io[0][0]),
			"write-family (syscw)": float64(s.io[1][1] - s.io[0][1]),
		}, tokens), nil
	}
	return nil, nil
}

// perfLine matches a count line of `perf stat -x ,` for a syscall
// tracepoint. perf's own messages ("Events enabled") may share a line, so
// the match is not anchored.
var perfLine = regexp.MustCompile(`(\d+|<not counted>|<not supported>),[^,\n]*,((?:raw_)?syscalls:sys_enter\w*),`)

// parsePerfStat reads perf stat's CSV output into counts by kind; the key
// "" is the total (raw_syscalls:sys_enter).
func parsePerfStat(b []byte) (map[string]float64, error) {
	counts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		for _, m := range perfLine.FindAllStringSubmatch(sc.Text(), -1) {
			v := 0.0
			if m[1][0] != '<' {
				v, _ = strconv.ParseFloat(m[1], 64)
			}
			name := strings.TrimPrefix(m[2], "syscalls:sys_enter_")
			if m[2] == "raw_syscalls:sys_enter" {
				name = ""
			}
			counts[name] += v
		}
	}
	if _, ok := counts[""]; !ok {
		return nil, fmt.Errorf("bench: -syscalls perf: no raw_syscalls:sys_enter count in perf's output %q", truncate(string(b), 200))
	}
	return counts, nil
}

// syscallStats builds the report from counts by kind. With perf the key ""
// is the total, and what the named kinds do not cover is "other"; with
// proc the total is the kinds' sum.
func syscallStats(source string, counts map[string]float64, tokens int64) *SyscallStats {
	st := &SyscallStats{Source: source}
	per := func(n float64) float64 {
		if tokens <= 0 {
			return -1
		}
		return n / float64(tokens)
	}
	var sum float64
	for name, n := range counts {
		if name == "" || n == 0 {
			continue
		}
		sum += n
		st.Kinds = append(st.Kinds, SyscallKind{Name: name, Count: n, PerToken: per(n)})
	}
	st.Total = sum
	if total, ok := counts[""]; ok {
		st.Total = total
		if rest := total - sum; rest > 0 {
			st.Kinds = append(st.Kinds, SyscallKind{Name: "other", Count: rest, PerToken: per(rest)})
		}
	}
	sort.Slice(st.Kinds, func(i, j int) bool {
		if st.Kinds[i].Count != st.Kinds[j].Count {
			return st.Kinds[i].Count > st.Kinds[j].Count
		}
		return st.Kinds[i].Name < st.Kinds[j].Name
	})
	st.PerToken = per(st.Total)
	return st
}

// readProcIO returns syscr and syscw from /proc/PID/io.
func readProcIO(pid int) (syscr, syscw int64, err error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "io"))
	if err != nil {
		return 0, 0, fmt.Errorf("%w %d: %w", ErrNoProc, pid, err)
	}
	var okR, okW bool
	for _, line := range strings.Split(string(b), "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "syscr":
			syscr, okR = n, true
		case "syscw":
			syscw, okW = n, true
		}
	}
	if !okR || !okW {
		return 0, 0, fmt.Errorf("%w %d: io has no syscr/syscw", ErrNoProc, pid)
	}
	return syscr, syscw, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
