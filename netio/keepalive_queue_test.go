package netio_test

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio"
)

// Keep-alives for requests parked in the admission queue: past the
// keep-alive period a parked request gets its session before its permit
// (a held session), which validates and prepares it, answers one that
// fails with its error status, and sends a stream's 200 head, which the
// sweep keeps alive until the permit comes.

// queueServer runs a server with one request slot, two queue places, the
// given keep-alive and queue deadline, and a blocker stream holding the
// slot; closing the returned blocker frees it.
func queueServer(t *testing.T, keepalive, maxWait time.Duration) (*testServer, func()) {
	t.Helper()
	srv := startServer(t, 5*time.Millisecond, func(o *netio.Options) {
		o.MaxConcurrentRequests = 1
		o.MaxQueuedRequests = 2
		o.StreamKeepalive = keepalive
		o.MaxQueueWait = maxWait
	})
	blocker := startBlocker(t, srv.addr)
	return srv, func() { blocker.Close() }
}

const queuedStream = `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`

// TestStreamKeepaliveQueued: a streamed request parked behind a busy slot
// gets its 200 head once it has waited the keep-alive period (never
// before), then keep-alives while it is still queued; when the slot frees
// it streams its tokens to the end, all in strict chunks.
func TestStreamKeepaliveQueued(t *testing.T) {
	const k = 150 * time.Millisecond
	srv, free := queueServer(t, k, time.Minute)
	sent := time.Now()
	c, r, head := postStream(t, srv.addr, "HTTP/1.1", "/v1/chat/completions", queuedStream)
	if waited := time.Since(sent); waited < k {
		t.Errorf("the head came after %v, before the keep-alive period %v", waited, k)
	}
	if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "text/event-stream") {
		t.Fatalf("head %q", head)
	}
	for i := 0; i < 2; i++ {
		if ev, end := nextChunk(t, r); end || ev != commentKeepalive {
			t.Fatalf("while queued: %q (end %v), want a keep-alive", ev, end)
		}
	}
	// Still parked: the keep-alives came from the queue, not the engine,
	// which runs the blocker alone (no engine work without a permit).
	waitQueued(t, srv.addr, 1)
	if n := srv.eng.running.Load(); n != 1 {
		t.Fatalf("%d requests in the engine while one waits for its permit, want the blocker only", n)
	}
	free()
	evs := readChunkedEvents(t, c, r, 3*k)
	tokens := 0
	for _, e := range evs {
		if strings.Contains(e.text, `"content":"`) {
			tokens++
		}
	}
	if tokens != 3 || evs[len(evs)-1].text != "data: [DONE]\n\n" {
		t.Fatalf("after the slot freed: %d tokens, events %v", tokens, evs)
	}
	waitQueued(t, srv.addr, 0)
}

// TestStreamKeepaliveQueuedValidatesFirst: a parked streamed request that
// fails validation gets its 404 (no 200 first) as soon as its held session
// has decoded it, while the slot is still busy, leaves the queue, and its
// connection serves the next request.
func TestStreamKeepaliveQueuedValidatesFirst(t *testing.T) {
	srv, _ := queueServer(t, 150*time.Millisecond, time.Minute)
	body := strings.Replace(queuedStream, `"vajra-sim"`, `"no-such-model"`, 1)
	c := dialRaw(t, srv.addr)
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	status, got := readResponse(t, r)
	if status != 404 || !strings.Contains(got, `"model_not_found"`) {
		t.Fatalf("parked invalid stream: %d %s", status, got)
	}
	waitQueued(t, srv.addr, 0)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	if status, _ := readResponse(t, r); status != 200 {
		t.Fatalf("next request on the connection: %d", status)
	}
}

