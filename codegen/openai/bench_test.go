package openai

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// BenchmarkChatAppendDelta is the per-token hot path: one chunk per token,
// chunked framing. It must not allocate.
func BenchmarkChatAppendDelta(b *testing.B) {
	for _, bc := range []struct {
		name string
		d    engine.Delta
		opts ChatStreamOptions
	}{
		{"text", engine.Delta{Text: []byte(" world"), TokenIDs: []int{1917}}, ChatStreamOptions{}},
		{"logprobs5", engine.Delta{Text: []byte(" world"), TokenIDs: []int{1917}, Logprobs: []engine.TokenLogprob{{
			Token: " world", Logprob: -0.0123, Top: []engine.TopLogprob{
				{Token: " world", Logprob: -0.0123}, {Token: " World", Logprob: -4.5}, {Token: " word", Logprob: -6.25},
				{Token: " earth", Logprob: -7}, {Token: "!", Logprob: -9.5}}}}}, ChatStreamOptions{}},
		{"continuous_usage", engine.Delta{Text: []byte(" world"), TokenIDs: []int{1917}, Usage: &engine.Usage{PromptTokens: 100, CompletionTokens: 5}},
			ChatStreamOptions{IncludeUsage: true, ContinuousUsage: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := NewChatFormatter("chatcmpl-0123456789abcdef", "meta-llama/Llama-3.1-8B-Instruct", 1767225600, bc.opts)
			buf := make([]byte, 0, 4096)
			d := bc.d
			buf = f.AppendDelta(buf[:0], &d)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				buf = f.AppendDelta(buf[:0], &d)
			}
		})
	}
}

func TestChatAppendDeltaAllocs(t *testing.T) {
	f := NewChatFormatter("chatcmpl-x", "m", 1, ChatStreamOptions{IncludeUsage: true, ContinuousUsage: true, Framing: codegen.FramingChunked})
	buf := make([]byte, 0, 4096)
	d := engine.Delta{Text: []byte("tok"), Usage: &engine.Usage{PromptTokens: 1},
		Logprobs: []engine.TokenLogprob{{Token: "tok", Logprob: -1, Top: []engine.TopLogprob{{Token: "tok", Logprob: -1}}}}}
	e := engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1}
	res := engine.Result{}
	ee := engine.Error{Kind: engine.KindOverloaded}
	if n := testing.AllocsPerRun(100, func() {
		buf = f.AppendDelta(buf[:0], &d)
		buf = f.AppendChoiceEnd(buf, &e)
		buf = f.AppendEnd(buf, &res)
		buf = f.AppendError(buf, &ee)
	}); n != 0 {
		t.Errorf("chat formatter: %v allocs per run, want 0", n)
	}
}

// typicalChatBody is a ~2 KB chat request: a system prompt, a few turns,
// one tool, sampling parameters.
var typicalChatBody = func() []byte {
	long := strings.Repeat("Answer briefly and cite the source when you can. ", 12)
	return []byte(`{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[` +
		`{"role":"system","content":"` + long + `"},` +
		`{"role":"user","content":"What is the weather like in Paris today, and should I take an umbrella?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"{\"temp_c\":14,\"rain_probability\":0.7,\"wind_kmh\":20}"},` +
		`{"role":"user","content":[{"type":"text","text":"Thanks. And tomorrow? Please answer in French, in two sentences at most, with the temperature in Celsius."}]}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}}],` +
		`"temperature":0.7,"top_p":0.95,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"stop":["</s>"],"seed":42}`)
}()

func BenchmarkDecodeChatRequest(b *testing.B) {
	b.SetBytes(int64(len(typicalChatBody)))
	b.ReportAllocs()
	var r ChatRequest
	var q engine.Request
	for range b.N {
		if err := DecodeChatRequest(typicalChatBody, &r); err != nil {
			b.Fatal(err)
		}
		q = engine.Request{Messages: q.Messages[:0]}
		if err := r.ToEngine(&q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompletionAppendDelta(b *testing.B) {
	f := NewCompletionFormatter("cmpl-0123456789abcdef", "meta-llama/Llama-3.1-8B", 1767225600, CompletionStreamOptions{})
	d := engine.Delta{Text: []byte(" world"), TokenIDs: []int{1917}}
	buf := f.AppendDelta(make([]byte, 0, 4096), &d)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for range b.N {
		buf = f.AppendDelta(buf[:0], &d)
	}
}
