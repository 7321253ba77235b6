package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/vajra-go/vajra"
)

// The Responses API end to end with openai-go: create (streamed and not),
// the store (GET, DELETE, input_items, cancel), previous_response_id.

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

func TestResponsesCreateGetDelete(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:           vajra.DefaultModelName,
		Input:           textInput(question),
		Instructions:    openai.String("Answer briefly."),
		MaxOutputTokens: openai.Int(16),
		Metadata:        shared.Metadata{"k": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ID, "resp_") || res.OutputText() == "" || res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Fatalf("response %s", res.RawJSON())
	}
	if res.Usage.TotalTokens != res.Usage.InputTokens+res.Usage.OutputTokens {
		t.Errorf("usage %+v", res.Usage)
	}
	got, err := client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.RawJSON() != res.RawJSON() {
		t.Fatalf("GET differs from POST:\n%s\n%s", got.RawJSON(), res.RawJSON())
	}
	page, err := client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Type != "message" || page.Data[0].Role != "user" {
		t.Fatalf("input items %s", page.RawJSON())
	}
	if c := page.Data[0].Content.OfInputItemContentList; len(c) != 1 || c[0].Text != question {
		t.Fatalf("input item content %s", page.Data[0].RawJSON())
	}

	// Cancel: only background responses can be; a stored one has finished.
	_, err = client.Responses.Cancel(ctx, res.ID)
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("cancel: %v", err)
	}

	if err := client.Responses.Delete(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { _, err := client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); return err },
		func() error { return client.Responses.Delete(ctx, res.ID) },
		func() error { _, err := client.Responses.Cancel(ctx, res.ID); return err },
		func() error {
			_, err := client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{})
			return err
		},
	} {
		if err := call(); !asError(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Fatalf("after delete: %v, want 404", err)
		}
	}
}

func TestResponsesStoreFalse(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("hi"), MaxOutputTokens: openai.Int(4), Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET of an unstored response: %v", err)
	}
}

func TestResponsesStreamStoredAndChained(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(20),
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
	})
	var final responses.Response
	var text strings.Builder
	seq := int64(0)
	var types []string
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 4 || types[0] != "response.created" || types[1] != "response.in_progress" {
		t.Fatalf("event order %v", types)
	}
	if final.ID == "" || final.Usage.OutputTokens == 0 {
		t.Fatalf("final response %s", final.RawJSON())
	}
	if r := final.Usage.OutputTokensDetails.ReasoningTokens; r == 0 || r > final.Usage.OutputTokens {
		t.Errorf("reasoning_tokens %d of output_tokens %d", r, final.Usage.OutputTokens)
	}
	if final.OutputText() != text.String() {
		t.Fatalf("output_text %q, streamed %q", final.OutputText(), text.String())
	}
	got, err := client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != final.ID || got.OutputText() != final.OutputText() || got.Usage.InputTokens != final.Usage.InputTokens {
		t.Fatalf("stored %s\nstreamed %s", got.RawJSON(), final.RawJSON())
	}

	// The second turn carries the first's input and output.
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("And the ocean?"), MaxOutputTokens: openai.Int(8),
		PreviousResponseID: openai.String(final.ID),
	})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("And the ocean?"), MaxOutputTokens: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.Usage.InputTokens <= final.Usage.InputTokens || second.Usage.InputTokens <= alone.Usage.InputTokens {
		t.Errorf("second turn input_tokens %d, first %d, alone %d: history not replayed",
			second.Usage.InputTokens, final.Usage.InputTokens, alone.Usage.InputTokens)
	}
	if second.PreviousResponseID != final.ID {
		t.Errorf("previous_response_id echo %q", second.PreviousResponseID)
	}

	// An unknown previous id is a 400 naming the parameter.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("x"), PreviousResponseID: openai.String("resp_nope"),
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" || apiErr.Code != "previous_response_not_found" {
		t.Fatalf("unknown previous id: %v", err)
	}
}

