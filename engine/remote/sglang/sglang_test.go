package sglang

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/testworker"
)

// These tests run against a Go server written from sglang_scheduler.proto
// (testworker): no real SGLang was met, it has no CPU build.

func TestMain(m *testing.M) {
	testworker.Child()
	os.Exit(m.Run())
}

func dial(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := Dial("sglang://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gen(id string, n, max int) *remote.Generate {
	return &remote.Generate{ID: id, Prompt: []int32{1, 2, 3, 4}, Sampling: &engine.Sampling{N: n}, MaxTokens: max, CachePrompt: true}
}

func run(t *testing.T, c *Client, g *remote.Generate) (*testworker.Recorder, *remote.End) {
	t.Helper()
	rx := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	return rx, rx.Wait(t, 10*time.Second)
}

func TestGenerateN2Logprobs(t *testing.T) {
	s := testworker.Start(t, testworker.Config{TokensPerChunk: 2})
	c := dial(t, s.Addr)
	g := gen("r1", 2, 5)
	g.Sampling.Logprobs, g.Sampling.TopLogprobs = true, 2
	g.Sampling.StopTokenIDs = []int{int(testworker.Token(1, 3))}
	rx, end := run(t, c, g)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	for ch, want := range []int{5, 4} {
		if len(rx.IDs[ch]) != want || len(rx.Logprobs[ch]) != want || len(rx.Top[ch]) != want {
			t.Fatalf("choice %d: %d tokens %d logprobs %d tops, want %d", ch, len(rx.IDs[ch]), len(rx.Logprobs[ch]), len(rx.Top[ch]), want)
		}
		for k := range want {
			if rx.IDs[ch][k] != testworker.Token(ch, k) || rx.Logprobs[ch][k] != testworker.Logprob(ch, k) ||
				rx.Top[ch][k][1].TokenID != testworker.Token(ch, k)+1 {
				t.Errorf("choice %d token %d: %v %v %v", ch, k, rx.IDs[ch][k], rx.Logprobs[ch][k], rx.Top[ch][k])
			}
		}
		if end.Choices[ch].CompletionTokens != want {
			t.Errorf("choice %d: %d completion tokens, want %d", ch, end.Choices[ch].CompletionTokens, want)
		}
	}
	if e := end.Choices[0]; e.FinishReason != "length" || e.MatchedTokenID != -1 {
		t.Errorf("choice 0: %+v", e)
	}
	if e := end.Choices[1]; e.FinishReason != "stop" || e.MatchedTokenID != testworker.Token(1, 3) {
		t.Errorf("choice 1: %+v", e)
	}
	r := s.SGLangRequests()[0]
	if !r.GetReturnLogprob() || r.GetTopLogprobsNum() != 2 || r.GetLogprobStartLen() != -1 || !r.GetStream() {
		t.Errorf("logprob fields as sent: %v", r)
	}
}

func TestSamplingExplicit(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	c := dial(t, s.Addr)
	if _, end := run(t, c, gen("greedy", 1, 3)); end.Err != nil {
		t.Fatal(end.Err)
	}
	g := gen("full", 1, 3)
	g.Sampling = &engine.Sampling{N: 1, Temperature: 0.7, TopP: 0.9, TopK: 40, RepetitionPenalty: 1.2, MinP: 0.1,
		FrequencyPenalty: 0.5, PresencePenalty: 0.25, IgnoreEOS: true, StopTokenIDs: []int{9},
		LogitBias: []engine.TokenBias{{TokenID: 5, Bias: -100}}}
	g.MinTokens = 1
	g.PromptLogprobs = 1
	g.Constraint = remote.Constraint{Kind: remote.ConstraintJSONObject}
	if _, end := run(t, c, g); end.Err != nil {
		t.Fatal(end.Err)
	}
	reqs := s.SGLangRequests()
	d := reqs[0].GetSamplingParams()
	if d.Temperature != 0 || d.TopP != 1 || d.TopK != -1 || d.RepetitionPenalty != 1 || d.MaxNewTokens == nil || *d.MaxNewTokens != 3 ||
		d.N != 1 || !d.SkipSpecialTokens || !d.SpacesBetweenSpecialTokens || d.Constraint != nil || reqs[0].GetReturnLogprob() {
		t.Errorf("greedy: %v", reqs[0])
	}
	f := reqs[1].GetSamplingParams()
	if f.Temperature != 0.7 || f.TopP != 0.9 || f.TopK != 40 || f.RepetitionPenalty != 1.2 || f.MinP != 0.1 ||
		f.FrequencyPenalty != 0.5 || f.PresencePenalty != 0.25 || !f.IgnoreEos || fmt.Sprint(f.StopTokenIds) != "[9]" ||
		f.MinNewTokens != 1 || f.LogitBias["5"] != -100 || f.GetJsonSchema() != `{"type":"object"}` {
		t.Errorf("full: %v", f)
	}
	if !reqs[1].GetReturnLogprob() || reqs[1].GetLogprobStartLen() != 0 || reqs[1].GetTopLogprobsNum() != 1 {
		t.Errorf("prompt logprobs: %v", reqs[1])
	}
}

func TestConstraints(t *testing.T) {
	g := gen("c", 1, 1)
	g.Constraint = remote.Constraint{Kind: remote.ConstraintGrammar, Value: `root ::= "x"`}
	if p := Sampling(g); p.GetEbnfGrammar() != `root ::= "x"` {
		t.Errorf("grammar: %v", p.Constraint)
	}
	g.Constraint = remote.Constraint{Kind: remote.ConstraintJSONSchema, Value: "{}"}
	if p := Sampling(g); p.GetJsonSchema() != "{}" {
		t.Errorf("schema: %v", p.Constraint)
	}
	// Prepare's grammar in xgrammar's dialect goes in place of the schema.
	g.Constraint.EBNF = `root ::= "{}"`
	if p := Sampling(g); p.GetEbnfGrammar() != `root ::= "{}"` {
		t.Errorf("schema with its grammar: %v", p.Constraint)
	}
}

func TestAbortReachesWorker(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 20 * time.Millisecond, AbortComplete: true})
	c := dial(t, s.Addr)
	rx := testworker.NewRecorder()
	call, err := c.Generate(context.Background(), gen("ab", 1, 100000), rx)
	if err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 5*time.Second, "3 tokens", func() bool { return rx.Count(0) >= 3 })
	call.Abort()
	end := rx.Wait(t, 2*time.Second)
	if end.Err != nil || end.Choices[0].FinishReason != "abort" {
		t.Fatalf("end %+v", end)
	}
	testworker.WaitFor(t, 2*time.Second, "worker's running count at 0", func() bool { return s.Running() == 0 })
	steps, at := s.Steps(WireID("ab"))
	if a := s.Aborted(); len(a) != 1 || a[0] != WireID("ab") || at < 0 || steps > at+1 {
		t.Errorf("aborts %v; %d steps, abort at step %d", a, steps, at)
	}
}

