package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
)

// parkRequest sends a non-streamed generation request on a new connection
// (path and body in the dialect of path) and waits, by polling /load, until
// the server counts want requests queued.
func parkRequest(t *testing.T, addr, path, body string, want int) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nanthropic-version: 2023-06-01\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	waitQueued(t, addr, want)
	return c, bufio.NewReader(c)
}

const (
	queuedChat     = `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	queuedMessages = `{"model":"vajra-sim","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
)

// TestQueueWaitDeadline: with the only slot held by a long stream,
// requests parked in the admission queue are refused once they have waited
// --max-queue-wait: 429 on OpenAI routes, 529 overloaded_error on
// Anthropic's, with Retry-After and retry-after-ms, never before the
// deadline; they leave the queue, the refusals are counted, their
// connections stay usable, and the stream holding the slot goes on.
func TestQueueWaitDeadline(t *testing.T) {
	const wait = time.Second
	_, _, addr := fleetServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 5 * time.Millisecond
		c.MaxConcurrentRequests = 1
		c.MaxQueuedRequests = 2
		c.MaxQueueWait = wait
	})
	blocker := startBlocker(t, addr)
	defer blocker.Close()

	start := time.Now()
	oc, or := parkRequest(t, addr, "/v1/chat/completions", queuedChat, 1)
	ac, ar := parkRequest(t, addr, "/v1/messages", queuedMessages, 2)
	for _, tc := range []struct {
		c      net.Conn
		r      *bufio.Reader
		status int
		want   string
	}{
		{oc, or, 429, `"code":"queue_timeout"`},
		{ac, ar, 529, `"type":"overloaded_error"`},
	} {
		_ = tc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(tc.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || res.Header.Get("Retry-After") == "" || res.Header.Get("Retry-After-Ms") == "" || !strings.Contains(string(b), tc.want) {
			t.Fatalf("queued request: %d %v %s", res.StatusCode, res.Header, b)
		}
		if el := time.Since(start); el < wait {
			t.Fatalf("refused after %v, before the %v deadline", el, wait)
		}
		// The connection stays open and serves the next request.
		fmt.Fprint(tc.c, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
		if st, _ := readResponse(t, tc.r); st != 200 {
			t.Fatalf("after the refusal: %d", st)
		}
	}
	waitQueued(t, addr, 0)
	mfs := scrape(t, addr)
	if got := value(mfs, "vajra_rejected_requests_total", "reason", "queue_timeout"); got != 2 {
		t.Errorf("rejected{queue_timeout} = %v, want 2", got)
	}
	// The stream holding the slot was not disturbed.
	if _, err := bufio.NewReader(blocker).ReadString('\n'); err != nil {
		t.Fatalf("blocker stream: %v", err)
	}
}

// TestQueuedClientDisconnect: a queued request whose client disconnects
// leaves the queue at once (not at its deadline, here an hour away), and
// the slot, once free, goes to the next waiter.
func TestQueuedClientDisconnect(t *testing.T) {
	_, obs, addr := fleetServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 5 * time.Millisecond
		c.MaxConcurrentRequests = 1
		c.MaxQueuedRequests = 2
		c.MaxQueueWait = time.Hour
	})
	blocker := startBlocker(t, addr)
	gone, _ := parkRequest(t, addr, "/v1/chat/completions", queuedChat, 1)
	next, nr := parkRequest(t, addr, "/v1/chat/completions", queuedChat, 2)
	gone.Close()
	waitQueued(t, addr, 1)
	blocker.Close()
	<-obs.finals
	_ = next.SetReadDeadline(time.Now().Add(10 * time.Second))
	if st, body := readResponse(t, nr); st != 200 || !strings.Contains(body, `"chat.completion"`) {
		t.Fatalf("next waiter: %d %s", st, body)
	}
	waitQueued(t, addr, 0)
}
