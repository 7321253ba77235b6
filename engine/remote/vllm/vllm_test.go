package vllm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
	"github.com/vajra-go/vajra/internal/fixture"
	"github.com/vajra-go/vajra/internal/testworker"
)

func TestMain(m *testing.M) {
	testworker.Child()
	os.Exit(m.Run())
}

func dial(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := Dial("vllm://"+addr, Options{})
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

func TestGenerateN2(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	c := dial(t, s.Addr)
	rx, end := run(t, c, gen("r1", 2, 5))
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	for ch := 0; ch < 2; ch++ {
		want := make([]int32, 5)
		for k := range want {
			want[k] = testworker.Token(ch, k)
		}
		if fmt.Sprint(rx.IDs[ch]) != fmt.Sprint(want) {
			t.Errorf("choice %d: tokens %v, want %v", ch, rx.IDs[ch], want)
		}
		ce := end.Choices[ch]
		if ce.FinishReason != "length" || ce.CompletionTokens != 5 || ce.MatchedTokenID != -1 {
			t.Errorf("choice %d: end %+v", ch, ce)
		}
	}
	if end.PromptTokens != 4 || end.CachedTokens != 2 {
		t.Errorf("usage: prompt %d cached %d, want 4 and 2", end.PromptTokens, end.CachedTokens)
	}
	if n := len(s.VLLMRequests()); n != 1 {
		t.Fatalf("worker got %d requests", n)
	}
	r := s.VLLMRequests()[0]
	if r.GetSamplingParams().GetN() != 2 || !r.GetStream() || fmt.Sprint(r.GetTokenized().GetInputIds()) != "[1 2 3 4]" {
		t.Errorf("request as received: %v", r)
	}
}

func TestStopToken(t *testing.T) {
	s := testworker.Start(t, testworker.Config{TokensPerChunk: 2})
	c := dial(t, s.Addr)
	g := gen("r1", 1, 10)
	g.Sampling.StopTokenIDs = []int{int(testworker.Token(0, 2))}
	rx, end := run(t, c, g)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	ce := end.Choices[0]
	if len(rx.IDs[0]) != 3 || ce.FinishReason != "stop" || ce.MatchedTokenID != testworker.Token(0, 2) || ce.CompletionTokens != 3 {
		t.Errorf("tokens %v, end %+v", rx.IDs[0], ce)
	}
}

func TestLogprobs(t *testing.T) {
	s := testworker.Start(t, testworker.Config{TokensPerChunk: 3})
	c := dial(t, s.Addr)
	g := gen("r1", 2, 6)
	g.Sampling.Logprobs, g.Sampling.TopLogprobs = true, 3
	g.PromptLogprobs = 2
	rx, end := run(t, c, g)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	for ch := 0; ch < 2; ch++ {
		if len(rx.Logprobs[ch]) != 6 || len(rx.Top[ch]) != 6 {
			t.Fatalf("choice %d: %d logprobs, %d top rows, want 6", ch, len(rx.Logprobs[ch]), len(rx.Top[ch]))
		}
		for k := 0; k < 6; k++ {
			if lp := rx.Logprobs[ch][k]; lp != testworker.Logprob(ch, k) {
				t.Errorf("choice %d token %d: logprob %v, want %v", ch, k, lp, testworker.Logprob(ch, k))
			}
			top := rx.Top[ch][k]
			if len(top) != 3 {
				t.Fatalf("choice %d token %d: %d alternatives, want 3", ch, k, len(top))
			}
			for r, a := range top {
				if a.TokenID != testworker.Token(ch, k)+int32(r) || a.Logprob != testworker.Logprob(ch, k)-float32(r) {
					t.Errorf("choice %d token %d alternative %d: %+v", ch, k, r, a)
				}
			}
		}
	}
	if len(rx.PromptLP) != 4 {
		t.Fatalf("prompt logprobs: %d, want 4", len(rx.PromptLP))
	}
	if p := rx.PromptLP[0]; p.TokenID != 1 || p.Logprob != 0 || p.Top != nil {
		t.Errorf("first prompt token: %+v", p)
	}
	if p := rx.PromptLP[2]; p.TokenID != 3 || p.Logprob != testworker.PromptLogprob(2) || len(p.Top) != 2 || p.Top[1].Logprob != testworker.PromptLogprob(2)-1 {
		t.Errorf("third prompt token: %+v", p)
	}
	sp := s.VLLMRequests()[0].GetSamplingParams()
	if sp.Logprobs == nil || sp.GetLogprobs() != 3 || sp.PromptLogprobs == nil || sp.GetPromptLogprobs() != 2 {
		t.Errorf("logprobs as sent: %v %v", sp.Logprobs, sp.PromptLogprobs)
	}
}

// TestSamplingExplicit checks every field as the worker received it:
// proto3 drops zeros, so the optional ones must be present and the neutral
// values sent.
func TestSamplingExplicit(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	c := dial(t, s.Addr)
	// All defaults: temperature 0 (greedy) must arrive as a present 0.
	if _, end := run(t, c, gen("greedy", 1, 3)); end.Err != nil {
		t.Fatal(end.Err)
	}
	g := gen("full", 1, 3)
	g.Sampling = &engine.Sampling{
		N: 1, Temperature: 0.7, TopP: 0.9, TopK: 40, Seed: 1234, HasSeed: true, IgnoreEOS: true,
		StopTokenIDs: []int{7, 9}, FrequencyPenalty: 0.5, PresencePenalty: -0.25, RepetitionPenalty: 1.1, MinP: 0.05,
		LogitBias: []engine.TokenBias{{TokenID: 5, Bias: -100}, {TokenID: 6, Bias: 2.5}},
	}
	g.MinTokens = 2
	g.Constraint = remote.Constraint{Kind: remote.ConstraintJSONSchema, Value: `{"type":"object"}`}
	if _, end := run(t, c, g); end.Err != nil {
		t.Fatal(end.Err)
	}
	reqs := s.VLLMRequests()
	d := reqs[0].GetSamplingParams()
	if d.Temperature == nil || *d.Temperature != 0 {
		t.Errorf("greedy: temperature %v, want a present 0", d.Temperature)
	}
	if d.TopP != 1 || d.RepetitionPenalty != 1 || d.TopK != 0 || d.MaxTokens == nil || *d.MaxTokens != 3 || d.N != 1 {
		t.Errorf("greedy: top_p %v rep %v top_k %v max %v n %v", d.TopP, d.RepetitionPenalty, d.TopK, d.MaxTokens, d.N)
	}
	if d.Seed != nil || d.Logprobs != nil || d.PromptLogprobs != nil || d.Constraint != nil || len(d.StopTokenIds) != 0 || len(d.Stop) != 0 {
		t.Errorf("greedy: unasked fields set: %v", d)
	}
	if !d.SkipSpecialTokens || !d.SpacesBetweenSpecialTokens || d.IgnoreEos || d.IncludeStopStrInOutput {
		t.Errorf("greedy: special-token flags %v", d)
	}
	f := reqs[1].GetSamplingParams()
	if *f.Temperature != 0.7 || f.TopP != 0.9 || f.TopK != 40 || f.GetSeed() != 1234 || !f.IgnoreEos ||
		fmt.Sprint(f.StopTokenIds) != "[7 9]" || f.FrequencyPenalty != 0.5 || f.PresencePenalty != -0.25 ||
		f.RepetitionPenalty != 1.1 || f.MinP != 0.05 || f.MinTokens != 2 || *f.MaxTokens != 3 {
		t.Errorf("full: %v", f)
	}
	if len(f.LogitBias) != 2 || f.LogitBias[5] != -100 || f.LogitBias[6] != 2.5 {
		t.Errorf("full: logit_bias %v", f.LogitBias)
	}
	if f.GetJsonSchema() != `{"type":"object"}` {
		t.Errorf("full: constraint %v", f.Constraint)
	}
}

func TestConstraints(t *testing.T) {
	cases := []struct {
		c    remote.Constraint
		want func(*vllmpb.SamplingParams) bool
	}{
		{remote.Constraint{Kind: remote.ConstraintJSONObject}, func(p *vllmpb.SamplingParams) bool { return p.GetJsonObject() }},
		{remote.Constraint{Kind: remote.ConstraintJSONSchema, Value: "{}"}, func(p *vllmpb.SamplingParams) bool { return p.GetJsonSchema() == "{}" }},
		{remote.Constraint{Kind: remote.ConstraintGrammar, Value: `root ::= "x"`}, func(p *vllmpb.SamplingParams) bool { return p.GetGrammar() == `root ::= "x"` }},
		// Prepare's grammar in xgrammar's dialect goes in place of the rest.
		{remote.Constraint{Kind: remote.ConstraintJSONSchema, Value: "{}", EBNF: `root ::= "{}"`}, func(p *vllmpb.SamplingParams) bool { return p.GetGrammar() == `root ::= "{}"` }},
		{remote.Constraint{Kind: remote.ConstraintJSONObject, EBNF: `root ::= "{}"`}, func(p *vllmpb.SamplingParams) bool { return p.GetGrammar() == `root ::= "{}"` }},
	}
	for _, tc := range cases {
		g := gen("c", 1, 1)
		g.Constraint = tc.c
		if p := Sampling(g); !tc.want(p) {
			t.Errorf("constraint %v: sent %v", tc.c, p.Constraint)
		}
	}
}

func TestAbortReachesWorker(t *testing.T) {
	for _, complete := range []bool{false, true} {
		t.Run(fmt.Sprint("complete=", complete), func(t *testing.T) {
			step := 20 * time.Millisecond
			s := testworker.Start(t, testworker.Config{Step: step, AbortComplete: complete})
			c := dial(t, s.Addr)
			rx := testworker.NewRecorder()
			call, err := c.Generate(context.Background(), gen("ab", 2, 100000), rx)
			if err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 5*time.Second, "3 tokens", func() bool { return rx.Count(0) >= 3 })
			call.Abort()
			call.Abort() // idempotent
			end := rx.Wait(t, 2*time.Second)
			if end.Err != nil {
				t.Fatalf("an aborted call ends without error: %v", end.Err)
			}
			for i, ce := range end.Choices {
				if ce.FinishReason != "abort" {
					t.Errorf("choice %d: finish %q, want abort", i, ce.FinishReason)
				}
			}
			testworker.WaitFor(t, 2*time.Second, "worker's running count at 0", func() bool { return s.Running() == 0 })
			if a := s.Aborted(); len(a) != 1 || a[0] != "ab" {
				t.Fatalf("worker saw aborts %v", a)
			}
			steps, at := s.Steps("ab")
			if at < 0 || steps > at+1 {
				t.Errorf("worker ran %d steps, its Abort came at step %d: more than one step after", steps, at)
			}
		})
	}
}

