package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// Chat completions and completions, end to end with openai-go: every
// parameter real clients send, streamed and not.

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Get the weather of a city."),
	Parameters: shared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string"},
			"unit": map[string]any{"type": "string", "enum": []string{"c", "f"}},
		},
		"required": []string{"city", "unit"},
	},
})

func userMsg(s string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}
}

// checkWeatherArgs checks a call's arguments: valid JSON with the required
// properties of weatherTool.
func checkWeatherArgs(t *testing.T, name, args string) {
	t.Helper()
	if name != "get_weather" {
		t.Fatalf("called %q", name)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", args, err)
	}
	if _, ok := v["city"].(string); !ok {
		t.Fatalf("arguments %s lack city", args)
	}
	if _, ok := v["unit"].(string); !ok {
		t.Fatalf("arguments %s lack unit", args)
	}
}

func TestChatParametersNonStreaming(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:               vajra.DefaultModelName,
		Messages:            userMsg(question),
		N:                   openai.Int(2),
		Seed:                openai.Int(7),
		Temperature:         openai.Float(0.8),
		TopP:                openai.Float(0.9),
		MaxCompletionTokens: openai.Int(12),
		Logprobs:            openai.Bool(true),
		TopLogprobs:         openai.Int(5),
		User:                openai.String("user-1"),
		Metadata:            shared.Metadata{"k": "v"},
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"\n\n\n"}},
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 2 {
		t.Fatalf("choices: %d, want 2", len(res.Choices))
	}
	for i, c := range res.Choices {
		if c.Index != int64(i) || c.FinishReason != "length" || c.Message.Content == "" {
			t.Fatalf("choice %d: index %d finish %q content %q", i, c.Index, c.FinishReason, c.Message.Content)
		}
		if len(c.Logprobs.Content) != 12 {
			t.Fatalf("choice %d: %d logprobs, want 12", i, len(c.Logprobs.Content))
		}
		for _, lp := range c.Logprobs.Content {
			if len(lp.TopLogprobs) != 5 {
				t.Fatalf("top_logprobs: %d, want 5", len(lp.TopLogprobs))
			}
			if !sort.SliceIsSorted(lp.TopLogprobs, func(a, b int) bool { return lp.TopLogprobs[a].Logprob > lp.TopLogprobs[b].Logprob }) {
				t.Fatalf("top_logprobs not sorted: %+v", lp.TopLogprobs)
			}
		}
	}
	if res.Usage.CompletionTokens != 24 {
		t.Errorf("completion_tokens %d, want 24 (2 choices × 12)", res.Usage.CompletionTokens)
	}
}

