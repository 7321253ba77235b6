package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

func decodeCompletion(t *testing.T, body string) *CompletionRequest {
	t.Helper()
	var r CompletionRequest
	if err := DecodeCompletionRequest([]byte(body), &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return &r
}

func TestDecodePromptUnion(t *testing.T) {
	f := func(prompt string, want Prompt) {
		t.Helper()
		r := decodeCompletion(t, `{"model":"m","prompt":`+prompt+`,"foo":1}`)
		if !reflect.DeepEqual(r.Prompt, want) {
			t.Errorf("%s: got %+v, want %+v", prompt, r.Prompt, want)
		}
		if !reflect.DeepEqual(r.Unknown, []string{"foo"}) {
			t.Errorf("%s: unknown %q", prompt, r.Unknown)
		}
	}
	f(`"hi"`, Prompt{Texts: []string{"hi"}})
	f(`["a","b"]`, Prompt{Texts: []string{"a", "b"}, Array: true})
	f(`[1,2,3]`, Prompt{Tokens: [][]int{{1, 2, 3}}, Array: true})
	f(`[[1,2],[3]]`, Prompt{Tokens: [][]int{{1, 2}, {3}}, Array: true})
	f(`[[]]`, Prompt{Tokens: [][]int{{}}, Array: true})
	f(`[]`, Prompt{Array: true})
	f(`null`, Prompt{})

	bad := func(body, param, code string) {
		t.Helper()
		var r CompletionRequest
		err := DecodeCompletionRequest([]byte(body), &r)
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != param || pe.Code != code {
			t.Errorf("%s: got %v, want %q %q", body, err, param, code)
		}
	}
	bad(`{"prompt":5}`, "prompt", CodeInvalidType)
	bad(`{"prompt":["a",1]}`, "prompt[1]", CodeInvalidType)
	bad(`{"prompt":[1,"a"]}`, "prompt[1]", CodeInvalidType)
	bad(`{"prompt":[[1],2]}`, "prompt[1]", CodeInvalidType)
	bad(`{"prompt":[{}]}`, "prompt[0]", CodeInvalidType)
	bad(`{"prompt":"x","logprobs":true}`, "logprobs", CodeInvalidType)
}

func TestCompletionToEngine(t *testing.T) {
	r := decodeCompletion(t, `{"model":"m","prompt":"The capital of France is","echo":true,"logprobs":1,"max_tokens":1,"temperature":0,"n":1,"best_of":1,"stop":"\n","seed":3}`)
	var q engine.Request
	if err := r.ToEngine(&q); err != nil {
		t.Fatal(err)
	}
	want := engine.Request{Model: "m", Prompt: "The capital of France is", Echo: true, PromptLogprobs: 1,
		Sampling: engine.Sampling{N: 1, Temperature: 0, TopP: 1, MaxTokens: 1, Unset: engine.AllSamplingFields &^ (engine.FieldTemperature | engine.FieldMaxTokens), Stop: []string{"\n"}, Seed: 3, HasSeed: true, Logprobs: true, TopLogprobs: 1}}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("got  %+v\nwant %+v", q, want)
	}
	r = decodeCompletion(t, `{"prompt":[[5,6,7]],"echo":true,"logprobs":0,"stream":true,"stream_options":{"include_usage":true}}`)
	q = engine.Request{}
	if err := r.ToEngine(&q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.PromptTokens, []int32{5, 6, 7}) || q.PromptLogprobs != -1 || q.Sampling.MaxTokens != DefaultCompletionMaxTokens || !q.Stream {
		t.Errorf("token prompt: %+v", q)
	}
	if o := r.CompletionStreamOptions(); !o.IncludeUsage || !o.Echo {
		t.Errorf("stream options %+v", o)
	}
}

