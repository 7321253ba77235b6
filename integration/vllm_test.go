package integration_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/remote/vllm"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// TestVLLMWorker: Vajra in front of a real `vllm serve --grpc` (the CPU
// build `make vllm` installs, on the tiny random-weight Llama with the
// real Llama 3 tokenizer), with no tokenizer of its own (it takes the
// worker's, GetTokenizer), through the official SDKs: every dialect, the
// sampling features vLLM enforces (n, seed, logprobs, logit_bias,
// penalties, structured output, forced tool calls), the ones Vajra does
// (stop strings, the context check), a disconnect reaching vLLM's running
// count, a stalled engine, and a killed and restarted worker. One vLLM
// serves every subtest (its start-up takes a minute or more); the last
// subtests kill it. Skips without the venv, fails with VAJRA_REQUIRE_VLLM
// set.
func TestVLLMWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts vLLM (minutes)")
	}
	vllmserver.Need(t)
	w := vllmserver.Start(t, true)
	c, err := vllm.Dial("vllm://"+w.Addr, vllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Start-up on two shared cores takes minutes.
	w.Wait(t, 15*time.Minute, func() bool { return c.Health(ctx) == nil })
	srv, base := startRemote(t, nil, "vllm://"+w.Addr)
	client := newClient(base)
	running := func(t *testing.T) int {
		t.Helper()
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := c.Load(lctx)
		if err != nil {
			t.Fatalf("vLLM's GetLoads: %v", err)
		}
		return l.Running
	}
	// drained waits (5 s at most) for vLLM's running count to be 0.
	drained := func(t *testing.T, what string) {
		t.Helper()
		eventually.True(t, "vLLM no longer runs "+what, func() bool { return running(t) == 0 })
	}
	greedy := func(maxTokens int64) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0),
		}
	}

	t.Run("Dialects", func(t *testing.T) {
		params := greedy(12)
		whole, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Usage.CompletionTokens != 12 || whole.Usage.PromptTokens == 0 || whole.Choices[0].FinishReason != "length" {
			t.Fatalf("chat: %s", whole.RawJSON())
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got, want := acc.Choices[0].Message.Content, whole.Choices[0].Message.Content; got != want {
			t.Fatalf("streamed %q, not streamed %q", got, want)
		}

		comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(tinyName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")},
			MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		if comp.Usage.CompletionTokens != 8 || comp.Choices[0].Text == "" {
			t.Fatalf("completions: %s", comp.RawJSON())
		}

		res, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != responses.ResponseStatusIncomplete || res.Usage.OutputTokens != 16 || res.OutputText() == "" {
			t.Fatalf("responses: %s", res.RawJSON())
		}

		ac := newAnthropic(base)
		mp := anthropic.MessageNewParams{Model: tinyName, MaxTokens: 8, Messages: userText(question)}
		msg, err := ac.Messages.New(ctx, mp, aoption.WithJSONSet("temperature", 0))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Usage.OutputTokens != 8 || msg.StopReason != anthropic.StopReasonMaxTokens || len(msg.Content) == 0 {
			t.Fatalf("messages: %s", msg.RawJSON())
		}
		ms := ac.Messages.NewStreaming(ctx, mp, aoption.WithJSONSet("temperature", 0))
		var streamed anthropic.Message
		for ms.Next() {
			if err := streamed.Accumulate(ms.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := ms.Err(); err != nil {
			t.Fatal(err)
		}
		if len(streamed.Content) == 0 || streamed.Content[0].Text != msg.Content[0].Text || streamed.StopReason != anthropic.StopReasonMaxTokens {
			t.Fatalf("messages streamed %+v, not streamed %s", streamed, msg.RawJSON())
		}
	})

	t.Run("NSeedLogprobs", func(t *testing.T) {
		// Sampled (temperature 1) with a seed: two choices that differ,
		// the same two again for the same seed, each token with its
		// logprob and two alternatives.
		params := openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(8), Temperature: openai.Float(1),
			N: openai.Int(2), Seed: openai.Int(7), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
		}
		var got [2][2]string
		for i := range got {
			res, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Choices) != 2 || res.Usage.CompletionTokens != 16 {
				t.Fatalf("%d choices, usage %+v", len(res.Choices), res.Usage)
			}
			for k, ch := range res.Choices {
				got[i][ch.Index] = ch.Message.Content
				lp := ch.Logprobs.Content
				// A token that ends inside a UTF-8 character is held and
				// its logprob given with the next: at most 8 entries.
				if len(lp) == 0 || len(lp) > 8 {
					t.Fatalf("choice %d: %d logprobs for 8 tokens", k, len(lp))
				}
				for _, e := range lp {
					if e.Logprob > 0 || len(e.TopLogprobs) != 2 {
						t.Fatalf("choice %d: logprob %v with %d alternatives", k, e.Logprob, len(e.TopLogprobs))
					}
				}
			}
		}
		if got[0] != got[1] {
			t.Errorf("the same seed sampled %q then %q", got[0], got[1])
		}
		if got[0][0] == got[0][1] {
			t.Errorf("two sampled choices are the same: %q", got[0][0])
		}
	})

	t.Run("StopStrings", func(t *testing.T) {
		// Vajra finds stop strings in the detokenized text (with hold-back
		// while streaming): pick one from the middle of a greedy answer.
		res, err := client.Chat.Completions.New(ctx, greedy(24), greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		full := []rune(res.Choices[0].Message.Content)
		if len(full) < 12 {
			t.Fatalf("a greedy answer of %d characters: %q", len(full), string(full))
		}
		stop := string(full[len(full)/2 : len(full)/2+3])
		want := string(full[:strings.Index(string(full), stop)])
		params := greedy(24)
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{stop}}
		res, err = client.Chat.Completions.New(ctx, params, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		if ch := res.Choices[0]; ch.Message.Content != want || ch.FinishReason != "stop" {
			t.Fatalf("stop %q: %q (%s), want %q", stop, ch.Message.Content, ch.FinishReason, want)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params, greedyEOS...)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if ch := acc.Choices[0]; ch.Message.Content != want || ch.FinishReason != "stop" {
			t.Fatalf("streamed, stop %q: %q (%s), want %q", stop, ch.Message.Content, ch.FinishReason, want)
		}
	})

	t.Run("LogitBias", func(t *testing.T) {
		// +100 on "Hello" (9906 in the Llama 3 vocabulary): every token.
		params := greedy(5)
		params.LogitBias = map[string]int64{"9906": 100}
		res, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0].Message.Content; got != strings.Repeat("Hello", 5) {
			t.Fatalf("logit_bias +100 on Hello: %q", got)
		}
	})

	t.Run("Penalties", func(t *testing.T) {
		// A random-weight model's logits are small: a presence penalty of
		// 2 bans every token already drawn, where greedy alone repeats.
		ids := func(params openai.CompletionNewParams) []string {
			t.Helper()
			res, err := client.Completions.New(ctx, params, greedyEOS...)
			if err != nil {
				t.Fatal(err)
			}
			return res.Choices[0].Logprobs.Tokens
		}
		params := openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(tinyName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")},
			MaxTokens: openai.Int(24), Temperature: openai.Float(0), Logprobs: openai.Int(0),
		}
		if toks := ids(params); !repeats(toks) {
			// Greedy decoding of a fixed model is deterministic: a prompt
			// that stops repeating is a change of the model, not luck.
			t.Fatalf("greedy did not repeat a token in %q: nothing for the penalty to change (pick another prompt)", toks)
		}
		params.PresencePenalty = openai.Float(2)
		if toks := ids(params); repeats(toks) {
			t.Fatalf("presence_penalty 2: a token repeats in %q", toks)
		}
	})

	t.Run("JSONSchema", func(t *testing.T) {
		schema := map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "string", "enum": []string{"yes", "no"}}},
		}
		params := greedy(48)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "verdict", Schema: schema, Strict: openai.Bool(true)},
		}}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Answer string `json:"answer"`
		}
		content := res.Choices[0].Message.Content
		if err := json.Unmarshal([]byte(content), &v); err != nil || (v.Answer != "yes" && v.Answer != "no") || res.Choices[0].FinishReason != "stop" {
			t.Fatalf("json_schema: %q (%s): %v", content, res.Choices[0].FinishReason, err)
		}
	})

	t.Run("ToolChoiceRequired", func(t *testing.T) {
		params := greedy(64)
		params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather",
			Parameters: shared.FunctionParameters{
				"type": "object", "additionalProperties": false, "required": []string{"city"},
				"properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"Paris", "Oslo"}}},
			},
		})}
		params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Choices[0]
		if len(ch.Message.ToolCalls) == 0 || ch.FinishReason != "tool_calls" {
			t.Fatalf("tool_choice required: %s", res.RawJSON())
		}
		fn := ch.Message.ToolCalls[0].Function
		var args struct {
			City string `json:"city"`
		}
		if err := json.Unmarshal([]byte(fn.Arguments), &args); err != nil || fn.Name != "get_weather" || (args.City != "Paris" && args.City != "Oslo") {
			t.Fatalf("tool call %s(%s): %v", fn.Name, fn.Arguments, err)
		}
	})

	t.Run("ContextLength", func(t *testing.T) {
		// vLLM's context is 2,048 tokens (GetModelInfo): refused before
		// the 200, in the dialect's shape.
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(strings.Repeat("hello ", 2100)), MaxTokens: openai.Int(4),
		})
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
			t.Fatalf("a prompt past the context: %v", err)
		}
	})

	t.Run("DisconnectAborts", func(t *testing.T) {
		// A client that leaves mid-stream: Vajra's Abort RPC takes the
		// request off vLLM's running count.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream := client.Chat.Completions.NewStreaming(sctx, greedy(1900), greedyEOS...)
		for i := 0; i < 5 && stream.Next(); i++ {
		}
		if n := running(t); n != 1 {
			t.Fatalf("vLLM runs %d requests while one streams", n)
		}
		cancel()
		stream.Close()
		left := time.Now()
		drained(t, "the request 5 s after its client left")
		t.Logf("vLLM's running count 0 after %v", time.Since(left))
		eventually.True(t, "Vajra's in-flight count back to 0", func() bool { return srv.Engine().Stats().Running == 0 })
	})

	t.Run("StalledEngine", func(t *testing.T) {
		// The engine core stopped (SIGSTOP) mid-stream, the gRPC server
		// still up: Vajra's inter-token timeout ends the stream with an
		// error event and aborts the request, which vLLM drops once the
		// engine runs again (2,000 tokens would take it many seconds).
		_, sbase := startRemote(t, func(cfg *vajra.Config) {
			cfg.Remote.FirstTokenTimeout, cfg.Remote.InterTokenTimeout = time.Minute, time.Second
		}, "vllm://"+w.Addr)
		pid, err := w.EnginePID()
		if err != nil {
			t.Fatal(err)
		}
		sclient := newClient(sbase)
		stream := sclient.Chat.Completions.NewStreaming(ctx, greedy(1900), greedyEOS...)
		for i := 0; i < 3 && stream.Next(); i++ {
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		resumed := false
		resume := func() {
			if !resumed {
				syscall.Kill(pid, syscall.SIGCONT)
				resumed = true
			}
		}
		defer resume()
		for stream.Next() {
		}
		took := time.Since(stopped)
		if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "worker") {
			t.Fatalf("a stalled stream ended with %v", stream.Err())
		}
		if took > 5*time.Second {
			t.Fatalf("the stalled stream ended %v after the stop, with a 1 s inter-token timeout", took)
		}
		resume()
		drained(t, "the stalled request 5 s after its engine resumed")
		t.Logf("stream ended %v after the stop", took)
	})

	t.Run("KilledAndRestarted", func(t *testing.T) {
		// Every stream of a killed worker ends within 2 s with the
		// dialect's error event; /health is 503 until the worker is back
		// on its address, then Vajra serves again.
		killMidStream(t, 2, time.Minute, w.Kill, func() *ssestream.Stream[openai.ChatCompletionChunk] {
			return client.Chat.Completions.NewStreaming(ctx, greedy(1900), greedyEOS...)
		})
		addr := strings.TrimPrefix(base, "http://")
		eventually.True(t, "/health 503 with the worker down", func() bool {
			status, _, _ := get(t, addr, "GET", "/health", "")
			return status == 503
		})
		_, err := client.Chat.Completions.New(ctx, greedy(4))
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != 503 {
			t.Fatalf("chat with the worker down: %v", err)
		}
		w.Restart(t)
		w.Wait(t, 15*time.Minute, func() bool { return c.Health(ctx) == nil })
		back := time.Now()
		eventually.True(t, "Vajra healthy after the restart", func() bool { return srv.Engine().Stats().Healthy })
		t.Logf("healthy %v after the worker came back", time.Since(back))
		res, err := client.Chat.Completions.New(ctx, greedy(4))
		if err != nil || res.Usage.CompletionTokens != 4 {
			t.Fatalf("after the restart: %v", err)
		}
	})
}

// repeats says whether a token occurs twice.
func repeats(toks []string) bool {
	seen := map[string]bool{}
	for _, s := range toks {
		if seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}
