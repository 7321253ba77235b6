package sim

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// recFormatter records what the engine asks it to format, and appends a
// short frame per call so that sinks see bytes.
type recFormatter struct {
	starts  int
	start   engine.Start
	deltas  []recDelta
	ends    []engine.ChoiceEnd
	endRes  *engine.Result
	errs    []*engine.Error
	noStore bool // benchmarks: count only
	n       int
}

type recDelta struct {
	choice int
	kind   engine.DeltaKind
	first  bool
	text   string
	ids    []int
	lps    []engine.TokenLogprob
	callID string
	name   string
	usage  engine.Usage
}

func (f *recFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	f.starts++
	f.start = *s
	return append(dst, "S\n"...)
}

func (f *recFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	f.n++
	if !f.noStore {
		f.deltas = append(f.deltas, recDelta{choice: d.Choice, kind: d.Kind, first: d.First, text: string(d.Text),
			ids: append([]int(nil), d.TokenIDs...), lps: append([]engine.TokenLogprob(nil), d.Logprobs...),
			callID: d.ToolCallID, name: d.ToolName, usage: *d.Usage})
	}
	dst = append(dst, "D "...)
	return append(dst, d.Text...)
}

func (f *recFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	f.ends = append(f.ends, *e)
	return append(dst, "C\n"...)
}

func (f *recFormatter) AppendEnd(dst []byte, r *engine.Result) []byte {
	f.endRes = r
	return append(dst, "END\n"...)
}

func (f *recFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	f.errs = append(f.errs, err)
	return append(dst, "ERR\n"...)
}

// text returns the concatenated delta text of one choice and kind.
func (f *recFormatter) text(choice int, kind engine.DeltaKind) string {
	var s string
	for _, d := range f.deltas {
		if d.choice == choice && d.kind == kind {
			s += d.text
		}
	}
	return s
}

// recSink records deliveries; done closes on the final one.
type recSink struct {
	mu       sync.Mutex
	frames   []byte
	delivers int
	finals   int
	final    *engine.Result
	times    []time.Time
	done     chan struct{}
}

func newSink() *recSink { return &recSink{done: make(chan struct{})} }

func (s *recSink) Deliver(frames []byte, final *engine.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames = append(s.frames, frames...)
	s.delivers++
	s.times = append(s.times, time.Now())
	if final != nil {
		s.finals++
		if s.finals > 1 {
			panic("second final delivery")
		}
		s.final = final
		close(s.done)
	}
}

func (s *recSink) wait(t testing.TB) *engine.Result {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("no final delivery within 20s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.final
}

// newEngine builds an engine with fast test defaults changed by mod.
func newEngine(t testing.TB, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ITL = 0
	cfg.PrefillTPS = 0
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func chatReq(text string, maxTokens int) *engine.Request {
	return &engine.Request{
		Messages: []engine.Message{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: text}},
		Sampling: engine.Sampling{MaxTokens: maxTokens},
	}
}

// run prepares and starts req (streamed through a recFormatter when stream)
// and waits for its final result.
func run(t testing.TB, e *Engine, req *engine.Request, stream bool) (*engine.Result, *recFormatter, *recSink) {
	t.Helper()
	f := &recFormatter{}
	if stream {
		req.Stream, req.Formatter = true, f
	}
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	if _, err := e.Start(req, sink); err != nil {
		t.Fatal(err)
	}
	res := sink.wait(t)
	return res, f, sink
}

func itoaT(i int) string { return strconv.Itoa(i) }
