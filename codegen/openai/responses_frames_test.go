package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// respScript is one streamed Responses API response as an engine drives it.
type respScript struct {
	name   string
	deltas []engine.Delta
	end    engine.ChoiceEnd
	res    engine.Result
	err    *engine.Error
}

func respDelta(kind engine.DeltaKind, s string) engine.Delta {
	return engine.Delta{Kind: kind, Text: []byte(s), TokenIDs: []int{1}}
}

var respUsage = engine.Usage{PromptTokens: 12, CachedTokens: 4, CompletionTokens: 6, ReasoningTokens: 2}

var respScripts = []respScript{
	{
		name:   "text",
		deltas: []engine.Delta{respDelta(engine.DeltaText, "Hello"), respDelta(engine.DeltaText, ", \"world\"\n<&>")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1},
		res:    engine.Result{Choices: []engine.Choice{{Text: "Hello, \"world\"\n<&>", FinishReason: engine.FinishStop}}, Usage: respUsage},
	},
	{
		name:   "reasoning",
		deltas: []engine.Delta{respDelta(engine.DeltaReasoning, "Think."), respDelta(engine.DeltaReasoning, " Done."), respDelta(engine.DeltaText, "42")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1},
		res:    engine.Result{Choices: []engine.Choice{{Reasoning: "Think. Done.", Text: "42", FinishReason: engine.FinishStop}}, Usage: respUsage},
	},
	{
		name: "tool_call",
		deltas: []engine.Delta{
			respDelta(engine.DeltaText, "Checking."),
			{Kind: engine.DeltaToolCallStart, ToolCallID: "call_abc", ToolName: "get_weather"},
			respDelta(engine.DeltaToolCallArgs, `{"city":`),
			respDelta(engine.DeltaToolCallArgs, `"Paris"}`),
			{Kind: engine.DeltaToolCallStart, ToolCallIndex: 1, ToolName: "get_time"},
			respDelta(engine.DeltaToolCallArgs, `{}`),
		},
		end: engine.ChoiceEnd{FinishReason: engine.FinishToolCalls, StopTokenID: -1},
		res: engine.Result{Choices: []engine.Choice{{Text: "Checking.", FinishReason: engine.FinishToolCalls,
			ToolCalls: []engine.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time", Arguments: `{}`}}}}, Usage: respUsage},
	},
	{
		name:   "length",
		deltas: []engine.Delta{respDelta(engine.DeltaText, "cut sh")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishLength, StopTokenID: -1},
		res:    engine.Result{Choices: []engine.Choice{{Text: "cut sh", FinishReason: engine.FinishLength}}, Usage: respUsage},
	},
	{
		name:   "error",
		deltas: []engine.Delta{respDelta(engine.DeltaText, "partial")},
		err:    &engine.Error{Kind: engine.KindOverloaded, Message: "engine overloaded"},
	},
}

func respTestMeta() ResponseMeta {
	var r ResponsesRequest
	if err := DecodeResponsesRequest([]byte(`{"model":"vajra-test","input":"hi","instructions":"Be brief.",
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],
		"metadata":{"b":"2","a":"1"},"reasoning":{"effort":"low"}}`), &r); err != nil {
		panic(err)
	}
	m := r.Meta("resp_0123abc", 1767225600)
	m.CompletedAt = 1767225601
	return m
}

func respRun(dst []byte, s *respScript, f *ResponsesFormatter) []byte {
	dst = f.AppendStart(dst, &engine.Start{PromptTokens: 12, CachedTokens: 4, N: 1})
	for i := range s.deltas {
		dst = f.AppendDelta(dst, &s.deltas[i])
	}
	if s.err != nil {
		return f.AppendError(dst, s.err)
	}
	dst = f.AppendChoiceEnd(dst, &s.end)
	return f.AppendEnd(dst, &s.res)
}

func TestResponsesStreamGolden(t *testing.T) {
	for i := range respScripts {
		s := &respScripts[i]
		t.Run(s.name, func(t *testing.T) {
			raw := respRun(nil, s, NewResponsesFormatter(respTestMeta(), codegen.FramingRaw))
			checkGolden(t, "responses_"+s.name, raw)
			chunked := respRun(nil, s, NewResponsesFormatter(respTestMeta(), codegen.FramingChunked))
			if got := sseBody(t, chunked, codegen.FramingChunked); !bytes.Equal(got, raw) {
				t.Fatalf("chunked body differs from raw")
			}
		})
	}
}

// respSDKEvents decodes a raw SSE body with openai-go's stream decoder.
func respSDKEvents(t *testing.T, raw []byte) []responses.ResponseStreamEventUnion {
	t.Helper()
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(raw)), nil)
	var evs []responses.ResponseStreamEventUnion
	for stream.Next() {
		evs = append(evs, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go stream: %v", err)
	}
	return evs
}

// TestResponsesStreamSDK decodes every event with openai-go's types and
// checks the protocol WIRE.md describes: sequence numbers from 0, created
// then in_progress first, output_item.added before any event of its index,
// content_part.added before deltas, deltas adding up to .done, and a final
// response equal to the non-streamed one.
func TestResponsesStreamSDK(t *testing.T) {
	for i := range respScripts {
		s := &respScripts[i]
		t.Run(s.name, func(t *testing.T) {
			meta := respTestMeta()
			evs := respSDKEvents(t, respRun(nil, s, NewResponsesFormatter(meta, codegen.FramingRaw)))
			if len(evs) < 3 || evs[0].Type != "response.created" || evs[1].Type != "response.in_progress" {
				t.Fatalf("stream does not open with created, in_progress: %d events", len(evs))
			}
			added := map[int64]bool{}
			parts := map[int64]bool{}
			texts := map[int64]string{}
			for k, ev := range evs {
				if ev.SequenceNumber != int64(k) {
					t.Fatalf("event %d (%s) has sequence_number %d", k, ev.Type, ev.SequenceNumber)
				}
				if ev.AsAny() == nil {
					t.Fatalf("openai-go does not know event %q", ev.Type)
				}
				switch ev.Type {
				case "response.created", "response.in_progress":
					r := ev.Response
					if r.ID != meta.ID || r.Status != "in_progress" || len(r.Output) != 0 || r.Model != "vajra-test" {
						t.Fatalf("%s: %s", ev.Type, ev.RawJSON())
					}
				case "response.output_item.added":
					added[ev.OutputIndex] = true
				case "response.content_part.added":
					parts[ev.OutputIndex] = true
				case "response.output_text.delta", "response.reasoning_text.delta":
					if !parts[ev.OutputIndex] {
						t.Fatalf("%s before content_part.added", ev.Type)
					}
					texts[ev.OutputIndex] += ev.Delta
				case "response.function_call_arguments.delta":
					texts[ev.OutputIndex] += ev.Delta
				case "response.output_text.done", "response.reasoning_text.done":
					if ev.Text != texts[ev.OutputIndex] {
						t.Fatalf("%s text %q, deltas %q", ev.Type, ev.Text, texts[ev.OutputIndex])
					}
				case "response.function_call_arguments.done":
					if ev.Arguments != texts[ev.OutputIndex] {
						t.Fatalf("arguments.done %s, deltas %q", ev.RawJSON(), texts[ev.OutputIndex])
					}
				}
				if strings.HasPrefix(ev.Type, "response.output_") || strings.HasPrefix(ev.Type, "response.content_part") ||
					strings.HasPrefix(ev.Type, "response.reasoning_text") || strings.HasPrefix(ev.Type, "response.function_call") {
					if !added[ev.OutputIndex] {
						t.Fatalf("%s for output %d before output_item.added", ev.Type, ev.OutputIndex)
					}
				}
			}
			last := evs[len(evs)-1]
			final := last.Response
			if s.err != nil {
				if last.Type != "response.failed" || final.Status != "failed" || final.Error.Code != "rate_limit_exceeded" || final.Error.Message != "engine overloaded" {
					t.Fatalf("error stream ends with %s", last.RawJSON())
				}
				return
			}
			var want responses.Response
			body := AppendResponse(nil, BuildResponse(&meta, &s.res))
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatalf("openai-go rejects the response object: %v\n%s", err, body)
			}
			if final.RawJSON() != want.RawJSON() {
				t.Fatalf("final event's response differs from the non-streamed one:\n%s\n%s", final.RawJSON(), want.RawJSON())
			}
			// Every output_item.done carries the item the final response lists.
			for _, ev := range evs {
				if ev.Type == "response.output_item.done" {
					if got, want := ev.Item.RawJSON(), final.Output[ev.OutputIndex].RawJSON(); got != want {
						t.Fatalf("output_item.done %s\nfinal output %s", got, want)
					}
				}
			}
			if got := final.OutputText(); got != s.res.Choices[0].Text {
				t.Fatalf("SDK OutputText() = %q", got)
			}
			if final.Usage.InputTokens != 12 || final.Usage.InputTokensDetails.CachedTokens != 4 || final.Usage.OutputTokens != 6 ||
				final.Usage.OutputTokensDetails.ReasoningTokens != 2 || final.Usage.TotalTokens != 18 {
				t.Fatalf("usage %s", final.Usage.RawJSON())
			}
		})
	}
}

func TestResponsesFormatterReset(t *testing.T) {
	f := NewResponsesFormatter(respTestMeta(), codegen.FramingRaw)
	first := respRun(nil, &respScripts[2], f)
	f.Reset(respTestMeta(), codegen.FramingRaw)
	if again := respRun(nil, &respScripts[2], f); !bytes.Equal(first, again) {
		t.Fatal("a reset formatter writes different bytes")
	}
}

func TestResponsesDeltaAllocs(t *testing.T) {
	f := NewResponsesFormatter(respTestMeta(), codegen.FramingChunked)
	buf := make([]byte, 0, 64<<10)
	for i := range respScripts[:4] {
		s := &respScripts[i]
		f.Reset(respTestMeta(), codegen.FramingChunked)
		buf = respRun(buf[:0], s, f) // warm the formatter's buffers
		f.Reset(respTestMeta(), codegen.FramingChunked)
		buf = f.AppendStart(buf[:0], &engine.Start{})
		allocs := testing.AllocsPerRun(50, func() {
			for j := range s.deltas {
				buf = f.AppendDelta(buf[:0], &s.deltas[j])
			}
			buf = f.AppendChoiceEnd(buf[:0], &s.end)
			f.ended = false
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per stream of deltas", s.name, allocs)
		}
	}
}

func BenchmarkResponsesDelta(b *testing.B) {
	for _, kind := range []struct {
		name string
		kind engine.DeltaKind
	}{{"text", engine.DeltaText}, {"reasoning", engine.DeltaReasoning}, {"tool_args", engine.DeltaToolCallArgs}} {
		b.Run(kind.name, func(b *testing.B) {
			f := NewResponsesFormatter(respTestMeta(), codegen.FramingChunked)
			buf := f.AppendStart(make([]byte, 0, 8192), &engine.Start{})
			d := engine.Delta{Kind: kind.kind, Text: []byte(" token"), TokenIDs: []int{42}}
			buf = f.AppendDelta(buf[:0], &d)
			b.ReportAllocs()
			b.SetBytes(int64(len(f.AppendDelta(buf[:0], &d))))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i&1023 == 0 {
					f.text = f.text[:0] // bound the item's kept text
				}
				buf = f.AppendDelta(buf[:0], &d)
			}
		})
	}
}

// TestResponsesHeldLogprobs: the logprobs of tokens with no text yet (a
// Delta with empty text, which has no event of its own) go with the next
// text's delta, and every token's logprob is in the message's .done, in
// order.
func TestResponsesHeldLogprobs(t *testing.T) {
	lp := func(tok string, p float32) []engine.TokenLogprob {
		return []engine.TokenLogprob{{Token: tok, Logprob: p}}
	}
	f := NewResponsesFormatter(respTestMeta(), codegen.FramingRaw)
	raw := f.AppendStart(nil, &engine.Start{PromptTokens: 12, N: 1})
	for _, d := range []engine.Delta{
		{Kind: engine.DeltaText, Text: []byte("a"), TokenIDs: []int{1}, Logprobs: lp("a", -1)},
		{Kind: engine.DeltaText, TokenIDs: []int{2}, Logprobs: lp("\xc3", -2)},
		{Kind: engine.DeltaText, Text: []byte("é"), TokenIDs: []int{3}, Logprobs: lp("\xa9", -3)},
		{Kind: engine.DeltaText, TokenIDs: []int{4}, Logprobs: lp("<", -4)},
	} {
		raw = f.AppendDelta(raw, &d)
	}
	raw = f.AppendChoiceEnd(raw, &engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1})
	raw = f.AppendEnd(raw, &engine.Result{Choices: []engine.Choice{{Text: "aé", FinishReason: engine.FinishStop}}, Usage: respUsage})
	var deltas [][]float64
	var done []float64
	for _, ev := range respSDKEvents(t, raw) {
		var ps []float64
		for _, l := range ev.Logprobs.OfResponseTextDeltaEventLogprobs {
			ps = append(ps, l.Logprob)
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas = append(deltas, ps)
		case "response.output_text.done":
			done = ps
		}
	}
	if got := fmt.Sprint(deltas, done); got != "[[-1] [-2 -3]] [-1 -2 -3 -4]" {
		t.Fatalf("delta logprobs and .done's: %s", got)
	}
}