func TestResponsesToolCallRoundTrip(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}},
		"required":   []string{"city", "unit"},
	}, true)
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("Weather in Oslo?"), MaxOutputTokens: openai.Int(200),
		Tools:      []responses.ToolUnionParam{tool},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range res.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.CallID == "" {
		t.Fatalf("no function_call in %s", res.RawJSON())
	}
	checkWeatherArgs(t, call.Name, call.Arguments.OfString)

	// Answer the call in a second turn chained to the first.
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, MaxOutputTokens: openai.Int(8), PreviousResponseID: openai.String(res.ID),
		Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			functionCallOutput(call.CallID, `{"temp":3}`),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.Usage.InputTokens <= res.Usage.InputTokens {
		t.Errorf("second turn input %d <= first %d", next.Usage.InputTokens, res.Usage.InputTokens)
	}
}

func TestResponsesTextFormatAndItems(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	schema := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}, "required": []string{"a"}}
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, MaxOutputTokens: openai.Int(200),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("You are terse.", responses.EasyInputMessageRoleDeveloper),
			responses.ResponseInputItemParamOfMessage("Give me JSON.", responses.EasyInputMessageRoleUser),
		}},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("a", schema)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.OutputText()), &v); err != nil || v["a"] == nil {
		t.Fatalf("text.format json_schema: %q %v", res.OutputText(), err)
	}
	// input_items: newest first by default; paging with limit and after.
	page, err := client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{Limit: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || !page.HasMore || page.Data[0].Role != "user" {
		t.Fatalf("first page %s", page.RawJSON())
	}
	page, err = client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{Limit: openai.Int(1), After: param.NewOpt(page.Data[0].ID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.HasMore || page.Data[0].Role != "developer" {
		t.Fatalf("second page %s", page.RawJSON())
	}
	_, err = client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{Limit: openai.Int(1000)})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "limit" {
		t.Fatalf("limit 1000: %v", err)
	}
}

// TestResponsesRoutesNeedNoContentType: the SDK's GET and DELETE send no
// body; the routes must not ask for application/json.
func TestResponsesRoutesNeedNoContentType(t *testing.T) {
	_, _, base := startServer(t, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/responses/resp_x"},
		{"DELETE", "/openai/v1/responses/resp_x"},
		{"POST", "/v1/responses/resp_x/cancel"},
		{"GET", "/v1/responses/resp_x/input_items?limit=2&order=asc"},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(body.Error.Message, "resp_x") {
			t.Errorf("%s %s: %d %q, want 404 naming the id", r.method, r.path, resp.StatusCode, body.Error.Message)
		}
	}
}

func functionCallOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}

var _ = option.WithMaxRetries

// TestResponsesLogprobs: top_logprobs gives each output_text delta its
// tokens' logprobs, and the final output_text part all of them.
func TestResponsesLogprobs(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	const tokens = 6
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(tokens),
		TopLogprobs: openai.Int(3),
		Include:     []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs},
	})
	deltas := 0
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			for _, lp := range ev.AsResponseOutputTextDelta().Logprobs {
				deltas++
				if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[2].Logprob {
					t.Fatalf("delta logprob %+v", lp)
				}
			}
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas != tokens {
		t.Fatalf("%d delta logprobs, want %d", deltas, tokens)
	}
	if final.TopLogprobs != 3 || len(final.Output) != 1 || len(final.Output[0].Content) != 1 {
		t.Fatalf("final %s", final.RawJSON())
	}
	part := final.Output[0].Content[0]
	if len(part.Logprobs) != tokens {
		t.Fatalf("output_text logprobs %d, want %d", len(part.Logprobs), tokens)
	}
	var text strings.Builder
	for _, lp := range part.Logprobs {
		text.WriteString(lp.Token)
	}
	if text.String() != part.Text {
		t.Errorf("logprob tokens %q, text %q", text.String(), part.Text)
	}
}
