package netio

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/internal/eventually"
)

// slowStream streams tokens 60 ms apart through s (longer than sysmon's
// 10 ms retake) and checks that the stream is whole.
func slowStream(t *testing.T, s *Server, tokens int) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	body := fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, tokens)
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") ||
		!strings.Contains(string(b), fmt.Sprintf(`"completion_tokens":%d`, tokens)) {
		t.Fatalf("stream: %d %v %.300s", res.StatusCode, err, b)
	}
}

// timersArmed reports how many of s's nudge timers are armed.
func timersArmed(t *testing.T, s *Server) (armed, all int) {
	t.Helper()
	s.bellMu.Lock()
	defer s.bellMu.Unlock()
	for _, fd := range s.timers {
		var cur unix.ItimerSpec
		if err := unix.TimerfdGettime(fd, &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Value.Sec != 0 || cur.Value.Nsec != 0 {
			armed++
		}
	}
	return armed, len(s.timers)
}

// TestNudgeTimerKeepsSlowStepsFromSysmon: a stream whose tokens come 60
// ms apart leaves its loop asleep longer than sysmon's 10 ms retake; with a
// P spare beside the loop, the loop's nudge timer wakes it between the
// tokens (some 6 times per gap, at least once however late), the stream
// is whole, and once nothing is in flight the timer stays disarmed.
func TestNudgeTimerKeepsSlowStepsFromSysmon(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs a P beside the one event loop")
	}
	s := startTestServer(t, 60*time.Millisecond, nil)
	// The loop's state, and its timer, come with its first connection.
	if res, err := http.Get("http://" + s.Addr().String() + "/health"); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}
	eventually.True(t, "the loop's nudge timer is enrolled", func() bool { _, n := timersArmed(t, s); return n == 1 })
	const tokens = 10
	wakes := s.Wakes()
	slowStream(t, s, tokens)
	t.Logf("%d nudges, %d doorbell wakes", s.nudges.Load(), s.Wakes()-wakes)
	// The engine's steps wake the loop once per token (its doorbell); the
	// timer between them.
	if n, w := s.nudges.Load(), s.Wakes()-wakes; n < tokens-1 || w < tokens {
		t.Fatalf("%d nudges and %d doorbell wakes over %d gaps of 60 ms, want a nudge per gap and a wake per token", n, w, tokens-1)
	}
	eventually.True(t, "the nudge timer is disarmed once nothing is in flight", func() bool { a, _ := timersArmed(t, s); return a == 0 })
}

// TestNoNudgeWithoutSpareP: with as many loops as Ps no P is spare, and
// the loops are not nudged (there sysmon's retake is what runs the timers
// and the netpoller): the same slow stream fires no timer.
func TestNoNudgeWithoutSpareP(t *testing.T) {
	s := startTestServer(t, 60*time.Millisecond, func(o *Options) { o.Loops = runtime.GOMAXPROCS(0) })
	slowStream(t, s, 4)
	if n := s.nudges.Load(); n != 0 {
		t.Fatalf("%d nudges without a spare P", n)
	}
	if a, _ := timersArmed(t, s); a != 0 {
		t.Fatalf("%d nudge timers armed without a spare P", a)
	}
}