func TestRefused(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Refuse: codes.ResourceExhausted})
	c := dial(t, s.Addr)
	_, end := run(t, c, gen("x", 1, 4))
	var we *remote.WorkerError
	if !errors.As(end.Err, &we) || we.Status != 429 || !we.Retryable {
		t.Fatalf("End.Err %v", end.Err)
	}
}

func TestWorkerKilledMidStream(t *testing.T) {
	p := testworker.StartChild(t, testworker.Config{Step: 10 * time.Millisecond}, "127.0.0.1:0")
	c := dial(t, p.Addr)
	rx := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), gen("k", 1, 100000), rx); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 10*time.Second, "tokens", func() bool { return rx.Count(0) >= 2 })
	p.Kill()
	end := rx.Wait(t, 2*time.Second)
	var we *remote.WorkerError
	if !errors.As(end.Err, &we) || we.Retryable {
		t.Errorf("End.Err %v", end.Err)
	}
	// It comes back on the same port: grpc reconnects.
	testworker.StartChild(t, testworker.Config{}, p.Addr)
	testworker.WaitFor(t, 10*time.Second, "health after the restart", func() bool { return c.Health(context.Background()) == nil })
	if _, end := run(t, c, gen("b", 1, 2)); end.Err != nil {
		t.Fatal(end.Err)
	}
}

func TestInfoLoadTokenizerEmbed(t *testing.T) {
	files := map[string][]byte{"tokenizer.json": []byte(`{"model":{}}`), "tokenizer_config.json": []byte(`{}`)}
	s := testworker.Start(t, testworker.Config{ContextLength: 8192, EOS: []int32{2}, ServedName: "m", Tokenizer: files})
	c := dial(t, s.Addr)
	ctx := context.Background()
	info, err := c.Info(ctx)
	if err != nil || info.ServedModelName != "m" || info.MaxContextLength != 8192 || fmt.Sprint(info.EOSTokenIDs) != "[2]" {
		t.Errorf("info %+v %v", info, err)
	}
	l, err := c.Load(ctx)
	if err != nil || l.Capacity != 32 || l.KVUsage != 0.5 {
		t.Errorf("load %+v %v", l, err)
	}
	got, err := c.TokenizerFiles(ctx)
	if err != nil || string(got["tokenizer.json"]) != `{"model":{}}` || len(got) != 2 {
		t.Errorf("tokenizer %v %v", got, err)
	}
	e, err := c.Embed(ctx, "e", []int32{1, 2, 3})
	if err != nil || fmt.Sprint(e.Vector) != "[3]" {
		t.Errorf("embed %+v %v", e, err)
	}
}

func TestCloseEndsEveryCall(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 10 * time.Millisecond})
	before := runtime.NumGoroutine()
	c, err := Dial("sglang://"+s.Addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rxs []*testworker.Recorder
	for i := range 4 {
		rx := testworker.NewRecorder()
		if _, err := c.Generate(context.Background(), gen(fmt.Sprint("c", i), 2, 100000), rx); err != nil {
			t.Fatal(err)
		}
		rxs = append(rxs, rx)
	}
	testworker.WaitFor(t, 5*time.Second, "4 streams running", func() bool { return s.Running() == 4 })
	c.Close()
	for _, rx := range rxs {
		if end := rx.Wait(t, 0); end.Err == nil {
			t.Error("a call ended by Close has no error")
		}
	}
	testworker.WaitFor(t, 5*time.Second, "worker's streams ended", func() bool { return s.Running() == 0 })
	testworker.WaitFor(t, 5*time.Second, "client goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
}

func TestRegistered(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	c, err := remote.Dial("sglang://"+s.Addr, remote.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*Client); !ok {
		t.Fatalf("sglang:// dials a %T", c)
	}
	if info, err := c.Info(context.Background()); err != nil || info.Slots != 32 || !info.PromptLogprobs {
		t.Fatalf("info %+v %v", info, err)
	}
}
