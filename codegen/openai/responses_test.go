package openai

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra/engine"
)

func decodeResponses(t *testing.T, body string) *ResponsesRequest {
	t.Helper()
	var r ResponsesRequest
	if err := DecodeResponsesRequest([]byte(body), &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return &r
}

func responsesToEngine(t *testing.T, body string, history []engine.Message) *engine.Request {
	t.Helper()
	var req engine.Request
	if err := decodeResponses(t, body).ToEngine(&req, history); err != nil {
		t.Fatalf("ToEngine %s: %v", body, err)
	}
	return &req
}

func TestResponsesInputForms(t *testing.T) {
	f := func(body string, history []engine.Message, want []engine.Message) {
		t.Helper()
		if got := responsesToEngine(t, body, history).Messages; !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %+v\nwant %+v", body, got, want)
		}
	}
	f(`{"model":"m","input":"hi"}`, nil, []engine.Message{{Role: "user", Content: "hi"}})
	f(`{"model":"m","input":"hi","instructions":"be brief"}`, []engine.Message{{Role: "user", Content: "old"}, {Role: "assistant", Content: "ans"}},
		[]engine.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "old"}, {Role: "assistant", Content: "ans"}, {Role: "user", Content: "hi"}})
	f(`{"model":"m","input":[
		{"role":"developer","content":"dev"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"calling","annotations":[]}]},
		{"type":"function_call","call_id":"call_1","name":"w","arguments":"{\"c\":1}"},
		{"type":"function_call","call_id":"call_2","name":"t","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"sunny"},
		{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"noon"}]},
		{"type":"function_call","call_id":"call_3","name":"w","arguments":"{}"}]}`, nil,
		[]engine.Message{
			{Role: "developer", Content: "dev"},
			{Role: "user", Content: "a\nb"},
			{Role: "assistant", Content: "calling", ToolCalls: []engine.ToolCall{{ID: "call_1", Name: "w", Arguments: `{"c":1}`}, {ID: "call_2", Name: "t", Arguments: "{}"}}},
			{Role: "tool", ToolCallID: "call_1", Content: "sunny"},
			{Role: "tool", ToolCallID: "call_2", Content: "noon"},
			{Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "call_3", Name: "w", Arguments: "{}"}}},
		})
	// A function_call never joins an assistant message from the history.
	f(`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"w","arguments":"{}"}]}`, []engine.Message{{Role: "assistant", Content: "old"}},
		[]engine.Message{{Role: "assistant", Content: "old"}, {Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "c", Name: "w", Arguments: "{}"}}}})
}