func TestChatStreamNChoicesAccumulate(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         vajra.DefaultModelName,
		Messages:      userMsg(question),
		N:             openai.Int(3),
		MaxTokens:     openai.Int(10),
		Logprobs:      openai.Bool(true),
		TopLogprobs:   openai.Int(20),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true), option.WithJSONSet("stream_options.continuous_usage_stats", true))
	// The accumulator sums the usage of every chunk, so with
	// continuous_usage_stats its usage is not the total: take the last
	// chunk's (the include_usage chunk) instead.
	var acc openai.ChatCompletionAccumulator
	var usage openai.CompletionUsage
	finishes := map[int64]int{}
	roles := map[int64]int{}
	continuous := 0
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator refused %s", chunk.RawJSON())
		}
		if len(chunk.Choices) > 0 && chunk.Usage.CompletionTokens > 0 {
			continuous++
		}
		usage = chunk.Usage
		for _, c := range chunk.Choices {
			if c.FinishReason != "" {
				finishes[c.Index]++
			}
			if c.Delta.Role == "assistant" {
				roles[c.Index]++
			}
			for _, lp := range c.Logprobs.Content {
				if len(lp.TopLogprobs) != 20 {
					t.Fatalf("streamed top_logprobs %d, want 20", len(lp.TopLogprobs))
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 3 {
		t.Fatalf("accumulated %d choices", len(acc.Choices))
	}
	for i := range int64(3) {
		if finishes[i] != 1 || roles[i] != 1 {
			t.Errorf("choice %d: %d finish reasons, %d role deltas; want 1 and 1", i, finishes[i], roles[i])
		}
	}
	if usage.CompletionTokens != 30 || usage.TotalTokens != usage.PromptTokens+30 {
		t.Errorf("usage %+v", usage)
	}
	if continuous == 0 {
		t.Errorf("continuous_usage_stats: no chunk with choices carried usage")
	}
}

func TestChatToolCalls(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	choices := map[string]openai.ChatCompletionToolChoiceOptionUnionParam{
		"required": {OfAuto: openai.String("required")},
		"named":    openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
	}
	for name, choice := range choices {
		params := openai.ChatCompletionNewParams{
			Model:             vajra.DefaultModelName,
			Messages:          userMsg("What is the weather in Paris?"),
			Tools:             []openai.ChatCompletionToolUnionParam{weatherTool},
			ToolChoice:        choice,
			ParallelToolCalls: openai.Bool(false),
			MaxTokens:         openai.Int(200),
		}
		t.Run(name+"/non-stream", func(t *testing.T) {
			res, err := client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Choices[0]
			if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("finish %q, calls %+v", c.FinishReason, c.Message.ToolCalls)
			}
			tc := c.Message.ToolCalls[0]
			if tc.ID == "" {
				t.Fatal("call without id")
			}
			checkWeatherArgs(t, tc.Function.Name, tc.Function.Arguments)
		})
		t.Run(name+"/stream", func(t *testing.T) {
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			sawCall := false
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("accumulator refused %s", stream.Current().RawJSON())
				}
				if tc, ok := acc.JustFinishedToolCall(); ok {
					sawCall = true
					checkWeatherArgs(t, tc.Name, tc.Arguments)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			c := acc.Choices[0]
			if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("finish %q, calls %+v", c.FinishReason, c.Message.ToolCalls)
			}
			checkWeatherArgs(t, c.Message.ToolCalls[0].Function.Name, c.Message.ToolCalls[0].Function.Arguments)
			_ = sawCall // JustFinishedToolCall fires only when a later chunk follows the call
		})
	}
}