func TestCompletionValidation(t *testing.T) {
	f := func(body, param, code string) {
		t.Helper()
		r := decodeCompletion(t, body)
		var q engine.Request
		err := r.ToEngine(&q)
		if err == nil || err.Param != param || err.Code != code {
			t.Errorf("%s: got %+v, want %q %q", body, err, param, code)
		}
	}
	f(`{}`, "prompt", CodeMissing)
	f(`{"prompt":[]}`, "prompt", CodeMissing)
	f(`{"prompt":[[]]}`, "prompt", CodeMissing)
	f(`{"prompt":["a","b"]}`, "prompt", CodeMultiplePrompts)
	f(`{"prompt":[[1],[2]]}`, "prompt", CodeMultiplePrompts)
	f(`{"prompt":[1,-2]}`, "prompt", CodeInvalidValue)
	f(`{"prompt":"x","suffix":"y"}`, "suffix", CodeUnsupported)
	f(`{"prompt":"x","best_of":3}`, "best_of", CodeUnsupportedValue)
	f(`{"prompt":"x","n":2,"best_of":3}`, "best_of", CodeUnsupportedValue)
	f(`{"prompt":"x","logprobs":21}`, "logprobs", CodeInvalidValue)
	f(`{"prompt":"x","logprobs":-1}`, "logprobs", CodeInvalidValue)
	f(`{"prompt":"x","max_tokens":0}`, "max_tokens", CodeInvalidValue)
	f(`{"prompt":"x","temperature":3}`, "temperature", CodeInvalidValue)
	f(`{"prompt":"x","top_p":0}`, "top_p", CodeInvalidValue)
	f(`{"prompt":"x","n":0}`, "n", CodeInvalidValue)
	f(`{"prompt":"x","stream_options":{"include_usage":true}}`, "stream_options", CodeStreamOptionsNoStream)
	f(`{"prompt":"x","stop_token_ids":[-5]}`, "stop_token_ids[0]", CodeInvalidValue)

	r := decodeCompletion(t, `{"prompt":"x","suffix":null,"best_of":2,"n":2}`)
	var q engine.Request
	if err := r.ToEngine(&q); err != nil {
		t.Errorf("best_of == n, null suffix: %v", err)
	}
}

var promptLogprobs = []engine.TokenLogprob{
	{TokenID: 1, Token: "The", Logprob: 0},
	{TokenID: 2, Token: " cé", Logprob: -3.5, Top: []engine.TopLogprob{{TokenID: 9, Token: " a", Logprob: -1}, {TokenID: 2, Token: " cé", Logprob: -3.5}}},
}

var completionScripts = []struct {
	name string
	opts CompletionStreamOptions
	s    []step
}{
	{"completion_text", CompletionStreamOptions{Framing: codegen.FramingChunked, IncludeUsage: true}, []step{
		start(1), text(0, true, "Paris"), text(0, false, "."), finish(0, engine.FinishLength), done(usage)}},
	{"completion_echo_logprobs", CompletionStreamOptions{Framing: codegen.FramingRaw, Echo: true, EchoPrompt: "The cé"}, []step{
		{start: &engine.Start{PromptTokens: 2, N: 2, PromptLogprobs: promptLogprobs}},
		{delta: &engine.Delta{Choice: 0, First: true, Text: []byte(" Paris"), Logprobs: []engine.TokenLogprob{
			{Token: " Paris", Logprob: -0.5, Top: []engine.TopLogprob{{Token: " Paris", Logprob: -0.5}}}}}},
		{delta: &engine.Delta{Choice: 1, First: true, Text: []byte(" Lyon"), Logprobs: []engine.TokenLogprob{
			{Token: " Lyon", Logprob: -2, Top: []engine.TopLogprob{{Token: " Paris", Logprob: -0.5}}}}}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaReasoning, Text: []byte("never shown")}},
		finish(0, engine.FinishLength), finish(1, engine.FinishLength), done(usage)}},
	{"completion_error", CompletionStreamOptions{Framing: codegen.FramingRaw, IncludeUsage: true, ContinuousUsage: true}, []step{
		start(1), {delta: &engine.Delta{Choice: 0, First: true, Text: []byte("x"), Usage: &engine.Usage{PromptTokens: 3, CompletionTokens: 1}}},
		{err: &engine.Error{Kind: engine.KindContextLength, Message: "This model's maximum context length is 4096 tokens."}}}},
}

