package sim

import (
	"slices"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestPrepareRendersChatML checks that Prepare, which renders into a pooled
// buffer and tokenizes it in place, gives the ids of RenderChatML's string,
// for ASCII and non-ASCII (the tokenizer library's path) conversations, one
// after the other so that each reuses the buffer the last one left.
func TestPrepareRendersChatML(t *testing.T) {
	e := newEngine(t, nil)
	tools := []engine.Tool{{Name: "get_weather", Description: "Weather", Parameters: []byte(`{"type":"object"}`)}}
	for _, msgs := range [][]engine.Message{
		{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: requestPrompt}},
		{{Role: "user", Content: "Quel temps fait-il à Paris ? Réponds brièvement, s'il te plaît."}},
		{{Role: "user", Content: "hi"}},
		{{Role: "developer", Content: "Sé breve."}, {Role: "user", Content: "¿Tiempo en París?"},
			{Role: "assistant", ToolCalls: []engine.ToolCall{{Name: "get_weather", Arguments: `{"location":"París"}`}}},
			{Role: "tool", Content: "18 °C"}},
	} {
		for _, tl := range [][]engine.Tool{nil, tools} {
			req := &engine.Request{Messages: msgs, Tools: tl}
			if err := e.Prepare(req); err != nil {
				t.Fatal(err)
			}
			if want := e.Tokenize(RenderChatML(msgs, tl)); !slices.Equal(req.PromptTokens, want) {
				t.Fatalf("Prepare gave %d ids, RenderChatML %d:\n%v\n%v", len(req.PromptTokens), len(want), req.PromptTokens, want)
			}
		}
	}
}