func TestChatResponseFormatAndReasoning(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"answer": map[string]any{"type": "string"}, "score": map[string]any{"type": "integer"}},
		"required":   []string{"answer", "score"},
	}
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     vajra.DefaultModelName,
		Messages:  userMsg(question),
		MaxTokens: openai.Int(300),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: schema, Strict: openai.Bool(true)},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &v); err != nil || v["answer"] == nil || v["score"] == nil {
		t.Fatalf("json_schema answer %q: %v", res.Choices[0].Message.Content, err)
	}

	// reasoning_effort: reasoning_content deltas before the answer, and
	// reasoning tokens in the usage.
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:           vajra.DefaultModelName,
		Messages:        userMsg(question),
		MaxTokens:       openai.Int(400),
		ReasoningEffort: shared.ReasoningEffortLow,
		StreamOptions:   openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var reasoning, content strings.Builder
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok && f.Raw() != "null" {
				var s string
				_ = json.Unmarshal([]byte(f.Raw()), &s)
				if content.Len() > 0 {
					t.Fatalf("reasoning after content")
				}
				reasoning.WriteString(s)
			}
			content.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.Len() == 0 {
		t.Fatal("no reasoning_content deltas")
	}
	if acc.Usage.CompletionTokensDetails.ReasoningTokens == 0 || acc.Usage.CompletionTokensDetails.ReasoningTokens >= acc.Usage.CompletionTokens {
		t.Errorf("usage %+v: want 0 < reasoning_tokens < completion_tokens", acc.Usage)
	}

	// vLLM's include_reasoning false: the same answer without its
	// reasoning, streamed and not; the usage still counts it.
	p := openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg(question), MaxTokens: openai.Int(400),
		ReasoningEffort: shared.ReasoningEffortLow, Temperature: openai.Float(0), Seed: openai.Int(7)}
	shown, err := client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown.RawJSON(), "reasoning_content") || shown.Choices[0].Message.Content == "" {
		t.Fatalf("greedy with reasoning: %s", shown.RawJSON())
	}
	content.Reset()
	content.WriteString(shown.Choices[0].Message.Content)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	hide := option.WithJSONSet("include_reasoning", false)
	s2 := client.Chat.Completions.NewStreaming(context.Background(), p, hide)
	var hidden openai.ChatCompletionAccumulator
	for s2.Next() {
		chunk := s2.Current()
		hidden.AddChunk(chunk)
		if strings.Contains(chunk.RawJSON(), "reasoning_content") {
			t.Fatalf("include_reasoning false streamed reasoning: %s", chunk.RawJSON())
		}
	}
	if err := s2.Err(); err != nil {
		t.Fatal(err)
	}
	if hidden.Choices[0].Message.Content != content.String() || hidden.Usage.CompletionTokensDetails.ReasoningTokens == 0 {
		t.Errorf("include_reasoning false, streamed: %q (usage %+v); with reasoning %q", hidden.Choices[0].Message.Content, hidden.Usage, content.String())
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	whole, err := client.Chat.Completions.New(context.Background(), p, hide)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(whole.RawJSON(), "reasoning_content") || whole.Choices[0].Message.Content != content.String() {
		t.Errorf("include_reasoning false: %s", whole.RawJSON())
	}

	// With return_token_ids and logprobs, include_reasoning false hides
	// the generated tokens' ids and logprobs too (they would show the
	// reasoning), streamed and not, as vLLM does behind a parser; the
	// prompt's ids stay. Shown, they are there (the same request without
	// include_reasoning false).
	meta := []option.RequestOption{option.WithJSONSet("return_token_ids", true)}
	p.Logprobs = openai.Bool(true)
	for _, hideIt := range []bool{false, true} {
		opts := meta
		if hideIt {
			opts = append(slices.Clone(meta), hide)
		}
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s3 := client.Chat.Completions.NewStreaming(context.Background(), p, opts...)
		var ids, lps, prompt int
		for s3.Next() {
			chunk := s3.Current()
			if _, ok := chunk.JSON.ExtraFields["prompt_token_ids"]; ok {
				prompt++
			}
			for _, c := range chunk.Choices {
				if f, ok := c.JSON.ExtraFields["token_ids"]; ok && f.Raw() != "[]" {
					ids++
				}
				lps += len(c.Logprobs.Content)
			}
		}
		if err := s3.Err(); err != nil {
			t.Fatal(err)
		}
		if prompt != 1 || (!hideIt && (ids == 0 || lps == 0)) || (hideIt && (ids > 0 || lps > 0)) {
			t.Errorf("include_reasoning hidden %v, streamed: %d chunks with prompt_token_ids, %d with token_ids, %d logprobs", hideIt, prompt, ids, lps)
		}
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
		body, err := client.Chat.Completions.New(context.Background(), p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, hasIDs := body.Choices[0].JSON.ExtraFields["token_ids"]
		_, hasPrompt := body.JSON.ExtraFields["prompt_token_ids"]
		if !hasPrompt || hasIDs == hideIt || (len(body.Choices[0].Logprobs.Content) == 0) == !hideIt ||
			body.Choices[0].Message.Content != content.String() {
			t.Errorf("include_reasoning hidden %v: %s", hideIt, body.RawJSON())
		}
	}
}

func TestChatCachedTokens(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	long := strings.Repeat("The sea is wide and deep and blue. ", 40)
	var cached []int64
	for range 2 {
		res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: vajra.DefaultModelName, Messages: userMsg(long), MaxTokens: openai.Int(2),
		})
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, res.Usage.PromptTokensDetails.CachedTokens)
	}
	if cached[0] != 0 || cached[1] == 0 {
		t.Errorf("cached_tokens of two identical prompts: %v, want 0 then > 0", cached)
	}
}

