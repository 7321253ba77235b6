package llama

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestManyConcurrentStreams runs 200 streams over 32 sequences: every one
// ends with its terminal frame and the exact token count.
func TestManyConcurrentStreams(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxNumSeqs: 32}}, tinymodel.Config{})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := chatReq("Stream number "+strings.Repeat("x", i%7)+" says hello.", 8+i%5)
			req.Sampling.IgnoreEOS = true
			req.Sampling.Temperature = 0.8
			req.Stream = true
			res, rec := run(t, e, req)
			want := 8 + i%5
			switch {
			case res.Err != nil:
				errs <- res.Err.Error()
			case res.Usage.CompletionTokens != want || len(rec.ends) != 1:
				errs <- "wrong count or end"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Fatal(msg)
	}
	if st := e.Stats(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after all: %+v", st)
	}
}

// TestPreemptionWhenKVFull fills a small KV cache with long generations:
// requests are preempted and recomputed, and all still finish whole.
func TestPreemptionWhenKVFull(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxNumSeqs: 8, MaxModelLen: 256, KVCacheTokens: 300}, PrefixCaching: true}, tinymodel.Config{})
	var wg sync.WaitGroup
	results := make([]*engine.Result, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := chatReq("Request "+string(rune('a'+i))+" wants a long answer.", 120)
			req.Sampling.IgnoreEOS = true
			req.Stream = true
			results[i], _ = run(t, e, req)
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res.Err != nil || res.Usage.CompletionTokens != 120 || len(res.Choices[0].TokenIDs) != 120 {
			t.Fatalf("request %d: err %v, usage %+v", i, res.Err, res.Usage)
		}
	}
	if e.Stats().Preemptions == 0 {
		t.Fatal("no preemption: the test did not fill the cache")
	}
	t.Logf("preemptions: %d", e.Stats().Preemptions)
}

// TestPreemptedGreedyOutputUnchanged: recompute after preemption gives
// the same greedy tokens as an uninterrupted run.
func TestPreemptedGreedyOutputUnchanged(t *testing.T) {
	alone := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 256}}, tinymodel.Config{})
	req := chatReq("Request a wants a long answer.", 120)
	req.Sampling.IgnoreEOS = true
	want, _ := run(t, alone, req)

	e := newTestEngine(t, Config{Config: engine.Config{MaxNumSeqs: 8, MaxModelLen: 256, KVCacheTokens: 300}}, tinymodel.Config{})
	var wg sync.WaitGroup
	results := make([]*engine.Result, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := chatReq("Request a wants a long answer.", 120)
			r.Sampling.IgnoreEOS = true
			results[i], _ = run(t, e, r)
		}()
	}
	wg.Wait()
	if e.Stats().Preemptions == 0 {
		t.Fatal("no preemption")
	}
	for i, res := range results {
		if res.Choices[0].Text != want.Choices[0].Text {
			t.Fatalf("request %d differs after preemption:\n%q\n%q", i, res.Choices[0].Text, want.Choices[0].Text)
		}
	}
}

// TestNChoicesShareThePrompt: n choices at temperature > 0 with a seed
// differ from each other, are reproducible, and count the prompt once.
func TestNChoicesShareThePrompt(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	mk := func() *engine.Request {
		r := chatReq("Pick a word.", 16)
		r.Sampling.N, r.Sampling.Temperature, r.Sampling.Seed, r.Sampling.HasSeed = 4, 1.0, 42, true
		r.Sampling.IgnoreEOS = true
		return r
	}
	a, _ := run(t, e, mk())
	b, _ := run(t, e, mk())
	if len(a.Choices) != 4 || a.Usage.CompletionTokens != 64 {
		t.Fatalf("choices %d, usage %+v", len(a.Choices), a.Usage)
	}
	distinct := map[string]bool{}
	for i := range a.Choices {
		if a.Choices[i].Text != b.Choices[i].Text {
			t.Fatalf("choice %d not reproducible with a seed", i)
		}
		distinct[a.Choices[i].Text] = true
	}
	if len(distinct) < 2 {
		t.Fatal("all choices identical at temperature 1")
	}
}

