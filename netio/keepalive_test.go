package netio_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio"
)

// The stream keep-alive tests run the fake engine with a long ITL (a
// stalled stream: the engine is silent between tokens, as in a long
// prefill or its own waiting queue, with the head already out) and a short
// keep-alive, and read the raw bytes.

const (
	commentKeepalive = ": keep-alive\n\n"
	pingKeepalive    = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
)

// postStream sends a streamed request (HTTP/1.1 or HTTP/1.0) on a new
// connection and returns a reader after the response head, and the head.
func postStream(t *testing.T, addr, proto, path, body string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c := dialRaw(t, addr)
	fmt.Fprintf(c, "POST %s %s\r\nHost: x\r\nContent-Type: application/json\r\nanthropic-version: 2023-06-01\r\nContent-Length: %d\r\n\r\n%s", path, proto, len(body), body)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	var head strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading head: %v (so far %q)", err, head.String())
		}
		head.WriteString(line)
		if line == "\r\n" {
			return c, r, head.String()
		}
	}
}

// sseEvent is one event of a stream and when it arrived.
type sseEvent struct {
	text string
	at   time.Time
}

// nextChunk reads one chunk of a chunked body strictly (RFC 9112 §7.1:
// hex size, CRLF, data, CRLF) and checks that it holds exactly one whole
// SSE event, so that a keep-alive can land only between events. It
// reports end at the zero-size chunk (after its CRLF).
func nextChunk(t *testing.T, r *bufio.Reader) (ev string, end bool) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("chunk size: %v", err)
	}
	size, ok := strings.CutSuffix(line, "\r\n")
	n, perr := strconv.ParseUint(size, 16, 32)
	if !ok || perr != nil {
		t.Fatalf("bad chunk size line %q", line)
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r, data); err != nil {
		t.Fatalf("chunk data: %v", err)
	}
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		t.Fatalf("chunk of %d bytes not followed by CRLF: %q", n, data)
	}
	if n == 0 {
		return "", true
	}
	ev = string(data[:n])
	if !strings.HasSuffix(ev, "\n\n") || strings.Contains(ev[:len(ev)-2], "\n\n") {
		t.Fatalf("chunk is not one whole SSE event: %q", ev)
	}
	return ev, false
}

// readChunkedEvents reads a chunked stream's events (nextChunk) up to the
// last chunk, and checks that nothing follows it on the connection for
// quietAfter (a keep-alive after the end would).
func readChunkedEvents(t *testing.T, c net.Conn, r *bufio.Reader, quietAfter time.Duration) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for {
		ev, end := nextChunk(t, r)
		if end {
			break
		}
		evs = append(evs, sseEvent{ev, time.Now()})
	}
	assertSilent(t, c, r, quietAfter)
	return evs
}

// assertSilent checks that nothing more arrives on c for d (the server
// keeps the connection open for the next request).
func assertSilent(t *testing.T, c net.Conn, r *bufio.Reader, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := r.ReadByte()
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("bytes after the stream's end: %q (err %v)", b, err)
	}
}

// countKeepalives counts the events equal to ka, and fails on any other
// comment or keep-alive-like event.
func countKeepalives(t *testing.T, evs []sseEvent, ka string) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.text == ka {
			n++
		} else if strings.HasPrefix(e.text, ":") || strings.Contains(e.text, "keep-alive") {
			t.Fatalf("a comment that is not the keep-alive: %q", e.text)
		}
	}
	return n
}

const stalledChat = `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`

// TestStreamKeepaliveChat: a chat stream whose engine is silent for 600 ms
// before each of its 3 tokens gets ": keep-alive" comments, each in a
// chunk of its own between whole events, at about the configured 150 ms
// (loose bounds: at least one per silence, no more than the elapsed time
// allows), and none after the last chunk.
func TestStreamKeepaliveChat(t *testing.T) {
	const k, itl = 150 * time.Millisecond, 600 * time.Millisecond
	srv := startServer(t, itl, func(o *netio.Options) { o.StreamKeepalive = k })
	start := time.Now()
	c, r, head := postStream(t, srv.addr, "HTTP/1.1", "/v1/chat/completions", stalledChat)
	if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(strings.ToLower(head), "transfer-encoding: chunked") {
		t.Fatalf("head %q", head)
	}
	evs := readChunkedEvents(t, c, r, 3*k)
	elapsed := time.Since(start)
	got := countKeepalives(t, evs, commentKeepalive)
	t.Logf("%d keep-alives in %v", got, elapsed)
	// Each 600 ms silence (before each token) is four keep-alive periods;
	// allowing for a loaded machine, want at least one in each.
	silences := 0
	prevData := -1
	for i, e := range evs {
		if e.text == commentKeepalive {
			continue
		}
		if strings.HasPrefix(e.text, "data: {") && strings.Contains(e.text, `"content":"`) {
			silences++
			if i-prevData < 2 {
				t.Errorf("no keep-alive in the silence before token %d (events %d..%d)", silences, prevData, i)
			}
		}
		prevData = i
	}
	if silences != 3 {
		t.Fatalf("%d content events, want 3: %v", silences, evs)
	}
	if max := int(elapsed/k)*3/2 + 2; got > max {
		t.Errorf("%d keep-alives in %v, more than %d: faster than every %v", got, elapsed, max, k)
	}
	if last := evs[len(evs)-1].text; last != "data: [DONE]\n\n" {
		t.Errorf("last event %q, want [DONE]", last)
	}
	if v := value(scrape(t, srv.addr), "vajra_stream_keepalives_total"); int(v) != got {
		t.Errorf("vajra_stream_keepalives_total = %v, read %d", v, got)
	}
}