func TestCompletionStream(t *testing.T) {
	for _, sc := range completionScripts {
		t.Run(sc.name, func(t *testing.T) {
			f := NewCompletionFormatter("cmpl-test123", "vajra-sim", 1767225600, sc.opts)
			out := drive(f, sc.s)
			checkGolden(t, sc.name, out)

			// openai-go must decode every chunk.
			body := sseBody(t, out, sc.opts.Framing)
			stream := ssestream.NewStream[oai.Completion](ssestream.NewDecoder(sseResponse(body)), nil)
			texts := map[int64]string{}
			finished := map[int64]string{}
			for stream.Next() {
				c := stream.Current()
				if c.ID != "cmpl-test123" {
					t.Errorf("id %q", c.ID)
				}
				for _, ch := range c.Choices {
					texts[ch.Index] += ch.Text
					if ch.FinishReason != "" {
						finished[ch.Index] = string(ch.FinishReason)
					}
				}
			}
			if sc.name == "completion_error" {
				if stream.Err() == nil {
					t.Fatal("want the SDK to see the error event")
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if sc.opts.Echo && texts[0] != "The cé Paris" {
				t.Errorf("echo text %q", texts[0])
			}
			if len(finished) != max(sc.s[0].start.N, 1) {
				t.Errorf("finished %v", finished)
			}
		})
	}
}

func TestCompletionBody(t *testing.T) {
	res := &engine.Result{Choices: []engine.Choice{{Index: 0, Text: " Paris", FinishReason: engine.FinishLength, StopTokenID: -1,
		PromptLogprobs: promptLogprobs,
		Logprobs:       []engine.TokenLogprob{{Token: " Paris", Logprob: -0.5, Top: []engine.TopLogprob{{Token: " Paris", Logprob: -0.5}}}}}},
		Usage: engine.Usage{PromptTokens: 2, CompletionTokens: 1}}
	m := &CompletionMeta{ID: "cmpl-x", Model: "m", Created: 1767225600, Logprobs: true, Echo: true, EchoPrompt: "The cé"}
	body := AppendCompletion(nil, m, res)
	checkGolden(t, "completion_body", body)
	var c oai.Completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("openai-go: %v", err)
	}
	ch := c.Choices[0]
	if ch.Text != "The cé Paris" || len(ch.Logprobs.Tokens) != 3 || ch.Logprobs.TokenLogprobs[1] != -3.5 {
		t.Errorf("decoded %+v", ch)
	}
	if !reflect.DeepEqual(ch.Logprobs.TextOffset, []int64{0, 3, 6}) {
		t.Errorf("text_offset %v", ch.Logprobs.TextOffset)
	}
	// lm-eval reads top_logprobs[i] as a dict; the first prompt token's is null.
	var raw struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	lp := raw.Choices[0].Logprobs
	if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil || lp.TopLogprobs[1][" a"] != -1 {
		t.Errorf("prompt logprobs %+v", lp)
	}
}

func TestCompletionAppendDeltaAllocs(t *testing.T) {
	f := NewCompletionFormatter("cmpl-x", "m", 1, CompletionStreamOptions{Framing: codegen.FramingChunked, Echo: true, EchoPrompt: "p", IncludeUsage: true, ContinuousUsage: true})
	buf := make([]byte, 0, 4096)
	st := engine.Start{N: 1, PromptLogprobs: promptLogprobs}
	d := engine.Delta{Text: []byte("tok"), Usage: &engine.Usage{}, Logprobs: []engine.TokenLogprob{{Token: "tok", Logprob: -1, Top: []engine.TopLogprob{{Token: "tok", Logprob: -1}}}}}
	e := engine.ChoiceEnd{StopTokenID: -1}
	if n := testing.AllocsPerRun(100, func() {
		buf = f.AppendStart(buf[:0], &st)
		buf = f.AppendDelta(buf, &d)
		buf = f.AppendChoiceEnd(buf, &e)
		buf = f.AppendEnd(buf, &engine.Result{})
	}); n != 0 {
		t.Errorf("completion formatter: %v allocs per run", n)
	}
}

func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":1,"echo":true,"logprobs":1}`,
		`{"prompt":[[1,2],[3]],"stop":["a"],"suffix":"x"}`,
		`{"prompt":[1,2,-3],"best_of":2}`,
		`{"prompt":["a"],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[[`, `[]`, `{"prompt":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	var r CompletionRequest
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := DecodeCompletionRequest(body, &r); err != nil {
			_ = err.(*ParamError).AppendBody(nil)
			return
		}
		var q engine.Request
		if pe := r.ToEngine(&q); pe != nil {
			_ = pe.AppendBody(nil)
		}
	})
}
