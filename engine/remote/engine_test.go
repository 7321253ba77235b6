package remote

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text/grammar"
	"github.com/vajra-go/vajra/internal/eventually"
)

// TestChatStream: a chat request goes to the worker as the ChatML prompt's
// ids with every sampling field, its tokens come back as text deltas and
// the worker's usage ends up in the Result.
func TestChatStream(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	if !e.Stats().Healthy || e.ModelName() != "fake-model" || e.MaxModelLen() != 256 {
		t.Fatalf("healthy %v name %q len %d", e.Stats().Healthy, e.ModelName(), e.MaxModelLen())
	}
	req := chat("hi", 10)
	req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 0.5, 7, true
	rec, _, c := start(t, e, f, req)
	want := append([]int32{tokBOS}, ids("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")...)
	if string(toBytes(c.g.Prompt)) != string(toBytes(want)) {
		t.Fatalf("prompt %v, want %v", c.g.Prompt, want)
	}
	if c.g.MaxTokens != 10 || c.g.Sampling.Temperature != 0.5 || c.g.Sampling.Seed != 7 || !c.g.CachePrompt {
		t.Fatalf("generate %+v sampling %+v", c.g, c.g.Sampling)
	}
	c.tokens(0, ids("Hel")...)
	c.tokens(0, ids("lo")...)
	c.tokens(0, tokEOS)
	select {
	case <-rec.done:
		t.Fatal("final before the worker's End (its usage)")
	default:
	}
	c.end(&End{Choices: []ChoiceEnd{{FinishReason: "stop", MatchedTokenID: -1, CompletionTokens: 6}}, PromptTokens: len(want), CachedTokens: 5})
	res := rec.wait(t)
	if res.Err != nil || res.Choices[0].Text != "Hello" || rec.text[0].String() != "Hello" {
		t.Fatalf("err %v text %q streamed %q", res.Err, res.Choices[0].Text, rec.text[0].String())
	}
	if res.Choices[0].FinishReason != engine.FinishStop || res.Usage.CompletionTokens != 6 ||
		res.Usage.PromptTokens != len(want) || res.Usage.CachedTokens != 5 {
		t.Fatalf("finish %s usage %+v", res.Choices[0].FinishReason, res.Usage)
	}
	if c.aborted.Load() != 0 {
		t.Fatal("a call the worker ended itself was aborted (its connection would be lost)")
	}
	if !strings.HasPrefix(string(rec.frames), "sd") || !strings.HasSuffix(string(rec.frames), "ce") {
		t.Fatalf("frames %q", rec.frames)
	}
	eventually.True(t, "in-flight count back to 0", func() bool { return e.Stats().Running == 0 })
}

func toBytes(ids []int32) []byte {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return b
}

// TestStopStringAbortsWorker: a stop string the engine matched ends the
// choice at once (held back, never streamed) and aborts the worker's
// request, which would not stop there by itself.
func TestStopStringAbortsWorker(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 20)
	req.Sampling.Stop = []string{"lo w"}
	rec, _, c := start(t, e, f, req)
	c.tokens(0, ids("Hel")...)
	c.tokens(0, ids("lo")...)
	if got := rec.text[0].String(); got != "Hel" {
		t.Fatalf("streamed %q before the stop string is decided, want %q", got, "Hel")
	}
	c.tokens(0, ids(" wor")...)
	res := rec.wait(t)
	if res.Choices[0].Text != "Hel" || res.Choices[0].StopString != "lo w" || res.Choices[0].FinishReason != engine.FinishStop {
		t.Fatalf("choice %+v", res.Choices[0])
	}
	if c.aborted.Load() == 0 {
		t.Fatal("the worker's request was not aborted")
	}
	eventually.True(t, "in-flight count back to 0", func() bool { return e.Stats().Running == 0 })
}

// TestStopTokenID: stop_token_ids are the engine's to match too.
func TestStopTokenID(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 20)
	req.Sampling.StopTokenIDs = []int{'!'}
	rec, _, c := start(t, e, f, req)
	c.tokens(0, ids("ok!more")...)
	res := rec.wait(t)
	if res.Choices[0].Text != "ok" || res.Choices[0].StopTokenID != '!' || c.aborted.Load() == 0 {
		t.Fatalf("choice %+v aborted %d", res.Choices[0], c.aborted.Load())
	}
}