// TestStreamKeepaliveMessagesPing: on /v1/messages the keep-alive is
// Anthropic's own ping event, byte for byte as the formatter's ping after
// message_start.
func TestStreamKeepaliveMessagesPing(t *testing.T) {
	const k, itl = 150 * time.Millisecond, 600 * time.Millisecond
	srv := startServer(t, itl, func(o *netio.Options) { o.StreamKeepalive = k })
	body := `{"model":"vajra-sim","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	c, r, head := postStream(t, srv.addr, "HTTP/1.1", "/v1/messages", body)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("head %q", head)
	}
	evs := readChunkedEvents(t, c, r, 3*k)
	pings := countKeepalives(t, evs, pingKeepalive)
	// One ping follows message_start (Anthropic's); each 600 ms silence
	// adds at least one more.
	if pings < 3 {
		t.Fatalf("%d ping events, want the one after message_start and one per silence: %v", pings, evs)
	}
	for _, e := range evs {
		if strings.Contains(e.text, "keep-alive") {
			t.Fatalf("an SSE comment on an Anthropic stream: %q", e.text)
		}
	}
	if last := evs[len(evs)-1].text; !strings.HasPrefix(last, "event: message_stop\n") {
		t.Errorf("last event %q, want message_stop", last)
	}
}

// TestStreamKeepaliveHTTP10: an HTTP/1.0 stream is close-delimited, so
// its keep-alives are bare, between whole events, and the body ends with
// the close.
func TestStreamKeepaliveHTTP10(t *testing.T) {
	const k, itl = 150 * time.Millisecond, 600 * time.Millisecond
	srv := startServer(t, itl, func(o *netio.Options) { o.StreamKeepalive = k })
	c, r, head := postStream(t, srv.addr, "HTTP/1.0", "/v1/chat/completions", stalledChat)
	if !strings.HasPrefix(head, "HTTP/1.0 200") || strings.Contains(strings.ToLower(head), "chunked") {
		t.Fatalf("head %q", head)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	body, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the close-delimited body: %v", err)
	}
	evs := strings.SplitAfter(string(body), "\n\n")
	if evs[len(evs)-1] != "" {
		t.Fatalf("body does not end with a whole event: %q", evs[len(evs)-1])
	}
	evs = evs[:len(evs)-1]
	n := 0
	for _, e := range evs {
		if e == commentKeepalive {
			n++
		} else if !strings.HasPrefix(e, "data: ") {
			t.Fatalf("not a whole event: %q", e)
		}
	}
	if n < 3 || evs[len(evs)-1] != "data: [DONE]\n\n" {
		t.Fatalf("%d keep-alives (want one per silence, at least 3), last %q", n, evs[len(evs)-1])
	}
}

// TestStreamKeepaliveOff: with StreamKeepalive 0 a stalled stream gets no
// keep-alive.
func TestStreamKeepaliveOff(t *testing.T) {
	srv := startServer(t, 400*time.Millisecond, func(o *netio.Options) { o.StreamKeepalive = 0 })
	c, r, _ := postStream(t, srv.addr, "HTTP/1.1", "/v1/chat/completions", stalledChat)
	if n := countKeepalives(t, readChunkedEvents(t, c, r, 100*time.Millisecond), commentKeepalive); n != 0 {
		t.Fatalf("%d keep-alives with StreamKeepalive 0", n)
	}
}

// TestStreamKeepaliveNotWhileTokensFlow: a stream whose tokens come every
// 20 ms, far inside the 300 ms keep-alive, gets none; nor does a
// non-streamed request that waits longer than the period.
func TestStreamKeepaliveNotWhileTokensFlow(t *testing.T) {
	srv := startServer(t, 20*time.Millisecond, func(o *netio.Options) { o.StreamKeepalive = 300 * time.Millisecond })
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":40,"stream":true}`
	c, r, _ := postStream(t, srv.addr, "HTTP/1.1", "/v1/chat/completions", body)
	if n := countKeepalives(t, readChunkedEvents(t, c, r, 100*time.Millisecond), commentKeepalive); n != 0 {
		t.Fatalf("%d keep-alives on a stream that never paused for the period", n)
	}
	// 40 tokens at 20 ms: 800 ms of silence before the non-streamed answer.
	_, _, got := rawExchange(t, srv.addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body)-len(`,"stream":true`))+"\r\n\r\n"+strings.Replace(body, `,"stream":true`, "", 1))
	if strings.Contains(got, "keep-alive") || !strings.HasPrefix(got, `{"id":"chatcmpl-`) {
		t.Fatalf("non-streamed body %q", got)
	}
}

// TestStreamKeepaliveIdleLoopsSleep: a short keep-alive makes the sweeper
// tick at half of it, but loops with nothing in flight are woken only once
// a second, as without keep-alives. (Measures wakes over a second of
// idleness: the time is the quantity measured, not a stand-in for a
// signal.)
func TestStreamKeepaliveIdleLoopsSleep(t *testing.T) {
	srv := startServer(t, time.Millisecond, func(o *netio.Options) { o.StreamKeepalive = 100 * time.Millisecond })
	// One request, so that both loops exist; then idleness.
	if st, _, _ := get(t, srv.addr, "GET", "/health", ""); st != 200 {
		t.Fatalf("health: %d", st)
	}
	before := srv.net.Wakes()
	time.Sleep(time.Second)
	// At most 2 loops (those that served a connection), about 1 sweep each
	// per second (2 when the second straddles a tick), against 20 each at
	// the keep-alive's pace.
	if n := srv.net.Wakes() - before; n > 6 {
		t.Fatalf("%d loop wakes in an idle second with a 100 ms keep-alive, want at most 6", n)
	}
}
