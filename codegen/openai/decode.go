package openai

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"

	"github.com/vajra-go/vajra/codegen"
)

// This file holds the decoding helpers every OpenAI request type shares: the
// union types (stop, raw JSON), the bounded record of unknown fields, and the
// translation of lexer errors into a ParamError that names the JSON field at
// fault without echoing the client's bytes.

// MaxUnknownFields bounds how many unknown top-level keys one request records
// (the rest are still skipped, only not recorded): a body of a million tiny
// unknown keys must not grow a million strings.
const MaxUnknownFields = 16

// maxKeyEcho is the longest field name (in bytes) an error message repeats.
const maxKeyEcho = 64

// maxPathDepth is the deepest JSON path an error message names.
const maxPathDepth = 32

// recordUnknown skips the value of the unknown key and appends a copy of key
// to *dst (bounded by MaxUnknownFields). The key is copied because the lexer's
// key may point into the request body, which the caller may reuse.
func recordUnknown(dst *[]string, in *jlexer.Lexer, key string) {
	in.SkipRecursive()
	if len(*dst) < MaxUnknownFields {
		if len(key) > maxKeyEcho {
			key = key[:maxKeyEcho]
		}
		*dst = append(*dst, strings.Clone(key))
	}
}

// StopList is the "stop" parameter: null, one string, or an array of strings.
type StopList []string

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (s *StopList) UnmarshalEasyJSON(in *jlexer.Lexer) {
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
		*s = nil
	case jlexer.TokenString:
		*s = append((*s)[:0], in.String())
	case jlexer.TokenDelim:
		in.Delim('[')
		out := (*s)[:0]
		for !in.IsDelim(']') {
			out = append(out, in.String())
			in.WantComma()
		}
		in.Delim(']')
		*s = out
	default:
		unionError(in, "a string or an array of strings")
	}
}

// MarshalEasyJSON implements easyjson.Marshaler (an array, or null).
func (s StopList) MarshalEasyJSON(w *jwriter.Writer) {
	if s == nil {
		w.RawString("null")
		return
	}
	w.RawByte('[')
	for i, v := range s {
		if i > 0 {
			w.RawByte(',')
		}
		w.String(v)
	}
	w.RawByte(']')
}

// RawJSON is codegen.RawJSON: a JSON value kept as an owned copy of its
// bytes.
type RawJSON = codegen.RawJSON

// unionError records a type error at the lexer's current token: the union
// accepts only what wants says. It consumes the token so decoding stops.
func unionError(in *jlexer.Lexer, wants string) {
	in.AddError(&jlexer.LexerError{Reason: "expected " + wants, Offset: in.GetPos()})
}

// errorOffset returns where in body the value at fault starts: the lexer
// reports the offset just past the token it rejected, which for '[' or '{'
// would name the (unread) first element.
func errorOffset(body []byte, off int) int {
	if off > len(body) {
		off = len(body)
	}
	if off > 0 && (body[off-1] == '[' || body[off-1] == '{') {
		off--
	}
	return off
}

// checkText refuses a body that is not UTF-8 or escapes a lone surrogate
// (codegen.CheckText), with a ParamError naming the JSON path of the string
// at fault, or no path when the fault is in a key. Every Decode function
// calls it before the lexer, which would let both through.
func checkText(body []byte) *ParamError {
	te := codegen.CheckText(body)
	if te == nil {
		return nil
	}
	path := jsonPathAt(body, te.Offset)
	if !utf8.ValidString(path) { // the fault is in the innermost key
		path = ""
	}
	return &ParamError{Param: path, Code: CodeInvalidJSON, Message: te.Message()}
}

// decodeError turns the lexer's error into a ParamError naming the JSON path
// of the offending value (messages[2].content). The lexer's own message is
// used only when it is one of ours or a fixed "expected T"; its Data (the
// client's bytes) is never repeated.
func decodeError(body []byte, err error) *ParamError {
	var le *jlexer.LexerError
	if len(strings.TrimSpace(string(body))) == 0 {
		return &ParamError{Code: CodeInvalidJSON, Message: "The request body is empty: it must be a JSON object."}
	}
	if !errors.As(err, &le) {
		return &ParamError{Code: CodeInvalidJSON, Message: "The request body is not valid JSON (it ends too early)."}
	}
	if t := strings.TrimLeft(string(body), " \t\r\n"); t[0] != '{' && t[0] != 'n' {
		return &ParamError{Code: CodeInvalidType, Message: "The request body must be a JSON object."}
	}
	path := jsonPathAt(body, errorOffset(body, le.Offset))
	if path != "" && strings.HasPrefix(le.Reason, "expected ") && safeReason(le.Reason) {
		what := le.Reason[len("expected "):]
		return &ParamError{Param: path, Code: CodeInvalidType,
			Message: "Invalid type for '" + path + "': expected " + what + "."}
	}
	if path != "" && strings.HasPrefix(le.Reason, "strconv.") {
		return &ParamError{Param: path, Code: CodeInvalidType,
			Message: "Invalid number for '" + path + "': out of range or not of the expected kind."}
	}
	msg := "The request body is not valid JSON"
	if path != "" {
		msg += " (at '" + path + "', byte offset " + strconv.Itoa(le.Offset) + ")"
	} else {
		msg += " (at byte offset " + strconv.Itoa(le.Offset) + ")"
	}
	return &ParamError{Param: path, Code: CodeInvalidJSON, Message: msg + "."}
}

// safeReason reports whether a lexer reason looks like our fixed words
// ("expected number", "expected [", our union descriptions). jlexer builds
// its "expected …" reasons from constants only; this is a second guard.
func safeReason(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return len(s) < 120
}

// jsonPathAt returns the path (a.b[3].c) of the innermost value open at byte
// offset off of body, by walking the body's structure up to off. It is used
// on the error path only. Keys longer than maxKeyEcho are cut; the result is
// plain text that the error renderer escapes.
func jsonPathAt(body []byte, off int) string {
	type frame struct {
		array  bool
		index  int
		key    string
		hasKey bool // a key was read and its value is under way
	}
	var stack []frame
	if off > len(body) {
		off = len(body)
	}
	expectKey := false
	depth := 0
	for i := 0; i < off; i++ {
		c := body[i]
		switch c {
		case '{', '[':
			// Frames past maxPathDepth are counted, not kept: a deeply
			// nested body must not make the error path allocate much.
			depth++
			if depth <= maxPathDepth {
				stack = append(stack, frame{array: c == '['})
			}
			expectKey = c == '{'
		case '}', ']':
			if depth > 0 {
				if depth <= maxPathDepth {
					stack = stack[:len(stack)-1]
				}
				depth--
			}
			expectKey = false
		case ',':
			if n := len(stack); n > 0 && depth == n {
				if stack[n-1].array {
					stack[n-1].index++
				} else {
					stack[n-1].hasKey = false
					expectKey = true
				}
			}
		case '"':
			j := i + 1
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			if n := len(stack); expectKey && n > 0 && depth == n && !stack[n-1].array {
				end := j
				if end > len(body) {
					end = len(body)
				}
				k := body[i+1 : end]
				if len(k) > maxKeyEcho {
					k = k[:maxKeyEcho]
				}
				stack[n-1].key = string(k)
				stack[n-1].hasKey = true
				expectKey = false
			}
			i = j
		}
	}
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if !f.hasKey {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

// quoteValue renders a client-supplied value for an error message: quoted,
// escaped, and cut at 64 bytes.
func quoteValue(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
