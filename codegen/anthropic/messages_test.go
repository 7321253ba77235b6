package anthropic

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/vajra-go/vajra/engine"
)

func decode(t *testing.T, body string) *MessagesRequest {
	t.Helper()
	var r MessagesRequest
	if err := DecodeMessagesRequest([]byte(body), &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return &r
}

func mapOK(t *testing.T, body string) *engine.Request {
	t.Helper()
	var req engine.Request
	if err := decode(t, body).ToEngine(&req); err != nil {
		t.Fatalf("ToEngine %s: %v", body, err)
	}
	return &req
}

func TestDecodeUnions(t *testing.T) {
	f := func(body string, want []engine.Message) {
		t.Helper()
		req := mapOK(t, body)
		if !reflect.DeepEqual(req.Messages, want) {
			t.Errorf("%s\n got %+v\nwant %+v", body, req.Messages, want)
		}
	}
	// content as a string, system as a string
	f(`{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
		[]engine.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}})
	// content as blocks, system as text blocks (cache_control skipped)
	f(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}],
	   "messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}]}`,
		[]engine.Message{{Role: "system", Content: "a\nb"}, {Role: "user", Content: "x\ny"}})
	// assistant turn with thinking, text and tool_use; user turn with tool results (string and blocks) then text
	f(`{"model":"m","max_tokens":5,"messages":[
	   {"role":"user","content":"weather?"},
	   {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"redacted_thinking","data":"xx"},
	      {"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"w","input":{"city": "Paris"}},
	      {"type":"tool_use","id":"toolu_2","name":"t"}]},
	   {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
	      {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"noon"}],"is_error":false},
	      {"type":"text","text":"thanks"}]},
	   {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3"}]}]}`,
		[]engine.Message{
			{Role: "user", Content: "weather?"},
			{Role: "assistant", Content: "Let me check.", Reasoning: "hmm", ToolCalls: []engine.ToolCall{
				{ID: "toolu_1", Name: "w", Arguments: `{"city": "Paris"}`}, {ID: "toolu_2", Name: "t", Arguments: "{}"}}},
			{Role: "tool", ToolCallID: "toolu_1", Content: "sunny"},
			{Role: "tool", ToolCallID: "toolu_2", Content: "noon"},
			{Role: "user", Content: "thanks"},
			{Role: "tool", ToolCallID: "toolu_3"},
		})
	// text before a tool result stays before it; null system is absent
	f(`{"model":"m","max_tokens":5,"system":null,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
		[]engine.Message{{Role: "user", Content: "a"}, {Role: "tool", ToolCallID: "t", Content: "r"}})
}

func TestToEngineMapping(t *testing.T) {
	req := mapOK(t, `{"model":"claude","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],
		"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
		         {"type":"bash_20250124","name":"bash"},
		         {"type":"web_search_20250305","name":"web_search","max_uses":5,"allowed_domains":["a.com"]}],
		"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
		"thinking":{"type":"enabled","budget_tokens":1024},
		"stop_sequences":["END","\n\nHuman:"],"temperature":0.5,"top_p":0.9,"top_k":40,"stream":true,
		"metadata":{"user_id":"u1"},"service_tier":"auto"}`)
	want := engine.Request{
		Model:    "claude",
		Messages: []engine.Message{{Role: "user", Content: "hi"}},
		Tools: []engine.Tool{
			{Name: "get_weather", Description: "Weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			{Name: "bash"}, {Name: "web_search"}},
		ToolChoice: engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "get_weather"},
		Reasoning:  engine.Reasoning{Enabled: true, BudgetTokens: 1024},
		Sampling: engine.Sampling{Temperature: 0.5, TopP: 0.9, TopK: 40, MaxTokens: 2048, Stop: []string{"END", "\n\nHuman:"},
			Unset: engine.AllSamplingFields &^ (engine.FieldTemperature | engine.FieldTopP | engine.FieldTopK | engine.FieldMaxTokens)},
		Stream: true,
	}
	if !reflect.DeepEqual(*req, want) {
		t.Fatalf("got  %+v\nwant %+v", *req, want)
	}

	f := func(body string, check func(*engine.Request) bool) {
		t.Helper()
		if req := mapOK(t, body); !check(req) {
			t.Errorf("%s: mapped to %+v", body, *req)
		}
	}
	base := `"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"a","input_schema":{}}]`
	f(`{`+base+`}`, func(r *engine.Request) bool {
		return r.Sampling.Temperature == 1 && r.ParallelToolCalls && r.ToolChoice.Mode == engine.ToolChoiceAuto && !r.Reasoning.Enabled
	})
	f(`{`+base+`,"tool_choice":{"type":"any"}}`, func(r *engine.Request) bool {
		return r.ToolChoice.Mode == engine.ToolChoiceRequired && r.ParallelToolCalls
	})
	f(`{`+base+`,"tool_choice":{"type":"none"}}`, func(r *engine.Request) bool { return r.ToolChoice.Mode == engine.ToolChoiceNone })
	f(`{`+base+`,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`, func(r *engine.Request) bool { return !r.ParallelToolCalls })
	f(`{`+base+`,"thinking":{"type":"adaptive"}}`, func(r *engine.Request) bool { return r.Reasoning == engine.Reasoning{Enabled: true} })
	f(`{`+base+`,"thinking":{"type":"disabled"}}`, func(r *engine.Request) bool { return !r.Reasoning.Enabled })
	f(`{`+base+`,"temperature":0}`, func(r *engine.Request) bool { return r.Sampling.Temperature == 0 })
}

func TestUnknownFieldsRecorded(t *testing.T) {
	r := decode(t, `{"model":"m","foo":{"deep":[1,2,{"x":null}]},"max_tokens":3,"bar":"baz","messages":[{"role":"user","content":"x","extra":1}],"container":"c"}`)
	if want := []string{"foo", "bar", "container"}; !reflect.DeepEqual(r.Unknown, want) {
		t.Fatalf("Unknown = %q, want %q", r.Unknown, want)
	}
	if r.Model != "m" || r.MaxTokens.V != 3 || len(r.Messages) != 1 {
		t.Fatalf("known fields lost around unknown ones: %+v", r)
	}
}

func TestDecodeCopiesOutOfBody(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":3,"zzz":1,"tools":[{"name":"a","input_schema":{"type":"object"}}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"i","name":"n","input":{"k":1}}]}]}`)
	var r MessagesRequest
	if err := DecodeMessagesRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'X'
	}
	if string(r.Tools[0].InputSchema) != `{"type":"object"}` || string(r.Messages[0].Content.Blocks[0].Input) != `{"k":1}` || r.Unknown[0] != "zzz" {
		t.Fatalf("decoded values alias the body: %+v", r)
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, body := range []string{
		``, `{`, `[]`, `{"model":1}`, `{"max_tokens":"5"}`, `{"messages":{}}`, `{"messages":[{"content":5}]}`,
		`{"system":true}`, `{"stream":"yes"}`, `{"model":"m"} x`, `{"tools":[{"input_schema":{]}]}`,
	} {
		var r MessagesRequest
		if err := DecodeMessagesRequest([]byte(body), &r); err == nil {
			t.Errorf("%q: decoded without error", body)
		}
	}
}

func TestValidation(t *testing.T) {
	f := func(body, param, msg string) {
		t.Helper()
		var req engine.Request
		err := decode(t, body).ToEngine(&req)
		if err == nil {
			t.Errorf("%s: accepted", body)
			return
		}
		if err.Kind != KindInvalidRequest || err.Status() != 400 || err.Param != param || !strings.HasPrefix(err.Message, param+": ") || !strings.Contains(err.Message, msg) {
			t.Errorf("%s:\n got %d %q %q\nwant param %q containing %q", body, err.Status(), err.Param, err.Message, param, msg)
		}
	}
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	f(`{"max_tokens":1,`+msgs+`}`, "model", "Field required")
	f(`{"model":"m",`+msgs+`}`, "max_tokens", "Field required")
	f(`{"model":"m","max_tokens":0,`+msgs+`}`, "max_tokens", "greater than or equal to 1")
	f(`{"model":"m","max_tokens":1}`, "messages", "at least one")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`, "messages.0.role", `"system"`)
	f(`{"model":"m","max_tokens":1,"messages":[{"content":"x"}]}`, "messages.0.role", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, "messages.0.content", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","data":"x"}}]}]}`,
		"messages.0.content.1", "image content is not supported")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document"}]}]}`, "messages.0.content.0", "document content is not supported")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"bogus\u0000"}]}]}`, "messages.0.content.0.type", `unknown content block type "bogus\x00"`)
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"a"}]}]}`, "messages.0.content.0.type", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b"}]}]}`, "messages.0.content.0", "only allowed in assistant")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages.0.content.0", "only allowed in user")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"a"}]}]}`, "messages.0.content.0", "only allowed in assistant")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"b"}]}]}`, "messages.0.content.0.id", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a"}]}]}`, "messages.0.content.0.name", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":[1]}]}]}`, "messages.0.content.0.input", "JSON object")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id", "Field required")
	f(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image"}]}]}]}`,
		"messages.0.content.0.content.0", "image content is not supported")
	f(`{"model":"m","max_tokens":1,"system":[{"type":"image"}],`+msgs+`}`, "system.0", "image content is not supported")
	f(`{"model":"m","max_tokens":1,"temperature":1.5,`+msgs+`}`, "temperature", "between 0 and 1, got 1.5")
	f(`{"model":"m","max_tokens":1,"temperature":-0.1,`+msgs+`}`, "temperature", "between 0 and 1")
	f(`{"model":"m","max_tokens":1,"top_p":2,`+msgs+`}`, "top_p", "between 0 and 1")
	f(`{"model":"m","max_tokens":1,"top_k":-1,`+msgs+`}`, "top_k", "greater than or equal to 0")
	f(`{"model":"m","max_tokens":1,"stop_sequences":["a",""],`+msgs+`}`, "stop_sequences.1", "must not be empty")
	f(`{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":100},`+msgs+`}`, "thinking.budget_tokens", "greater than or equal to 1024")
	f(`{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},`+msgs+`}`, "thinking.budget_tokens", "less than max_tokens (2000)")
	f(`{"model":"m","max_tokens":1,"thinking":{"type":"on"},`+msgs+`}`, "thinking.type", `got "on"`)
	f(`{"model":"m","max_tokens":1,"tools":[{"input_schema":{}}],`+msgs+`}`, "tools.0.name", "Field required")
	f(`{"model":"m","max_tokens":1,"tools":[{"name":"a b","input_schema":{}}],`+msgs+`}`, "tools.0.name", "must match")
	f(`{"model":"m","max_tokens":1,"tools":[{"name":"`+strings.Repeat("a", 129)+`","input_schema":{}}],`+msgs+`}`, "tools.0.name", "at most 128")
	f(`{"model":"m","max_tokens":1,"tools":[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}],`+msgs+`}`, "tools.1.name", "unique")
	f(`{"model":"m","max_tokens":1,"tools":[{"name":"a"}],`+msgs+`}`, "tools.0.input_schema", "Field required")
	f(`{"model":"m","max_tokens":1,"tools":[{"name":"a","input_schema":"x"}],`+msgs+`}`, "tools.0.input_schema", "JSON object")
	f(`{"model":"m","max_tokens":1,"tool_choice":{"type":"any"},`+msgs+`}`, "tool_choice.type", "requires tools")
	f(`{"model":"m","max_tokens":1,"tool_choice":{"type":"tool"},"tools":[{"name":"a","input_schema":{}}],`+msgs+`}`, "tool_choice.name", "Field required")
	f(`{"model":"m","max_tokens":1,"tool_choice":{"type":"tool","name":"b"},"tools":[{"name":"a","input_schema":{}}],`+msgs+`}`, "tool_choice.name", `no tool named "b"`)
	f(`{"model":"m","max_tokens":1,"tool_choice":{"type":"sometimes"},`+msgs+`}`, "tool_choice.type", "must be")
	f(`{"model":"m","max_tokens":1,"output_config":{"effort":"huge"},`+msgs+`}`, "output_config.effort", `got "huge"`)
	f(`{"model":"m","max_tokens":1,"output_config":{"format":{"type":"xml"}},`+msgs+`}`, "output_config.format.type", `got "xml"`)
	f(`{"model":"m","max_tokens":1,"output_config":{"format":{"type":"json_schema"}},`+msgs+`}`, "output_config.format.schema", "Field required")
	f(`{"model":"m","max_tokens":1,"output_config":{"format":{"schema":[1]}},`+msgs+`}`, "output_config.format.schema", "JSON Schema object")
	f(`{"model":"m","max_tokens":1,"output_config":{"format":{"schema":{}}},"tool_choice":{"type":"any"},"tools":[{"name":"a","input_schema":{}}],`+msgs+`}`,
		"output_config.format", "forces a tool call")
}

