package openai

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

func decodeChat(t *testing.T, body string) *ChatRequest {
	t.Helper()
	var r ChatRequest
	if err := DecodeChatRequest([]byte(body), &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return &r
}

func TestDecodeChatUnions(t *testing.T) {
	const msg = `"messages":[{"role":"user","content":"hi"}]`
	f := func(body string, check func(r *ChatRequest) bool) {
		t.Helper()
		r := decodeChat(t, body)
		if !check(r) {
			t.Errorf("%s: decoded %+v", body, r)
		}
	}
	// content: string, null, array of parts.
	f(`{"messages":[{"role":"user","content":"hi"}]}`, func(r *ChatRequest) bool {
		return r.Messages[0].Content.Text == "hi" && r.Messages[0].Content.Set
	})
	f(`{"messages":[{"role":"assistant","content":null}]}`, func(r *ChatRequest) bool { return !r.Messages[0].Content.Set })
	f(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`, func(r *ChatRequest) bool {
		return r.Messages[0].Content.Text == "a" && r.Messages[0].Content.Parts == 1
	})
	f(`{"messages":[{"role":"user","content":[{"text":"a","type":"text"},{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}`, func(r *ChatRequest) bool {
		return r.Messages[0].Content.Text == "a\nb\nc" && !r.Messages[0].Content.HasBad
	})
	f(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, func(r *ChatRequest) bool {
		c := r.Messages[0].Content
		return c.HasBad && c.BadPart == 1 && c.BadType == "image_url" && c.Text == "a"
	})
	f(`{"messages":[{"role":"user","content":[]}]}`, func(r *ChatRequest) bool {
		return r.Messages[0].Content.Set && r.Messages[0].Content.Text == ""
	})
	// stop: string, array, null.
	f(`{`+msg+`,"stop":"###"}`, func(r *ChatRequest) bool { return reflect.DeepEqual([]string(r.Stop), []string{"###"}) })
	f(`{`+msg+`,"stop":["a","b"]}`, func(r *ChatRequest) bool { return reflect.DeepEqual([]string(r.Stop), []string{"a", "b"}) })
	f(`{`+msg+`,"stop":null}`, func(r *ChatRequest) bool { return r.Stop == nil })
	// tool_choice: strings and the object form.
	for _, m := range []string{"auto", "none", "required"} {
		f(`{`+msg+`,"tool_choice":"`+m+`"}`, func(r *ChatRequest) bool { return r.ToolChoice.Mode == m && r.ToolChoice.Set })
	}
	f(`{`+msg+`,"tool_choice":{"type":"function","function":{"name":"f"}}}`, func(r *ChatRequest) bool {
		return r.ToolChoice.Mode == "function" && r.ToolChoice.Name == "f"
	})
	f(`{`+msg+`,"tool_choice":null}`, func(r *ChatRequest) bool { return !r.ToolChoice.Set })
	// tools: parameters kept as raw bytes.
	f(`{`+msg+`,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object", "properties":{}}}}]}`, func(r *ChatRequest) bool {
		return string(r.Tools[0].Function.Parameters) == `{"type":"object", "properties":{}}`
	})
	// response_format.
	f(`{`+msg+`,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}}`, func(r *ChatRequest) bool {
		return r.ResponseFormat.Type == "json_schema" && string(r.ResponseFormat.JSONSchema.Schema) == `{"type":"object"}` && r.ResponseFormat.JSONSchema.Strict.V
	})
	// optional numbers: null means unset.
	f(`{`+msg+`,"temperature":null,"top_p":0.5,"n":2,"seed":-3,"max_tokens":9,"logit_bias":{"1":-100}}`, func(r *ChatRequest) bool {
		return !r.Temperature.Defined && r.TopP.V == 0.5 && r.N.V == 2 && r.Seed.V == -3 && r.MaxTokens.V == 9 && r.LogitBias.Set
	})
	f(`{`+msg+`,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, func(r *ChatRequest) bool {
		o := r.ChatStreamOptions()
		return r.Stream.V && o.IncludeUsage && o.ContinuousUsage
	})
}

func TestDecodeChatUnknownFields(t *testing.T) {
	r := decodeChat(t, `{"model":"m","length_penalty":0.1,"messages":[{"role":"user","content":"x","extra":1}],"guided_json":{"a":[1,{"b":"}"}]},"echo_extra":11}`)
	if want := []string{"length_penalty", "guided_json", "echo_extra"}; !reflect.DeepEqual(r.Unknown, want) {
		t.Errorf("Unknown = %q, want %q", r.Unknown, want)
	}
	if r.Model != "m" || len(r.Messages) != 1 {
		t.Errorf("known fields lost: %+v", r)
	}
	// Bounded, and reset by the next decode.
	var b strings.Builder
	b.WriteString(`{"messages":[]`)
	for i := range 100 {
		b.WriteString(`,"x` + strings.Repeat("y", i) + `":0`)
	}
	b.WriteString("}")
	if err := DecodeChatRequest([]byte(b.String()), r); err != nil {
		t.Fatal(err)
	}
	if len(r.Unknown) != MaxUnknownFields || r.Unknown[0] != "x" {
		t.Errorf("Unknown = %d entries (%q...), want %d", len(r.Unknown), r.Unknown[0], MaxUnknownFields)
	}
}

func TestDecodeChatErrors(t *testing.T) {
	f := func(body, param, code string) {
		t.Helper()
		var r ChatRequest
		err := DecodeChatRequest([]byte(body), &r)
		pe, ok := err.(*ParamError)
		if !ok {
			t.Fatalf("%s: got %v (%T), want a *ParamError", body, err, err)
		}
		if pe.Param != param || pe.Code != code {
			t.Errorf("%s: got param %q code %q (%s), want %q %q", body, pe.Param, pe.Code, pe.Message, param, code)
		}
		if strings.Contains(pe.Message, "SECRET") {
			t.Errorf("%s: message echoes client bytes: %s", body, pe.Message)
		}
	}
	f(``, "", CodeInvalidJSON)
	f(`  `, "", CodeInvalidJSON)
	f(`[1]`, "", CodeInvalidType)
	f(`{"messages":[{"role":"user","content":"x"}]`, "", CodeInvalidJSON)
	f(`{"temperature":"SECRET"}`, "temperature", CodeInvalidType)
	f(`{"n":1.5}`, "n", CodeInvalidType)
	f(`{"messages":[{"role":"user","content":"x"},{"role":"user","content":7}]}`, "messages[1].content", CodeInvalidType)
	f(`{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text", CodeInvalidType)
	f(`{"stop":5}`, "stop", CodeInvalidType)
	f(`{"stop":["a",1]}`, "stop[1]", CodeInvalidType)
	f(`{"tool_choice":[]}`, "tool_choice", CodeInvalidType)
	f(`{"tools":[{"type":"function","function":{"name":"f","parameters":{"a":SECRET}}}]}`, "tools[0].function.parameters", CodeInvalidJSON)
	f(`{"messages":[{"role":"user","content":"x"}]} SECRET`, "", CodeInvalidJSON)
	f(`{1:2}`, "", CodeInvalidJSON)
	f(`{"temperature":1e999999}`, "temperature", CodeInvalidType)
	f(`{"messages":[[1]]}`, "messages[0]", CodeInvalidType)
}

func TestChatToEngine(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"bob"},
		{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"42"}],
		"temperature":0,"top_p":0.9,"top_k":-1,"n":2,"seed":7,"max_tokens":5,"max_completion_tokens":6,
		"ignore_eos":true,"stop":["x",""],"stop_token_ids":[3],"logprobs":true,"top_logprobs":2,
		"stream":true,"stream_options":{"include_usage":true},
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,
		"response_format":{"type":"json_object"},"reasoning_effort":"low"}`
	r := decodeChat(t, body)
	var q engine.Request
	if err := r.ToEngine(&q); err != nil {
		t.Fatal(err)
	}
	want := engine.Request{
		Model: "m",
		Messages: []engine.Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "a\nb", Name: "bob"},
			{Role: "assistant", Reasoning: "r", ToolCalls: []engine.ToolCall{{ID: "call_1", Name: "f", Arguments: "{}"}}},
			{Role: "tool", Content: "42", ToolCallID: "call_1"},
		},
		Tools:          []engine.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice:     engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "f"},
		ResponseFormat: engine.ResponseFormat{Type: engine.FormatJSONObject},
		Reasoning:      engine.Reasoning{Enabled: true, Effort: "low"},
		Sampling: engine.Sampling{N: 2, Temperature: 0, TopP: 0.9, Seed: 7, HasSeed: true, MaxTokens: 6, IgnoreEOS: true,
			Unset: engine.AllSamplingFields &^ (engine.FieldTemperature | engine.FieldTopP | engine.FieldTopK | engine.FieldMaxTokens),
			Stop:  []string{"x"}, StopTokenIDs: []int{3}, Logprobs: true, TopLogprobs: 2},
		Stream: true,
	}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("ToEngine:\n got %+v\nwant %+v", q, want)
	}

	// Defaults.
	r = decodeChat(t, `{"messages":[{"role":"user","content":"x"}]}`)
	q = engine.Request{}
	if err := r.ToEngine(&q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.Sampling, engine.Sampling{N: 1, Temperature: 1, TopP: 1, Unset: engine.AllSamplingFields}) || !q.ParallelToolCalls || q.ToolChoice.Mode != engine.ToolChoiceAuto {
		t.Errorf("defaults: %+v", q)
	}
}

func TestChatValidation(t *testing.T) {
	f := func(extra, param, code string) {
		t.Helper()
		body := `{"messages":[{"role":"user","content":"x"}]` + extra + `}`
		r := decodeChat(t, body)
		var q engine.Request
		err := r.ToEngine(&q)
		if err == nil {
			t.Fatalf("%s: no error, want %s", extra, param)
		}
		if err.Param != param || err.Code != code {
			t.Errorf("%s: got %q %q (%s), want %q %q", extra, err.Param, err.Code, err.Message, param, code)
		}
		if err.Status() != 400 {
			t.Errorf("status %d", err.Status())
		}
	}
	f(`,"temperature":2.5`, "temperature", CodeInvalidValue)
	f(`,"temperature":-0.1`, "temperature", CodeInvalidValue)
	f(`,"top_p":0`, "top_p", CodeInvalidValue)
	f(`,"top_p":1.01`, "top_p", CodeInvalidValue)
	f(`,"top_k":-2`, "top_k", CodeInvalidValue)
	f(`,"n":0`, "n", CodeInvalidValue)
	f(`,"n":129`, "n", CodeInvalidValue)
	f(`,"frequency_penalty":3`, "frequency_penalty", CodeInvalidValue)
	f(`,"presence_penalty":-3`, "presence_penalty", CodeInvalidValue)
	f(`,"max_tokens":0`, "max_tokens", CodeInvalidValue)
	f(`,"max_completion_tokens":-1`, "max_completion_tokens", CodeInvalidValue)
	f(`,"top_logprobs":21,"logprobs":true`, "top_logprobs", CodeInvalidValue)
	f(`,"top_logprobs":2`, "top_logprobs", CodeTopLogprobsNeedsLogprb)
	f(`,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]`, "stop", CodeInvalidValue)
	f(`,"stop_token_ids":[-1]`, "stop_token_ids[0]", CodeInvalidValue)
	f(`,"stream_options":{"include_usage":true}`, "stream_options", CodeStreamOptionsNoStream)
	f(`,"stream":false,"stream_options":{}`, "stream_options", CodeStreamOptionsNoStream)
	f(`,"tools":[{"type":"retrieval","function":{"name":"f"}}]`, "tools[0].type", CodeInvalidValue)
	f(`,"tools":[{"type":"function","function":{"name":""}}]`, "tools[0].function.name", CodeInvalidValue)
	f(`,"tools":[{"type":"function","function":{"name":"a b"}}]`, "tools[0].function.name", CodeInvalidValue)
	f(`,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`, "tools[1].function.name", CodeInvalidValue)
	f(`,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`, "tools[0].function.parameters", CodeInvalidType)
	f(`,"tool_choice":"maybe"`, "tool_choice", CodeInvalidValue)
	f(`,"tool_choice":"required"`, "tool_choice", CodeInvalidValue)
	f(`,"tool_choice":{"type":"function","function":{"name":"g"}},"tools":[{"type":"function","function":{"name":"f"}}]`, "tool_choice", CodeUnknownTool)
	f(`,"tool_choice":{"type":"function","function":{}}`, "tool_choice.function.name", CodeMissing)
	f(`,"response_format":{"type":"xml"}`, "response_format.type", CodeInvalidValue)
	f(`,"response_format":{"type":"json_schema"}`, "response_format.json_schema", CodeMissing)
	f(`,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`, "response_format.json_schema.name", CodeMissing)
	f(`,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":"x"}}`, "response_format.json_schema.schema", CodeInvalidType)
	f(`,"reasoning_effort":"max"`, "reasoning_effort", CodeInvalidValue)

	m := func(msgs, param, code string) {
		t.Helper()
		r := decodeChat(t, `{"messages":`+msgs+`}`)
		var q engine.Request
		err := r.ToEngine(&q)
		if err == nil || err.Param != param || err.Code != code {
			t.Errorf("%s: got %+v, want %q %q", msgs, err, param, code)
		}
	}
	m(`[]`, "messages", CodeMissing)
	m(`null`, "messages", CodeMissing)
	m(`[{"content":"x"}]`, "messages[0].role", CodeMissing)
	m(`[{"role":"robot","content":"x"}]`, "messages[0].role", CodeInvalidValue)
	m(`[{"role":"user"}]`, "messages[0].content", CodeMissing)
	m(`[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:"}}]}]`, "messages[1].content[1]", CodeUnsupportedContent)
	m(`[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`, "messages[0].content[0]", CodeUnsupportedContent)
	m(`[{"role":"tool","content":"x"}]`, "messages[0].tool_call_id", CodeMissing)
	m(`[{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}]`, "messages[0].tool_calls[0].function.name", CodeMissing)
}

func TestErrorBodies(t *testing.T) {
	f := func(got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	pe := &ParamError{Param: "messages[0].content", Code: CodeMissing, Message: `A "user" message needs 'content'.`}
	f(pe.AppendBody(nil), `{"error":{"message":"A \"user\" message needs 'content'.","type":"invalid_request_error","param":"messages[0].content","code":"missing_required_parameter"}}`)
	f(AppendErrorBody(nil, 404, "", "", "", "no such route"), `{"error":{"message":"no such route","type":"not_found_error","param":null,"code":null}}`)
	ae := FromEngineError(&engine.Error{Kind: engine.KindContextLength, Message: "too long"}, "prompt")
	f(ae.AppendBody(nil), `{"error":{"message":"too long","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"}}`)
	for _, c := range []struct {
		k      engine.ErrorKind
		status int
	}{{engine.KindInvalid, 400}, {engine.KindContextLength, 400}, {engine.KindOverloaded, 429}, {engine.KindClosed, 503}, {engine.KindInternal, 500}, {engine.KindAborted, 503}} {
		e := FromEngineError(&engine.Error{Kind: c.k, Message: "m"}, "messages")
		if e.Status() != c.status {
			t.Errorf("engine kind %d: status %d, want %d", c.k, e.Status(), c.status)
		}
	}
	a := APIError{Kind: KindAuthentication, Message: "bad key"}
	f(a.AppendBody(nil), `{"error":{"message":"bad key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`)
	f(a.AppendStreamError(nil, codegen.FramingRaw), "data: "+`{"error":{"message":"bad key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`+"\n\ndata: [DONE]\n\n")
}

func TestJSONPathAt(t *testing.T) {
	body := []byte(`{"a":{"b":[1,{"c":"x,y\"]"},[3,4]]},"d":5}`)
	f := func(sub, want string) {
		t.Helper()
		off := bytes.Index(body, []byte(sub))
		if got := jsonPathAt(body, off+1); got != want {
			t.Errorf("at %q: got %q, want %q", sub, got, want)
		}
	}
	f(`1,`, "a.b[0]")
	f(`"x,y`, "a.b[1].c")
	f(`4]`, "a.b[2][1]")
	f(`5}`, "d")
}

func TestJSONPathAtDeep(t *testing.T) {
	body := []byte(`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 9999) + `,"b":1}`)
	if got := jsonPathAt(body, 5+10000); got != "a"+strings.Repeat("[0]", maxPathDepth-1) {
		t.Errorf("deep path: %q", got)
	}
	if got := jsonPathAt(body, len(body)-2); got != "a[1]" {
		t.Errorf("deep path: %q", got)
	}
	body = []byte(`{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `,"b":1}`)
	if got := jsonPathAt(body, len(body)-2); got != "b" {
		t.Errorf("after deep value: %q", got)
	}
}

// TestDecodeChatRequestViews: DecodeChatRequest's contents are copies (the
// body may be reused at once); DecodeChatRequestView's plain string
// contents are views of the body, and an escaped one is unescaped into a
// copy either way.
func TestDecodeChatRequestViews(t *testing.T) {
	const body = `{"messages":[{"role":"system","content":"be terse"},{"role":"user","content":"say \"hi\""}]}`
	for _, view := range []bool{false, true} {
		b := []byte(body)
		var r ChatRequest
		decode := DecodeChatRequest
		if view {
			decode = DecodeChatRequestView
		}
		if err := decode(b, &r); err != nil {
			t.Fatal(err)
		}
		if got := r.Messages[1].Content.Text; got != `say "hi"` {
			t.Fatalf("view %v: escaped content %q", view, got)
		}
		if a := aliases(r.Messages[0].Content.Text, b); a != view {
			t.Errorf("view %v: plain content aliases the body: %v", view, a)
		}
		if aliases(r.Messages[1].Content.Text, b) {
			t.Errorf("view %v: the unescaped content aliases the body", view)
		}
		copy(b, bytes.Repeat([]byte{'x'}, len(b))) // the caller reuses its buffer
		if got := r.Messages[0].Content.Text; !view && got != "be terse" {
			t.Errorf("a copying decode's content changed with the body: %q", got)
		}
	}
}