// TestStreamKeepaliveQueuedDeadline: a held stream still parked at
// MaxQueueWait ends with the dialect's in-stream error (its head is out:
// no 429 is possible any more), counted as a queue timeout; a held
// request that does not stream still gets the 429 with code queue_timeout
// and Retry-After (529 on Anthropic's API).
func TestStreamKeepaliveQueuedDeadline(t *testing.T) {
	srv, _ := queueServer(t, 100*time.Millisecond, 700*time.Millisecond)
	// Each API's own terminal error event, after keep-alives only.
	for _, tc := range []struct {
		path, body, keepalive string
		last                  []string // the stream's last events, by prefix and content
	}{
		{"/v1/chat/completions", queuedStream, commentKeepalive, []string{`data: {"error":`, "data: [DONE]"}},
		{"/v1/responses", `{"model":"vajra-sim","input":"hi","max_output_tokens":3,"stream":true}`, commentKeepalive,
			[]string{"event: response.failed\n"}},
		{"/v1/messages", `{"model":"vajra-sim","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, pingKeepalive,
			[]string{"event: error\n"}},
	} {
		c, r, head := postStream(t, srv.addr, "HTTP/1.1", tc.path, tc.body)
		if !strings.HasPrefix(head, "HTTP/1.1 200") {
			t.Fatalf("%s: head %q", tc.path, head)
		}
		evs := readChunkedEvents(t, c, r, 100*time.Millisecond)
		n, m := len(evs), len(tc.last)
		if n <= m || countKeepalives(t, evs, tc.keepalive) != n-m || !strings.Contains(evs[n-m].text, "queue deadline") {
			t.Fatalf("%s: held stream past the deadline: %v", tc.path, evs)
		}
		for i, want := range tc.last {
			if !strings.HasPrefix(evs[n-m+i].text, want) {
				t.Fatalf("%s: event %q, want %q first: %v", tc.path, evs[n-m+i].text, want, evs)
			}
		}
	}

	msgs := `{"model":"vajra-sim","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	plain := strings.Replace(queuedStream, `,"stream":true`, "", 1)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", plain, "HTTP/1.1 429 "},
		{"/v1/messages", msgs, "HTTP/1.1 529 "},
	} {
		st, head, got := rawExchange(t, srv.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nanthropic-version: 2023-06-01\r\nContent-Length: %d\r\n\r\n%s", tc.path, len(tc.body), tc.body))
		if fmt.Sprintf("HTTP/1.1 %d ", st) != tc.want || !strings.Contains(head, "Retry-After: ") || !strings.Contains(got, "queue deadline") ||
			(tc.path == "/v1/chat/completions" && !strings.Contains(got, `"code":"queue_timeout"`)) {
			t.Fatalf("%s past the deadline: %d %q %s", tc.path, st, head, got)
		}
	}
	if v := value(scrape(t, srv.addr), "vajra_rejected_requests_total", "reason", "queue_timeout"); v != 5 {
		t.Errorf("queue timeouts counted %v, want 5", v)
	}
}

// TestStreamKeepaliveQueuedPlain: a non-streamed request parked past the
// keep-alive period is held too (decoded and prepared) but sends nothing
// before its status line, and is answered once the slot frees.
func TestStreamKeepaliveQueuedPlain(t *testing.T) {
	srv, free := queueServer(t, 100*time.Millisecond, time.Minute)
	body := strings.Replace(queuedStream, `,"stream":true`, "", 1)
	c := dialRaw(t, srv.addr)
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitQueued(t, srv.addr, 1)
	// Past several keep-alive periods, still parked: nothing was written.
	r := bufio.NewReader(c)
	assertSilent(t, c, r, 400*time.Millisecond)
	free()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	status, got := readResponse(t, r)
	if status != 200 || !strings.HasPrefix(got, `{"id":"chatcmpl-`) {
		t.Fatalf("held plain request: %d %s", status, got)
	}
}

// TestStreamKeepaliveQueuedBatch: a held batch of completions prompts
// (which the dialect starts itself) is validated and prepared, sends its
// head and keep-alives, and starts none of its prompts in the engine until
// the permit comes; then every prompt streams.
func TestStreamKeepaliveQueuedBatch(t *testing.T) {
	const k = 150 * time.Millisecond
	srv, free := queueServer(t, k, time.Minute)
	body := `{"model":"vajra-sim","prompt":["one","two"],"max_tokens":2,"stream":true}`
	c, r, head := postStream(t, srv.addr, "HTTP/1.1", "/v1/completions", body)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("head %q", head)
	}
	if ev, end := nextChunk(t, r); end || ev != commentKeepalive {
		t.Fatalf("while queued: %q (end %v), want a keep-alive", ev, end)
	}
	waitQueued(t, srv.addr, 1)
	if n := srv.eng.running.Load(); n != 1 {
		t.Fatalf("%d requests in the engine while the batch waits for its permit, want the blocker only", n)
	}
	free()
	evs := readChunkedEvents(t, c, r, 3*k)
	tokens := 0
	for _, e := range evs {
		tokens += strings.Count(e.text, `"text":"sea "`)
	}
	if tokens != 4 || evs[len(evs)-1].text != "data: [DONE]\n\n" {
		t.Fatalf("batch after the slot freed: %d tokens (want 2 prompts x 2), events %v", tokens, evs)
	}
}

// TestStreamKeepaliveQueuedEngineRefuses: a held stream whose permit comes
// when the engine can no longer start it (shut down) ends with the
// in-stream error, its head being out.
func TestStreamKeepaliveQueuedEngineRefuses(t *testing.T) {
	srv, _ := queueServer(t, 100*time.Millisecond, time.Minute)
	c, r, head := postStream(t, srv.addr, "HTTP/1.1", "/v1/chat/completions", queuedStream)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("head %q", head)
	}
	if ev, end := nextChunk(t, r); end || ev != commentKeepalive {
		t.Fatalf("while queued: %q (end %v), want a keep-alive", ev, end)
	}
	// Closing the engine ends the blocker, whose permit goes to the held
	// stream, which the closed engine refuses.
	_ = srv.eng.Close()
	evs := readChunkedEvents(t, c, r, 100*time.Millisecond)
	n := len(evs)
	if n < 2 || !strings.HasPrefix(evs[n-2].text, `data: {"error":`) || !strings.Contains(evs[n-2].text, "shut down") ||
		evs[n-1].text != "data: [DONE]\n\n" || countKeepalives(t, evs, commentKeepalive) != n-2 {
		t.Fatalf("held stream the engine refused: %v", evs)
	}
}
