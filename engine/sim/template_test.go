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
			if want := e.Tokenize(RenderChatML(msgs, tl)); !slices.EqualFunc(req.PromptTokens, want, func(a int32, b int) bool { return int(a) == b }) {
				t.Fatalf("Prepare gave %d ids, RenderChatML %d:\n%v\n%v", len(req.PromptTokens), len(want), req.PromptTokens, want)
			}
		}
	}
}

// TestStartPreparedTwice starts one prepared request twice: the first Start
// takes the group allocated with the prepared state, the second a new one,
// and both run to the same (greedy) answer.
func TestStartPreparedTwice(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("Tell me about the river.", 12)
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	var sessions [2]engine.Session
	var results [2]*engine.Result
	for i := range 2 {
		sink := newSink()
		s, err := e.Start(req, sink)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i], results[i] = s, sink.wait(t)
	}
	if sessions[0] == sessions[1] || sessions[0] != req.Prepared.(*prepared).spare {
		t.Fatal("the second Start reused the first one's group")
	}
	if a, b := results[0].Choices[0], results[1].Choices[0]; a.Text != b.Text || !slices.Equal(a.TokenIDs, b.TokenIDs) || a.Text == "" {
		t.Fatalf("answers differ: %q, %q", a.Text, b.Text)
	}
	sessions[0].Abort() // a stale handle: harmless
}
