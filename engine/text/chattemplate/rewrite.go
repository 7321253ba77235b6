package chattemplate

import "strings"

// tojsonName is the name "| tojson" is rewritten to. The engine looks a
// filter up among its builtins first and then among the template's
// variables, so a builtin cannot be replaced, only avoided: Render binds
// this name to tojsonFilter.
const tojsonName = "vajra_tojson"

// rewriteFilters renames the tojson filter to tojsonName wherever it is
// applied with "|" inside a {{ }} or {% %} tag, outside string literals and
// raw blocks. Tags are delimited as the engine's scanner delimits them
// (quotes with backslash escapes are skipped when looking for the closer),
// so the rewrite sees the same tags the engine will parse.
func rewriteFilters(src string) string {
	if !strings.Contains(src, "tojson") {
		return src
	}
	var b strings.Builder
	b.Grow(len(src) + 64)
	inRaw := false
	i := 0
	for i < len(src) {
		if src[i] != '{' || i+1 == len(src) || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			b.WriteByte(src[i])
			i++
			continue
		}
		kind := src[i+1]
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		start := i
		j := i + 2
		end := -1
		for j < len(src) {
			c := src[j]
			if kind != '#' && (c == '\'' || c == '"') {
				j++
				for j < len(src) && src[j] != c {
					if src[j] == '\\' && j+1 < len(src) {
						j++
					}
					j++
				}
				j++
				continue
			}
			if strings.HasPrefix(src[j:], closer) {
				end = j + 2
				break
			}
			j++
		}
		if end < 0 {
			// Unclosed: leave it to the engine to report.
			b.WriteString(src[start:])
			break
		}
		tag := src[start:end]
		inner := strings.TrimSpace(strings.Trim(tag[2:len(tag)-2], "-"))
		switch {
		case kind == '%' && inRaw:
			if keyword(inner) == "endraw" {
				inRaw = false
			}
			b.WriteString(tag)
		case kind == '%' && keyword(inner) == "raw":
			inRaw = true
			b.WriteString(tag)
		case kind == '#' || inRaw:
			b.WriteString(tag)
		default:
			b.WriteString(renameTojson(tag))
		}
		i = end
	}
	return b.String()
}

// keyword returns the first word of a statement.
func keyword(stmt string) string {
	if k := strings.IndexAny(stmt, " \t\r\n"); k >= 0 {
		return stmt[:k]
	}
	return stmt
}

// renameTojson rewrites "|" [spaces] "tojson" not followed by an identifier
// character, outside quotes, in one tag.
func renameTojson(tag string) string {
	var b strings.Builder
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if c == '\'' || c == '"' {
			j := i + 1
			for j < len(tag) && tag[j] != c {
				if tag[j] == '\\' && j+1 < len(tag) {
					j++
				}
				j++
			}
			j = min(j+1, len(tag))
			b.WriteString(tag[i:j])
			i = j - 1
			continue
		}
		b.WriteByte(c)
		if c != '|' {
			continue
		}
		j := i + 1
		for j < len(tag) && (tag[j] == ' ' || tag[j] == '\t' || tag[j] == '\n' || tag[j] == '\r') {
			j++
		}
		const name = "tojson"
		if strings.HasPrefix(tag[j:], name) && (j+len(name) == len(tag) || !isIdent(tag[j+len(name)])) {
			b.WriteString(tag[i+1 : j])
			b.WriteString(tojsonName)
			i = j + len(name) - 1
		}
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
