package netio_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra/netio"
)

// TestOverloadSDKRetryHonoursRetryAfter: with one request slot taken, the
// next gets 429 with Retry-After and retry-after-ms before any stream
// starts; openai-go (MaxRetries 1) waits retry-after-ms, not its own
// backoff (at most 0.5 s for a first retry), and its second attempt
// succeeds because the slot freed in between. retry-after-ms is set well
// above the SDK's own backoff so that only a lower bound is checked: no
// timing upper bound to flake on a loaded machine.
func TestOverloadSDKRetryHonoursRetryAfter(t *testing.T) {
	srv := startServer(t, 5*time.Millisecond, func(o *netio.Options) {
		o.MaxConcurrentRequests = 1
		o.RetryAfter = 1200 * time.Millisecond
	})
	obs, addr := srv.eng, srv.addr
	blocker := startBlocker(t, addr)

	var mu sync.Mutex
	var attempts []int
	var refusedAt, retriedAt time.Time
	var hdr http.Header
	mw := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		mu.Lock()
		if len(attempts) == 1 {
			retriedAt = time.Now()
		}
		mu.Unlock()
		res, err := next(req)
		if err != nil {
			return res, err
		}
		mu.Lock()
		attempts = append(attempts, res.StatusCode)
		mu.Unlock()
		if res.StatusCode == 429 {
			hdr = res.Header.Clone()
			// Free the slot: the blocker's client leaves; its abort
			// reaches the engine after the permit was returned.
			blocker.Close()
			select {
			case <-obs.finals:
			case <-time.After(10 * time.Second):
				t.Error("blocker not aborted")
			}
			refusedAt = time.Now()
		}
		return res, err
	}
	client := newClient("http://"+addr, option.WithMaxRetries(1), option.WithMiddleware(mw))
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     modelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		MaxTokens: openai.Int(4),
	})
	if err != nil {
		t.Fatalf("after retry: %v (attempts %v)", err, attempts)
	}
	if len(res.Choices) != 1 || fmt.Sprint(attempts) != "[429 200]" {
		t.Fatalf("attempts %v, response %+v", attempts, res)
	}
	if hdr.Get("Retry-After") != "2" || hdr.Get("Retry-After-Ms") != "1200" {
		t.Errorf("retry headers: Retry-After %q, retry-after-ms %q", hdr.Get("Retry-After"), hdr.Get("Retry-After-Ms"))
	}
	if wait := retriedAt.Sub(refusedAt); wait < 1200*time.Millisecond {
		t.Errorf("the SDK retried after %v; retry-after-ms said 1200ms (its own backoff is <= 500ms)", wait)
	}
	mfs := scrape(t, addr)
	if got := value(mfs, "vajra_rejected_requests_total", "reason", "overloaded"); got != 1 {
		t.Errorf("rejected{overloaded} = %v, want 1", got)
	}
	if got := value(mfs, "vajra_http_requests_total", "route", "chat_completions", "status", "429"); got != 1 {
		t.Errorf("http{chat_completions,429} = %v, want 1", got)
	}
}

// TestAdmissionQueueAndAnthropic529: one slot and one queue place. A
// second request waits for the slot; a third is refused at once (429 on
// OpenAI routes, 529 overloaded_error on Anthropic's); when the slot frees,
// the queued request runs and succeeds.
func TestAdmissionQueueAndAnthropic529(t *testing.T) {
	srv := startServer(t, 5*time.Millisecond, func(o *netio.Options) {
		o.MaxConcurrentRequests = 1
		o.MaxQueuedRequests = 1
	})
	obs, addr := srv.eng, srv.addr
	blocker := startBlocker(t, addr)

	// The second request parks.
	qc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	fmt.Fprintf(qc, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for i := 0; ; i++ {
		if i == 20000 { // each round trip paces the loop
			t.Fatal("the second request never queued")
		}
		_, _, lb := get(t, addr, "GET", "/load", "")
		var load struct{ Queued int }
		_ = json.Unmarshal([]byte(lb), &load)
		if load.Queued == 1 {
			break
		}
	}

	// The third is refused at once, in each dialect's shape.
	status, h, b := get(t, addr, "POST", "/v1/chat/completions", body)
	if status != 429 || h.Get("Retry-After") == "" || h.Get("Retry-After-Ms") == "" || !strings.Contains(b, `"error"`) {
		t.Fatalf("third request: %d %v %s", status, h, b)
	}
	mb := `{"model":"vajra-sim","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	status, h, b = get(t, addr, "POST", "/v1/messages", mb, "anthropic-version", "2023-06-01")
	if status != 529 || h.Get("Retry-After") == "" || !strings.Contains(b, `"type":"overloaded_error"`) || !strings.Contains(b, `"type":"error"`) {
		t.Fatalf("anthropic overload: %d %v %s", status, h, b)
	}

	// Free the slot: the queued request runs.
	blocker.Close()
	<-obs.finals
	_ = qc.SetReadDeadline(time.Now().Add(10 * time.Second))
	st, got := readResponse(t, bufio.NewReader(qc))
	if st != 200 || !strings.Contains(got, `"chat.completion"`) {
		t.Fatalf("queued request: %d %s", st, got)
	}
}

// TestMaxConnections: a connection beyond --max-connections gets a canned
// 503 and is closed; the server keeps serving the others.
func TestMaxConnections(t *testing.T) {
	addr := startServer(t, time.Millisecond, func(o *netio.Options) { o.MaxConnections = 2 }).addr
	var keep []net.Conn
	defer func() {
		for _, c := range keep {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, c)
		// A round trip proves the server opened it.
		fmt.Fprint(c, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if st, _ := readResponse(t, bufio.NewReader(c)); st != 200 {
			t.Fatalf("conn %d: %d", i, st)
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(extra)
	st, body := readResponse(t, r)
	if st != 503 || !strings.Contains(body, "Too many connections") {
		t.Fatalf("extra connection: %d %s", st, body)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("extra connection not closed")
	}
	// The first two still work.
	fmt.Fprint(keep[0], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	if st, _ := readResponse(t, bufio.NewReader(keep[0])); st != 200 {
		t.Fatalf("after refusal: %d", st)
	}
}
