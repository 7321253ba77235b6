package remote

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

// stubRouter takes the first worker offered and records what it is told.
type stubRouter struct {
	mu       sync.Mutex
	routes   []string
	outcomes []Outcome
	retries  int
}

func (s *stubRouter) Pick(ws []*Worker) *Worker { return ws[0] }

func (s *stubRouter) Route(ws []*Worker, q *Query) Selection {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, ws[0].URL())
	return Selection{Decode: ws[0], Matched: len(q.Prompt)}
}

func (s *stubRouter) Done(_ Selection, _ *Query, o Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes = append(s.outcomes, o)
}

func (s *stubRouter) Retry(_ *Query, attempt int) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries++
	return time.Millisecond, attempt <= 2
}

// newFakes makes n fake workers and an engine over them with router rt.
func newFakes(tb testing.TB, n int, rt Router) (*Engine, []*fakeClient) {
	tb.Helper()
	var fs []*fakeClient
	var urls []string
	for i := 0; i < n; i++ {
		u := "fake://r" + string(rune('a'+fakeSeq.Add(1)%26)) + time.Now().Format("150405.000000000")
		f := &fakeClient{url: u, ctx: 256, gens: make(chan *fakeCall, 64)}
		fakeMu.Lock()
		fakeClients[u] = f
		fakeMu.Unlock()
		fs, urls = append(fs, f), append(urls, u)
	}
	e, err := New(Config{Workers: urls, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond, Picker: rt.(Picker)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e, fs
}

func nextCall(tb testing.TB, f *fakeClient) *fakeCall {
	tb.Helper()
	select {
	case c := <-f.gens:
		return c
	case <-time.After(5 * time.Second):
		tb.Fatal("no Generate on " + f.url)
		return nil
	}
}

// TestRetryBeforeFirstByte: a call its worker refuses in End (as
// llama-server does: 503 before any token) goes to another worker, and
// the client sees only the second worker's output, and its name.
func TestRetryBeforeFirstByte(t *testing.T) {
	rt := &stubRouter{}
	e, fs := newFakes(t, 2, rt)
	rec, s, c := start(t, e, fs[0], chat("hi", 5))
	namer := s.(interface{ WorkerURL() string }) // what X-Vajra-Worker says
	if u := namer.WorkerURL(); u != fs[0].url {
		t.Fatalf("the session names %q, running on %q", u, fs[0].url)
	}
	c.end(&End{Err: &WorkerError{Worker: fs[0].url, Status: 503, Retryable: true, Message: "loading"}})
	c2 := nextCall(t, fs[1])
	if string(c2.g.Prompt) != string(c.g.Prompt) || c2.g.ID != c.g.ID {
		t.Fatal("the retry is not the same request")
	}
	// The response's first byte comes from the second worker: the session
	// names it (X-Vajra-Worker, sent with the first frames).
	if u := namer.WorkerURL(); u != fs[1].url {
		t.Fatalf("after the retry the session names %q, running on %q", u, fs[1].url)
	}
	c2.tokens(0, ids("ok")...)
	c2.end(&End{})
	res := rec.wait(t)
	if res.Err != nil || res.Choices[0].Text != "ok" {
		t.Fatalf("err %v text %q", res.Err, res.Choices[0].Text)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.routes) != 2 || rt.routes[0] != fs[0].url || rt.routes[1] != fs[1].url {
		t.Fatalf("routes %v", rt.routes)
	}
	if len(rt.outcomes) != 2 || rt.outcomes[0].Result != OutcomeFailed || rt.outcomes[0].Status != 503 ||
		rt.outcomes[1].Result != OutcomeOK || !rt.outcomes[1].FirstByte {
		t.Fatalf("outcomes %+v", rt.outcomes)
	}
	if n := fs[0].calls[0].aborted.Load(); n > 1 {
		t.Fatalf("the refused call aborted %d times", n)
	}
	eventually.True(t, "in flight back to 0", func() bool {
		return e.Workers()[0].InFlight() == 0 && e.Workers()[1].InFlight() == 0
	})
}

// TestNoRetryAfterFirstByte: once a token reached the client, a worker's
// failure ends the stream with an error event; no other worker gets it.
func TestNoRetryAfterFirstByte(t *testing.T) {
	rt := &stubRouter{}
	e, fs := newFakes(t, 2, rt)
	rec, _, c := start(t, e, fs[0], chat("hi", 5))
	c.tokens(0, ids("a")...)
	c.end(&End{Err: &WorkerError{Worker: fs[0].url, Status: 503, Retryable: true, Message: "gone"}})
	res := rec.wait(t)
	if res.Err == nil || !strings.HasSuffix(string(rec.frames), "x") || res.Choices[0].Text != "a" {
		t.Fatalf("err %v frames %q text %q", res.Err, rec.frames, res.Choices[0].Text)
	}
	select {
	case <-fs[1].gens:
		t.Fatal("a request retried after its first byte")
	default:
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.retries != 0 || len(rt.outcomes) != 1 || rt.outcomes[0].Result != OutcomeFailed || !rt.outcomes[0].FirstByte {
		t.Fatalf("retries %d outcomes %+v", rt.retries, rt.outcomes)
	}
}

// TestRetryExhausted: every worker refuses; the request ends with the
// last refusal (503) after the Router's retries, and nothing is left in
// flight.
func TestRetryExhausted(t *testing.T) {
	rt := &stubRouter{}
	e, fs := newFakes(t, 2, rt)
	rec, _, c := start(t, e, fs[0], chat("hi", 5))
	c.end(&End{Err: &WorkerError{Worker: fs[0].url, Status: 503, Retryable: true, Message: "busy"}})
	c2 := nextCall(t, fs[1])
	c2.end(&End{Err: &WorkerError{Worker: fs[1].url, Status: 503, Retryable: true, Message: "busy"}})
	res := rec.wait(t)
	if res.Err == nil || res.Err.Kind != engine.KindClosed {
		t.Fatalf("err %v, want the 503 (KindClosed)", res.Err)
	}
	if e.Workers()[0].InFlight() != 0 || e.Workers()[1].InFlight() != 0 {
		t.Fatal("requests left in flight")
	}
}

// TestRetryStartRefused: a worker refusing at Generate (connection
// refused) is retried at once on the other.
func TestRetryStartRefused(t *testing.T) {
	rt := &stubRouter{}
	e, fs := newFakes(t, 2, rt)
	// Down for calls, still marked healthy until its prober notices.
	fs[0].down.Store(true)
	req := chat("hi", 5)
	if err := e.Prepare(req); err != nil && !errors.Is(err, engine.ErrClosed) {
		t.Fatal(err)
	}
	rec, _, c := start(t, e, fs[1], req)
	c.tokens(0, ids("b")...)
	c.end(&End{})
	if res := rec.wait(t); res.Err != nil || res.Choices[0].Text != "b" {
		t.Fatalf("err %v", res.Err)
	}
}

// newFakeURLs registers n fake workers and returns them with their URLs.
func newFakeURLs(n int) ([]*fakeClient, []string) {
	var fs []*fakeClient
	var urls []string
	for i := 0; i < n; i++ {
		u := "fake://s" + string(rune('a'+fakeSeq.Add(1)%26)) + time.Now().Format("150405.000000000")
		f := &fakeClient{url: u, ctx: 256, gens: make(chan *fakeCall, 64)}
		fakeMu.Lock()
		fakeClients[u] = f
		fakeMu.Unlock()
		fs, urls = append(fs, f), append(urls, u)
	}
	return fs, urls
}

// TestSetWorkersDrains: a worker removed by a reload takes no new
// request while its running stream finishes, then is closed and
// forgotten; an added worker serves once its probe passed.
func TestSetWorkersDrains(t *testing.T) {
	fs, urls := newFakeURLs(3)
	e, err := New(Config{Workers: urls[:2], Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond, Picker: &stubRouter{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	rec, _, c := start(t, e, fs[0], chat("hi", 5))
	c.tokens(0, ids("a")...)
	if err := e.SetWorkers([]string{urls[1], urls[2]}); err != nil {
		t.Fatal(err)
	}
	ws := e.Workers()
	if len(ws) != 3 || !ws[2].Draining() || ws[2].URL() != urls[0] {
		t.Fatalf("after the reload: %d workers, last %s draining %v", len(ws), ws[2].URL(), ws[2].Draining())
	}
	// New requests: never the drained worker (the stub takes the first offered).
	eventually.True(t, "the added worker healthy", func() bool { return e.Workers()[1].Healthy() })
	for i := 0; i < 3; i++ {
		rec2, _, c2 := start(t, e, fs[1], chat("hi", 5))
		c2.tokens(0, ids("b")...)
		c2.end(&End{})
		if res := rec2.wait(t); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	select {
	case <-fs[0].gens:
		t.Fatal("a new request went to the removed worker")
	default:
	}
	// The running stream finishes.
	c.tokens(0, ids("z")...)
	c.end(&End{})
	if res := rec.wait(t); res.Err != nil || res.Choices[0].Text != "az" {
		t.Fatalf("the draining stream: err %v text %q", res.Err, res.Choices[0].Text)
	}
	if !ws[2].retiredDone() {
		t.Fatal("the drained worker was not retired")
	}
	eventually.True(t, "the drained worker forgotten", func() bool { return len(e.Workers()) == 2 })
	if err := e.SetWorkers([]string{"nope://x"}); err == nil || len(e.Workers()) != 2 {
		t.Fatalf("a bad URL: %v, %d workers", err, len(e.Workers()))
	}
}
