// Package wiretest holds the raw-HTTP helpers the black-box tests of
// integration/ and netio/ share: requests written by hand on a fresh
// connection, responses and server-sent events read back, /metrics
// scraped with Prometheus's parser. For tests only.
package wiretest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vajra-go/vajra/internal/sse"
)

// RawExchange sends raw request bytes on a new connection and returns the
// status line's code, the head and the body (Content-Length framed).
func RawExchange(t testing.TB, addr, req string) (int, string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	var status int
	fmt.Sscanf(line[9:], "%d", &status)
	var head strings.Builder
	n := 0
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if h == "\r\n" {
			break
		}
		head.WriteString(h)
		if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length: "); ok {
			fmt.Sscanf(v, "%d", &n)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return status, head.String(), string(body)
}

// DialRaw opens a raw connection to addr, closed when the test ends.
func DialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RawStream sends one streamed chat request on a new connection and
// returns a reader positioned after the response head.
func RawStream(t testing.TB, addr, body string, extraHeaders ...string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hdr := strings.Join(extraHeaders, "")
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", hdr, len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	var head strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading head: %v (so far %q)", err, head.String())
		}
		head.WriteString(line)
		if line == "\r\n" {
			return conn, r, head.String()
		}
	}
}

// ReadEvents reads SSE lines of a chunked stream until the terminating
// chunk; it returns the content tokens, whether [DONE] came, and the error
// events seen.
func ReadEvents(t testing.TB, r *bufio.Reader, onToken func(n int)) (tokens int, done bool, errorsSeen int) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream cut after %d tokens (done=%v): %v", tokens, done, err)
		}
		switch {
		case line == "0\r\n":
			// Last chunk: the blank line follows.
			_, _ = r.ReadString('\n')
			return
		case strings.HasPrefix(line, "data: [DONE]"):
			done = true
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"error"`):
			errorsSeen++
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"content":"`):
			tokens++
			if onToken != nil {
				onToken(tokens)
			}
		}
	}
}

// ReadResponse reads one Content-Length response.
func ReadResponse(t testing.TB, r *bufio.Reader) (int, string) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var status int
	fmt.Sscanf(line, "HTTP/1.1 %d", &status)
	n := 0
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if h == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length: "); ok {
			fmt.Sscanf(v, "%d", &n)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return status, string(body)
}

// Get sends a request on a fresh connection and returns status, headers
// and body (the response must have a Content-Length).
func Get(t testing.TB, addr, method, path, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// Scrape fetches /metrics and parses it with Prometheus's own parser.
func Scrape(t testing.TB, addr string, header ...string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// Value returns the value of the series of family name whose labels
// include every (name, value) pair given; -1 when there is none.
func Value(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	return -1
}

// BlockerBody is a chat request that streams 4,000 tokens of the model
// "vajra-sim": long enough to hold its admission permit for a test.
const BlockerBody = `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`

// StartBlocker opens a long stream and reads until it produces tokens, so
// it holds its admission permit.
func StartBlocker(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, r, head := RawStream(t, addr, BlockerBody)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("blocker: %q", head)
	}
	for n := 0; n < 2; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"`) {
			n++
		}
	}
	return conn
}

// WaitQueued polls /load until it reports want requests waiting in the
// admission queue (each round trip paces the loop; bounded).
func WaitQueued(t testing.TB, addr string, want int) {
	t.Helper()
	for i := 0; ; i++ {
		if i == 20000 {
			t.Fatalf("queued never reached %d", want)
		}
		_, _, lb := Get(t, addr, "GET", "/load", "")
		var load struct{ Queued int }
		_ = json.Unmarshal([]byte(lb), &load)
		if load.Queued == want {
			return
		}
	}
}

// SSEEvents reads a text/event-stream body (an http.Response's, already
// de-chunked) with internal/sse, the tree's one SSE reader, and calls each
// with every event's name and data in order until each returns false or
// the body ends. It returns the body's read error (nil at its end), the
// reader's, or an error for an event cut off by the body's end.
func SSEEvents(body io.Reader, each func(name, data string) bool) error {
	var (
		r    sse.Reader
		h    sseCollect
		buf  = make([]byte, 32<<10)
		stop bool
	)
	for !stop {
		n, err := body.Read(buf)
		if ferr := r.Feed(buf[:n], &h); ferr != nil {
			return ferr
		}
		for _, ev := range h.events {
			if !each(ev[0], ev[1]) {
				stop = true
				break
			}
		}
		h.events = h.events[:0]
		if err == io.EOF {
			if !stop && r.Pending() {
				return errors.New("the stream ended inside an event")
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sseCollect keeps the events of one Feed as strings (the reader's slices
// are valid only during OnEvent).
type sseCollect struct{ events [][2]string }

func (c *sseCollect) OnEvent(name, data []byte) {
	c.events = append(c.events, [2]string{string(name), string(data)})
}
