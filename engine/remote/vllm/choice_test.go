package vllm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/testworker"
)

// TestAbortChoiceWhole: vLLM's Abort takes only the request's own id, not
// its choices' (internal ids with a random suffix), so a choice the engine
// ended is not stopped alone: its output is dropped, and once the other
// choices have finished the whole request is aborted rather than left to
// run the stopped choice to its max_tokens.
func TestAbortChoiceWhole(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 5 * time.Millisecond})
	c := dial(t, s.Addr)
	var call atomic.Pointer[remote.ChoiceAborter]
	var once atomic.Bool
	rx := testworker.NewRecorder()
	rx.OnTokens = func(r *testworker.Recorder, ck *remote.Chunk) {
		if ck.Choice == 0 && r.Count(0) >= 3 {
			if ca := call.Load(); ca != nil && once.CompareAndSwap(false, true) {
				(*ca).AbortChoice(0)
			}
		}
	}
	g := gen("w", 2, 2000)
	g.Sampling.StopTokenIDs = []int{int(testworker.Token(1, 19))}
	k, err := c.Generate(context.Background(), g, rx)
	if err != nil {
		t.Fatal(err)
	}
	ca, ok := k.(remote.ChoiceAborter)
	if !ok {
		t.Fatal("a vLLM call is no remote.ChoiceAborter")
	}
	call.Store(&ca)
	end := rx.Wait(t, 5*time.Second)
	if end.Err != nil || end.Choices[0].FinishReason != "abort" || end.Choices[1].FinishReason != "stop" {
		t.Fatalf("end %+v", end)
	}
	if got := s.ChoiceTokens("w", 0); got >= 2000 || rx.Count(0) > 3 || end.Choices[0].CompletionTokens > 3 {
		t.Fatalf("the stopped choice: %d tokens on the worker, %d delivered, %d counted", got, rx.Count(0), end.Choices[0].CompletionTokens)
	}
	if a := s.Aborted(); len(a) != 1 || a[0] != "w" {
		t.Fatalf("aborts %v, want the request's own id only", a)
	}
	testworker.WaitFor(t, 2*time.Second, "the worker's streams over", func() bool { return s.Running() == 0 })
}
