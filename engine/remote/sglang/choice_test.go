package sglang

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/testworker"
)

// abortChoiceAt starts g and, on the receive goroutine as the engine
// does, stops choice which once it has received at tokens.
func abortChoiceAt(t *testing.T, c *Client, g *remote.Generate, which, at int) *testworker.Recorder {
	t.Helper()
	var call atomic.Pointer[remote.ChoiceAborter]
	var once atomic.Bool
	rx := testworker.NewRecorder()
	rx.OnTokens = func(r *testworker.Recorder, ck *remote.Chunk) {
		if ck.Choice == which && r.Count(which) >= at && !once.Load() {
			if ca := call.Load(); ca != nil && once.CompareAndSwap(false, true) {
				(*ca).AbortChoice(which)
			}
		}
	}
	k, err := c.Generate(context.Background(), g, rx)
	if err != nil {
		t.Fatal(err)
	}
	ca, ok := k.(remote.ChoiceAborter)
	if !ok {
		t.Fatal("an SGLang call is no remote.ChoiceAborter")
	}
	call.Store(&ca)
	return rx
}

// TestAbortChoice: one choice of three stopped by the engine stops on
// the worker (an Abort of its own id, "{id}-1") while the others run to
// their end; then, since SGLang's stream of such a request never ends by
// itself, the client aborts the request, and End reports the stopped
// choice as aborted.
func TestAbortChoice(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 5 * time.Millisecond})
	c := dial(t, s.Addr)
	rx := abortChoiceAt(t, c, gen("pc", 3, 40), 1, 3)
	end := rx.Wait(t, 10*time.Second)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	testworker.WaitFor(t, 2*time.Second, "the worker's streams over", func() bool { return s.Running() == 0 })
	id := WireID("pc")
	for ch, want := range []string{"length", "abort", "length"} {
		if end.Choices[ch].FinishReason != want {
			t.Fatalf("choice %d: %+v, want %s", ch, end.Choices[ch], want)
		}
	}
	if got := s.ChoiceTokens(id, 1); got > 5 {
		t.Fatalf("the stopped choice ran %d tokens on the worker (stopped at 3)", got)
	}
	if s.ChoiceTokens(id, 0) != 40 || s.ChoiceTokens(id, 2) != 40 || rx.Count(0) != 40 || rx.Count(2) != 40 {
		t.Fatalf("the other choices: %d and %d tokens on the worker, %d and %d received",
			s.ChoiceTokens(id, 0), s.ChoiceTokens(id, 2), rx.Count(0), rx.Count(2))
	}
	if rx.Count(1) > 3 || end.Choices[1].CompletionTokens > 3 {
		t.Fatalf("the stopped choice: %d tokens delivered, %d counted after its stop at 3", rx.Count(1), end.Choices[1].CompletionTokens)
	}
	if a := s.Aborted(); !slices.Equal(a, []string{id + "-1", id}) {
		t.Fatalf("aborts %v, want the choice's then the request's", a)
	}
}

// TestAbortChoicePrefix: SGLang's Abort stops every id it is a prefix
// of, so choice 1 of 12 ("{id}-1", a prefix of "{id}-10" and "{id}-11")
// is stopped only once choices 10 and 11 are over, which run to their
// own end (a stop token) untouched.
func TestAbortChoicePrefix(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 5 * time.Millisecond})
	c := dial(t, s.Addr)
	g := gen("px", 12, 30)
	g.Sampling = &engine.Sampling{N: 12, StopTokenIDs: []int{int(testworker.Token(10, 8)), int(testworker.Token(11, 9))}}
	rx := abortChoiceAt(t, c, g, 1, 2)
	end := rx.Wait(t, 10*time.Second)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	testworker.WaitFor(t, 2*time.Second, "the worker's streams over", func() bool { return s.Running() == 0 })
	id := WireID("px")
	if e10, e11 := end.Choices[10], end.Choices[11]; e10.FinishReason != "stop" || e11.FinishReason != "stop" ||
		s.ChoiceTokens(id, 10) != 9 || s.ChoiceTokens(id, 11) != 10 {
		t.Fatalf("choices 10 and 11: %+v %+v, %d and %d tokens on the worker", e10, e11, s.ChoiceTokens(id, 10), s.ChoiceTokens(id, 11))
	}
	if end.Choices[1].FinishReason != "abort" || s.ChoiceTokens(id, 1) >= 30 {
		t.Fatalf("choice 1: %+v, %d tokens on the worker", end.Choices[1], s.ChoiceTokens(id, 1))
	}
	if a := s.Aborted(); len(a) != 2 || a[0] != id+"-1" {
		t.Fatalf("aborts %v", a)
	}
}