// TestAbort: the client's disconnect reaches the worker's call at once;
// the Result says aborted and the stream gets no error event.
func TestAbort(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	rec, s, c := start(t, e, f, chat("hi", 20))
	c.tokens(0, ids("a")...)
	s.Abort()
	if c.aborted.Load() == 0 {
		t.Fatal("Abort did not reach the worker's call")
	}
	res := rec.wait(t)
	if !errors.Is(res.Err, engine.ErrAborted) || strings.Contains(string(rec.frames), "x") {
		t.Fatalf("err %v frames %q", res.Err, rec.frames)
	}
	eventually.True(t, "in-flight count back to 0", func() bool { return e.Stats().Running == 0 })
}

// TestWorkerBrokeMidStream: a broken stream ends with the dialect's error
// event, the worker is marked down (requests get KindClosed) and comes
// back when its probe succeeds.
func TestWorkerBrokeMidStream(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	rec, _, c := start(t, e, f, chat("hi", 20))
	c.tokens(0, ids("ab")...)
	f.down.Store(true)
	c.end(&End{Err: &WorkerError{Worker: f.url, Message: "the stream broke", Err: errors.New("EOF")}})
	res := rec.wait(t)
	if res.Err == nil || res.Err.Kind != engine.KindClosed || !strings.HasSuffix(string(rec.frames), "x") {
		t.Fatalf("err %v frames %q", res.Err, rec.frames)
	}
	if res.Choices[0].Text != "ab" {
		t.Fatalf("text %q", res.Choices[0].Text)
	}
	eventually.True(t, "worker marked down", func() bool { return !e.Stats().Healthy })
	if err := e.Prepare(chat("hi", 5)); err != nil {
		t.Fatal(err) // the model stays known
	}
	down := chat("hi", 5)
	down.Stream = false
	if _, err := e.Start(down, newRecorder()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Start with the worker down: %v, want KindClosed", err)
	}
	f.down.Store(false)
	eventually.True(t, "worker back up", func() bool { return e.Stats().Healthy })
}

// TestWorkerDownAtStart: the engine starts with its worker down, refuses
// requests with KindClosed (503) and serves once the worker is up.
func TestWorkerDownAtStart(t *testing.T) {
	e, f := newFake(t, Config{}, true)
	if e.Stats().Healthy {
		t.Fatal("healthy with the worker down")
	}
	if err := e.Prepare(chat("hi", 5)); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Prepare: %v, want KindClosed", err)
	}
	f.down.Store(false)
	eventually.True(t, "worker up", func() bool { return e.Stats().Healthy })
	rec, _, c := start(t, e, f, chat("hi", 5))
	c.tokens(0, ids("x")...)
	c.end(&End{})
	if res := rec.wait(t); res.Err != nil || res.Choices[0].Text != "x" {
		t.Fatalf("err %v text %q", res.Err, res.Choices[0].Text)
	}
}

// TestContextLength: the worker's context length is checked before the 200.
func TestContextLength(t *testing.T) {
	e, _ := newFake(t, Config{}, false)
	err := e.Prepare(chat(strings.Repeat("x", 230), 20))
	if !errors.Is(err, engine.ErrContextLength) {
		t.Fatalf("Prepare: %v, want KindContextLength", err)
	}
	req := chat("hi", 0)
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if p := req.Prepared.(*prepared); p.MaxTokens != 256-len(p.Prompt) {
		t.Fatalf("max tokens %d for a %d-token prompt in 256", p.MaxTokens, len(p.Prompt))
	}
}

// TestFirstTokenTimeout: a worker that sends nothing is aborted after the
// first-token timeout and the stream ends with an error event.
func TestFirstTokenTimeout(t *testing.T) {
	e, f := newFake(t, Config{FirstTokenTimeout: 50 * time.Millisecond, InterTokenTimeout: time.Hour}, false)
	rec, _, c := start(t, e, f, chat("hi", 5))
	res := rec.wait(t)
	if res.Err == nil || !strings.Contains(res.Err.Message, "sent no token") || c.aborted.Load() == 0 {
		t.Fatalf("err %v aborted %d", res.Err, c.aborted.Load())
	}
	if !strings.HasSuffix(string(rec.frames), "x") {
		t.Fatalf("frames %q", rec.frames)
	}
}

