package integration_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra"
)

// TestStreamInterval: with --stream-interval N each chunk carries up to N
// tokens (vLLM's option), the usage still counts every token, and the text
// is the same as token by token.
func TestStreamInterval(t *testing.T) {
	const maxTokens, interval = 16, 4
	run := func(every int) (chunks int, text string, completion int64) {
		_, _, base := startServer(t, func(c *vajra.Config) { c.EngineConfig.StreamInterval = every })
		client := newClient(base)
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model:         vajra.DefaultModelName,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
			MaxTokens:     openai.Int(maxTokens),
			Temperature:   openai.Float(0),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithJSONSet("ignore_eos", true))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			c := stream.Current()
			acc.AddChunk(c)
			for _, ch := range c.Choices {
				if ch.Delta.Content != "" {
					chunks++
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return chunks, acc.Choices[0].Message.Content, acc.Usage.CompletionTokens
	}
	oneChunks, oneText, oneUsage := run(0)
	chunks, text, usage := run(interval)
	if oneChunks != maxTokens || chunks != maxTokens/interval {
		t.Errorf("content chunks: %d token by token, %d with interval %d; want %d and %d", oneChunks, chunks, interval, maxTokens, maxTokens/interval)
	}
	if text != oneText || usage != maxTokens || oneUsage != maxTokens {
		t.Errorf("interval changed the output: %q (%d tokens) vs %q (%d tokens)", text, usage, oneText, oneUsage)
	}
}