// TestRandomModelEmitsValidUTF8: a random-weight model emits arbitrary
// bytes; every delta and the final text are valid UTF-8.
func TestRandomModelEmitsValidUTF8(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{Seed: 7})
	for seed := int64(0); seed < 8; seed++ {
		req := &engine.Request{Prompt: "é漢字🙂 bytes", Stream: true,
			Sampling: engine.Sampling{MaxTokens: 64, IgnoreEOS: true, Temperature: 2, Seed: seed, HasSeed: true}}
		res, rec := run(t, e, req)
		validUTF8(t, "text", res.Choices[0].Text)
		for _, d := range rec.deltas {
			validUTF8(t, "delta", d.text)
		}
	}
}

func TestStopStringsAndTokens(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	base := chatReq("Tell me about the sea.", 40)
	base.Sampling.IgnoreEOS = true
	full, _ := run(t, e, base)
	text := full.Choices[0].Text
	if len(text) < 12 {
		t.Fatalf("greedy output too short to cut: %q", text)
	}
	stop := text[8:11]
	req := chatReq("Tell me about the sea.", 40)
	req.Sampling.IgnoreEOS, req.Sampling.Stop, req.Stream = true, []string{stop}, true
	res, rec := run(t, e, req)
	c := res.Choices[0]
	want := text[:strings.Index(text, stop)]
	if c.Text != want || c.FinishReason != engine.FinishStop || c.StopString != stop {
		t.Fatalf("stop %q: text %q finish %s stop %q; want %q", stop, c.Text, c.FinishReason, c.StopString, want)
	}
	if got := rec.text(0, engine.DeltaText); got != want {
		t.Fatalf("streamed %q, want %q", got, want)
	}
	// A stop token: the third generated token.
	tok := full.Choices[0].TokenIDs[2]
	req = chatReq("Tell me about the sea.", 40)
	req.Sampling.IgnoreEOS, req.Sampling.StopTokenIDs = true, []int{tok}
	res, _ = run(t, e, req)
	if c := res.Choices[0]; c.FinishReason != engine.FinishStop || c.StopTokenID != tok || len(c.TokenIDs) > 3 {
		t.Fatalf("stop token %d: finish %s, stop token %d, %d tokens", tok, c.FinishReason, c.StopTokenID, len(c.TokenIDs))
	}
}

func TestLogprobs(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	req := &engine.Request{Prompt: "The sea is", Echo: true, PromptLogprobs: 2,
		Sampling: engine.Sampling{MaxTokens: 5, IgnoreEOS: true, Logprobs: true, TopLogprobs: 3}}
	res, _ := run(t, e, req)
	c := res.Choices[0]
	if len(c.Logprobs) != 5 {
		t.Fatalf("%d logprobs for 5 tokens", len(c.Logprobs))
	}
	for i, lp := range c.Logprobs {
		if lp.TokenID != c.TokenIDs[i] || lp.Logprob > 0 || len(lp.Top) != 3 {
			t.Fatalf("logprob %d: %+v", i, lp)
		}
		// Greedy: the sampled token is the most likely one.
		if lp.Top[0].TokenID != lp.TokenID || lp.Top[0].Logprob < lp.Top[1].Logprob {
			t.Fatalf("logprob %d: greedy token %d is not the top %+v", i, lp.TokenID, lp.Top)
		}
	}
	if len(c.PromptLogprobs) != res.Usage.PromptTokens {
		t.Fatalf("%d prompt logprobs for %d prompt tokens", len(c.PromptLogprobs), res.Usage.PromptTokens)
	}
	for i, lp := range c.PromptLogprobs[1:] {
		if lp.TokenID != int(res.PromptTokens[i+1]) || lp.Logprob > 0 || len(lp.Top) != 2 {
			t.Fatalf("prompt logprob %d: %+v", i+1, lp)
		}
	}
}

