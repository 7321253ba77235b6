package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/vajra-go/vajra"
)

// Anthropic Messages end to end with anthropic-sdk-go: streamed and not,
// tools, thinking, count_tokens, models, errors in Anthropic's shape.

func newAnthropic(base string, opts ...aoption.RequestOption) anthropic.Client {
	opts = append([]aoption.RequestOption{aoption.WithBaseURL(base), aoption.WithAPIKey("test-key"), aoption.WithMaxRetries(0)}, opts...)
	return anthropic.NewClient(opts...)
}

func userText(s string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
}

var anthropicWeather = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("Get the weather of a city."),
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}},
		Required:   []string{"city", "unit"},
	},
}}

func TestAnthropicMessagesAndCountTokens(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newAnthropic(base)
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:         vajra.DefaultModelName,
		MaxTokens:     24,
		System:        []anthropic.TextBlockParam{{Text: "You are a sailor."}},
		Messages:      userText(question),
		StopSequences: []string{"\u0000never"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("u1")},
	}
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    params.Model,
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
		Messages: params.Messages,
	})
	if err != nil {
		t.Fatal(err)
	}
	// anthropic-sdk-go v2 has no sampling fields; clients set them raw.
	msg, err := client.Messages.New(ctx, params, aoption.WithJSONSet("temperature", 0.7),
		aoption.WithJSONSet("top_p", 0.9), aoption.WithJSONSet("top_k", 40))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Role != "assistant" || len(msg.Content) == 0 || msg.Content[0].Type != "text" || msg.Content[0].Text == "" {
		t.Fatalf("message %s", msg.RawJSON())
	}
	if msg.StopReason != anthropic.StopReasonEndTurn && msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Fatalf("stop_reason %q", msg.StopReason)
	}
	if in := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; in != count.InputTokens || count.InputTokens == 0 {
		t.Errorf("count_tokens %d, message input %d (+%d cached)", count.InputTokens, msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens)
	}
	if msg.Usage.OutputTokens < 1 || msg.Usage.OutputTokens > 24 {
		t.Errorf("output_tokens %d", msg.Usage.OutputTokens)
	}
}