func TestContextEndAborts(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 10 * time.Millisecond})
	c := dial(t, s.Addr)
	ctx, cancel := context.WithCancel(context.Background())
	rx := testworker.NewRecorder()
	if _, err := c.Generate(ctx, gen("ctx", 1, 100000), rx); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 5*time.Second, "a token", func() bool { return rx.Count(0) >= 1 })
	cancel()
	end := rx.Wait(t, 2*time.Second)
	if end.Choices[0].FinishReason != "abort" {
		t.Errorf("finish %q", end.Choices[0].FinishReason)
	}
	testworker.WaitFor(t, 2*time.Second, "the Abort RPC", func() bool { return len(s.Aborted()) == 1 })
}

func TestRefusedBeforeFirstToken(t *testing.T) {
	for _, tc := range []struct {
		code      codes.Code
		status    int
		retryable bool
	}{
		{codes.ResourceExhausted, 429, true},
		{codes.Unavailable, 503, true},
		{codes.InvalidArgument, 400, false},
		{codes.Internal, 502, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			s := testworker.Start(t, testworker.Config{Refuse: tc.code})
			c := dial(t, s.Addr)
			rx, end := run(t, c, gen("x", 1, 4))
			var we *remote.WorkerError
			if !errors.As(end.Err, &we) {
				t.Fatalf("End.Err %v, want a *remote.WorkerError", end.Err)
			}
			if we.Status != tc.status || we.Retryable != tc.retryable || rx.Chunks != 0 {
				t.Errorf("status %d retryable %v (chunks %d), want %d %v", we.Status, we.Retryable, rx.Chunks, tc.status, tc.retryable)
			}
		})
	}
}

