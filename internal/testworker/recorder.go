package testworker

import (
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
)

// Recorder is a remote.Receiver that keeps copies of what it was given.
type Recorder struct {
	mu       sync.Mutex
	IDs      map[int][]int32
	Logprobs map[int][]float32
	Top      map[int][][]remote.TopLogprob
	PromptLP []engine.TokenLogprob
	Chunks   int
	end      *remote.End
	done     chan struct{}
	// OnTokens, when set, is called after each chunk is recorded (on the
	// client's receive goroutine).
	OnTokens func(r *Recorder, c *remote.Chunk)
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{IDs: map[int][]int32{}, Logprobs: map[int][]float32{}, Top: map[int][][]remote.TopLogprob{}, done: make(chan struct{})}
}

// Tokens implements remote.Receiver.
func (r *Recorder) Tokens(c *remote.Chunk) {
	r.mu.Lock()
	r.Chunks++
	r.IDs[c.Choice] = append(r.IDs[c.Choice], c.TokenIDs...)
	r.Logprobs[c.Choice] = append(r.Logprobs[c.Choice], c.Logprobs...)
	for _, t := range c.Top {
		r.Top[c.Choice] = append(r.Top[c.Choice], append([]remote.TopLogprob(nil), t...))
	}
	if c.PromptLogprobs != nil {
		r.PromptLP = c.PromptLogprobs
	}
	on := r.OnTokens
	r.mu.Unlock()
	if on != nil {
		on(r, c)
	}
}

// End implements remote.Receiver; a second End fails the test at Wait.
func (r *Recorder) End(e *remote.End) {
	cp := *e
	cp.Choices = append([]remote.ChoiceEnd(nil), e.Choices...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end != nil {
		cp.Err = errTwice
		r.end = &cp
		return
	}
	r.end = &cp
	close(r.done)
}

type twice struct{}

func (twice) Error() string { return "End was called twice" }

var errTwice error = twice{}

// Count returns the number of tokens choice c received so far.
func (r *Recorder) Count(c int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.IDs[c])
}

// Done is closed by End.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// Wait returns the End, failing tb when it does not come within d.
func (r *Recorder) Wait(tb testing.TB, d time.Duration) *remote.End {
	tb.Helper()
	select {
	case <-r.done:
	default:
		select {
		case <-r.done:
		case <-time.After(d):
			tb.Fatalf("no End within %v", d)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end.Err == errTwice {
		tb.Fatal(errTwice)
	}
	return r.end
}

// WaitFor polls cond every millisecond until it holds or d passes.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}
