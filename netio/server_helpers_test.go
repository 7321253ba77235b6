package netio_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/metrics"
	"github.com/vajra-go/vajra/netio"
)

// The netio mechanics tests (auth, CORS, timeouts, overload, drain, slow
// consumers) run a real netio.Server with actors.Sessions over fakeEngine,
// a small deterministic engine: what they test is the network layer, not
// generation.

// modelName is the one model the test server serves.
const modelName = "vajra-sim"

// question is a user message for SDK requests.
const question = "Tell me about the sea."

// fakeToken is every token fakeEngine generates (one word, so that each
// chat chunk carries "content":"sea ").
const fakeToken = "sea "

// defaultMaxTokens is what fakeEngine generates when a request sets no
// max_tokens.
const defaultMaxTokens = 16

// fakeEngine generates fakeToken max_tokens times per request, one token
// per step every itl (as fast as it can with itl 0), on one goroutine per
// request, with the request's Formatter. Abort ends a request with
// KindAborted and no more frames; Close ends every request still running
// with its dialect's error event (the Formatter's AppendError), as a real
// engine does. Each final Result also goes to finals (dropped when full),
// so that a test can wait for it instead of sleeping.
type fakeEngine struct {
	itl     time.Duration
	finals  chan *engine.Result
	running atomic.Int64

	mu     sync.Mutex
	closed bool
	live   map[*fakeSession]struct{}
}

func newFakeEngine(itl time.Duration) *fakeEngine {
	return &fakeEngine{itl: itl, finals: make(chan *engine.Result, 1024), live: map[*fakeSession]struct{}{}}
}

// fakeSession is one request inside fakeEngine.
type fakeSession struct {
	aborted chan struct{}
	closed  chan struct{}
	once    sync.Once
	cOnce   sync.Once
}

func (s *fakeSession) Abort() { s.once.Do(func() { close(s.aborted) }) }

// Prepare counts one prompt token per word of the prompt.
func (e *fakeEngine) Prepare(req *engine.Request) error {
	text := req.Prompt
	for _, m := range req.Messages {
		text += " " + m.Content
	}
	req.PromptTokens = e.Tokenize(text)
	return nil
}

func (e *fakeEngine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	s := &fakeSession{aborted: make(chan struct{}), closed: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "engine is shut down"}
	}
	e.live[s] = struct{}{}
	e.running.Add(1)
	e.mu.Unlock()
	go e.run(req, sink, s)
	return s, nil
}

// run generates one request's tokens and delivers its frames, one step at
// a time.
func (e *fakeEngine) run(req *engine.Request, sink engine.Sink, s *fakeSession) {
	start := time.Now()
	n := req.Sampling.MaxTokens
	if n <= 0 {
		n = defaultMaxTokens
	}
	usage := engine.Usage{PromptTokens: len(req.PromptTokens)}
	f := req.Formatter
	if !req.Stream {
		f = nil
	}
	var buf []byte
	if f != nil {
		buf = f.AppendStart(buf, &engine.Start{PromptTokens: usage.PromptTokens, N: 1})
	}
	var timer *time.Timer
	if e.itl > 0 {
		timer = time.NewTimer(e.itl)
		defer timer.Stop()
	}
	ids := []int{1}
	res := &engine.Result{PromptTokens: req.PromptTokens}
	for i := 0; i < n && res.Err == nil; i++ {
		if timer != nil {
			timer.Reset(e.itl)
		}
		select {
		case <-s.aborted:
			res.Err = &engine.Error{Kind: engine.KindAborted, Message: "aborted by the client"}
			continue
		case <-s.closed:
			res.Err = &engine.Error{Kind: engine.KindAborted, Message: "engine is shut down"}
			continue
		default:
		}
		if timer != nil {
			select {
			case <-timer.C:
			case <-s.aborted:
				res.Err = &engine.Error{Kind: engine.KindAborted, Message: "aborted by the client"}
				continue
			case <-s.closed:
				res.Err = &engine.Error{Kind: engine.KindAborted, Message: "engine is shut down"}
				continue
			}
		}
		usage.CompletionTokens++
		if f != nil {
			buf = f.AppendDelta(buf, &engine.Delta{First: i == 0, Text: []byte(fakeToken), TokenIDs: ids, Usage: &usage})
			sink.Deliver(buf, nil)
			buf = buf[:0]
		}
	}
	res.Usage = usage
	res.EndToEnd = time.Since(start)
	e.mu.Lock()
	delete(e.live, s)
	e.mu.Unlock()
	e.running.Add(-1)
	var frames []byte
	switch {
	case res.Err == nil:
		text := strings.Repeat(fakeToken, usage.CompletionTokens)
		res.Choices = []engine.Choice{{Text: text, FinishReason: engine.FinishLength, StopTokenID: -1}}
		if f != nil {
			buf = f.AppendChoiceEnd(buf, &engine.ChoiceEnd{FinishReason: engine.FinishLength, StopTokenID: -1, Usage: &usage})
			frames = f.AppendEnd(buf, res)
		}
	case f != nil && res.Err.Message == "engine is shut down":
		frames = f.AppendError(buf[:0], res.Err)
	}
	sink.Deliver(frames, res)
	select {
	case e.finals <- res:
	default:
	}
}

