package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/remote/vllm"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// TestVLLMWorkerDialects: Vajra in front of a real `vllm serve --grpc`
// (the CPU build `make vllm` installs, on the tiny random-weight Llama with
// the real Llama 3 tokenizer), with no tokenizer of its own (it takes the
// worker's, GetTokenizer), through the official SDKs: chat streamed and
// not (greedy: the two agree), completions, Responses and Messages, each
// with the worker's usage. Skips without the venv, fails with
// VAJRA_REQUIRE_VLLM set.
func TestVLLMWorkerDialects(t *testing.T) {
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
	// Start-up on two cores takes minutes.
	w.Wait(t, 15*time.Minute, func() bool { return c.Health(ctx) == nil })
	_, base := startRemote(t, func(cfg *vajra.Config) { cfg.ServedModelNames = []string{tinyName} }, "vllm://"+w.Addr)
	client := newClient(base)

	params := openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	}
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
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: tinyName, MaxTokens: 8, Messages: userText(question),
	}, aoption.WithJSONSet("temperature", 0))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.OutputTokens != 8 || msg.StopReason != anthropic.StopReasonMaxTokens || len(msg.Content) == 0 {
		t.Fatalf("messages: %s", msg.RawJSON())
	}
}
