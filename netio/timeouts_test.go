package netio_test

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio"
)

// TestIdleTimeout: a keep-alive connection idle for longer than IdleTimeout
// is closed by the server, and counted.
func TestIdleTimeout(t *testing.T) {
	base := startServer(t, time.Millisecond, func(o *netio.Options) { o.IdleTimeout = time.Second }).addr
	c := dialRaw(t, base)
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("health: %q, %v", line, err)
	}
	// The server closes the idle connection within the timeout plus the
	// sweep's second; the read deadline only bounds a failing test.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(r); err != nil {
		t.Fatalf("the idle connection was not closed by the server: %v", err)
	}
	if v := value(scrape(t, base), "vajra_idle_connections_closed_total"); v != 1 {
		t.Fatalf("vajra_idle_connections_closed_total = %v, want 1", v)
	}
}

// TestRequestReadTimeout: a request whose head stops arriving gets a 408
// and its connection is closed; a connection that never sends a byte is
// idle, not reading, and is left to the idle timeout.
func TestRequestReadTimeout(t *testing.T) {
	base := startServer(t, time.Millisecond, func(o *netio.Options) {
		o.RequestReadTimeout = time.Second
		o.IdleTimeout = time.Hour
	}).addr
	c := dialRaw(t, base)
	silent := dialRaw(t, base)
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the stalled request's connection was not closed: %v (read %q)", err, all)
	}
	if !strings.HasPrefix(string(all), "HTTP/1.1 408 ") || !strings.Contains(string(all), `"request_timeout"`) {
		t.Fatalf("stalled request answered %q, want a 408", all)
	}
	// The silent connection is still open: a request on it is served.
	if _, err := io.WriteString(silent, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(silent).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("the silent connection: %q, %v", line, err)
	}
	if v := value(scrape(t, base), "vajra_rejected_requests_total", "reason", "request_timeout"); v != 1 {
		t.Fatalf("vajra_rejected_requests_total{reason=request_timeout} = %v, want 1", v)
	}
}

// TestTimeoutsSpareStreams: a stream that lasts several times both timeouts
// runs to its end: an exchange in flight is never timed out.
func TestTimeoutsSpareStreams(t *testing.T) {
	base := startServer(t, 300*time.Millisecond, func(o *netio.Options) {
		o.IdleTimeout = time.Second
		o.RequestReadTimeout = time.Second
	}).addr
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":12,"ignore_eos":true,"stream":true}`
	_, r, _ := rawStream(t, base, body)
	chunks, done, _ := readEvents(t, r, nil)
	if !done || chunks < 12 {
		t.Fatalf("stream cut: %d content chunks, done %v", chunks, done)
	}
}