func TestCompletionsPromptForms(t *testing.T) {
	srv, _, base := startServer(t, nil)
	client := newClient(base)
	ids := srv.Engine().Tokenize("Once upon a time")
	forms := map[string]openai.CompletionNewParamsPromptUnion{
		"string":       {OfString: openai.String("Once upon a time")},
		"strings":      {OfArrayOfStrings: []string{"Once upon a time"}},
		"tokens":       {OfArrayOfTokens: toInt64(ids)},
		"token-arrays": {OfArrayOfTokenArrays: [][]int64{toInt64(ids)}},
	}
	for name, prompt := range forms {
		t.Run(name, func(t *testing.T) {
			res, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
				Model: openai.CompletionNewParamsModel(vajra.DefaultModelName), Prompt: prompt,
				MaxTokens: openai.Int(5), Seed: openai.Int(1),
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Choices) != 1 || res.Choices[0].Text == "" {
				t.Fatalf("choices %+v", res.Choices)
			}
			if res.Usage.PromptTokens != int64(len(ids)) {
				t.Errorf("prompt_tokens %d, want %d", res.Usage.PromptTokens, len(ids))
			}
		})
	}
}

func toInt64(ids []int) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestCompletionsEchoLogprobs is lm-eval's scoring call: echo, logprobs 1,
// max_tokens 1, temperature 0; it reads the prompt's token_logprobs.
func TestCompletionsEchoLogprobs(t *testing.T) {
	srv, _, base := startServer(t, nil)
	client := newClient(base)
	const prompt = "The capital of France is Paris"
	res, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: openai.CompletionNewParamsModel(vajra.DefaultModelName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		Echo: openai.Bool(true), Logprobs: openai.Int(1), MaxTokens: openai.Int(1), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Choices[0]
	if !strings.HasPrefix(c.Text, prompt) {
		t.Fatalf("echo: text %q", c.Text)
	}
	n := len(srv.Engine().Tokenize(prompt))
	lp := c.Logprobs
	// The first prompt token's entries are null, as OpenAI renders them;
	// openai-go then drops the typed top_logprobs, so read the raw JSON.
	var top []map[string]float64
	if err := json.Unmarshal([]byte(lp.JSON.TopLogprobs.Raw()), &top); err != nil {
		t.Fatal(err)
	}
	if len(lp.Tokens) != n+1 || len(lp.TokenLogprobs) != n+1 || len(top) != n+1 || len(lp.TextOffset) != n+1 {
		t.Fatalf("logprobs for %d prompt tokens + 1: tokens %d token_logprobs %d top %d offsets %d",
			n, len(lp.Tokens), len(lp.TokenLogprobs), len(top), len(lp.TextOffset))
	}
	if strings.Join(lp.Tokens[:n], "") != prompt || top[0] != nil {
		t.Fatalf("prompt tokens %q, first top %v", lp.Tokens[:n], top[0])
	}
	for i := 1; i <= n; i++ {
		if len(top[i]) != 1 {
			t.Errorf("top_logprobs[%d] = %v, want 1 entry", i, top[i])
		}
	}
}

func TestCompletionsStreamingNStopUsage(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	stream := client.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:         openai.CompletionNewParamsModel(vajra.DefaultModelName),
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		N:             openai.Int(2),
		MaxTokens:     openai.Int(8),
		Logprobs:      openai.Int(3),
		Stop:          openai.CompletionNewParamsStopUnion{OfString: openai.String("\u0000never")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true))
	text := map[int64]string{}
	finishes := map[int64]string{}
	var usage openai.CompletionUsage
	id := ""
	for stream.Next() {
		c := stream.Current()
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Fatalf("chunk id %q, want %q", c.ID, id)
		}
		for _, ch := range c.Choices {
			text[ch.Index] += ch.Text
			if ch.FinishReason != "" {
				if finishes[ch.Index] != "" {
					t.Fatalf("choice %d finished twice", ch.Index)
				}
				finishes[ch.Index] = string(ch.FinishReason)
			}
			for _, top := range ch.Logprobs.TopLogprobs {
				if len(top) > 3 {
					t.Fatalf("top_logprobs %v: more than 3", top)
				}
			}
		}
		if c.JSON.Usage.Valid() && c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range int64(2) {
		if text[i] == "" || finishes[i] != "length" {
			t.Errorf("choice %d: text %q finish %q", i, text[i], finishes[i])
		}
	}
	if usage.CompletionTokens != 16 || usage.TotalTokens != usage.PromptTokens+16 {
		t.Errorf("usage %+v", usage)
	}
}