// TestOutputConfig: output_config.format is a JSON Schema constraint on
// the answer (structured outputs), as OpenAI's json_schema; effort maps
// to the reasoning effort.
func TestOutputConfig(t *testing.T) {
	req := mapOK(t, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],
		"output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}}`)
	if f := req.ResponseFormat; f.Type != engine.FormatJSONSchema || string(f.Schema) != `{"type":"object","properties":{"a":{"type":"integer"}}}` {
		t.Errorf("format %+v", f)
	}
	if req.Reasoning.Effort != "high" || req.Reasoning.Enabled {
		t.Errorf("reasoning %+v", req.Reasoning)
	}
	if req := mapOK(t, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}]}`); req.ResponseFormat.Type != engine.FormatText {
		t.Errorf("no output_config: format %+v", req.ResponseFormat)
	}
	// The SDK's own parameter encodes to what is decoded.
	body, err := json.Marshal(sdk.MessageNewParams{Model: "m", MaxTokens: 9, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("x"))},
		OutputConfig: sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: map[string]any{"type": "object"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if req := mapOK(t, string(body)); req.ResponseFormat.Type != engine.FormatJSONSchema || string(req.ResponseFormat.Schema) != `{"type":"object"}` {
		t.Errorf("the SDK's %s: format %+v", body, req.ResponseFormat)
	}
}

func TestQuoteEscapesAndCuts(t *testing.T) {
	if got := quote("<script>\n"); got != `"<script>\n"` {
		t.Fatalf("quote = %s", got)
	}
	if got := quote(strings.Repeat("x", 100)); len(got) > maxQuoted+8 {
		t.Fatalf("quote did not cut: %d bytes", len(got))
	}
}

func TestCountTokens(t *testing.T) {
	var r CountTokensRequest
	if err := DecodeCountTokensRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"system":"s","odd":1}`), &r); err != nil {
		t.Fatal(err)
	}
	var req engine.Request
	if err := r.ToEngine(&req); err != nil {
		t.Fatalf("count_tokens needs no max_tokens: %v", err)
	}
	if len(req.Messages) != 2 || r.Unknown[0] != "odd" {
		t.Fatalf("mapped %+v", req.Messages)
	}
	var got sdk.MessageTokensCount
	if err := json.Unmarshal(AppendCountTokens(nil, 42), &got); err != nil || got.InputTokens != 42 {
		t.Fatalf("SDK reads %+v, %v", got, err)
	}
}

