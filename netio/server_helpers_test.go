package netio_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/wiretest"
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
	for _, id := range e.Tokenize(text) {
		req.PromptTokens = append(req.PromptTokens, int32(id))
	}
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
func startServer(t testing.TB, itl time.Duration, mutate func(*netio.Options)) *testServer {
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

// The raw-HTTP helpers, shared with integration/ (internal/wiretest).
var (
	rawExchange  = wiretest.RawExchange
	startBlocker = wiretest.StartBlocker
	dialRaw      = wiretest.DialRaw
	rawStream    = wiretest.RawStream
	readEvents   = wiretest.ReadEvents
	readResponse = wiretest.ReadResponse
	get          = wiretest.Get
	scrape       = wiretest.Scrape
	value        = wiretest.Value
	waitQueued   = wiretest.WaitQueued
)
