package sim

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// finalSink keeps the final Result and signals it; it allocates nothing, so
// that a request's allocations are the engine's.
type finalSink struct {
	res  *engine.Result
	done chan struct{}
}

func (s *finalSink) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		s.res = final
		s.done <- struct{}{}
	}
}

// requestPrompt is a chat prompt of about 128 tokens once rendered.
var requestPrompt = func() string {
	words := strings.Fields(corpusText)
	return strings.Join(words[:100], " ")
}()

// runRequests runs whole requests through e one after the other, req reused
// (Prepare sets its PromptTokens and Prepared again each time), and returns
// the last Result.
func runRequests(tb testing.TB, e *Engine, req *engine.Request, sink *finalSink, n int) *engine.Result {
	for range n {
		req.PromptTokens, req.Prepared = nil, nil
		if err := e.Prepare(req); err != nil {
			tb.Fatal(err)
		}
		if _, err := e.Start(req, sink); err != nil {
			tb.Fatal(err)
		}
		<-sink.done
	}
	return sink.res
}

// requestCases are the requests of BenchmarkRequestAllocs and
// TestRequestAllocs: a ~128-token chat prompt and 16 generated tokens,
// non-streamed, the server's most common request.
// maxAllocs is what TestRequestAllocs allows: the prepared state with the
// session, the prompt's ids, the Result, and per choice its ids and text.
var requestCases = []struct {
	name      string
	n         int
	stream    bool
	maxAllocs float64
}{
	{"chat16", 1, false, 4},
	{"chat16/n2", 2, false, 8},
	{"chat16/stream", 1, true, 4},
}

func newRequestCase(n int, stream bool) *engine.Request {
	req := chatReq(requestPrompt, 16)
	req.Sampling.IgnoreEOS = true
	req.Sampling.N = n
	if stream {
		req.Stream, req.Formatter = true, nopFormatter{}
	}
	return req
}

// BenchmarkRequestAllocs measures what the engine allocates per request:
// Prepare, Start, and the scheduler's passes up to the final Result (ITL 0,
// no prefill time). One op is one whole request.
func BenchmarkRequestAllocs(b *testing.B) {
	for _, bc := range requestCases {
		b.Run(bc.name, func(b *testing.B) {
			e := newEngine(b, nil)
			req := newRequestCase(bc.n, bc.stream)
			sink := &finalSink{done: make(chan struct{}, 1)}
			runRequests(b, e, req, sink, 10) // buffers grown, prefix cached
			b.ReportAllocs()
			b.ResetTimer()
			res := runRequests(b, e, req, sink, b.N)
			b.StopTimer()
			if res.Err != nil || len(res.Choices[0].TokenIDs) != 16 {
				b.Fatalf("result %+v", res)
			}
		})
	}
}

// TestRequestAllocs guards the allocations of a whole request, counted in
// every goroutine (the scheduler's included).
func TestRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, nil)
			req := newRequestCase(tc.n, tc.stream)
			sink := &finalSink{done: make(chan struct{}, 1)}
			runRequests(t, e, req, sink, 10)
			allocs := testing.AllocsPerRun(100, func() { runRequests(t, e, req, sink, 1) })
			if allocs > tc.maxAllocs {
				t.Fatalf("%v allocations per request, want at most %v", allocs, tc.maxAllocs)
			}
		})
	}
}
