package codegen

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSONString appends s as a JSON string literal (RFC 8259 §7), quotes
// included. Control characters, '"', '\\' are escaped; so are '<', '>', '&'
// and U+2028/U+2029 like encoding/json does, so a frame is safe to embed.
// Invalid UTF-8 becomes U+FFFD. It never allocates beyond growing dst.
func AppendJSONString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	dst = AppendJSONEscaped(dst, s)
	return append(dst, '"')
}

// AppendJSONStringS is AppendJSONString for a string; it does not allocate.
func AppendJSONStringS(dst []byte, s string) []byte {
	// The conversion does not escape: AppendJSONString only reads s.
	return AppendJSONString(dst, unsafeBytes(s))
}

// AppendJSONEscaped appends s escaped as AppendJSONString does, without the
// quotes: the caller writes them, around one or more pieces that make up a
// single JSON string. Each piece is escaped on its own: a UTF-8 sequence
// split between two pieces is not joined, its bytes become U+FFFD.
func AppendJSONEscaped(dst []byte, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// AppendJSONEscapedS is AppendJSONEscaped for a string; it does not allocate.
func AppendJSONEscapedS(dst []byte, s string) []byte {
	// The conversion does not escape: AppendJSONEscaped only reads s.
	return AppendJSONEscaped(dst, unsafeBytes(s))
}

func appendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// safeASCII marks the ASCII bytes that appear unescaped in a JSON string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	t[0x7f] = true
	return t
}()

// AppendFloat appends f in the shortest form that round-trips as float32,
// as JSON (no NaN or Inf: those become -9999.0, vLLM's floor for -inf
// logprobs).
func AppendFloat(dst []byte, f float32) []byte {
	if f != f || f > 3.4e38 || f < -3.4e38 {
		return append(dst, "-9999.0"...)
	}
	return strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
}

// AppendInt appends v in decimal.
func AppendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// AppendIntArray appends ids as a JSON array of integers ([] when empty).
func AppendIntArray[T ~int | ~int32](dst []byte, ids []T) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}
