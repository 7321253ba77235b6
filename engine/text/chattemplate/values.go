package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/vajra-go/vajra/engine"
)

// messagesValue builds the messages list the way transformers hands it to a
// template (see the package comment). Keys are set in the order an OpenAI
// client writes them, which is what tojson of a whole message shows.
func messagesValue(msgs []engine.Message) (jinja.Value, error) {
	items := make([]jinja.Value, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		// Always a string, even beside tool calls where an OpenAI client
		// sends null: llama.cpp does the same, and templates such as QwQ's
		// call content.split() on every assistant turn.
		dict.Set("content", jinja.NewString(m.Content))
		if m.Name != "" {
			dict.Set("name", jinja.NewString(m.Name))
		}
		if m.Reasoning != "" {
			dict.Set("reasoning_content", jinja.NewString(m.Reasoning))
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				args, err := argumentsValue(tc.Arguments)
				if err != nil {
					return jinja.Value{}, fmt.Errorf("%w: message %d, tool call %d (%s): %w", ErrToolArguments, i, j, tc.Name, err)
				}
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(tc.Name))
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				cd := call.AsDict()
				if tc.ID != "" {
					cd.Set("id", jinja.NewString(tc.ID))
				}
				cd.Set("type", jinja.NewString("function"))
				cd.Set("function", fn)
				calls[j] = call
			}
			dict.Set("tool_calls", jinja.NewList(calls))
		}
		if m.ToolCallID != "" {
			dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		items[i] = d
	}
	return jinja.NewList(items), nil
}

// argumentsValue parses a tool call's arguments; empty text is an empty
// object (a call without arguments).
func argumentsValue(s string) (jinja.Value, error) {
	if strings.TrimSpace(s) == "" {
		return jinja.NewDict(), nil
	}
	return parseJSON([]byte(s))
}

// toolsValue builds the tools list, or none when there are no tools
// (transformers passes tools=None).
func toolsValue(tools []engine.Tool) (jinja.Value, error) {
	if len(tools) == 0 {
		return jinja.None(), nil
	}
	items := make([]jinja.Value, len(tools))
	for i, t := range tools {
		fn := jinja.NewDict()
		fd := fn.AsDict()
		fd.Set("name", jinja.NewString(t.Name))
		if t.Description != "" {
			fd.Set("description", jinja.NewString(t.Description))
		}
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			p, err := parseJSON(t.Parameters)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("%w: tool %d (%s) parameters: %w", ErrToolArguments, i, t.Name, err)
			}
			fd.Set("parameters", p)
		}
		tool := jinja.NewDict()
		tool.AsDict().Set("type", jinja.NewString("function"))
		tool.AsDict().Set("function", fn)
		items[i] = tool
	}
	return jinja.NewList(items), nil
}

// parseJSON decodes one JSON value into a jinja.Value, keeping the order of
// object keys (Python's json.loads does, and tojson shows it) and the
// difference between integers and floats. Duplicate keys keep the last value
// in the first key's place, as Python's dict does.
func parseJSON(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			dict := d.AsDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				dict.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return jinja.FromGoValue(t), nil
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %T", tok)
}

// goValue converts a chat_template_kwargs value. Maps have no order in Go,
// so their keys are sorted.
func goValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(x), nil
	case string:
		return jinja.NewString(x), nil
	case int:
		return jinja.NewInt(int64(x)), nil
	case int64:
		return jinja.NewInt(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return jinja.NewInt(int64(x)), nil
		}
		return jinja.NewFloat(x), nil
	case json.Number:
		return jinja.FromGoValue(x), nil
	case json.RawMessage:
		return parseJSON(x)
	case []any:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			ev, err := goValue(e)
			if err != nil {
				return jinja.Value{}, err
			}
			items[i] = ev
		}
		return jinja.NewList(items), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := jinja.NewDict()
		for _, k := range keys {
			ev, err := goValue(x[k])
			if err != nil {
				return jinja.Value{}, err
			}
			d.AsDict().Set(k, ev)
		}
		return d, nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported value of type %T", v)
}