func TestFailMidStream(t *testing.T) {
	s := testworker.Start(t, testworker.Config{FailAfter: 3})
	c := dial(t, s.Addr)
	rx, end := run(t, c, gen("x", 1, 100))
	var we *remote.WorkerError
	if !errors.As(end.Err, &we) || we.Retryable || we.Status != 502 {
		t.Fatalf("End.Err %#v, want a non-retryable 502", end.Err)
	}
	if rx.Count(0) != 3 || end.Choices[0].FinishReason != "error" {
		t.Errorf("%d tokens, finish %q", rx.Count(0), end.Choices[0].FinishReason)
	}
}

func TestWorkerKilledMidStream(t *testing.T) {
	p := testworker.StartChild(t, testworker.Config{Step: 10 * time.Millisecond}, "127.0.0.1:0")
	c := dial(t, p.Addr)
	var rxs []*testworker.Recorder
	for i := range 4 {
		rx := testworker.NewRecorder()
		if _, err := c.Generate(context.Background(), gen(fmt.Sprint("k", i), 1, 100000), rx); err != nil {
			t.Fatal(err)
		}
		rxs = append(rxs, rx)
	}
	for _, rx := range rxs {
		testworker.WaitFor(t, 10*time.Second, "tokens", func() bool { return rx.Count(0) >= 2 })
	}
	p.Kill()
	killed := time.Now()
	for _, rx := range rxs {
		end := rx.Wait(t, 2*time.Second)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Retryable {
			t.Errorf("End.Err %v, want a non-retryable *remote.WorkerError", end.Err)
		}
	}
	t.Logf("every stream ended %v after the kill", time.Since(killed))
}

