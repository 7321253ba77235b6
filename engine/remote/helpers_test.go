package remote

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// byteTok is a byte-level tokenizer: ids 0..255 are the bytes, then two
// special tokens.
type byteTok struct{}

const (
	tokBOS = 256
	tokEOS = 257
)

var specials = map[string]int32{"<|bos|>": tokBOS, "<|eos|>": tokEOS}

func (byteTok) Encode(dst []int32, s string) []int32 {
	for len(s) > 0 {
		matched := false
		for text, id := range specials {
			if strings.HasPrefix(s, text) {
				dst, s, matched = append(dst, id), s[len(text):], true
				break
			}
		}
		if !matched {
			dst, s = append(dst, int32(s[0])), s[1:]
		}
	}
	return dst
}

func (byteTok) AppendPiece(dst []byte, id int32) []byte {
	switch {
	case id < 256:
		return append(dst, byte(id))
	case id == tokBOS:
		return append(dst, "<|bos|>"...)
	case id == tokEOS:
		return append(dst, "<|eos|>"...)
	}
	return dst
}

func (byteTok) IsSpecial(id int32) bool { return id >= 256 }
func (byteTok) VocabSize() int          { return 258 }
func (byteTok) ChatTemplate() string    { return "" }
func (byteTok) BOS() int32              { return tokBOS }
func (byteTok) EOS() int32              { return tokEOS }
func (byteTok) AddBOS() bool            { return true }

// fakeClient is a worker the test drives by hand: each Generate is kept,
// and the test calls its Receiver as a client's receive goroutine would.
type fakeClient struct {
	url  string
	down atomic.Bool
	ctx  int

	mu    sync.Mutex
	calls []*fakeCall
	gens  chan *fakeCall
}

type fakeCall struct {
	g       Generate
	rx      Receiver
	aborted atomic.Int32
	choices atomic.Int64 // bit per aborted choice
	// endOnAbort ends the call (with an error) when it is aborted, as a
	// real client does when its connection closes.
	endOnAbort bool
	ended      atomic.Bool
	mu         sync.Mutex
}

func (c *fakeCall) Abort() {
	if c.aborted.Add(1) == 1 && c.endOnAbort {
		go c.end(&End{Err: &WorkerError{Worker: "fake", Message: "aborted"}})
	}
}

func (c *fakeCall) AbortChoice(i int) { c.choices.Or(1 << i) }

// tokens sends one chunk of choice i.
func (c *fakeCall) tokens(i int, ids ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rx.Tokens(&Chunk{Choice: i, TokenIDs: ids})
}

func (c *fakeCall) end(e *End) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended.Swap(true) {
		return
	}
	c.rx.End(e)
}

func (f *fakeClient) Generate(_ context.Context, g *Generate, rx Receiver) (Call, error) {
	if f.down.Load() {
		return nil, &WorkerError{Worker: f.url, Retryable: true, Message: "unreachable", Err: errors.New("refused")}
	}
	c := &fakeCall{g: *g, rx: rx, endOnAbort: true}
	c.g.Prompt = append([]int32(nil), g.Prompt...)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	f.gens <- c
	return c, nil
}

func (f *fakeClient) Info(context.Context) (*Info, error) {
	return &Info{ServedModelName: "fake-model", MaxContextLength: f.ctx, VocabSize: 258, EOSTokenIDs: []int32{tokEOS}, BOSTokenID: tokBOS}, nil
}

func (f *fakeClient) Health(context.Context) error {
	if f.down.Load() {
		return errors.New("down")
	}
	return nil
}

func (f *fakeClient) Load(context.Context) (Load, error) { return Load{Capacity: 4}, nil }
func (f *fakeClient) TokenizerFiles(context.Context) (map[string][]byte, error) {
	return nil, ErrUnsupported
}
func (f *fakeClient) Close() error { return nil }

var (
	fakeMu      sync.Mutex
	fakeClients = map[string]*fakeClient{}
)

