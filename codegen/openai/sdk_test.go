package openai

import (
	"encoding/json"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/pagination"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/vajra-go/vajra/engine"
)

// TestChatStreamOpenAIGo decodes every scripted stream with openai-go's own
// SSE decoder, chunk type and ChatCompletionAccumulator: the SDK must accept
// every chunk, and the accumulated completion must hold what we streamed.
func TestChatStreamOpenAIGo(t *testing.T) {
	for _, sc := range chatScripts {
		t.Run(sc.name, func(t *testing.T) {
			f := NewChatFormatter("chatcmpl-test123", "vajra-sim", 1767225600, sc.opts)
			body := sseBody(t, drive(f, sc.s), sc.opts.Framing)
			stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(body)), nil)
			var acc oai.ChatCompletionAccumulator
			chunks := 0
			for stream.Next() {
				chunks++
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("accumulator rejected chunk %d: %s", chunks, stream.Current().RawJSON())
				}
			}
			if !sc.sdk {
				if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "engine failed") {
					t.Fatalf("want the SDK to report the stream error, got %v", stream.Err())
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("SDK stream error: %v", err)
			}
			want := wantChat(sc.s)
			if len(acc.Choices) != len(want) {
				t.Fatalf("choices: got %d, want %d", len(acc.Choices), len(want))
			}
			for i, w := range want {
				c := acc.Choices[i]
				if c.Message.Content != w.text {
					t.Errorf("choice %d content: got %q, want %q", i, c.Message.Content, w.text)
				}
				if string(c.FinishReason) != w.finish {
					t.Errorf("choice %d finish_reason: got %q, want %q", i, c.FinishReason, w.finish)
				}
				if string(c.Message.Role) != "assistant" {
					t.Errorf("choice %d role: got %q", i, c.Message.Role)
				}
				if len(c.Message.ToolCalls) != len(w.calls) {
					t.Fatalf("choice %d tool calls: got %d, want %d", i, len(c.Message.ToolCalls), len(w.calls))
				}
				for k, call := range w.calls {
					got := c.Message.ToolCalls[k]
					if got.ID != call.ID || got.Function.Name != call.Name || got.Function.Arguments != call.Arguments {
						t.Errorf("choice %d call %d: got %+v, want %+v", i, k, got, call)
					}
				}
				if n := len(c.Logprobs.Content); n != w.logprobs {
					t.Errorf("choice %d logprobs: got %d, want %d", i, n, w.logprobs)
				}
			}
			if sc.opts.IncludeUsage && acc.Usage.TotalTokens == 0 {
				t.Errorf("usage not accumulated")
			}
		})
	}
}

type wantChoice struct {
	text, finish string
	calls        []engine.ToolCall
	logprobs     int
}

// wantChat computes the expected accumulated choices of a script.
func wantChat(s []step) []wantChoice {
	var out []wantChoice
	get := func(i int) *wantChoice {
		for len(out) <= i {
			out = append(out, wantChoice{})
		}
		return &out[i]
	}
	for _, st := range s {
		switch {
		case st.delta != nil:
			w := get(st.delta.Choice)
			w.logprobs += len(st.delta.Logprobs)
			switch st.delta.Kind {
			case engine.DeltaText:
				w.text += string(st.delta.Text)
			case engine.DeltaToolCallStart:
				w.calls = append(w.calls, engine.ToolCall{ID: st.delta.ToolCallID, Name: st.delta.ToolName})
			case engine.DeltaToolCallArgs:
				w.calls[st.delta.ToolCallIndex].Arguments += string(st.delta.Text)
			}
		case st.end != nil:
			get(st.end.Choice).finish = string(st.end.FinishReason)
		}
	}
	return out
}

// TestChatCompletionOpenAIGo decodes a non-streaming body with openai-go's
// ChatCompletion type.
func TestChatCompletionOpenAIGo(t *testing.T) {
	res := &engine.Result{
		Choices: []engine.Choice{
			{Index: 0, Text: "Hello <b>", Reasoning: "hmm", FinishReason: engine.FinishStop, StopTokenID: -1,
				Logprobs: []engine.TokenLogprob{{Token: "Hello", Logprob: -0.5, Top: []engine.TopLogprob{{Token: "Hello", Logprob: -0.5}}}}},
			{Index: 1, FinishReason: engine.FinishStop, StopTokenID: -1,
				ToolCalls: []engine.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}}},
		},
		Usage: usage,
	}
	m := &ChatCompletionMeta{ID: "chatcmpl-x", Model: "m", Created: 1767225600, Logprobs: true}
	body := AppendChatCompletion(nil, m, res)
	checkGolden(t, "chat_completion", body)
	var cc oai.ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatalf("openai-go: %v\n%s", err, body)
	}
	if cc.ID != "chatcmpl-x" || len(cc.Choices) != 2 || cc.Choices[0].Message.Content != "Hello <b>" {
		t.Fatalf("decoded %+v", cc)
	}
	if cc.Choices[1].FinishReason != "tool_calls" || cc.Choices[1].Message.ToolCalls[0].Function.Arguments != `{"a":1}` {
		t.Errorf("tool call choice: %+v", cc.Choices[1])
	}
	if cc.Choices[1].Message.JSON.Content.Raw() != "null" {
		t.Errorf("tool-call content should be null, got %s", cc.Choices[1].Message.JSON.Content.Raw())
	}
	if cc.Usage.PromptTokensDetails.CachedTokens != 4 || cc.Usage.CompletionTokensDetails.ReasoningTokens != 1 {
		t.Errorf("usage: %+v", cc.Usage)
	}
	if len(cc.Choices[0].Logprobs.Content) != 1 || cc.Choices[0].Logprobs.Content[0].Bytes[0] != 'H' {
		t.Errorf("logprobs: %+v", cc.Choices[0].Logprobs)
	}
}

// TestModelsSDKs decodes the model list with openai-go's Model and checks the
// Anthropic fields parse as anthropic-sdk-go expects (created_at RFC 3339).
func TestModelsSDKs(t *testing.T) {
	models := []Model{{ID: "vajra-sim", Created: 1767225600, OwnedBy: "vajra", MaxModelLen: 4096, Root: "vajra-sim"}, {ID: "b", Created: 0}}
	body := AppendModelList(nil, models)
	checkGolden(t, "models", body)
	var list struct {
		Data    []oai.Model `json:"data"`
		HasMore bool        `json:"has_more"`
		FirstID string      `json:"first_id"`
		LastID  string      `json:"last_id"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 2 || list.Data[0].ID != "vajra-sim" || list.Data[0].Created != 1767225600 || list.FirstID != "vajra-sim" || list.LastID != "b" {
		t.Fatalf("decoded %+v", list)
	}
	var page pagination.Page[anthropic.ModelInfo]
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	if len(page.Data) != 2 || page.Data[0].CreatedAt.Unix() != 1767225600 || page.Data[0].DisplayName != "vajra-sim" || page.HasMore || page.LastID != "b" {
		t.Fatalf("anthropic decoded %+v", page)
	}
	if got := string(AppendModelList(nil, nil)); got != `{"object":"list","data":[],"has_more":false,"first_id":null,"last_id":null}` {
		t.Errorf("empty list: %s", got)
	}
}