func TestCompletionsSuffixRefused(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	_, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(vajra.DefaultModelName),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("def f(")},
		Suffix: openai.String("return x"),
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "suffix" {
		t.Fatalf("suffix: %v", err)
	}
}

// engineMessages is a shorthand for one user turn.
func engineMessages(s string) []engine.Message { return []engine.Message{{Role: "user", Content: s}} }

// TestUnknownFieldsAccepted: a field no dialect knows is accepted (and
// counted), in every dialect, as vLLM does.
func TestUnknownFieldsAccepted(t *testing.T) {
	_, _, base := startServer(t, nil)
	for path, body := range map[string]string{
		"/v1/chat/completions":        `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"frobnicate":{"x":[1]}}`,
		"/v1/completions":             `{"model":"vajra-sim","prompt":"hi","max_tokens":2,"frobnicate":1}`,
		"/v1/responses":               `{"model":"vajra-sim","input":"hi","max_output_tokens":2,"frobnicate":true}`,
		"/v1/messages":                `{"model":"vajra-sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"frobnicate":null}`,
		"/v1/messages/count_tokens":   `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"frobnicate":"x"}`,
		"/openai/v1/chat/completions": `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
	} {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
}

// TestCompletionsBatch: several prompts in one request, as lm-eval sends
// them: prompt k's choices are k*n … k*n+n-1, the usage is the sum.
func TestCompletionsBatch(t *testing.T) {
	srv, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	prompts := []string{"Once upon a time", "The capital of France is Paris"}
	lens := []int{len(srv.Engine().Tokenize(prompts[0])), len(srv.Engine().Tokenize(prompts[1]))}

	t.Run("non-stream echo logprobs", func(t *testing.T) {
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: vajra.DefaultModelName, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts},
			Echo: openai.Bool(true), Logprobs: openai.Int(1), MaxTokens: openai.Int(1), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Choices) != 2 || res.Usage.PromptTokens != int64(lens[0]+lens[1]) || res.Usage.CompletionTokens != 2 {
			t.Fatalf("choices %d usage %+v", len(res.Choices), res.Usage)
		}
		for k, c := range res.Choices {
			if c.Index != int64(k) || !strings.HasPrefix(c.Text, prompts[k]) || len(c.Logprobs.Tokens) != lens[k]+1 {
				t.Fatalf("choice %d: index %d text %q tokens %d", k, c.Index, c.Text, len(c.Logprobs.Tokens))
			}
		}
	})
	t.Run("token arrays n=2", func(t *testing.T) {
		ids := [][]int64{toInt64(srv.Engine().Tokenize(prompts[0])), toInt64(srv.Engine().Tokenize(prompts[1]))}
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: vajra.DefaultModelName, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: ids},
			N: openai.Int(2), MaxTokens: openai.Int(3),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Choices) != 4 || res.Usage.CompletionTokens != 12 {
			t.Fatalf("choices %d usage %+v", len(res.Choices), res.Usage)
		}
		for i, c := range res.Choices {
			if c.Index != int64(i) || c.Text == "" {
				t.Fatalf("choice %d: %+v", i, c)
			}
		}
	})
	t.Run("stream", func(t *testing.T) {
		stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model: vajra.DefaultModelName, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts},
			N: openai.Int(2), MaxTokens: openai.Int(4), Echo: openai.Bool(true),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithJSONSet("ignore_eos", true))
		text := map[int64]string{}
		finishes := map[int64]int{}
		var usage openai.CompletionUsage
		for stream.Next() {
			c := stream.Current()
			for _, ch := range c.Choices {
				text[ch.Index] += ch.Text
				if ch.FinishReason != "" {
					finishes[ch.Index]++
				}
			}
			if c.Usage.TotalTokens > 0 {
				usage = c.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		for i := range int64(4) {
			if finishes[i] != 1 || !strings.HasPrefix(text[i], prompts[i/2]) || len(text[i]) == len(prompts[i/2]) {
				t.Errorf("choice %d: %d finishes, text %q", i, finishes[i], text[i])
			}
		}
		if usage.CompletionTokens != 16 || usage.PromptTokens != int64(2*(lens[0]+lens[1])) && usage.PromptTokens != int64(lens[0]+lens[1]) {
			t.Errorf("usage %+v", usage)
		}
	})
	t.Run("one prompt too long", func(t *testing.T) {
		_, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:  vajra.DefaultModelName,
			Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"hi", strings.Repeat("sea ", 9000)}},
		})
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
			t.Fatalf("%v", err)
		}
	})
}

// TestCompletionsBatchDisconnect: a client that leaves aborts every
// prompt's engine session.
func TestCompletionsBatchDisconnect(t *testing.T) {
	_, obs, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 5 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"vajra-sim","prompt":["a","b","c"],"max_tokens":4000,"ignore_eos":true,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for tokens := 0; tokens < 6; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"text":`) {
			tokens++
		}
	}
	if got := obs.Stats().Running; got != 3 {
		t.Fatalf("running sequences mid-stream = %d, want 3", got)
	}
	conn.Close()
	for range 3 {
		select {
		case res := <-obs.finals:
			if res.Err == nil || res.Err.Kind != engine.KindAborted {
				t.Fatalf("final after disconnect: %+v, want aborted", res.Err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("prompt not aborted after the client left")
		}
	}
}

// TestChatSeedAndStop: a seed makes the answer reproducible, and a stop
// string taken from that answer ends it there ("stop", string trimmed).
func TestChatSeedAndStop(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: vajra.DefaultModelName, Messages: userMsg(question), Seed: openai.Int(1234),
		Temperature: openai.Float(1), MaxTokens: openai.Int(30),
	}
	a, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	text := a.Choices[0].Message.Content
	if text != b.Choices[0].Message.Content {
		t.Fatalf("same seed, different answers: %q, %q", text, b.Choices[0].Message.Content)
	}
	words := strings.Fields(text)
	if len(words) < 4 {
		t.Fatalf("answer too short to cut (the seeded simulator answers alike every run: change the prompt): %q", text)
	}
	stop := " " + words[3]
	cut := text[:strings.Index(text, stop)]
	params.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(stop)}
	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Choices[0]; got.Message.Content != cut || got.FinishReason != "stop" {
		t.Fatalf("with stop %q: %q (%s), want %q (stop)", stop, got.Message.Content, got.FinishReason, cut)
	}
}

