package llama

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// A request with tools renders with the GGUF's tool_use template, one
// without with the default; --chat-template overrides both.
func TestNamedToolUseTemplate(t *testing.T) {
	mc := tinymodel.Config{Meta: map[string]string{
		"tokenizer.chat_template.tool_use": "TOOLS {% for t in tools %}{{ t.function.name }} {% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}",
	}}
	render := func(e *Engine, tools []engine.Tool) string {
		t.Helper()
		req := &engine.Request{Messages: []engine.Message{{Role: "user", Content: "hi"}}, Tools: tools, Sampling: engine.Sampling{MaxTokens: 4}}
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		ids := make([]int, len(req.PromptTokens))
		for i, id := range req.PromptTokens {
			ids[i] = int(id)
		}
		return e.Detokenize(ids)
	}
	tools := []engine.Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object"}`)}}
	e := newTestEngine(t, Config{}, mc)
	if got := render(e, tools); got != "TOOLS get_weather hi" {
		t.Fatalf("with tools: %q", got)
	}
	if got := render(e, nil); got == "TOOLS get_weather hi" || got == "TOOLS hi" {
		t.Fatalf("without tools the tool_use template rendered: %q", got)
	}
	o := newTestEngine(t, Config{Config: engine.Config{ChatTemplate: "OWN {% for m in messages %}{{ m.content }}{% endfor %}"}}, mc)
	if got := render(o, tools); got != "OWN hi" {
		t.Fatalf("--chat-template with tools: %q", got)
	}
}
