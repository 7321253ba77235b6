package chattemplate

import "github.com/vajra-go/vajra/engine"

// conversation is the test conversation: a system message, a user turn, an
// assistant turn that calls a tool, the tool's result, an answer and a
// follow-up. The tool call ID is nine characters (Mistral insists).
func conversation() []engine.Message {
	return []engine.Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "What's the weather in Paris? Answer in <celsius> & be brief."},
		{Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "call12345", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius", "days": 1, "ratio": 1.0}`}}},
		{Role: "tool", ToolCallID: "call12345", Content: `{"temperature": 18.5, "condition": "sunny"}`},
		{Role: "assistant", Content: "It is 18.5 °C and sunny in Paris."},
		{Role: "user", Content: "And tomorrow?"},
	}
}

// weatherTools is one tool whose schema keeps its keys out of alphabetical
// order and whose description has characters an HTML-escaping encoder
// would mangle.
func weatherTools() []engine.Tool {
	return []engine.Tool{{
		Name:        "get_weather",
		Description: "Get the weather <for> a city & country",
		Parameters:  []byte(`{"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`),
	}}
}
