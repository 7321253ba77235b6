package llama

import (
	"encoding/json"
	"strconv"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/grammar"
)

// Forced tool calls. tool_choice "required" or a named function is
// enforced as vLLM does it: with a grammar, independent of the model's own
// tool-call syntax and of --tool-call-parser. A named function's output is
// its arguments object (JSON Schema of the function's parameters); a
// required call's output is a JSON array of {"name", "parameters"}
// objects, one of the tools each. The engine turns that output into tool
// calls itself.

// forcedTool is how one request's choices are forced to call.
type forcedTool struct {
	name string // the named function; "" for required
}

// forcedGrammar returns the grammar and the forcing of req's tool_choice,
// or nil when the choice is free.
func forcedGrammar(req *engine.Request) (string, *forcedTool, error) {
	switch req.ToolChoice.Mode {
	case engine.ToolChoiceNamed:
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name != req.ToolChoice.Name {
				continue
			}
			g, err := grammar.FromJSONSchema(paramsSchema(t))
			if err != nil {
				return "", nil, invalid("tools", "the parameters of "+strconv.Quote(t.Name)+" cannot be enforced: "+err.Error())
			}
			return g, &forcedTool{name: t.Name}, nil
		}
		return "", nil, invalid("tool_choice", "tool_choice names "+strconv.Quote(req.ToolChoice.Name)+", which is not among the tools")
	case engine.ToolChoiceRequired:
		alts := make([]json.RawMessage, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			name, _ := json.Marshal(t.Name)
			alts[i] = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","enum":[` + string(name) +
				`]},"parameters":` + string(paramsSchema(t)) + `},"required":["name","parameters"],"additionalProperties":false}`)
		}
		items, _ := json.Marshal(alts)
		schema := `{"type":"array","minItems":1,"items":{"anyOf":` + string(items) + `}}`
		g, err := grammar.FromJSONSchema([]byte(schema))
		if err != nil {
			return "", nil, invalid("tools", "the tools' parameters cannot be enforced: "+err.Error())
		}
		return g, &forcedTool{}, nil
	}
	return "", nil, nil
}

// paramsSchema is a tool's parameters schema, an open object when none.
func paramsSchema(t *engine.Tool) []byte {
	if len(t.Parameters) == 0 {
		return []byte(`{"type":"object"}`)
	}
	return t.Parameters
}

// forcedState is one choice's progress through a forced call.
type forcedState struct {
	dec     text.UTF8Stream
	out     []byte // the whole output so far
	id      string
	started bool
	calls   []engine.ToolCall
	content string // a required call's output that did not parse
}

// feedForced takes a forced choice's token text: a named call streams its
// arguments as they come; a required call's array is parsed at the end.
func (s *scheduler) feedForced(q *seq, piece []byte) {
	f := q.forced
	n := len(f.out)
	f.out = f.dec.Append(f.out, piece)
	if q.g.prep.forced.name == "" || !q.g.req.Stream {
		return
	}
	if !f.started {
		f.started = true
		f.id = text.NewCallID()
		s.emitTool(q, engine.DeltaToolCallStart, 0, f.id, q.g.prep.forced.name, nil)
	}
	if len(f.out) > n {
		s.emitTool(q, engine.DeltaToolCallArgs, 0, "", "", f.out[n:])
	}
}

// finishForced ends a forced choice: its calls, and for a required call
// their frames (or its text as content when the array did not parse).
func (s *scheduler) finishForced(q *seq) {
	f := q.forced
	f.out = f.dec.Flush(f.out)
	if name := q.g.prep.forced.name; name != "" {
		if !f.started {
			f.id = text.NewCallID()
			if q.g.req.Stream {
				s.emitTool(q, engine.DeltaToolCallStart, 0, f.id, name, nil)
				s.emitTool(q, engine.DeltaToolCallArgs, 0, "", "", f.out)
			}
		}
		f.calls = []engine.ToolCall{{ID: f.id, Name: name, Arguments: string(f.out)}}
		return
	}
	var arr []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(f.out, &arr); err != nil || len(arr) == 0 {
		f.content = string(f.out)
		if q.g.req.Stream && len(f.out) > 0 {
			s.emitTool(q, engine.DeltaText, 0, "", "", f.out)
		}
		return
	}
	for i, c := range arr {
		call := engine.ToolCall{ID: text.NewCallID(), Name: c.Name, Arguments: string(c.Parameters)}
		f.calls = append(f.calls, call)
		if q.g.req.Stream {
			s.emitTool(q, engine.DeltaToolCallStart, i, call.ID, call.Name, nil)
			s.emitTool(q, engine.DeltaToolCallArgs, i, "", "", []byte(call.Arguments))
		}
	}
}

// emitTool writes one delta of a forced call.
func (s *scheduler) emitTool(q *seq, kind engine.DeltaKind, idx int, id, name string, txt []byte) {
	s.emit(q, []text.Event{{Kind: kind, Text: txt, ToolIndex: idx, ToolID: id, ToolName: name}})
}
