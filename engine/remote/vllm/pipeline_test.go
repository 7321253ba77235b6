package vllm

import (
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/testworker"
)

// recStream is a Formatter and Sink that records what a streamed request
// produced: the Start, each text Delta's text, ids and logprobs, and the
// final Result.
type recStream struct {
	mu     sync.Mutex
	start  engine.Start
	texts  []string
	ids    [][]int
	lps    [][]engine.TokenLogprob
	final  *engine.Result
	done   chan struct{}
	starts int
}

func newRecStream() *recStream { return &recStream{done: make(chan struct{})} }

func (r *recStream) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		r.mu.Lock()
		r.final = final
		r.mu.Unlock()
		close(r.done)
	}
}
func (r *recStream) AppendStart(dst []byte, s *engine.Start) []byte {
	r.start = *s
	r.starts++
	return append(dst, 's')
}
func (r *recStream) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if d.Kind == engine.DeltaText {
		r.texts = append(r.texts, string(d.Text))
		r.ids = append(r.ids, append([]int(nil), d.TokenIDs...))
		r.lps = append(r.lps, append([]engine.TokenLogprob(nil), d.Logprobs...))
	}
	return append(dst, 'd')
}
func (r *recStream) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte { return dst }
func (r *recStream) AppendEnd(dst []byte, _ *engine.Result) []byte          { return append(dst, 'e') }
func (r *recStream) AppendError(dst []byte, _ *engine.Error) []byte         { return append(dst, 'x') }

func (r *recStream) wait(t *testing.T) *engine.Result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second): // a stall detector
		t.Fatal("no final Result")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final
}

// TestEngineStreamIntervalAndPromptLogprobs: in front of a gRPC worker the
// remote engine honours --stream-interval (each text delta carries up to
// that many tokens, with their ids and logprobs, the text unchanged), and a
// completion with echo and logprobs gets the prompt logprobs the worker
// returned, named by the tokenizer, in the stream's opening frames and in
// the Result (they were asked for and dropped before).
func TestEngineStreamIntervalAndPromptLogprobs(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	e := newEngine(t, s.Addr)
	const prompt, maxTokens = "hello", 8
	run := func(interval int) (*recStream, *engine.Result) {
		rs := newRecStream()
		req := &engine.Request{Prompt: prompt, Stream: true, Formatter: rs, StreamInterval: interval,
			Echo: true, PromptLogprobs: 1}
		req.Sampling.MaxTokens = maxTokens
		req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 1
		req.Sampling.IgnoreEOS = true
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Start(req, rs); err != nil {
			t.Fatal(err)
		}
		return rs, rs.wait(t)
	}
	want := ""
	for k := range maxTokens {
		want += string(rune(testworker.Token(0, k)))
	}
	for _, tc := range []struct{ interval, deltas int }{{1, maxTokens}, {4, maxTokens / 4}, {3, 3}} {
		rs, res := run(tc.interval)
		if res.Err != nil {
			t.Fatalf("interval %d: %v", tc.interval, res.Err)
		}
		c := res.Choices[0]
		if c.Text != want || len(c.TokenIDs) != maxTokens || len(c.Logprobs) != maxTokens {
			t.Fatalf("interval %d: text %q, %d ids, %d logprobs; want %q", tc.interval, c.Text, len(c.TokenIDs), len(c.Logprobs), want)
		}
		joined, n := "", 0
		for i, txt := range rs.texts {
			joined += txt
			if len(rs.ids[i]) > tc.interval || len(rs.lps[i]) != len(rs.ids[i]) {
				t.Fatalf("interval %d: delta %d carries %d ids, %d logprobs", tc.interval, i, len(rs.ids[i]), len(rs.lps[i]))
			}
			for j, lp := range rs.lps[i] {
				if k := n + j; lp.TokenID != int(testworker.Token(0, k)) || lp.Logprob != testworker.Logprob(0, k) {
					t.Fatalf("interval %d: token %d logprob %+v", tc.interval, k, lp)
				}
			}
			n += len(rs.ids[i])
		}
		if len(rs.texts) != tc.deltas || joined != want || n != maxTokens {
			t.Fatalf("interval %d: %d text deltas %q (%d tokens), want %d deltas of %q", tc.interval, len(rs.texts), rs.texts, n, tc.deltas, want)
		}
		// The prompt's logprobs: one per prompt token, the first without
		// a logprob (nothing precedes it), each named.
		for name, plp := range map[string][]engine.TokenLogprob{"start": rs.start.PromptLogprobs, "result": c.PromptLogprobs} {
			if len(plp) != len(prompt) {
				t.Fatalf("interval %d: %s prompt logprobs %+v", tc.interval, name, plp)
			}
			for i, lp := range plp {
				if lp.TokenID != int(prompt[i]) || lp.Token != prompt[i:i+1] {
					t.Fatalf("%s prompt logprob %d: %+v", name, i, lp)
				}
				if i > 0 && (lp.Logprob != testworker.PromptLogprob(i) || len(lp.Top) != 1 ||
					lp.Top[0].TokenID != int(prompt[i]) || lp.Top[0].Token != prompt[i:i+1]) {
					t.Fatalf("%s prompt logprob %d: %+v", name, i, lp)
				}
			}
		}
	}
}
