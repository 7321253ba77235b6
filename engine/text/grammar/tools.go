package grammar

import (
	"encoding/json"
	"strconv"

	"github.com/vajra-go/vajra/engine"
)

// ForToolChoice returns the grammar that enforces req's tool_choice when it
// forces a call, as vLLM does it (independent of the model's own tool-call
// syntax): a named function's output is its arguments object (the JSON
// Schema of its parameters); a required call's output is a JSON array of
// {"name", "parameters"} objects, one of the tools each. forced is false
// (and g empty) when the choice is free; named is the named function, ""
// for required. A schema that cannot be enforced is a KindInvalid error.
func ForToolChoice(req *engine.Request) (g, named string, forced bool, err *engine.Error) {
	switch req.ToolChoice.Mode {
	case engine.ToolChoiceNamed:
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name != req.ToolChoice.Name {
				continue
			}
			g, gerr := FromJSONSchema(ParamsSchema(t))
			if gerr != nil {
				return "", "", false, invalidTools("tools", "the parameters of "+strconv.Quote(t.Name)+" cannot be enforced: "+gerr.Error())
			}
			return g, t.Name, true, nil
		}
		return "", "", false, invalidTools("tool_choice", "tool_choice names "+strconv.Quote(req.ToolChoice.Name)+", which is not among the tools")
	case engine.ToolChoiceRequired:
		alts := make([]json.RawMessage, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			name, _ := json.Marshal(t.Name)
			alts[i] = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","enum":[` + string(name) +
				`]},"parameters":` + string(ParamsSchema(t)) + `},"required":["name","parameters"],"additionalProperties":false}`)
		}
		items, _ := json.Marshal(alts)
		schema := `{"type":"array","minItems":1,"items":{"anyOf":` + string(items) + `}}`
		g, gerr := FromJSONSchema([]byte(schema))
		if gerr != nil {
			return "", "", false, invalidTools("tools", "the tools' parameters cannot be enforced: "+gerr.Error())
		}
		return g, "", true, nil
	}
	return "", "", false, nil
}

// ParamsSchema is a tool's parameters schema, an open object when none.
func ParamsSchema(t *engine.Tool) []byte {
	if len(t.Parameters) == 0 {
		return []byte(`{"type":"object"}`)
	}
	return t.Parameters
}

func invalidTools(param, msg string) *engine.Error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}
