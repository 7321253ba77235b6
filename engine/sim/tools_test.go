package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// checkSchema validates v against the subset of JSON Schema the simulator
// promises (types, required, enum, const, bounds, items, $ref).
func checkSchema(t *testing.T, root, s map[string]any, v any, path string) {
	t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		s = root["$defs"].(map[string]any)[name].(map[string]any)
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				return
			}
		}
		t.Fatalf("%s: %v not in enum %v", path, v, enum)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		s = alts[1].(map[string]any)
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %T is not an object", path, v)
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			if _, ok := m[r.(string)]; !ok {
				t.Fatalf("%s: required %q missing", path, r)
			}
		}
		for k, pv := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Fatalf("%s: unknown property %q", path, k)
			}
			checkSchema(t, root, ps, pv, path+"."+k)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			t.Fatalf("%s: %T is not an array", path, v)
		}
		if mi, ok := s["minItems"].(float64); ok && len(a) < int(mi) {
			t.Fatalf("%s: %d items < minItems %v", path, len(a), mi)
		}
		if mi, ok := s["maxItems"].(float64); ok && len(a) > int(mi) {
			t.Fatalf("%s: %d items > maxItems %v", path, len(a), mi)
		}
		for i, x := range a {
			checkSchema(t, root, s["items"].(map[string]any), x, fmt.Sprintf("%s[%d]", path, i))
		}
	case "string":
		if _, ok := v.(string); !ok {
			t.Fatalf("%s: %T is not a string", path, v)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || s["type"] == "integer" && f != float64(int64(f)) {
			t.Fatalf("%s: %v is not a %s", path, v, s["type"])
		}
		if m, ok := s["minimum"].(float64); ok && f < m {
			t.Fatalf("%s: %v < minimum %v", path, f, m)
		}
		if m, ok := s["maximum"].(float64); ok && f > m {
			t.Fatalf("%s: %v > maximum %v", path, f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			t.Fatalf("%s: %T is not a boolean", path, v)
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

const weatherSchema = `{
  "type": "object",
  "properties": {
    "location": {"type": "string", "description": "City"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "threshold": {"type": "number", "minimum": -5.5, "maximum": 0},
    "alerts": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3},
    "where": {"$ref": "#/$defs/Point"},
    "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
    "nested": {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"]}
  },
  "required": ["location", "unit", "days", "threshold", "alerts", "tags", "where", "nested"],
  "$defs": {"Point": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]}}
}`

func TestToolCallRequired(t *testing.T) {
	e := newEngine(t, nil)
	var root map[string]any
	if err := json.Unmarshal([]byte(weatherSchema), &root); err != nil {
		t.Fatal(err)
	}
	tools := []engine.Tool{
		{Name: "lookup_time", Parameters: []byte(`{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}`)},
		{Name: "get_weather", Description: "Weather", Parameters: []byte(weatherSchema)},
	}
	for seed := range int64(20) {
		req := chatReq("What is it like outside?", 500)
		req.Tools = tools
		req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "get_weather"}
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 1, seed, true
		res, f, _ := run(t, e, req, true)
		c := res.Choices[0]
		if c.FinishReason != engine.FinishToolCalls || len(c.ToolCalls) != 1 || c.Text != "" {
			t.Fatalf("finish %q calls %d text %q", c.FinishReason, len(c.ToolCalls), c.Text)
		}
		call := c.ToolCalls[0]
		if call.Name != "get_weather" || !strings.HasPrefix(call.ID, "call_") {
			t.Fatalf("call %+v", call)
		}
		if f.deltas[0].kind != engine.DeltaToolCallStart || f.deltas[0].name != "get_weather" || f.deltas[0].callID != call.ID ||
			!f.deltas[0].first || f.text(0, engine.DeltaToolCallArgs) != call.Arguments {
			t.Fatalf("streamed tool call differs: %+v", f.deltas[0])
		}
		var v any
		if err := json.Unmarshal([]byte(call.Arguments), &v); err != nil {
			t.Fatalf("arguments %s: %v", call.Arguments, err)
		}
		checkSchema(t, root, root, v, "$")
		if seed == 0 {
			t.Logf("%s", call.Arguments)
		}
	}
	// required picks some tool; auto only when named.
	req := chatReq("Anything.", 200)
	req.Tools, req.ToolChoice.Mode = tools, engine.ToolChoiceRequired
	if res, _, _ := run(t, e, req, false); len(res.Choices[0].ToolCalls) != 1 {
		t.Fatal("required: no call")
	}
	req = chatReq("Please call get_weather for Paris.", 200)
	req.Tools = tools
	if res, _, _ := run(t, e, req, false); len(res.Choices[0].ToolCalls) != 1 || res.Choices[0].ToolCalls[0].Name != "get_weather" {
		t.Fatal("auto with the tool named: no call")
	}
	req = chatReq("Just chat.", 200)
	req.Tools = tools
	if res, _, _ := run(t, e, req, false); len(res.Choices[0].ToolCalls) != 0 || res.Choices[0].FinishReason == engine.FinishToolCalls {
		t.Fatal("auto without a tool named made a call")
	}
}

func TestToolChoiceErrors(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("x", 10)
	req.Tools = []engine.Tool{{Name: "a"}}
	req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "b"}
	if err := e.Prepare(req); err == nil || engine.AsError(err).Param != "tool_choice" {
		t.Fatalf("unknown named tool: %v", err)
	}
	req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "a"}
	req.Tools[0].Parameters = []byte(`{"type": "object", "properties": {`)
	if err := e.Prepare(req); err == nil || engine.AsError(err).Param != "tools" {
		t.Fatalf("broken schema: %v", err)
	}
}