func TestAnthropicStreamAccumulate(t *testing.T) {
	_, _, base := startServer(t, nil)
	// Old SDK style auth and version, on the same route.
	client := newAnthropic(base, aoption.WithHeader("anthropic-version", "2023-06-01"))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     vajra.DefaultModelName,
		MaxTokens: 2048,
		Messages:  userText(question),
		Thinking:  anthropic.ThinkingConfigParamOfEnabled(1024),
	})
	var acc anthropic.Message
	var types []string
	var text strings.Builder
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.RawJSON(), err)
		}
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok && d.Delta.Type == "text_delta" {
			text.WriteString(d.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if types[0] != "message_start" || types[len(types)-1] != "message_stop" || !contains(types, "message_delta") {
		t.Fatalf("events %v", types)
	}
	if len(acc.Content) < 2 || acc.Content[0].Type != "thinking" || acc.Content[0].Thinking == "" || acc.Content[0].Signature == "" {
		t.Fatalf("accumulated %s", acc.RawJSON())
	}
	last := acc.Content[len(acc.Content)-1]
	if last.Type != "text" || last.Text != text.String() || acc.StopReason == "" {
		t.Fatalf("accumulated text %q (streamed %q), stop %q", last.Text, text.String(), acc.StopReason)
	}
	if acc.Usage.InputTokens == 0 || acc.Usage.OutputTokens == 0 {
		t.Fatalf("usage %+v", acc.Usage)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestAnthropicToolUse(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newAnthropic(base)
	ctx := context.Background()
	for name, choice := range map[string]anthropic.ToolChoiceUnionParam{
		"any":  {OfAny: &anthropic.ToolChoiceAnyParam{}},
		"tool": {OfTool: &anthropic.ToolChoiceToolParam{Name: "get_weather"}},
	} {
		params := anthropic.MessageNewParams{
			Model: vajra.DefaultModelName, MaxTokens: 300, Messages: userText("Weather in Rome?"),
			Tools: []anthropic.ToolUnionParam{anthropicWeather}, ToolChoice: choice,
		}
		t.Run(name, func(t *testing.T) {
			msg, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			use := lastToolUse(msg)
			if msg.StopReason != anthropic.StopReasonToolUse || use == nil {
				t.Fatalf("message %s", msg.RawJSON())
			}
			checkWeatherArgs(t, use.Name, string(use.Input))

			stream := client.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for stream.Next() {
				if err := acc.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			use = lastToolUse(&acc)
			if acc.StopReason != anthropic.StopReasonToolUse || use == nil {
				t.Fatalf("streamed message %s", acc.RawJSON())
			}
			checkWeatherArgs(t, use.Name, string(use.Input))

			// The tool's result goes back as a tool_result block.
			next, err := client.Messages.New(ctx, anthropic.MessageNewParams{
				Model: vajra.DefaultModelName, MaxTokens: 16, Tools: params.Tools,
				Messages: []anthropic.MessageParam{
					params.Messages[0],
					acc.ToParam(),
					anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temp":21}`, false)),
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// Anthropic counts prefix-cache hits apart from input_tokens.
			if a, b := next.Usage.InputTokens+next.Usage.CacheReadInputTokens, msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens; a <= b {
				t.Errorf("tool_result turn input %d <= first turn %d", a, b)
			}
		})
	}
}

func lastToolUse(m *anthropic.Message) *anthropic.ContentBlockUnion {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if m.Content[i].Type == "tool_use" {
			return &m.Content[i]
		}
	}
	return nil
}

func TestAnthropicErrors(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) { c.APIKeys = []string{"right"} })
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: vajra.DefaultModelName, MaxTokens: 8, Messages: userText("hi")}

	check := func(name string, err error, status int, typ string) {
		t.Helper()
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: %v is not an *anthropic.Error", name, err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil {
			t.Fatalf("%s: body %q: %v", name, apiErr.RawJSON(), err)
		}
		if apiErr.StatusCode != status || body.Type != "error" || body.Error.Type != typ || body.Error.Message == "" {
			t.Fatalf("%s: %d %s, want %d %s", name, apiErr.StatusCode, apiErr.RawJSON(), status, typ)
		}
	}

	// x-api-key (older SDKs) and Bearer (v2) both authenticate.
	wrong := newAnthropic(base, aoption.WithAPIKey("wrong"))
	_, err := wrong.Messages.New(ctx, params)
	check("wrong key", err, 401, "authentication_error")
	right := newAnthropic(base, aoption.WithAPIKey("right"))
	if _, err := right.Messages.New(ctx, params); err != nil {
		t.Fatalf("x-api-key: %v", err)
	}
	bearer := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAuthToken("right"), aoption.WithMaxRetries(0))
	if _, err := bearer.Messages.New(ctx, params); err != nil {
		t.Fatalf("bearer: %v", err)
	}

	p := params
	p.Model = "no-such-model"
	_, err = right.Messages.New(ctx, p)
	check("unknown model", err, 404, "not_found_error")
	_, err = right.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "no-such-model", Messages: params.Messages})
	check("count_tokens unknown model", err, 404, "not_found_error")

	_, err = right.Messages.New(ctx, params, aoption.WithJSONSet("temperature", 1.5))
	check("temperature 1.5", err, 400, "invalid_request_error")

	p = params
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="))}
	_, err = right.Messages.New(ctx, p)
	check("image", err, 400, "invalid_request_error")

	p = params
	p.Messages = userText(strings.Repeat("sea ", 9000))
	_, err = right.Messages.New(ctx, p)
	check("context length", err, 400, "invalid_request_error")

	// A wrong Content-Type is refused in Anthropic's shape too.
	req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("x-api-key", "right")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Type  string `json:"type"`
		Error struct{ Type string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 415 || body.Type != "error" || body.Error.Type == "" {
		t.Fatalf("415: %d %+v", resp.StatusCode, body)
	}
}

func TestAnthropicModels(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newAnthropic(base)
	page, err := client.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != vajra.DefaultModelName || page.Data[0].DisplayName == "" {
		t.Fatalf("models %s", page.RawJSON())
	}
	m, err := client.Models.Get(context.Background(), vajra.DefaultModelName, anthropic.ModelGetParams{})
	if err != nil || m.ID != vajra.DefaultModelName {
		t.Fatalf("model %v %v", m, err)
	}
}

// TestAnthropicStopSequences: a stop sequence from the answer ends it there,
// with stop_reason "stop_sequence" naming it.
func TestAnthropicStopSequences(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newAnthropic(base)
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: vajra.DefaultModelName, MaxTokens: 30, Messages: userText(question)}
	greedy := aoption.WithJSONSet("temperature", 0)
	a, err := client.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	text := a.Content[0].Text
	words := strings.Fields(text)
	if len(words) < 4 {
		t.Fatalf("answer too short to cut (the greedy simulator answers alike every run: change the prompt): %q", text)
	}
	stop := " " + words[3]
	params.StopSequences = []string{stop}
	b, err := client.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	if b.StopReason != anthropic.StopReasonStopSequence || b.StopSequence != stop || b.Content[0].Text != text[:strings.Index(text, stop)] {
		t.Fatalf("stop %q: %s", stop, b.RawJSON())
	}
}
