package grammar

import "strings"

// EBNF rewrites a GBNF grammar (llama.cpp's, as FromJSONSchema and
// ForToolChoice write it) into the EBNF dialect of xgrammar, the
// structured-output backend that vLLM and SGLang run by default. The two
// read the same grammar but for one form: GBNF allows an empty
// alternative (`space ::= | " "`), which xgrammar rejects ("Expect
// element, but got |"); EBNF writes it as the empty string `""`. And in a
// string literal xgrammar knows fewer escapes: llama.cpp's converter
// escapes pattern characters (`"a\-b"`, `"\."`), which xgrammar refuses
// ("Invalid escape sequence"), so those are written as the character
// itself. Character classes are copied untouched.
func EBNF(gbnf string) string {
	var b strings.Builder
	b.Grow(len(gbnf) + 16)
	// open: an alternative has begun and holds no element yet.
	open := false
	for i := 0; i < len(gbnf); {
		c := gbnf[i]
		switch {
		case c == '"':
			i, open = copyLiteral(&b, gbnf, i), false
			continue
		case c == '[':
			j := skipClass(gbnf, i)
			b.WriteString(gbnf[i:j])
			i, open = j, false
			continue
		case c == '#':
			// A comment runs to the end of the line.
			j := strings.IndexByte(gbnf[i:], '\n')
			if j < 0 {
				j = len(gbnf) - i
			}
			b.WriteString(gbnf[i : i+j])
			i += j
			continue
		case strings.HasPrefix(gbnf[i:], "::="):
			b.WriteString("::=")
			i, open = i+3, true
			continue
		case c == '|' || c == ')':
			if open {
				b.WriteString(`"" `)
			}
			open = c == '|'
		case c == '(':
			open = true
		case c == '\n':
			// A rule ends at a newline outside any group: an empty last
			// alternative (`a ::= "x" |`) takes the empty string too.
			if open && endsRule(gbnf, i) {
				b.WriteString(` ""`)
				open = false
			}
		case c == ' ' || c == '\t' || c == '\r':
		default:
			open = false
		}
		b.WriteByte(c)
		i++
	}
	if open {
		b.WriteString(` ""`)
	}
	return b.String()
}

// skipClass returns the index just past the character class that starts
// at i, honouring backslash escapes.
func skipClass(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case ']':
			return j + 1
		}
	}
	return len(s)
}

// xgrammarEscapes are the characters that may follow a backslash in an
// xgrammar string literal.
const xgrammarEscapes = `"\'?/abfnrtv0xuU`

// copyLiteral writes the string literal that starts at i with the escapes
// xgrammar refuses unescaped, and returns the index just past it.
func copyLiteral(b *strings.Builder, s string, i int) int {
	b.WriteByte('"')
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			b.WriteByte('"')
			return j + 1
		case c == '\\' && j+1 < len(s):
			j++
			if strings.IndexByte(xgrammarEscapes, s[j]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		default:
			b.WriteByte(c)
		}
	}
	return len(s)
}

// endsRule reports whether the newline at i ends a rule: the next line
// that holds anything starts a new rule (`name ::=`) or there is none.
func endsRule(s string, i int) bool {
	rest := strings.TrimLeft(s[i:], " \t\r\n")
	if rest == "" {
		return true
	}
	line := rest
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		line = rest[:j]
	}
	name, _, ok := strings.Cut(line, "::=")
	return ok && strings.IndexAny(strings.TrimSpace(name), " \t\"[(|") < 0
}
