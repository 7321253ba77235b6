package codegen

import (
	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
)

// RawJSON keeps a JSON value's bytes as sent (a tool's JSON Schema, a
// tool_use input). Unlike easyjson.RawMessage it owns a copy, so it stays
// valid after the request body's buffer is reused. null decodes as nil; an
// empty value encodes as null.
type RawJSON []byte

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (r *RawJSON) UnmarshalEasyJSON(in *jlexer.Lexer) {
	if in.IsNull() {
		in.Skip()
		*r = nil
		return
	}
	start := in.GetPos()
	b := in.Raw()
	if !in.Ok() {
		// Raw reports an invalid value at the end of the body; point the
		// error back at this value so the decoder can name its path.
		if le, ok := in.Error().(*jlexer.LexerError); ok && le.Offset >= len(in.Data) {
			le.Offset = start
		}
		return
	}
	*r = append((*r)[:0], b...)
}

// MarshalEasyJSON implements easyjson.Marshaler.
func (r RawJSON) MarshalEasyJSON(w *jwriter.Writer) {
	if len(r) == 0 {
		w.RawString("null")
		return
	}
	w.Raw(r, nil)
}

// IsObject reports whether r is a JSON object: its first byte past
// whitespace is '{' (the decoder has already checked that r is well formed).
func (r RawJSON) IsObject() bool {
	for _, c := range r {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
