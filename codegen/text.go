package codegen

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Errors of CheckText, wrapped in a *TextError; compare with errors.Is.
var (
	// ErrInvalidUTF8: the body holds a byte sequence that is not UTF-8.
	// RFC 8259 section 8.1: JSON text exchanged between systems that are
	// not part of a closed ecosystem MUST be encoded using UTF-8.
	ErrInvalidUTF8 = errors.New("codegen: request body is not valid UTF-8")
	// ErrLoneSurrogate: a JSON string escapes half of a UTF-16 surrogate
	// pair on its own ("\ud800"), or a low surrogate first. RFC 8259
	// section 8.2 leaves such strings' behaviour unpredictable; no UTF-8
	// text can hold one, so they are refused like invalid UTF-8 rather
	// than silently replaced with U+FFFD (docs/compatibility.md).
	ErrLoneSurrogate = errors.New("codegen: request body escapes a lone UTF-16 surrogate")
)

// TextError says what in a request body cannot be read as Unicode text,
// and where. Err is ErrInvalidUTF8 or ErrLoneSurrogate.
type TextError struct {
	Err    error
	Offset int // byte offset in the body of the bad sequence or escape
}

func (e *TextError) Error() string {
	return e.Err.Error() + " at byte offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns Err.
func (e *TextError) Unwrap() error { return e.Err }

// Message is the text for the client's error body. It names the offset and
// never repeats the client's bytes.
func (e *TextError) Message() string {
	off := strconv.Itoa(e.Offset)
	if errors.Is(e.Err, ErrLoneSurrogate) {
		return "The request body escapes a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape not in a high-low pair) at byte offset " +
			off + ": it is not a Unicode character and has no UTF-8 form; send the character itself or its surrogate pair."
	}
	return "The request body is not valid UTF-8 (at byte offset " + off +
		"): JSON text must be encoded in UTF-8 (RFC 8259 section 8.1)."
}

// CheckText returns nil when body is UTF-8 and escapes no lone surrogate,
// and otherwise the first fault. It is meant to run once per request body,
// before decoding: the lexer passes invalid UTF-8 through into strings and
// turns a lone surrogate escape into U+FFFD, so neither can be told apart
// afterwards. It does not otherwise validate the JSON (the decoder does).
//
// Cost: one utf8.Valid pass (8 bytes at a time over ASCII) and a
// bytes.IndexByte hop from backslash to backslash; no allocation unless it
// fails.
func CheckText(body []byte) *TextError {
	if !utf8.Valid(body) {
		return &TextError{Err: ErrInvalidUTF8, Offset: invalidUTF8At(body)}
	}
	// Outside strings a backslash is already a syntax error, so every
	// backslash here starts an escape; escapes are taken whole (\\ included)
	// so that `\\ud800` is a backslash followed by text, not an escape.
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j
		r, ok := escapedUnit(body[i:])
		switch {
		case !ok: // \n, \\, ... or a malformed escape the decoder reports
			i += 2
		case r < 0xD800 || r > 0xDFFF:
			i += 6
		case r >= 0xDC00: // a low surrogate with no high one before it
			return &TextError{Err: ErrLoneSurrogate, Offset: i}
		default: // a high surrogate: the next escape must be a low one
			if lo, ok := escapedUnit(body[i+6:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 12
				continue
			}
			return &TextError{Err: ErrLoneSurrogate, Offset: i}
		}
		if i >= len(body) {
			return nil
		}
	}
}

// escapedUnit decodes the \uXXXX escape at the start of b: the UTF-16 code
// unit, or ok false when b does not start with one.
func escapedUnit(b []byte) (r rune, ok bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// invalidUTF8At returns the offset of the first byte of body that does not
// start a valid UTF-8 sequence (len(body) if none). Error path only.
func invalidUTF8At(body []byte) int {
	for i := 0; i < len(body); {
		if body[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(body)
}
