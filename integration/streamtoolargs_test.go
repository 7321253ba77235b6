package integration_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// Tool-call arguments stream as they are generated (tool_choice required
// and named, under the grammar that forces the call), through the
// in-process llama.cpp engine and each dialect's official SDK: the
// accumulated call equals the non-streamed one (greedy, so the same
// tokens) and its arguments came in more than one delta. The tiny model's
// random weights often never close the arguments' JSON: each test takes
// the first of a fixed list of prompts whose greedy answer is a call.

var toolPrompts = []string{"Weather in Rome?", "Weather in Oslo?", "Weather in Lima?", "Call something.", "Use the tool."}

// The schema bounds the city's length, so that the grammar closes the
// string and the object soon even under random weights.
var shortWeather = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string", "maxLength": 6},
		"unit": map[string]any{"type": "string", "enum": []string{"c", "f"}},
	},
	"required":             []string{"city", "unit"},
	"additionalProperties": false,
}

func TestLlamaStreamedToolArgsChat(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newClient(base)
	ctx := context.Background()
	for name, choice := range map[string]openai.ChatCompletionToolChoiceOptionUnionParam{
		"required": {OfAuto: openai.String("required")},
		"named":    openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
	} {
		t.Run(name, func(t *testing.T) {
			var params openai.ChatCompletionNewParams
			var want []openai.ChatCompletionMessageToolCallUnion
			for _, prompt := range toolPrompts {
				params = openai.ChatCompletionNewParams{
					Model: tinyName, Messages: userMsg(prompt),
					Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
						Name: "get_weather", Parameters: shortWeather})}, ToolChoice: choice,
					ParallelToolCalls: openai.Bool(false), Temperature: openai.Float(0), MaxTokens: openai.Int(300),
				}
				res, err := client.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				if res.Choices[0].FinishReason == "tool_calls" && len(res.Choices[0].Message.ToolCalls) > 0 {
					want = res.Choices[0].Message.ToolCalls
					break
				}
			}
			if want == nil {
				t.Fatal("no prompt made a call")
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			argDeltas, firsts := 0, 0
			for stream.Next() {
				ck := stream.Current()
				if !acc.AddChunk(ck) {
					t.Fatalf("accumulator refused %s", ck.RawJSON())
				}
				for _, c := range ck.Choices {
					for _, tc := range c.Delta.ToolCalls {
						if tc.ID != "" {
							firsts++
							if tc.Type != "function" || tc.Function.Name == "" {
								t.Fatalf("first delta of a call without type or name: %s", ck.RawJSON())
							}
						} else if tc.Function.Name != "" {
							t.Fatalf("name after the first delta: %s", ck.RawJSON())
						}
						if tc.Function.Arguments != "" {
							argDeltas++
						}
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			got := acc.Choices[0].Message.ToolCalls
			if acc.Choices[0].FinishReason != "tool_calls" || len(got) != len(want) || firsts != len(want) {
				t.Fatalf("streamed %d calls (%d first deltas), non-streamed %d", len(got), firsts, len(want))
			}
			for i := range want {
				if got[i].Function.Name != want[i].Function.Name || got[i].Function.Arguments != want[i].Function.Arguments {
					t.Fatalf("call %d: streamed %s(%s), non-streamed %s(%s)", i, got[i].Function.Name,
						got[i].Function.Arguments, want[i].Function.Name, want[i].Function.Arguments)
				}
				checkWeatherArgs(t, got[i].Function.Name, got[i].Function.Arguments)
			}
			if argDeltas <= len(want) {
				t.Fatalf("%d argument deltas for %d calls", argDeltas, len(want))
			}
		})
	}
}

func TestLlamaStreamedToolArgsResponses(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newClient(base)
	ctx := context.Background()
	tool := responses.ToolParamOfFunction("get_weather", shortWeather, true)
	var params responses.ResponseNewParams
	want := ""
	for _, prompt := range toolPrompts {
		params = responses.ResponseNewParams{
			Model: tinyName, Input: textInput(prompt), MaxOutputTokens: openai.Int(300),
			Temperature: openai.Float(0), Tools: []responses.ToolUnionParam{tool},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
		}
		res, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Output {
			if it.Type == "function_call" && res.Status == "completed" {
				want = it.Arguments.OfString
			}
		}
		if want != "" {
			break
		}
	}
	if want == "" {
		t.Fatal("no prompt made a call")
	}
	stream := client.Responses.NewStreaming(ctx, params)
	var deltas strings.Builder
	n, done, final := 0, "", ""
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			if done != "" {
				t.Fatal("arguments delta after .done")
			}
			deltas.WriteString(ev.Delta)
			n++
		case "response.function_call_arguments.done":
			done = ev.Arguments
		case "response.completed":
			for _, it := range ev.Response.Output {
				if it.Type == "function_call" {
					final = it.Arguments.OfString
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas.String() != want || done != want || final != want {
		t.Fatalf("deltas %q, done %q, completed %q; non-streamed %q", deltas.String(), done, final, want)
	}
	if n < 2 {
		t.Fatalf("%d argument deltas", n)
	}
}

func TestLlamaStreamedToolArgsAnthropic(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newAnthropic(base)
	ctx := context.Background()
	greedy := aoption.WithJSONSet("temperature", 0)
	for name, choice := range map[string]anthropic.ToolChoiceUnionParam{
		"any":  {OfAny: &anthropic.ToolChoiceAnyParam{}},
		"tool": {OfTool: &anthropic.ToolChoiceToolParam{Name: "get_weather"}},
	} {
		t.Run(name, func(t *testing.T) {
			var params anthropic.MessageNewParams
			var want *anthropic.ContentBlockUnion
			for _, prompt := range toolPrompts {
				params = anthropic.MessageNewParams{
					Model: tinyName, MaxTokens: 300, Messages: userText(prompt),
					Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
						InputSchema: anthropic.ToolInputSchemaParam{Properties: shortWeather["properties"], Required: []string{"city", "unit"},
							ExtraFields: map[string]any{"additionalProperties": false}}}}}, ToolChoice: choice,
				}
				msg, err := client.Messages.New(ctx, params, greedy)
				if err != nil {
					t.Fatal(err)
				}
				if want = lastToolUse(msg); msg.StopReason == anthropic.StopReasonToolUse && want != nil {
					break
				}
				want = nil
			}
			if want == nil {
				t.Fatal("no prompt made a call")
			}
			stream := client.Messages.NewStreaming(ctx, params, greedy)
			var acc anthropic.Message
			var partial strings.Builder
			n := 0
			for stream.Next() {
				ev := stream.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
				if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
					partial.WriteString(ev.Delta.PartialJSON)
					n++
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			got := lastToolUse(&acc)
			if acc.StopReason != anthropic.StopReasonToolUse || got == nil || got.Name != want.Name {
				t.Fatalf("streamed message %s", acc.RawJSON())
			}
			var a, b, c any
			if json.Unmarshal(got.Input, &a) != nil || json.Unmarshal(want.Input, &b) != nil ||
				json.Unmarshal([]byte(partial.String()), &c) != nil || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(b, c) {
				t.Fatalf("accumulated input %s, partial_json %s, non-streamed %s", got.Input, partial.String(), want.Input)
			}
			if n < 2 {
				t.Fatalf("%d input_json_delta events", n)
			}
		})
	}
}