// TestInterTokenTimeout: a worker that stops between tokens likewise.
func TestInterTokenTimeout(t *testing.T) {
	e, f := newFake(t, Config{FirstTokenTimeout: time.Hour, InterTokenTimeout: 50 * time.Millisecond}, false)
	rec, _, c := start(t, e, f, chat("hi", 5))
	c.tokens(0, ids("a")...)
	res := rec.wait(t)
	if res.Err == nil || !strings.Contains(res.Err.Message, "sent nothing") || c.aborted.Load() == 0 {
		t.Fatalf("err %v aborted %d", res.Err, c.aborted.Load())
	}
	if res.Choices[0].Text != "a" {
		t.Fatalf("text %q", res.Choices[0].Text)
	}
}

// TestNChoices: each choice is parsed apart; one that hits a stop string
// is stopped on the worker alone.
func TestNChoices(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 20)
	req.Sampling.N, req.Sampling.Stop = 2, []string{"!"}
	rec, _, c := start(t, e, f, req)
	c.tokens(1, ids("b!")...)
	if c.choices.Load() != 2 || c.aborted.Load() != 0 {
		t.Fatalf("choice aborts %b call aborts %d", c.choices.Load(), c.aborted.Load())
	}
	c.tokens(0, ids("aa")...)
	c.end(&End{Choices: []ChoiceEnd{{FinishReason: "length", MatchedTokenID: -1}, {FinishReason: "abort", MatchedTokenID: -1}}})
	res := rec.wait(t)
	if res.Choices[0].Text != "aa" || res.Choices[0].FinishReason != engine.FinishLength ||
		res.Choices[1].Text != "b" || res.Choices[1].FinishReason != engine.FinishStop {
		t.Fatalf("choices %+v", res.Choices)
	}
	if rec.text[0].String() != "aa" || rec.text[1].String() != "b" {
		t.Fatalf("streamed %q %q", rec.text[0].String(), rec.text[1].String())
	}
}

// TestForcedToolCall: tool_choice naming a function sends its grammar and
// turns the output into that call.
func TestForcedToolCall(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 30)
	req.Tools = []engine.Tool{{Name: "get", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}
	req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "get"}
	rec, _, c := start(t, e, f, req)
	if c.g.Constraint.Kind != ConstraintGrammar || c.g.Constraint.Value == "" || c.g.Constraint.EBNF != grammar.EBNF(c.g.Constraint.Value) {
		t.Fatalf("constraint %+v", c.g.Constraint)
	}
	c.tokens(0, ids(`{"a":`)...)
	c.tokens(0, ids(`1}`)...)
	c.end(&End{})
	res := rec.wait(t)
	ch := res.Choices[0]
	if ch.FinishReason != engine.FinishToolCalls || len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Arguments != `{"a":1}` {
		t.Fatalf("choice %+v", ch)
	}
}

// TestResponseFormat: json_schema goes to the worker as such, with its
// grammar in xgrammar's dialect beside it, and so does json_object; a
// schema that cannot be enforced is refused before the 200.
func TestResponseFormat(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 10)
	req.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Schema: []byte(`{"type":"object"}`)}
	_, s, c := start(t, e, f, req)
	want, _ := grammar.FromJSONSchema([]byte(`{"type":"object"}`))
	if c.g.Constraint.Kind != ConstraintJSONSchema || c.g.Constraint.Value != `{"type":"object"}` || c.g.Constraint.EBNF != grammar.EBNF(want) {
		t.Fatalf("constraint %+v", c.g.Constraint)
	}
	s.Abort()
	obj := chat("hi", 10)
	obj.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONObject}
	_, s, c = start(t, e, f, obj)
	if c.g.Constraint.Kind != ConstraintJSONObject || c.g.Constraint.EBNF != grammar.EBNF(want) {
		t.Fatalf("json_object constraint %+v", c.g.Constraint)
	}
	s.Abort()
	bad := chat("hi", 10)
	bad.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Schema: []byte(`{"type":"object","properties":{"a":{"$ref":"#/nope"}}}`)}
	if err := e.Prepare(bad); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("Prepare: %v, want KindInvalid", err)
	}
}

