package remote

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
)

// stagedRec is a recorder whose sink stages frames (engine.StagedSink):
// staged frames become visible (rec.frames) only when it is notified or
// delivered to, as a session hears of them.
type stagedRec struct {
	*recorder
	mu       sync.Mutex
	staged   []byte
	notifies atomic.Int32 // notifications that brought frames
}

func (s *stagedRec) Stage(frames []byte) {
	s.mu.Lock()
	s.staged = append(s.staged, frames...)
	s.mu.Unlock()
}

func (s *stagedRec) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.staged) > 0 {
		s.notifies.Add(1)
		s.recorder.Deliver(s.staged, nil)
		s.staged = s.staged[:0]
	}
}

func (s *stagedRec) Deliver(frames []byte, final *engine.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorder.Deliver(append(s.staged, frames...), final)
	s.staged = s.staged[:0]
}

// visible is what the session has heard of.
func (s *stagedRec) visible() string {
	s.recorder.mu.Lock()
	defer s.recorder.mu.Unlock()
	return string(s.recorder.frames)
}

// startStaged starts n streamed requests on f's worker, each into a
// stagedRec, and returns them with their calls (in the same order).
func startStaged(t *testing.T, e *Engine, f *fakeClient, n int) ([]*stagedRec, []*fakeCall) {
	t.Helper()
	recs := make([]*stagedRec, n)
	calls := make([]*fakeCall, n)
	for i := range recs {
		recs[i] = &stagedRec{recorder: newRecorder()}
		req := chat("hi", 1000)
		req.Formatter = recs[i].recorder
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Start(req, recs[i]); err != nil {
			t.Fatal(err)
		}
		select {
		case calls[i] = <-f.gens:
		case <-time.After(5 * time.Second):
			t.Fatal("no Generate")
		}
	}
	return recs, calls
}

// TestStepGate: the sessions of one worker hear of a step's chunks
// together, once every streamed request has sent its chunk of the step:
// before that, none of them does; a request that sends again (the worker
// began another step) or ends lets the step through at once.
func TestStepGate(t *testing.T) {
	// A window longer than the test: only the step's own completion lets
	// the chunks through.
	e, f := newFakeCtx(t, Config{StepWindow: time.Hour}, false, 4096)
	recs, calls := startStaged(t, e, f, 4)
	// The first chunk of each, one by one: each joins the step's count
	// as it comes, so the last three wait for a step the first one
	// completes when it sends again (a new step for it: everything goes).
	for _, c := range calls {
		c.tokens(0, 'a')
	}
	calls[0].tokens(0, 'a')
	before := make([]string, len(recs))
	for i, r := range recs {
		if before[i] = r.visible(); before[i] != map[bool]string{true: "sdd", false: "sd"}[i == 0] {
			t.Fatalf("request %d after its first step: %q", i, before[i])
		}
	}
	// A whole step: nothing goes out until its last chunk, then all of it.
	for i, c := range calls {
		c.tokens(0, 'b')
		for j, r := range recs {
			if v := r.visible(); i < len(calls)-1 && v != before[j] {
				t.Fatalf("after %d of 4 chunks of the step, request %d heard of its own: %q (was %q)", i+1, j, v, before[j])
			}
		}
	}
	for i := range recs {
		if got := recs[i].visible(); got != before[i]+"d" {
			t.Fatalf("request %d after the complete step: %q (was %q)", i, got, before[i])
		}
		before[i] = recs[i].visible()
	}
	// The next step: two report, then the other two end instead.
	calls[0].tokens(0, 'c')
	calls[1].tokens(0, 'c')
	if recs[0].visible() != before[0] || recs[1].visible() != before[1] {
		t.Fatal("half a step went out")
	}
	calls[2].end(&End{Choices: []ChoiceEnd{{FinishReason: "stop", MatchedTokenID: -1}}})
	if res := recs[2].wait(t); res.Err != nil || !strings.HasSuffix(recs[2].visible(), "ce") {
		t.Fatalf("the ended request: %v %q", res.Err, recs[2].visible())
	}
	if recs[0].visible() != before[0] {
		t.Fatal("the step went out with one of the four still to come")
	}
	calls[3].end(&End{Choices: []ChoiceEnd{{FinishReason: "stop", MatchedTokenID: -1}}})
	recs[3].wait(t)
	for i := range 2 {
		if v := recs[i].visible(); !strings.HasSuffix(v, "d") || v == before[i] {
			t.Fatalf("request %d after the others ended: %q (was %q)", i, v, before[i])
		}
	}
	for i := range 2 {
		calls[i].end(&End{Choices: []ChoiceEnd{{FinishReason: "stop", MatchedTokenID: -1}}})
		recs[i].wait(t)
	}
	if n := e.list()[0].gate.expect.Load(); n != 0 {
		t.Fatalf("the gate still counts %d requests", n)
	}
}

// TestStepGateWindow: a step some request sends nothing in goes out a
// window after its first chunk.
func TestStepGateWindow(t *testing.T) {
	e, f := newFakeCtx(t, Config{StepWindow: 5 * time.Millisecond}, false, 4096)
	recs, calls := startStaged(t, e, f, 2)
	for _, c := range calls {
		c.tokens(0, 'a')
	}
	calls[0].tokens(0, 'b') // call 1 is silent this step
	eventually(t, "the window lets the step through", func() bool {
		return strings.HasSuffix(recs[0].visible(), "dd") && recs[1].visible() == "sd"
	})
}

// TestStepGateConcurrent: chunks of many streams on their own goroutines,
// in no order, as clients receive them: every frame reaches its session,
// in order, none waits past the window, and the final carries the rest.
func TestStepGateConcurrent(t *testing.T) {
	const streams, chunks = 8, 200
	e, f := newFakeCtx(t, Config{}, false, 4096)
	recs, calls := startStaged(t, e, f, streams)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range chunks {
				c.tokens(0, 'a'+int32(k%26))
				if k%(i+2) == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	want := "s" + strings.Repeat("d", chunks)
	for i, r := range recs {
		eventually(t, "every chunk heard of", func() bool { return r.visible() == want })
		if n := r.notifies.Load(); n == 0 || n > chunks {
			t.Fatalf("request %d: %d notifications for %d chunks", i, n, chunks)
		}
	}
	for i, c := range calls {
		c.end(&End{Choices: []ChoiceEnd{{FinishReason: "length", MatchedTokenID: -1, CompletionTokens: chunks}}})
		res := recs[i].wait(t)
		if res.Err != nil || len(res.Choices[0].Text) != chunks || recs[i].visible() != want+"ce" {
			t.Fatalf("request %d: %v %d chars, frames %q", i, res.Err, len(res.Choices[0].Text), recs[i].visible())
		}
	}
	if n := e.list()[0].gate.expect.Load(); n != 0 {
		t.Fatalf("the gate still counts %d requests", n)
	}
}

// TestStepGateOff: a negative window turns the gate off: each chunk is
// heard of as it comes.
func TestStepGateOff(t *testing.T) {
	e, f := newFakeCtx(t, Config{StepWindow: -1}, false, 4096)
	recs, calls := startStaged(t, e, f, 2)
	for _, c := range calls {
		c.tokens(0, 'a')
	}
	calls[0].tokens(0, 'b')
	if v0, v1 := recs[0].visible(), recs[1].visible(); v0 != "sdd" || v1 != "sd" {
		t.Fatalf("frames %q, %q", v0, v1)
	}
	if n := e.list()[0].gate.expect.Load(); n != 0 {
		t.Fatalf("the gate counts %d requests", n)
	}
}