// TestRequestID: vLLM's request_id names the response ("chatcmpl-" or
// "cmpl-" and it), in every chunk of a stream too, and the client's
// X-Request-Id before it; without either each response gets an id of its
// own.
func TestRequestID(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	rid := option.WithJSONSet("request_id", "job-7/step 3")
	p := openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg(question), MaxTokens: openai.Int(4)}
	res, err := client.Chat.Completions.New(ctx, p, rid)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "chatcmpl-job-7/step 3" {
		t.Errorf("chat id %q", res.ID)
	}
	s := client.Chat.Completions.NewStreaming(ctx, p, rid)
	n := 0
	for s.Next() {
		if id := s.Current().ID; id != "chatcmpl-job-7/step 3" {
			t.Errorf("chunk id %q", id)
		}
		n++
	}
	if err := s.Err(); err != nil || n == 0 {
		t.Fatalf("%d chunks, %v", n, err)
	}
	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(vajra.DefaultModelName),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")}, MaxTokens: openai.Int(4)}, rid)
	if err != nil {
		t.Fatal(err)
	}
	if comp.ID != "cmpl-job-7/step 3" {
		t.Errorf("completion id %q", comp.ID)
	}
	// The client's X-Request-Id names it first, as in vLLM.
	hdr, err := client.Chat.Completions.New(ctx, p, rid, option.WithHeader("X-Request-Id", "trace-42"))
	if err != nil {
		t.Fatal(err)
	}
	if hdr.ID != "chatcmpl-trace-42" {
		t.Errorf("chat id with X-Request-Id: %q", hdr.ID)
	}
	a, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || !strings.HasPrefix(a.ID, "chatcmpl-") {
		t.Errorf("ids without request_id: %q, %q", a.ID, b.ID)
	}
}

