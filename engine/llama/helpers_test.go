package llama

import (
	"os"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// needLib returns the llama.cpp library directory, or skips the test when
// the libraries are not installed (`make llama`). With VAJRA_REQUIRE_LLAMA
// set (CI sets it) a missing library fails instead.
func needLib(tb testing.TB) string {
	tb.Helper()
	dir, err := FindLibDir()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return dir
}

// newTestEngine starts an engine on a freshly made tiny model.
func newTestEngine(tb testing.TB, cfg Config, mc tinymodel.Config) *Engine {
	tb.Helper()
	cfg.LibDir = needLib(tb)
	path, err := tinymodel.TempFile(tb.TempDir(), mc)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ModelPath = path
	if cfg.Threads == 0 {
		cfg.Threads = 1 // the machine is shared with the test's own work
	}
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// recorder is a Sink and a Formatter: it keeps every delta and the result.
type recorder struct {
	mu     sync.Mutex
	deltas []recDelta
	ends   []engine.ChoiceEnd
	starts int
	res    *engine.Result
	done   chan struct{}
}

type recDelta struct {
	choice int
	kind   engine.DeltaKind
	text   string
	ids    []int
	lps    int
}

func newRecorder() *recorder { return &recorder{done: make(chan struct{})} }

func (r *recorder) Deliver(frames []byte, final *engine.Result) {
	if final != nil {
		r.mu.Lock()
		r.res = final
		r.mu.Unlock()
		close(r.done)
	}
}

func (r *recorder) AppendStart(dst []byte, s *engine.Start) []byte {
	r.starts++
	return append(dst, 's')
}

func (r *recorder) AppendDelta(dst []byte, d *engine.Delta) []byte {
	r.mu.Lock()
	r.deltas = append(r.deltas, recDelta{d.Choice, d.Kind, string(d.Text), append([]int(nil), d.TokenIDs...), len(d.Logprobs)})
	r.mu.Unlock()
	return append(dst, 'd')
}

func (r *recorder) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	r.ends = append(r.ends, *e)
	return append(dst, 'c')
}

func (r *recorder) AppendEnd(dst []byte, res *engine.Result) []byte { return append(dst, 'e') }

func (r *recorder) AppendError(dst []byte, err *engine.Error) []byte { return append(dst, 'x') }

// text returns the streamed text of one choice and kind.
func (r *recorder) text(choice int, kind engine.DeltaKind) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s string
	for _, d := range r.deltas {
		if d.choice == choice && d.kind == kind {
			s += d.text
		}
	}
	return s
}

// run starts req on e and waits for its Result. Safe on any goroutine: a
// Prepare or Start that fails is reported with tb.Error (never tb.Fatal,
// which must not be called off the test's goroutine) and returned as the
// Result's Err, which every caller checks.
func run(tb testing.TB, e *Engine, req *engine.Request) (*engine.Result, *recorder) {
	tb.Helper()
	r := newRecorder()
	if req.Stream {
		req.Formatter = r
	}
	err := e.Prepare(req)
	if err == nil {
		_, err = e.Start(req, r)
	}
	if err != nil {
		tb.Error(err)
		ee, ok := err.(*engine.Error)
		if !ok {
			ee = &engine.Error{Kind: engine.KindInternal, Message: err.Error()}
		}
		return &engine.Result{Err: ee}, r
	}
	<-r.done
	return r.res, r
}

func chatReq(content string, maxTokens int) *engine.Request {
	return &engine.Request{
		Model:    "tiny",
		Messages: []engine.Message{{Role: "user", Content: content}},
		Sampling: engine.Sampling{MaxTokens: maxTokens},
	}
}

func validUTF8(tb testing.TB, what, s string) {
	tb.Helper()
	if !utf8.ValidString(s) {
		tb.Fatalf("%s is not valid UTF-8: %q", what, s)
	}
}