func TestAppendMessageSDK(t *testing.T) {
	f := func(res engine.Result, check func(m *sdk.Message) bool) {
		t.Helper()
		body := AppendMessage(nil, "msg_1", "m", &res)
		var m sdk.Message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("SDK rejects %s: %v", body, err)
		}
		if !json.Valid(body) || m.ID != "msg_1" || m.Role != "assistant" || m.Type != "message" || !check(&m) {
			t.Errorf("body %s", body)
		}
	}
	u := engine.Usage{PromptTokens: 10, CachedTokens: 3, CompletionTokens: 7}
	f(engine.Result{Choices: []engine.Choice{{Text: "hi", FinishReason: engine.FinishStop}}, Usage: u}, func(m *sdk.Message) bool {
		return len(m.Content) == 1 && m.Content[0].Text == "hi" && m.StopReason == "end_turn" && m.StopSequence == "" &&
			m.Usage.InputTokens == 7 && m.Usage.CacheReadInputTokens == 3 && m.Usage.OutputTokens == 7
	})
	f(engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishLength}}}, func(m *sdk.Message) bool {
		return len(m.Content) == 1 && m.Content[0].Type == "text" && m.StopReason == "max_tokens"
	})
	f(engine.Result{Choices: []engine.Choice{{Text: "a", StopString: "STOP", FinishReason: engine.FinishStop}}}, func(m *sdk.Message) bool {
		return m.StopReason == "stop_sequence" && m.StopSequence == "STOP"
	})
	f(engine.Result{Choices: []engine.Choice{{Reasoning: "r", FinishReason: engine.FinishToolCalls,
		ToolCalls: []engine.ToolCall{{ID: "call_9", Name: "f", Arguments: `{"a":[1]}`}, {ID: "toolu_x", Name: "g", Arguments: `{"cut`}}}}}, func(m *sdk.Message) bool {
		return len(m.Content) == 3 && m.Content[0].Thinking == "r" && m.Content[0].Signature == ThinkingSignature &&
			m.Content[1].ID == "toolu_9" && string(m.Content[1].Input) == `{"a":[1]}` &&
			m.Content[2].ID == "toolu_x" && string(m.Content[2].Input) == `{}` && m.StopReason == "tool_use"
	})
}

