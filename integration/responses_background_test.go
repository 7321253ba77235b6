package integration_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// The Responses API's stored statuses and background mode with openai-go:
// failed and incomplete responses are stored; background responses run
// after their HTTP exchange, are polled, resumed and cancelled. The
// failing engine is errors_test.go's failingEngine.

// TestResponsesFailedAndIncompleteStored: a response that fails after its
// stream opened is stored with status failed and its error; one cut short
// by max_output_tokens is stored incomplete with incomplete_details.
func TestResponsesFailedAndIncompleteStored(t *testing.T) {
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine { return failingEngine{e} })
	client := newClient(base)
	ctx := context.Background()

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(failMidStream),
	})
	var id, last string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		last = ev.Type
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if id == "" || last != "response.failed" {
		t.Fatalf("stream: id %q, last event %q", id, last)
	}
	got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseStatusFailed || got.Error.Code != "server_error" || got.Error.Message != "simulated engine failure" {
		t.Fatalf("stored failed response %s", got.RawJSON())
	}

	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseStatusIncomplete || got.IncompleteDetails.Reason != "max_output_tokens" || got.RawJSON() != res.RawJSON() {
		t.Fatalf("stored incomplete response %s\nPOST answered %s", got.RawJSON(), res.RawJSON())
	}
}