// TestLogprobs: the worker's logprobs reach the deltas and the Result,
// the alternatives trimmed to top_logprobs.
func TestLogprobs(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 10)
	req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 1
	rec, _, c := start(t, e, f, req)
	c.mu.Lock()
	c.rx.Tokens(&Chunk{TokenIDs: []int32{'o', 'k'}, Logprobs: []float32{-0.5, -1},
		Top: [][]TopLogprob{{{TokenID: 'o', Logprob: -0.5}, {TokenID: 'x', Logprob: -2}}, {{TokenID: 'k', Logprob: -1}, {TokenID: 'y', Logprob: -3}}}})
	c.mu.Unlock()
	c.end(&End{})
	res := rec.wait(t)
	lps := res.Choices[0].Logprobs
	if len(lps) != 2 || lps[0].Token != "o" || lps[1].Logprob != -1 || len(lps[0].Top) != 1 || lps[0].Top[0].Token != "o" {
		t.Fatalf("logprobs %+v", lps)
	}
}

// TestShutdown: Close ends every request in flight with KindClosed.
func TestShutdown(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	rec, _, _ := start(t, e, f, chat("hi", 10))
	e.Close()
	if res := rec.wait(t); !errors.Is(res.Err, engine.ErrClosed) {
		t.Fatalf("err %v", res.Err)
	}
	if err := e.Prepare(chat("hi", 5)); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Prepare after Close: %v", err)
	}
}

// TestRetryBeforeFirstToken: a call its worker refuses (or whose worker
// is gone) before any token goes to another healthy worker; the client
// sees one stream.
func TestRetryBeforeFirstToken(t *testing.T) {
	_, a := newFake(t, Config{}, false)
	_, b := newFake(t, Config{}, false)
	e, err := New(Config{Workers: []string{a.url, b.url}, Tokenizer: byteTok{}, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rec := newRecorder()
	req := chat("hi", 5)
	req.Formatter = rec
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(req, rec); err != nil {
		t.Fatal(err)
	}
	var first *fakeCall
	var second *fakeClient
	select {
	case first = <-a.gens:
		second = b
	case first = <-b.gens:
		second = a
	case <-time.After(5 * time.Second):
		t.Fatal("no Generate")
	}
	first.end(&End{Err: &WorkerError{Worker: "x", Retryable: true, Message: "unreachable", Err: errors.New("refused")}})
	var c *fakeCall
	select {
	case c = <-second.gens:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not retried on the other worker")
	}
	if string(c.g.Prompt) != string(first.g.Prompt) || c.g.MaxTokens != 5 {
		t.Fatalf("retried %+v", c.g)
	}
	c.tokens(0, ids("ok")...)
	c.end(&End{})
	res := rec.wait(t)
	if res.Err != nil || res.Choices[0].Text != "ok" || strings.Count(string(rec.frames), "s") != 1 {
		t.Fatalf("err %v text %q frames %q", res.Err, res.Choices[0].Text, rec.frames)
	}
	eventually.True(t, "in-flight back to 0", func() bool {
		return e.Stats().Running == 0 && e.Workers()[0].InFlight() == 0 && e.Workers()[1].InFlight() == 0
	})
}

// TestSessionIDReachesWorker: the request's session (vLLM's session_id)
// is the worker's to use (vLLM's engine core names it in its KV events);
// it is no capability to declare, so every worker takes it.
func TestSessionIDReachesWorker(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	req := chat("hi", 2)
	req.VLLM = &engine.VLLMExtensions{SessionID: "conv-9"}
	r, _, c := start(t, e, f, req)
	if c.g.SessionID != "conv-9" {
		t.Fatalf("the worker got session %q, want conv-9", c.g.SessionID)
	}
	c.end(&End{Choices: []ChoiceEnd{{FinishReason: "stop"}}})
	if res := r.wait(t); res.Err != nil {
		t.Fatal(res.Err)
	}
}