func TestErrors(t *testing.T) {
	for k, want := range map[Kind]int{KindInvalidRequest: 400, KindAuthentication: 401, KindPermission: 403, KindNotFound: 404,
		KindRequestTooLarge: 413, KindRateLimit: 429, KindAPI: 500, KindUnavailable: 503, KindOverloaded: 529} {
		if k.Status() != want || k.Type() == "" {
			t.Errorf("kind %d: %d %q", k, k.Status(), k.Type())
		}
	}
	body := invalid("messages.0", `bad "x"`).AppendBody(nil)
	var e sdk.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message != `messages.0: bad "x"` || string(e.Error.Type) != "invalid_request_error" {
		t.Fatalf("%s → %+v %v", body, e, err)
	}
	if got := PromptTooLong(300, 200).Message; got != "prompt is too long: 300 tokens > 200 maximum" {
		t.Fatal(got)
	}
	for _, c := range []struct {
		in   engine.Error
		kind Kind
	}{
		{engine.Error{Kind: engine.KindInvalid, Param: "x", Message: "bad"}, KindInvalidRequest},
		{engine.Error{Kind: engine.KindContextLength, Message: "300 tokens > 200 maximum"}, KindInvalidRequest},
		{engine.Error{Kind: engine.KindOverloaded}, KindOverloaded},
		{engine.Error{Kind: engine.KindClosed}, KindUnavailable},
		{engine.Error{Kind: engine.KindAborted}, KindAPI},
		{engine.Error{Kind: engine.KindInternal}, KindAPI},
	} {
		e := FromEngine(&c.in)
		if e.Kind != c.kind || e.Message == "" || engineKind(c.in.Kind) != c.kind {
			t.Errorf("%+v → %+v", c.in, e)
		}
	}
	if got := FromEngine(&engine.Error{Kind: engine.KindContextLength, Message: "300 tokens > 200 maximum"}).Message; got != "prompt is too long: 300 tokens > 200 maximum" {
		t.Error(got)
	}
}

func BenchmarkDecodeMessagesRequest(b *testing.B) {
	body := []byte(`{"model":"claude","max_tokens":1024,"system":"You are helpful.","messages":[{"role":"user","content":"Hello there, how are you?"},
		{"role":"assistant","content":[{"type":"text","text":"Fine."}]},{"role":"user","content":"Tell me a story."}],"temperature":0.7,"stream":true}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	var req engine.Request
	for i := 0; i < b.N; i++ {
		var r MessagesRequest
		if err := DecodeMessagesRequest(body, &r); err != nil {
			b.Fatal(err)
		}
		if err := r.ToEngine(&req); err != nil {
			b.Fatal(err)
		}
	}
}