// TestWireIDNoPrefix: aborting one request does not stop another whose
// engine id it begins ("r1" and "r10").
func TestWireIDNoPrefix(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 5 * time.Millisecond})
	c := dial(t, s.Addr)
	a := testworker.NewRecorder()
	ka, err := c.Generate(context.Background(), gen("r1", 1, 400), a)
	if err != nil {
		t.Fatal(err)
	}
	b := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), gen("r10", 1, 20), b); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 5*time.Second, "both started", func() bool { return a.Count(0) > 0 && b.Count(0) > 0 })
	ka.Abort()
	if e := b.Wait(t, 10*time.Second); e.Err != nil || e.Choices[0].FinishReason != "length" || b.Count(0) != 20 {
		t.Fatalf("r10 after r1's abort: %+v, %d tokens", e, b.Count(0))
	}
	if e := a.Wait(t, 2*time.Second); e.Choices[0].FinishReason != "abort" {
		t.Fatalf("r1: %+v", e)
	}
}

// byteTok is a byte-level remote.Tokenizer for the engine test.
type byteTok struct{}

func (byteTok) Encode(dst []int32, s string) []int32 {
	for i := 0; i < len(s); i++ {
		dst = append(dst, int32(s[i]))
	}
	return dst
}
func (byteTok) AppendPiece(dst []byte, id int32) []byte {
	if id < 256 {
		return append(dst, byte(id))
	}
	return dst
}
func (byteTok) IsSpecial(id int32) bool { return id >= 256 }
func (byteTok) VocabSize() int          { return 258 }
func (byteTok) ChatTemplate() string    { return "" }
func (byteTok) BOS() int32              { return -1 }
func (byteTok) EOS() int32              { return 257 }
func (byteTok) AddBOS() bool            { return false }

type finalSink chan *engine.Result

func (s finalSink) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		s <- final
	}
}

// TestEngineStopStringStopsChoice: through the remote engine, a stop
// string that ends one choice of two stops that choice on the worker at
// once, while the other runs to its max_tokens.
func TestEngineStopStringStopsChoice(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 5 * time.Millisecond})
	e, err := remote.New(remote.Config{Workers: []string{"sglang://" + s.Addr}, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	testworker.WaitFor(t, 5*time.Second, "engine healthy", func() bool { return e.Stats().Healthy })
	// Choice 0's tokens are the bytes "defg...": "fg" ends it at its 4th.
	req := &engine.Request{ID: "x", Prompt: "hi", Sampling: engine.Sampling{N: 2, Temperature: 1, MaxTokens: 40, Stop: []string{"fg"}}}
	sink := make(finalSink, 1)
	if _, err := e.Start(req, sink); err != nil {
		t.Fatal(err)
	}
	var res *engine.Result
	select {
	case res = <-sink:
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
	}
	if res.Err != nil || res.Choices[0].FinishReason != engine.FinishStop || res.Choices[0].StopString != "fg" ||
		res.Choices[0].Text != "de" || res.Choices[1].FinishReason != engine.FinishLength {
		t.Fatalf("result %+v", res)
	}
	testworker.WaitFor(t, 2*time.Second, "the worker's streams over", func() bool { return s.Running() == 0 })
	id := s.SGLangRequests()[0].GetRequestId()
	if got := s.ChoiceTokens(id, 0); got > 6 {
		t.Fatalf("the stopped choice ran %d tokens on the worker (stopped at 4)", got)
	}
	if s.ChoiceTokens(id, 1) != 40 {
		t.Fatalf("the other choice ran %d tokens, want 40", s.ChoiceTokens(id, 1))
	}
	if a := s.Aborted(); len(a) != 2 || a[0] != id+"-0" || a[1] != id {
		t.Fatalf("aborts %v", a)
	}
}

// TestEngineEmbed: the remote engine's Embed on an SGLang worker of an
// embedding model: one Embed RPC per input, the vectors normalised.
func TestEngineEmbed(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Embedding: true})
	e, err := remote.New(remote.Config{Workers: []string{"sglang://" + s.Addr}, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	testworker.WaitFor(t, 5*time.Second, "engine healthy", func() bool { return e.Stats().Healthy })
	res, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 2, 3}, {4}}})
	if err != nil {
		t.Fatal(err)
	}
	// The test worker's SGLang embedding is [len(input)]: unit length is [1].
	if res.Dim != 1 || len(res.Vectors) != 2 || res.Vectors[0][0] != 1 || res.Vectors[1][0] != 1 || res.PromptTokens != 4 {
		t.Fatalf("result %+v", res)
	}
	if ids, _ := s.Embeds(); len(ids) != 2 {
		t.Fatalf("Embed RPCs %v", ids)
	}
}
