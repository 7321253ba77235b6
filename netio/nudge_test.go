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

	"github.com/vajra-go/vajra/internal/eventually"
)

// TestNudgerKeepsSlowStepsFromSysmon: a stream whose tokens come 60 ms
// apart leaves its loop asleep longer than sysmon's 10 ms retake; with a
// P spare beside the loop, the nudger rings the loop between the tokens
// (some 7 times per gap, at least once however late the timer), the
// stream is whole, and once nothing is in flight the nudger waits on its
// channel instead of ticking.
func TestNudgerKeepsSlowStepsFromSysmon(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs a P beside the one event loop")
	}
	s := startTestServer(t, 60*time.Millisecond, nil)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const tokens = 10
	wakes := s.Wakes()
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
	// The engine's steps wake the loop about once per token; the nudges
	// at least as often again.
	if n, w := s.nudges.Load(), s.Wakes()-wakes; n < tokens-1 || w < 2*tokens {
		t.Fatalf("%d nudges and %d loop wakes over %d gaps of 60 ms, want a nudge per gap and two wakes per token", n, w, tokens-1)
	}
	eventually.True(t, "the nudger waits once nothing is in flight", func() bool { return s.nudgeParked.Load() })
}
