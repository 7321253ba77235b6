package actors

import (
	"testing"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// TestAssistantTurnCallIDsMatchOutputItems: the stored history names each
// tool call by the call_id of its output item in the stored response, also
// for calls the engine gave no id and that follow reasoning and text.
func TestAssistantTurnCallIDsMatchOutputItems(t *testing.T) {
	const id = "resp_k3j2"
	meta := openai.ResponseMeta{ID: id, Model: "m"}
	for _, c := range []engine.Choice{
		{ToolCalls: []engine.ToolCall{{Name: "a"}, {Name: "b"}}},
		{Text: "Checking.", ToolCalls: []engine.ToolCall{{Name: "a"}, {ID: "call_given", Name: "b"}}},
		{Reasoning: "Hm.", Text: "Checking.", ToolCalls: []engine.ToolCall{{Name: "a"}, {Name: "b"}}},
	} {
		res := &engine.Result{Choices: []engine.Choice{c}}
		var want []string
		for _, it := range openai.BuildResponse(&meta, res).Output {
			if it.Type == "function_call" {
				want = append(want, it.CallID)
			}
		}
		m := assistantTurn(id, &c)
		if len(m.ToolCalls) != len(want) {
			t.Fatalf("%d calls in the turn, %d items", len(m.ToolCalls), len(want))
		}
		for i, tc := range m.ToolCalls {
			if tc.ID != want[i] {
				t.Errorf("choice %+v: call %d has id %q in the history, %q in the response", c, i, tc.ID, want[i])
			}
		}
	}
}