func TestDownAtStartThenUp(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	c := dial(t, addr)
	start := time.Now()
	_, err = c.Generate(context.Background(), gen("d", 1, 2), testworker.NewRecorder())
	var we *remote.WorkerError
	if !errors.As(err, &we) || !we.Retryable || we.Status != 503 {
		t.Fatalf("Generate on a worker that is down: %v, want a retryable 503", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("failing took %v", d)
	}
	if err := c.Health(context.Background()); err == nil {
		t.Error("Health of a worker that is down: nil")
	}
	testworker.StartChild(t, testworker.Config{}, addr)
	// grpc reconnects with back-off (at most 2 s between attempts).
	testworker.WaitFor(t, 10*time.Second, "health after the worker came up", func() bool {
		return c.Health(context.Background()) == nil
	})
	if _, end := run(t, c, gen("u", 1, 2)); end.Err != nil {
		t.Fatal(end.Err)
	}
}

func TestReconnectAfterRestart(t *testing.T) {
	p := testworker.StartChild(t, testworker.Config{}, "127.0.0.1:0")
	c := dial(t, p.Addr)
	if _, end := run(t, c, gen("a", 1, 2)); end.Err != nil {
		t.Fatal(end.Err)
	}
	p.Kill()
	testworker.WaitFor(t, 5*time.Second, "health failing", func() bool { return c.Health(context.Background()) != nil })
	testworker.StartChild(t, testworker.Config{}, p.Addr)
	testworker.WaitFor(t, 10*time.Second, "health after the restart", func() bool { return c.Health(context.Background()) == nil })
	if _, end := run(t, c, gen("b", 1, 2)); end.Err != nil {
		t.Fatal(end.Err)
	}
}

// realTokenizer returns the Llama 3 tokenizer files of `make tokenizers`,
// or skips (fails with VAJRA_REQUIRE_TOKENIZERS set).
func realTokenizer(t *testing.T) map[string][]byte {
	t.Helper()
	p, err := fixture.Find("", filepath.Join(".tokenizers", "llama3", "package", "models", "tokenizer.json"),
		"the Llama 3 tokenizer is missing: run `make tokenizers`")
	tj := fixture.Need(t, "VAJRA_REQUIRE_TOKENIZERS", p, err)
	files := map[string][]byte{}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(tj), name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}

func TestTokenizerFiles(t *testing.T) {
	files := realTokenizer(t)
	s := testworker.Start(t, testworker.Config{Tokenizer: files})
	c := dial(t, s.Addr)
	got, err := c.TokenizerFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(files) {
		t.Fatalf("got files %d, want %d", len(got), len(files))
	}
	for n, b := range files {
		if string(got[n]) != string(b) {
			t.Errorf("%s: %d bytes, want %d identical", n, len(got[n]), len(b))
		}
	}
	// Without a tokenizer the worker's FAILED_PRECONDITION is a 400.
	s2 := testworker.Start(t, testworker.Config{})
	_, err = dial(t, s2.Addr).TokenizerFiles(context.Background())
	var we *remote.WorkerError
	if !errors.As(err, &we) || we.Status != 400 {
		t.Errorf("no tokenizer: %v", err)
	}
}

func TestInfoHealthLoadEmbed(t *testing.T) {
	s := testworker.Start(t, testworker.Config{ContextLength: 2048, EOS: []int32{128001, 128009}, ServedName: "tiny"})
	c := dial(t, s.Addr)
	ctx := context.Background()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.ServedModelName != "tiny" || info.MaxContextLength != 2048 || fmt.Sprint(info.EOSTokenIDs) != "[128001 128009]" ||
		info.VocabSize != 128256 || info.BOSTokenID != 1 || info.Embeddings || !info.PromptLogprobs || info.Slots != 64 {
		t.Errorf("info %+v", info)
	}
	if err := c.Health(ctx); err != nil {
		t.Error(err)
	}
	l, err := c.Load(ctx)
	if err != nil || l.Capacity != 64 || l.KVUsage != 0.25 || l.Running != 0 {
		t.Errorf("load %+v %v", l, err)
	}
	e, err := c.Embed(ctx, "e", []int32{1, 2, 3, 4, 5})
	if err != nil || fmt.Sprint(e.Vector) != "[6 2 3 4]" || e.PromptTokens != 5 {
		t.Errorf("embed %+v %v", e, err)
	}
}

// TestCloseEndsEveryCall: Close ends the calls in flight, each with an
// error, the worker sees its streams end, and the client's goroutines are
// gone.
func TestCloseEndsEveryCall(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Step: 10 * time.Millisecond})
	before := runtime.NumGoroutine()
	c, err := Dial("vllm://"+s.Addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rxs []*testworker.Recorder
	for i := range 8 {
		rx := testworker.NewRecorder()
		if _, err := c.Generate(context.Background(), gen(fmt.Sprint("c", i), 1, 100000), rx); err != nil {
			t.Fatal(err)
		}
		rxs = append(rxs, rx)
	}
	testworker.WaitFor(t, 5*time.Second, "8 streams running", func() bool { return s.Running() == 8 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close() // idempotent
	for _, rx := range rxs {
		select {
		case <-rx.Done():
		default:
			t.Fatal("Close returned before every End")
		}
		if end := rx.Wait(t, 0); end.Err == nil {
			t.Error("a call ended by Close has no error")
		}
	}
	testworker.WaitFor(t, 5*time.Second, "worker's streams ended", func() bool { return s.Running() == 0 })
	testworker.WaitFor(t, 5*time.Second, "client goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
	if _, err := c.Generate(context.Background(), gen("late", 1, 1), testworker.NewRecorder()); err == nil {
		t.Error("Generate after Close: nil error")
	}
}

// freezer is a TCP proxy that can stop forwarding without closing
// anything: a worker whose host vanished, as the client sees it.
type freezer struct {
	lis    net.Listener
	frozen chan struct{}
}

func newFreezer(t *testing.T, to string) *freezer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: lis, frozen: make(chan struct{})}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			a, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", to)
			if err != nil {
				a.Close()
				continue
			}
			t.Cleanup(func() { a.Close(); b.Close() })
			go f.pipe(a, b)
			go f.pipe(b, a)
		}
	}()
	return f
}