func TestJSONSchemaOutput(t *testing.T) {
	e := newEngine(t, nil)
	var root map[string]any
	json.Unmarshal([]byte(weatherSchema), &root)
	for seed := range int64(20) {
		req := chatReq("Give me JSON.", 600)
		req.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Name: "w", Schema: []byte(weatherSchema)}
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 1, seed, true
		res, f, _ := run(t, e, req, true)
		c := res.Choices[0]
		var v any
		if err := json.Unmarshal([]byte(c.Text), &v); err != nil || c.FinishReason != engine.FinishStop {
			t.Fatalf("text %s (%q): %v", c.Text, c.FinishReason, err)
		}
		checkSchema(t, root, root, v, "$")
		if f.text(0, engine.DeltaText) != c.Text {
			t.Fatal("streamed JSON differs")
		}
	}
	req := chatReq("Give me JSON.", 200)
	req.ResponseFormat.Type = engine.FormatJSONObject
	res, _, _ := run(t, e, req, false)
	var obj map[string]any
	if err := json.Unmarshal([]byte(res.Choices[0].Text), &obj); err != nil {
		t.Fatalf("json_object %q: %v", res.Choices[0].Text, err)
	}
}

func TestRenderChatML(t *testing.T) {
	msgs := []engine.Message{
		{Role: "developer", Content: "Be brief."},
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: "18C"},
		{Role: "tool", ToolCallID: "c2", Content: "sunny"},
	}
	got := RenderChatML(msgs, []engine.Tool{{Name: "get_weather", Description: "Weather", Parameters: []byte(`{"type":"object"}`)}})
	for _, want := range []string{
		"<|im_start|>system\nBe brief.\n\n# Tools",
		`{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type":"object"}}}`,
		"<|im_start|>user\nWeather in Paris?<|im_end|>\n",
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\":\"Paris\"}}\n</tool_call><|im_end|>\n",
		"<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "<|im_end|>\n<|im_start|>assistant\n") {
		t.Fatalf("bad ending:\n%s", got)
	}
	if got := RenderChatML([]engine.Message{{Role: "user", Content: "hi"}}, nil); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("plain: %q", got)
	}
}