func init() {
	Register("fake", func(u string, _ DialOptions) (Client, error) {
		fakeMu.Lock()
		defer fakeMu.Unlock()
		c := fakeClients[u]
		if c == nil {
			return nil, errors.New("no fake worker " + u)
		}
		return c, nil
	})
}

var fakeSeq atomic.Int64

// newFake makes a fake worker and an engine over it.
func newFake(tb testing.TB, cfg Config, down bool) (*Engine, *fakeClient) {
	tb.Helper()
	return newFakeCtx(tb, cfg, down, 256)
}

// newFakeCtx is newFake with a worker of context length ctx.
func newFakeCtx(tb testing.TB, cfg Config, down bool, ctx int) (*Engine, *fakeClient) {
	tb.Helper()
	u := "fake://w" + string(rune('a'+fakeSeq.Add(1)%26)) + time.Now().Format("150405.000000000")
	f := &fakeClient{url: u, ctx: ctx, gens: make(chan *fakeCall, 64)}
	f.down.Store(down)
	fakeMu.Lock()
	fakeClients[u] = f
	fakeMu.Unlock()
	cfg.Workers = []string{u}
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = byteTok{}
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 20 * time.Millisecond
	}
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e, f
}

// recorder is a Sink and a Formatter: it keeps every delta and the result.
type recorder struct {
	mu       sync.Mutex
	text     [4]strings.Builder
	kinds    []engine.DeltaKind
	ends     []engine.ChoiceEnd
	frames   []byte
	delivers int
	res      *engine.Result
	done     chan struct{}
}

func newRecorder() *recorder { return &recorder{done: make(chan struct{})} }

func (r *recorder) Deliver(frames []byte, final *engine.Result) {
	r.mu.Lock()
	r.frames = append(r.frames, frames...)
	r.delivers++
	r.mu.Unlock()
	if final != nil {
		r.res = final
		close(r.done)
	}
}

func (r *recorder) AppendStart(dst []byte, _ *engine.Start) []byte { return append(dst, 's') }
func (r *recorder) AppendDelta(dst []byte, d *engine.Delta) []byte {
	r.text[d.Choice].Write(d.Text)
	r.kinds = append(r.kinds, d.Kind)
	return append(dst, 'd')
}
func (r *recorder) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	r.ends = append(r.ends, *e)
	return append(dst, 'c')
}
func (r *recorder) AppendEnd(dst []byte, _ *engine.Result) []byte  { return append(dst, 'e') }
func (r *recorder) AppendError(dst []byte, _ *engine.Error) []byte { return append(dst, 'x') }

func (r *recorder) wait(tb testing.TB) *engine.Result {
	tb.Helper()
	select {
	case <-r.done:
		return r.res
	case <-time.After(5 * time.Second):
		tb.Fatal("no final Result within 5 s")
		return nil
	}
}

// start prepares and starts req, streamed into a recorder, and returns
// the worker's call.
func start(tb testing.TB, e *Engine, f *fakeClient, req *engine.Request) (*recorder, engine.Session, *fakeCall) {
	tb.Helper()
	r := newRecorder()
	if req.Stream {
		req.Formatter = r
	}
	if err := e.Prepare(req); err != nil {
		tb.Fatal(err)
	}
	s, err := e.Start(req, r)
	if err != nil {
		tb.Fatal(err)
	}
	select {
	case c := <-f.gens:
		return r, s, c
	case <-time.After(5 * time.Second):
		tb.Fatal("no Generate")
		return nil, nil, nil
	}
}

func ids(s string) []int32 { return byteTok{}.Encode(nil, s) }

func chat(content string, maxTokens int) *engine.Request {
	return &engine.Request{Model: "fake-model", Stream: true,
		Messages: []engine.Message{{Role: "user", Content: content}},
		Sampling: engine.Sampling{MaxTokens: maxTokens}}
}