func (e *fakeEngine) Tokenize(text string) []int {
	ids := make([]int, len(strings.Fields(text)))
	for i := range ids {
		ids[i] = i + 1
	}
	return ids
}

func (e *fakeEngine) Detokenize(ids []int) string { return strings.Repeat(fakeToken, len(ids)) }

func (e *fakeEngine) Stats() engine.Stats {
	return engine.Stats{Running: int(e.running.Load()), Healthy: true}
}

// Close ends every running request with its error event. Idempotent.
func (e *fakeEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for s := range e.live {
		s.cOnce.Do(func() { close(s.closed) })
	}
	return nil
}

// testServer is a netio.Server with its sessions, engine and metrics.
type testServer struct {
	net      *netio.Server
	eng      *fakeEngine
	sessions *actors.Sessions
	addr     string
	stopOnce sync.Once
}

// startServer runs a netio server with sessions over a fakeEngine of the
// given ITL on a free loopback port, with the limits `vajra serve` uses
// unless mutate changes them; it is stopped when the test ends.
func startServer(t *testing.T, itl time.Duration, mutate func(*netio.Options)) *testServer {
	t.Helper()
	eng := newFakeEngine(itl)
	models := []string{modelName}
	sessions, err := actors.NewSessions(actors.Config{Engine: eng, Models: models, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(models, metrics.Sources{})
	opts := netio.Options{
		Addr:               "127.0.0.1:0",
		Loops:              2,
		KeepGOMAXPROCS:     true,
		Models:             models,
		Sessions:           sessions,
		Engine:             eng,
		Metrics:            m,
		IdleTimeout:        netio.DefaultIdleTimeout,
		RequestReadTimeout: netio.DefaultRequestReadTimeout,
		MaxQueueWait:       netio.DefaultMaxQueueWait,
	}
	if mutate != nil {
		mutate(&opts)
	}
	n, err := netio.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m.SetSources(metrics.Sources{Server: n.ServerStats})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	s := &testServer{net: n, eng: eng, sessions: sessions, addr: n.Addr().String()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// stop stops the server as the root's Stop does. Idempotent.
func (s *testServer) stop(ctx context.Context) (err error) {
	s.stopOnce.Do(func() {
		err = s.net.Stop(ctx)
		if werr := s.sessions.Wait(ctx); err == nil {
			err = werr
		}
		_ = s.eng.Close()
		s.sessions.Close()
		s.net.Release()
	})
	return err
}

// shutdownGrace bounds each step of shutdown after its deadline, as the
// root's.
const shutdownGrace = 5 * time.Second

// shutdown drains the server as the root's Shutdown does: requests in
// flight run until ctx ends; then the engine is closed, which ends every
// stream with its error event, and the server stops.
func (s *testServer) shutdown(ctx context.Context) error {
	s.net.Drain()
	if err := s.net.WaitIdle(ctx); err != nil {
		_ = s.eng.Close()
		gctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		_ = s.net.WaitIdle(gctx)
		cancel()
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return s.stop(sctx)
}

func newClient(base string, opts ...option.RequestOption) openai.Client {
	opts = append([]option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0)}, opts...)
	return openai.NewClient(opts...)
}

// rawExchange sends raw request bytes on a new connection and returns the
// status line's code, the head and the body (Content-Length framed).
func rawExchange(t *testing.T, addr, req string) (int, string, string) {
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

// dialRaw opens a raw connection to addr, closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawStream sends one streamed chat request on a new connection and
// returns a reader positioned after the response head.
func rawStream(t *testing.T, addr, body string, extraHeaders ...string) (net.Conn, *bufio.Reader, string) {
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

// readEvents reads SSE lines of a chunked stream until the terminating
// chunk; it returns the content tokens, whether [DONE] came, and the error
// events seen.
func readEvents(t *testing.T, r *bufio.Reader, onToken func(n int)) (tokens int, done bool, errorsSeen int) {
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

// readResponse reads one Content-Length response.
func readResponse(t *testing.T, r *bufio.Reader) (int, string) {
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

// get sends a request on a fresh connection and returns status, headers
// and body (the response must have a Content-Length).
func get(t *testing.T, addr, method, path, body string, headers ...string) (int, http.Header, string) {
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

// scrape fetches /metrics and parses it with Prometheus's own parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
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

// value returns the value of the series of family name whose labels
// include every (name, value) pair given; -1 when there is none.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
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
