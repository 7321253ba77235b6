package text

import "bytes"

// indexString returns the index of the first occurrence of s in b, or -1.
// It is bytes.Index without converting s to a []byte.
func indexString(b []byte, s string) int {
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n > len(b):
		return -1
	}
	c := s[0]
	for i := 0; i+n <= len(b); {
		j := bytes.IndexByte(b[i:len(b)-n+1], c)
		if j < 0 {
			return -1
		}
		i += j
		if string(b[i:i+n]) == s { // compiles to a compare, no allocation
			return i
		}
		i++
	}
	return -1
}

// partialSuffix returns the length of the longest proper prefix of tag that
// b ends with: how many trailing bytes of b must be held back because the
// next piece may complete tag.
func partialSuffix(b []byte, tag string) int {
	for k := min(len(tag)-1, len(b)); k > 0; k-- {
		if b[len(b)-k] == tag[0] && string(b[len(b)-k:]) == tag[:k] {
			return k
		}
	}
	return 0
}

// isSpace reports whether c is JSON whitespace (RFC 8259 section 2), which
// is also what separates tags and calls in the formats parsed here.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-space byte of b at or after
// i, or len(b).
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// allSpace reports whether b is only whitespace.
func allSpace(b []byte) bool { return skipSpace(b, 0) == len(b) }

// jsonDepth scans JSON text for the end of the value that begins at b[0]
// (an object or array), continuing from the state st of an earlier scan of
// a prefix. It returns the index just past the closing bracket, or -1 when
// the value is not complete yet. It tracks only strings and bracket depth:
// the complete value is validated afterwards.
func jsonDepth(b []byte, st *jsonScan) int {
	for ; st.pos < len(b); st.pos++ {
		c := b[st.pos]
		if st.inString {
			switch {
			case st.escape:
				st.escape = false
			case c == '\\':
				st.escape = true
			case c == '"':
				st.inString = false
			}
			continue
		}
		switch c {
		case '"':
			st.inString = true
		case '{', '[':
			st.depth++
		case '}', ']':
			st.depth--
			if st.depth <= 0 {
				st.pos++
				return st.pos
			}
		}
	}
	return -1
}

// jsonScan is the state of jsonDepth between pieces.
type jsonScan struct {
	pos      int // next byte to scan, relative to the value's start
	depth    int
	inString bool
	escape   bool
}