// TestReturnTokenIDsBatch: a batch of prompts on /v1/completions with
// vLLM's return_token_ids gives each choice its own prompt's ids, streamed
// (on each choice's first chunk) and not.
func TestReturnTokenIDsBatch(t *testing.T) {
	srv, _, base := startServer(t, nil)
	eng := srv.Engine()
	prompts := []string{"The sea is", "Mountains are tall and"}
	body := map[string]any{"model": vajra.DefaultModelName, "prompt": prompts, "max_tokens": 3, "n": 2,
		"temperature": 0, "return_token_ids": true}
	want := func(i int) []int { return eng.Tokenize(prompts[i/2]) }
	var res tokenIDsBody
	postJSON(t, base+"/v1/completions", body, &res)
	if len(res.Choices) != 4 {
		t.Fatalf("%d choices", len(res.Choices))
	}
	for i, c := range res.Choices {
		if !slices.Equal(c.PromptTokenIDs, want(i)) || len(c.TokenIDs) != 3 {
			t.Errorf("choice %d: prompt_token_ids %v (want %v), token_ids %v", i, c.PromptTokenIDs, want(i), c.TokenIDs)
		}
	}
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prompt := map[int][][]int{}
	ids := map[int][]int{}
	err = sseEvents(resp.Body, func(_, data string) bool {
		if data == "[DONE]" {
			return true
		}
		var ch struct {
			Choices []struct {
				Index          int   `json:"index"`
				TokenIDs       []int `json:"token_ids"`
				PromptTokenIDs []int `json:"prompt_token_ids"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		for _, c := range ch.Choices {
			ids[c.Index] = append(ids[c.Index], c.TokenIDs...)
			if c.PromptTokenIDs != nil {
				prompt[c.Index] = append(prompt[c.Index], c.PromptTokenIDs)
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if len(prompt[i]) != 1 || !slices.Equal(prompt[i][0], want(i)) || !slices.Equal(ids[i], res.Choices[i].TokenIDs) {
			t.Errorf("streamed choice %d: prompt_token_ids %v (want %v once), token_ids %v (not streamed %v)", i, prompt[i], want(i), ids[i], res.Choices[i].TokenIDs)
		}
	}
}

// TestRequestStreamInterval: vLLM's per-request stream_interval batches
// a stream's tokens into fewer chunks (the text the same), and raises the
// server's --stream-interval, never lowers it.
func TestRequestStreamInterval(t *testing.T) {
	count := func(base string, interval int) (int, string) {
		t.Helper()
		client := newClient(base)
		p := openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg(question), MaxTokens: openai.Int(24),
			Temperature: openai.Float(0), Seed: openai.Int(3)}
		var opts []option.RequestOption
		opts = append(opts, option.WithJSONSet("ignore_eos", true))
		if interval > 0 {
			opts = append(opts, option.WithJSONSet("stream_interval", interval))
		}
		s := client.Chat.Completions.NewStreaming(context.Background(), p, opts...)
		n, text := 0, ""
		for s.Next() {
			for _, c := range s.Current().Choices {
				if c.Delta.Content != "" {
					n++
					text += c.Delta.Content
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return n, text
	}
	_, _, base := startServer(t, nil)
	each, text := count(base, 0)
	four, text4 := count(base, 4)
	if text4 != text || each < 12 || four > 24/4+1 || four < 2 {
		t.Fatalf("24 tokens: %d content chunks by default, %d with stream_interval 4 (text same: %v)", each, four, text4 == text)
	}
	// A server at --stream-interval 8: a request's 2 does not lower it.
	_, _, slow := startServer(t, func(c *vajra.Config) { c.EngineConfig.StreamInterval = 8 })
	if two, _ := count(slow, 2); two > 24/8+1 {
		t.Fatalf("server interval 8, request 2: %d content chunks for 24 tokens", two)
	}
}