func TestJSONResponseFormat(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	// A bounded schema: a random model must finish it within the budget.
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`
	for seed := int64(0); seed < 4; seed++ {
		req := chatReq("Give me a person as JSON.", 200)
		req.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Schema: []byte(schema)}
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 0.7, seed, true
		res, _ := run(t, e, req)
		c := res.Choices[0]
		if c.FinishReason != engine.FinishStop {
			t.Fatalf("finish %s after %q", c.FinishReason, c.Text)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(c.Text), &v); err != nil {
			t.Fatalf("%q is not a JSON object: %v", c.Text, err)
		}
		age, ok := v["age"].(float64)
		if _, isStr := v["name"].(string); !isStr || !ok || age < 0 || age > 120 || len(v) != 2 {
			t.Fatalf("%q does not follow the schema", c.Text)
		}
	}
	// json_object: an open grammar (a random model may write one string
	// forever), so only its start is certain.
	req := chatReq("Give me JSON.", 30)
	req.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONObject}
	res, _ := run(t, e, req)
	if txt := strings.TrimLeft(res.Choices[0].Text, " \t\n"); !strings.HasPrefix(txt, "{") {
		t.Fatalf("json_object output %q does not start an object", txt)
	}
	bad := chatReq("x", 5)
	bad.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Schema: []byte(`{"type":"object","properties":{"a":{"$ref":"#/nope"}}}`)}
	if err := e.Prepare(bad); err == nil || engine.AsError(err).Kind != engine.KindInvalid {
		t.Fatalf("bad schema: %v, want invalid", err)
	}
}

func TestContextLengthAndBadInput(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 64}}, tinymodel.Config{})
	for _, tc := range []struct {
		req  *engine.Request
		kind engine.ErrorKind
	}{
		{chatReq(strings.Repeat("word ", 100), 0), engine.KindContextLength},
		{chatReq("hi", 100), engine.KindContextLength},
		{&engine.Request{PromptTokens: []int32{1, 2, 1 << 20}}, engine.KindInvalid},
		{&engine.Request{Prompt: "x", Sampling: engine.Sampling{StopTokenIDs: []int{-1}}}, engine.KindInvalid},
		{&engine.Request{Prompt: "x", Sampling: engine.Sampling{LogitBias: []engine.TokenBias{{TokenID: 1 << 20, Bias: 1}}}}, engine.KindInvalid},
	} {
		err := e.Prepare(tc.req)
		if err == nil || engine.AsError(err).Kind != tc.kind {
			t.Fatalf("%+v: error %v, want kind %d", tc.req.Sampling, err, tc.kind)
		}
	}
}

func TestLogitBiasAndPenalties(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	base := chatReq("Tell me about the sea.", 20)
	base.Sampling.IgnoreEOS = true
	plain, _ := run(t, e, base)
	first := plain.Choices[0].TokenIDs[0]
	req := chatReq("Tell me about the sea.", 20)
	req.Sampling.IgnoreEOS = true
	req.Sampling.LogitBias = []engine.TokenBias{{TokenID: first, Bias: -100}}
	res, _ := run(t, e, req)
	if res.Choices[0].TokenIDs[0] == first {
		t.Fatal("logit_bias -100 did not ban the greedy token")
	}
	req = chatReq("Tell me about the sea.", 20)
	req.Sampling.IgnoreEOS = true
	req.Sampling.PresencePenalty = 2
	req.Sampling.FrequencyPenalty = 2
	res, _ = run(t, e, req)
	if countRepeats(res.Choices[0].TokenIDs) > countRepeats(plain.Choices[0].TokenIDs) {
		t.Fatalf("penalties raised repeats: %v vs %v", res.Choices[0].TokenIDs, plain.Choices[0].TokenIDs)
	}
	if res.Choices[0].Text == plain.Choices[0].Text && countRepeats(plain.Choices[0].TokenIDs) > 0 {
		t.Fatal("penalties had no effect on a repeating greedy output")
	}
}

func countRepeats(ids []int) int {
	seen := map[int]bool{}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
		seen[id] = true
	}
	return n
}

// TestNChoicesEndingAtOnce: every choice's first token ends it (a bias
// forces the end-of-sequence token): choice 0's sequence is freed before
// the others have taken theirs.
func TestNChoicesEndingAtOnce(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	eos := int(e.model.EOS())
	for _, stream := range []bool{false, true} {
		req := chatReq("Say nothing.", 8)
		req.Sampling.N, req.Stream = 3, stream
		req.Sampling.LogitBias = []engine.TokenBias{{TokenID: eos, Bias: 100}}
		res, _ := run(t, e, req)
		if res.Err != nil || len(res.Choices) != 3 || res.Usage.CompletionTokens != 3 {
			t.Fatalf("err %v, usage %+v", res.Err, res.Usage)
		}
		for i, c := range res.Choices {
			if c.FinishReason != engine.FinishStop || c.Text != "" {
				t.Fatalf("choice %d: %s %q", i, c.FinishReason, c.Text)
			}
		}
	}
	if st := e.Stats(); st.Running != 0 {
		t.Fatalf("running %d", st.Running)
	}
	// The engine still serves.
	res, _ := run(t, e, chatReq("Hello", 4))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
}
