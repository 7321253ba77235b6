package integration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// panicky is an engine that panics inside Start when the prompt asks it to:
// Start runs in the session actor, so the panic is a session failure.
type panicky struct{ engine.Engine }

func (p panicky) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "PANIC") {
			panic("engine exploded")
		}
	}
	return p.Engine.Start(req, sink)
}

// TestSessionFailureEndsOnlyThatRequest: a panic in one session ends that
// request with a 500 in the OpenAI shape (its supervisor stops it, never
// restarts it) and the server goes on serving.
func TestSessionFailureEndsOnlyThatRequest(t *testing.T) {
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine { return panicky{e} })
	client := newClient(base)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    vajra.DefaultModelName,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("PANIC now")},
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Fatalf("failed session answered %v, want a 500 server_error", err)
	}
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     vajra.DefaultModelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxTokens: openai.Int(4),
	})
	if err != nil || len(res.Choices) != 1 {
		t.Fatalf("server after a failed session: %v", err)
	}
}
