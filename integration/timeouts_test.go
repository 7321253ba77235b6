package integration_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
)

// dialRaw opens a raw connection to the server at base ("http://host:port").
func dialRaw(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestIdleTimeout: a keep-alive connection idle for longer than IdleTimeout
// is closed by the server, and counted.
func TestIdleTimeout(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) { c.IdleTimeout = time.Second })
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
	if v := value(scrape(t, strings.TrimPrefix(base, "http://")), "vajra_idle_connections_closed_total"); v != 1 {
		t.Fatalf("vajra_idle_connections_closed_total = %v, want 1", v)
	}
}

// TestRequestReadTimeout: a request whose head stops arriving gets a 408
// and its connection is closed; a connection that never sends a byte is
// idle, not reading, and is left to the idle timeout.
func TestRequestReadTimeout(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) {
		c.RequestReadTimeout = time.Second
		c.IdleTimeout = time.Hour
	})
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
	if v := value(scrape(t, strings.TrimPrefix(base, "http://")), "vajra_rejected_requests_total", "reason", "request_timeout"); v != 1 {
		t.Fatalf("vajra_rejected_requests_total{reason=request_timeout} = %v, want 1", v)
	}
}

// TestTimeoutsSpareStreams: a stream that lasts several times both timeouts
// runs to its end: an exchange in flight is never timed out.
func TestTimeoutsSpareStreams(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) {
		c.IdleTimeout = time.Second
		c.RequestReadTimeout = time.Second
		c.Sim.ITL = 300 * time.Millisecond
	})
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":12,"ignore_eos":true,"stream":true}`
	_, r, _ := rawStream(t, strings.TrimPrefix(base, "http://"), body)
	chunks, done, _ := readEvents(t, r, nil)
	if !done || chunks < 12 {
		t.Fatalf("stream cut: %d content chunks, done %v", chunks, done)
	}
}