func TestResponsesToEngineMapping(t *testing.T) {
	req := responsesToEngine(t, `{"model":"m","input":"x","stream":true,"max_output_tokens":100,"temperature":0.3,"top_p":0.8,
		"tools":[{"type":"function","name":"w","description":"d","parameters":{"type":"object"},"strict":false}],
		"tool_choice":{"type":"function","name":"w"},"parallel_tool_calls":false,"reasoning":{"effort":"high","summary":"auto"},
		"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true},"verbosity":"low"},
		"store":false,"metadata":{"k":"v"},"user":"u","truncation":"auto","include":["reasoning.encrypted_content"],"service_tier":"auto"}`, nil)
	want := engine.Request{Model: "m", Stream: true,
		Messages:       []engine.Message{{Role: "user", Content: "x"}},
		Tools:          []engine.Tool{{Name: "w", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice:     engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "w"},
		Reasoning:      engine.Reasoning{Enabled: true, Effort: "high"},
		ResponseFormat: engine.ResponseFormat{Type: engine.FormatJSONSchema, Name: "s", Schema: []byte(`{"type":"object"}`)},
		Sampling:       engine.Sampling{Temperature: 0.3, TopP: 0.8, MaxTokens: 100, Unset: engine.AllSamplingFields &^ (engine.FieldTemperature | engine.FieldTopP | engine.FieldMaxTokens)},
	}
	if !reflect.DeepEqual(*req, want) {
		t.Fatalf("got  %+v\nwant %+v", *req, want)
	}
	def := responsesToEngine(t, `{"model":"m","input":"x","tool_choice":"required","tools":[{"type":"function","name":"w"}]}`, nil)
	if def.Sampling.Temperature != 1 || !def.ParallelToolCalls || def.ToolChoice.Mode != engine.ToolChoiceRequired || def.Reasoning.Enabled {
		t.Fatalf("defaults: %+v", *def)
	}
	if r := responsesToEngine(t, `{"input":"x","reasoning":{"effort":"none"},"tool_choice":"none"}`, nil); r.Reasoning.Enabled || r.ToolChoice.Mode != engine.ToolChoiceNone {
		t.Fatalf("none: %+v", *r)
	}
	if r := decodeResponses(t, `{"input":"x"}`); !r.StoreEnabled() {
		t.Fatal("store must default to true")
	}
	if r := decodeResponses(t, `{"input":"x","store":false}`); r.StoreEnabled() {
		t.Fatal("store:false ignored")
	}
}

func TestResponsesUnknownFields(t *testing.T) {
	r := decodeResponses(t, `{"model":"m","zeta":[1,{"a":null}],"input":"x","kappa":"c","omega":{"id":"p"}}`)
	if want := []string{"zeta", "kappa", "omega"}; !reflect.DeepEqual(r.Unknown, want) {
		t.Fatalf("Unknown = %q", r.Unknown)
	}
	if r.Model != "m" || r.Input.Text != "x" {
		t.Fatalf("known fields lost: %+v", r)
	}
}

func TestResponsesDecodeErrors(t *testing.T) {
	f := func(body, param string) {
		t.Helper()
		var r ResponsesRequest
		err := DecodeResponsesRequest([]byte(body), &r)
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != param {
			t.Errorf("%s: got %v (param %q), want param %q", body, err, paramOf(pe), param)
		}
	}
	f(`{"input":5}`, "input")
	f(`{"input":[{"content":true}]}`, "input[0].content")
	f(`{"tool_choice":7}`, "tool_choice")
	f(`{"metadata":[]}`, "metadata")
	f(`{"max_output_tokens":"10"}`, "max_output_tokens")
	f(`[]`, "")
}

func paramOf(e *ParamError) string {
	if e == nil {
		return "<nil>"
	}
	return e.Param
}

func TestResponsesValidation(t *testing.T) {
	f := func(body, param, code, msg string) {
		t.Helper()
		var req engine.Request
		err := decodeResponses(t, body).ToEngine(&req, nil)
		if err == nil {
			t.Errorf("%s: accepted", body)
			return
		}
		if err.Param != param || err.Code != code || !strings.Contains(err.Message, msg) {
			t.Errorf("%s:\n got %q %q %q\nwant %q %q containing %q", body, err.Param, err.Code, err.Message, param, code, msg)
		}
	}
	f(`{"model":"m"}`, "input", CodeMissing, "non-empty")
	f(`{"input":[]}`, "input", CodeMissing, "non-empty")
	f(`{"input":"x","background":true,"store":false}`, "background", CodeInvalidValue, "'store' is true")
	f(`{"input":"x","temperature":3}`, "temperature", CodeInvalidValue, "between 0 and 2")
	f(`{"input":"x","top_p":-1}`, "top_p", CodeInvalidValue, "between 0 and 1")
	f(`{"input":"x","max_output_tokens":0}`, "max_output_tokens", CodeInvalidValue, "at least 1")
	f(`{"input":"x","max_tool_calls":-1}`, "max_tool_calls", CodeInvalidValue, "at least 0")
	f(`{"input":"x","top_logprobs":21}`, "top_logprobs", CodeInvalidValue, "0 to 20")
	f(`{"input":"x","truncation":"middle"}`, "truncation", CodeInvalidValue, `"middle"`)
	f(`{"input":"x","metadata":{"a":1}}`, "metadata", CodeInvalidType, "strings")
	f(`{"input":"x","metadata":{"a":"`+strings.Repeat("v", 513)+`"}}`, `metadata."a"`, CodeInvalidValue, "512")
	f(`{"input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", CodeUnsupportedValue, `"web_search"`)
	f(`{"input":"x","tools":[{"name":"w"}]}`, "tools[0].type", CodeMissing, "type")
	f(`{"input":"x","tools":[{"type":"function","name":"a b"}]}`, "tools[0].name", CodeInvalidValue, "function name")
	f(`{"input":"x","tools":[{"type":"function","name":"a"},{"type":"function","name":"a"}]}`, "tools[1].name", CodeInvalidValue, "Duplicate")
	f(`{"input":"x","tools":[{"type":"function","name":"a","parameters":[]}]}`, "tools[0].parameters", CodeInvalidType, "JSON Schema")
	f(`{"input":"x","tool_choice":"required"}`, "tool_choice", CodeInvalidValue, "needs 'tools'")
	f(`{"input":"x","tool_choice":"sometimes"}`, "tool_choice", CodeUnsupportedValue, `"sometimes"`)
	f(`{"input":"x","tool_choice":{"type":"file_search"}}`, "tool_choice", CodeUnsupportedValue, `"file_search"`)
	f(`{"input":"x","tool_choice":{"type":"function"},"tools":[{"type":"function","name":"a"}]}`, "tool_choice.name", CodeMissing, "required")
	f(`{"input":"x","tool_choice":{"type":"function","name":"b"},"tools":[{"type":"function","name":"a"}]}`, "tool_choice.name", CodeUnknownTool, `"b"`)
	f(`{"input":"x","reasoning":{"effort":"max"}}`, "reasoning.effort", CodeInvalidValue, `"max"`)
	f(`{"input":"x","reasoning":{"summary":"long"}}`, "reasoning.summary", CodeInvalidValue, `"long"`)
	f(`{"input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type", CodeInvalidValue, `"xml"`)
	f(`{"input":"x","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", CodeMissing, "required")
	f(`{"input":"x","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", CodeMissing, "required")
	f(`{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":1}}}`, "text.format.schema", CodeInvalidType, "object")
	f(`{"input":"x","text":{"verbosity":"loud"}}`, "text.verbosity", CodeInvalidValue, `"loud"`)
	f(`{"input":[{"content":"x"}]}`, "input[0].role", CodeMissing, "role")
	f(`{"input":[{"role":"tool","content":"x"}]}`, "input[0].role", CodeInvalidValue, `"tool"`)
	f(`{"input":[{"role":"user"}]}`, "input[0].content", CodeMissing, "content")
	f(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]}]}`, "input[0].content[1]", CodeUnsupportedContent, "input_image")
	f(`{"input":[{"role":"user","content":[{"type":"bogus"}]}]}`, "input[0].content[0].type", CodeInvalidValue, `"bogus"`)
	f(`{"input":[{"type":"function_call","name":"w"}]}`, "input[0].call_id", CodeMissing, "call_id")
	f(`{"input":[{"type":"function_call","call_id":"c"}]}`, "input[0].name", CodeMissing, "name")
	f(`{"input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", CodeMissing, "call_id")
	f(`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file"}]}]}`, "input[0].output[0]", CodeUnsupportedContent, "input_file")
	f(`{"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", CodeUnsupportedValue, "references")
	f(`{"input":[{"type":"web_search_call"}]}`, "input[0].type", CodeUnsupportedValue, `"web_search_call"`)
	f(`{"input":"x","prompt":{"id":"pmpt_1","variables":{"a":"b"}}}`, "prompt", CodeUnsupported, "reusable prompt")
	f(`{"input":"x","include_reasoning":false}`, "include_reasoning", CodeUnsupported, "include_reasoning")
	f(`{"input":"x","conversation":"conv_1"}`, "conversation", CodeUnsupported, "previous_response_id")
	// vLLM's extensions, checked as in chat.
	f(`{"input":"x","top_k":-2}`, "top_k", CodeInvalidValue, "-1 (off)")
	f(`{"input":"x","min_p":2}`, "min_p", CodeInvalidValue, "0 to 1")
	f(`{"input":"x","repetition_penalty":0}`, "repetition_penalty", CodeInvalidValue, "greater than 0")
	f(`{"input":"x","presence_penalty":3}`, "presence_penalty", CodeInvalidValue, "-2 to 2")
	f(`{"input":"x","stop_token_ids":[-1]}`, "stop_token_ids[0]", CodeInvalidValue, "non-negative")
	f(`{"input":"x","structured_outputs":{"regex":"a+"},"text":{"format":{"type":"json_object"}}}`, "structured_outputs", CodeInvalidValue, "both structured_outputs and text.format")
	f(`{"input":"x","structured_outputs":{"regex":"a","choice":["b"]}}`, "structured_outputs", CodeInvalidValue, "one kind")
	f(`{"input":"x","structured_outputs":{"choice":["a"]},"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`, "structured_outputs", CodeInvalidValue, "not both")
	f(`{"input":"x","chat_template_kwargs":[1]}`, "chat_template_kwargs", CodeInvalidType, "object")
	f(`{"input":"x","vllm_xargs":{"a":{"b":1}}}`, "vllm_xargs", CodeInvalidValue, "strings, numbers")
}

// TestResponsesVLLMExtensions: vLLM's Responses extensions reach the
// engine request as chat's do.
func TestResponsesVLLMExtensions(t *testing.T) {
	req := responsesToEngine(t, `{"input":"x","top_k":5,"min_p":0.1,"repetition_penalty":1.2,"presence_penalty":0.5,
		"frequency_penalty":-0.5,"logit_bias":{"7":-100},"seed":42,"stop":["END",""],"stop_token_ids":[9],"ignore_eos":true,
		"include_stop_str_in_output":true,"skip_special_tokens":false,"priority":-3,"structured_outputs":{"choice":["yes","no"]},
		"session_id":"conv-7","chat_template_kwargs":{"enable_thinking":false},"vllm_xargs":{"mode":"strict","ids":[1,2]}}`, nil)
	s := req.Sampling
	if s.TopK != 5 || s.MinP != 0.1 || s.RepetitionPenalty != 1.2 || s.PresencePenalty != 0.5 || s.FrequencyPenalty != -0.5 ||
		len(s.LogitBias) != 1 || s.LogitBias[0].TokenID != 7 || !s.HasSeed || s.Seed != 42 ||
		!slices.Equal(s.Stop, []string{"END"}) || !slices.Equal(s.StopTokenIDs, []int{9}) || !s.IgnoreEOS || !s.IncludeStopStr || !s.KeepSpecialTokens {
		t.Errorf("sampling %+v", s)
	}
	if s.Unset&(engine.FieldTopK|engine.FieldMinP|engine.FieldRepetitionPenalty|engine.FieldPresencePenalty|engine.FieldFrequencyPenalty) != 0 ||
		s.Unset&engine.FieldTemperature == 0 {
		t.Errorf("unset %b", s.Unset)
	}
	if req.VLLM == nil || req.VLLM.Priority != -3 || req.VLLM.SessionID != "conv-7" || !slices.Equal(req.VLLM.Choices, []string{"yes", "no"}) || req.ResponseFormat.Type != engine.FormatChoice ||
		string(req.VLLM.ExtraArgs) != `{"mode":"strict","ids":[1,2]}` {
		t.Errorf("vllm %+v, format %v", req.VLLM, req.ResponseFormat.Type)
	}
	if string(req.ChatTemplateKwargs) != `{"enable_thinking":false}` {
		t.Errorf("chat_template_kwargs %s", req.ChatTemplateKwargs)
	}
	// None of them: nothing allocated for vLLM, the defaults unset.
	req = responsesToEngine(t, `{"input":"x"}`, nil)
	if req.VLLM != nil || req.Sampling.TopK != 0 || req.Sampling.HasSeed || req.Sampling.Unset&engine.FieldTopK == 0 {
		t.Errorf("plain request: %+v %+v", req.VLLM, req.Sampling)
	}
}

// TestBuildResponseSDK checks every final status decodes with openai-go's
// Response type.
func TestBuildResponseSDK(t *testing.T) {
	meta := respTestMeta()
	f := func(res engine.Result, check func(r *responses.Response) bool) {
		t.Helper()
		body := AppendResponse(nil, BuildResponse(&meta, &res))
		var r responses.Response
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("openai-go rejects %s: %v", body, err)
		}
		if r.ID != meta.ID || r.Object != "response" || r.Instructions.OfString != "Be brief." || !check(&r) {
			t.Errorf("body %s", body)
		}
	}
	f(engine.Result{Choices: []engine.Choice{{Text: "hi", FinishReason: engine.FinishStop}}}, func(r *responses.Response) bool {
		return r.Status == "completed" && r.CompletedAt == 1767225601 && r.OutputText() == "hi" && r.Output[0].ID == "msg_0123abc_0"
	})
	f(engine.Result{Choices: []engine.Choice{{Text: "h", FinishReason: engine.FinishLength}}}, func(r *responses.Response) bool {
		return r.Status == "incomplete" && r.IncompleteDetails.Reason == "max_output_tokens" && r.Output[0].Status == "incomplete"
	})
	f(engine.Result{Err: &engine.Error{Kind: engine.KindInternal, Message: "boom"}}, func(r *responses.Response) bool {
		return r.Status == "failed" && r.Error.Code == "server_error" && r.Error.Message == "boom" && len(r.Output) == 0
	})
	f(engine.Result{Err: &engine.Error{Kind: engine.KindAborted}}, func(r *responses.Response) bool { return r.Status == "cancelled" })
	f(engine.Result{Choices: []engine.Choice{{Reasoning: "r", FinishReason: engine.FinishToolCalls,
		ToolCalls: []engine.ToolCall{{Name: "w", Arguments: `{"a":1}`}}}}}, func(r *responses.Response) bool {
		fc := r.Output[1].AsFunctionCall()
		return len(r.Output) == 2 && r.Output[0].Type == "reasoning" && r.Output[0].ID == "rs_0123abc_0" &&
			fc.ID == "fc_0123abc_1" && fc.CallID == "call_0123abc_1" && fc.Arguments == `{"a":1}` && fc.Name == "w"
	})
	// max_tool_calls is echoed as given, null when not.
	f(engine.Result{Choices: []engine.Choice{{Text: "hi", FinishReason: engine.FinishStop}}}, func(r *responses.Response) bool {
		return r.JSON.MaxToolCalls.Raw() == "null"
	})
	meta = decodeResponses(t, `{"model":"m","input":"x","max_tool_calls":3,"instructions":"Be brief."}`).Meta("resp_0123abc", 1767225600)
	f(engine.Result{Choices: []engine.Choice{{Text: "hi", FinishReason: engine.FinishStop}}}, func(r *responses.Response) bool {
		return r.MaxToolCalls == 3
	})
}

func TestResponsesInputItemsAndHistory(t *testing.T) {
	r := decodeResponses(t, `{"input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c1","name":"w","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"r"},{"type":"reasoning","summary":[]}]}`)
	items := r.InputItems("resp_abc")
	body := AppendInputItemsList(nil, items, false)
	var list responses.ResponseItemList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("openai-go rejects %s: %v", body, err)
	}
	if len(list.Data) != 3 || list.FirstID != "msg_abc_in0" || list.LastID != "fco_abc_in2" || list.HasMore ||
		!strings.Contains(list.Data[0].RawJSON(), `"text":"q"`) || list.Data[1].CallID != "c1" {
		t.Fatalf("list %s", body)
	}
	if got := string(AppendInputItemsList(nil, nil, false)); got != `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}` {
		t.Fatal(got)
	}
	meta := respTestMeta()
	out := BuildResponse(&meta, &engine.Result{Choices: []engine.Choice{{Text: "a", ToolCalls: []engine.ToolCall{{ID: "c2", Name: "w", Arguments: "{}"}}}}})
	hist := HistoryMessages(HistoryMessages(nil, items), out.Output)
	want := []engine.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "c1", Name: "w", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "c1", Content: "r"}, {Role: "assistant", Content: "a", ToolCalls: []engine.ToolCall{{ID: "c2", Name: "w", Arguments: "{}"}}}}
	if !reflect.DeepEqual(hist, want) {
		t.Fatalf("history %+v", hist)
	}
	if s := decodeResponses(t, `{"input":"plain"}`).InputItems("resp_x"); len(s) != 1 || s[0].ID != "msg_x_in0" || s[0].Content[0].Type != "input_text" {
		t.Fatalf("string input items %+v", s)
	}
	if got := string(AppendResponseDeleted(nil, "resp_1")); got != `{"id":"resp_1","object":"response","deleted":true}` {
		t.Fatal(got)
	}
}

func BenchmarkDecodeResponsesRequest(b *testing.B) {
	body := []byte(`{"model":"m","instructions":"Be helpful.","input":[{"role":"user","content":"Hello there"},
		{"role":"assistant","content":[{"type":"output_text","text":"Hi"}]},{"role":"user","content":"Tell me a story."}],"stream":true,"temperature":0.7}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	var r ResponsesRequest
	var req engine.Request
	for i := 0; i < b.N; i++ {
		if err := DecodeResponsesRequest(body, &r); err != nil {
			b.Fatal(err)
		}
		if err := r.ToEngine(&req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
