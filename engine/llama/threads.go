package llama

import (
	"bytes"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadTuner sets llama.cpp's compute threads to the cores other
// processes leave free, when --threads is not given. llama.cpp's threads
// spin at every barrier of a forward pass: with more threads than free
// cores, a step waits for descheduled threads at every barrier (measured
// on the 2-core machine under a load average of 20: 0.2 tokens/s with two
// threads, 137 with one). Once a second, on the scheduler goroutine, it
// reads the machine's busy CPU time (/proc/stat) and the process's own
// (/proc/self/stat), and sets the threads to the cores the others leave
// free (a moving average, rounded), between one and the physical cores.
// It starts at one thread, which is never the catastrophe.
// Nothing is allocated: both files stay open and are read into one buffer.
type threadTuner struct {
	max, cur    int
	stat, self  *os.File
	buf         []byte
	at          time.Time
	busy, mine  uint64  // clock ticks at the last check
	others      float64 // cores busy with other processes (moving average)
	ncpu        float64
	initialized bool
}

// tunePeriod is how often the tuner looks.
const tunePeriod = time.Second

func newThreadTuner(max int) *threadTuner {
	st, err1 := os.Open("/proc/stat")
	self, err2 := os.Open("/proc/self/stat")
	if err1 != nil || err2 != nil {
		if st != nil {
			st.Close()
		}
		if self != nil {
			self.Close()
		}
		return nil
	}
	return &threadTuner{max: max, cur: 1, stat: st, self: self, buf: make([]byte, 4096), ncpu: float64(runtime.NumCPU())}
}

func (t *threadTuner) close() {
	if t != nil {
		t.stat.Close()
		t.self.Close()
	}
}

// check returns the thread count to use from now, or 0 for no change.
func (t *threadTuner) check(now time.Time) int {
	if t == nil || now.Sub(t.at) < tunePeriod {
		return 0
	}
	busy, ok1 := t.readBusy()
	mine, ok2 := t.readSelf()
	if !ok1 || !ok2 {
		return 0
	}
	dt := now.Sub(t.at).Seconds()
	prevBusy, prevMine, first := t.busy, t.mine, !t.initialized
	t.at, t.busy, t.mine, t.initialized = now, busy, mine, true
	if first || dt <= 0 || busy < prevBusy || mine < prevMine {
		return 0
	}
	const hz = 100 // USER_HZ: /proc's clock ticks on Linux
	others := (float64(busy-prevBusy) - float64(mine-prevMine)) / hz / dt
	others = min(max(others, 0), t.ncpu)
	if t.others == 0 {
		t.others = others
	} else {
		t.others += (others - t.others) / 2
	}
	n := min(t.max, max(1, int(t.ncpu-t.others+0.5)))
	if n == t.cur {
		return 0
	}
	t.cur = n
	return n
}

// readBusy is the machine's non-idle CPU time in ticks: the first line of
// /proc/stat, all fields but idle and iowait.
func (t *threadTuner) readBusy() (uint64, bool) {
	n, err := unix.Pread(int(t.stat.Fd()), t.buf, 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	line := t.buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	var sum uint64
	for i, f := 0, 0; i < len(line); f++ {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		v, j, ok := parseUint(line, i)
		if f > 0 && ok && f != 4 && f != 5 && f <= 8 {
			sum += v
		}
		if j == i {
			for j < len(line) && line[j] != ' ' {
				j++
			}
		}
		i = j
	}
	return sum, true
}

// readSelf is this process's utime+stime in ticks (fields 14 and 15 of
// /proc/self/stat, counted after the command's closing parenthesis).
func (t *threadTuner) readSelf() (uint64, bool) {
	n, err := unix.Pread(int(t.self.Fd()), t.buf, 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	b := t.buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	b = b[i+1:]
	var sum uint64
	// After ")": field 3 (state) is the first; utime is field 14.
	for f, j := 3, 0; j < len(b) && f <= 15; f++ {
		for j < len(b) && b[j] == ' ' {
			j++
		}
		v, k, ok := parseUint(b, j)
		if (f == 14 || f == 15) && ok {
			sum += v
		}
		for k < len(b) && b[k] != ' ' {
			k++
		}
		j = k
	}
	return sum, true
}

// parseUint reads the decimal number at b[i:], returning it, where it
// ends, and whether there was one.
func parseUint(b []byte, i int) (uint64, int, bool) {
	var v uint64
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + uint64(b[j]-'0')
		j++
	}
	return v, j, j > i
}