func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-f.frozen:
			<-make(chan struct{}) // swallow everything from now on
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// TestSilentWorkerDetected: a worker that stops answering without closing
// its connection is dropped by keepalive (a ping after 10 s of silence,
// grpc-go's floor, unanswered for 2 s) and its streams end with an error.
func TestSilentWorkerDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 12 s")
	}
	s := testworker.Start(t, testworker.Config{Step: 10 * time.Millisecond})
	f := newFreezer(t, s.Addr)
	c := dial(t, f.lis.Addr().String())
	rx := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), gen("silent", 1, 100000), rx); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 5*time.Second, "tokens", func() bool { return rx.Count(0) >= 2 })
	close(f.frozen)
	frozen := time.Now()
	end := rx.Wait(t, 15*time.Second)
	var we *remote.WorkerError
	if !errors.As(end.Err, &we) || we.Status != 503 {
		t.Errorf("End.Err %v, want a 503 *remote.WorkerError", end.Err)
	}
	t.Logf("the silent worker's stream ended %v after it went silent", time.Since(frozen).Round(time.Millisecond))
}

func TestRegistered(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	c, err := remote.Dial("vllm://"+s.Addr, remote.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*Client); !ok {
		t.Fatalf("vllm:// dials a %T", c)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Dial("vllm://host-without-port", remote.DialOptions{}); err == nil {
		t.Error("a URL without a port: nil error")
	}
}
