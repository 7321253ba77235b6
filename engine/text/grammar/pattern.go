package grammar

import (
	"errors"
	"maps"
	"math"
	"strconv"
	"strings"
)

// maxPatternDepth bounds the nesting of groups in a pattern, so that a
// hostile pattern cannot exhaust the stack (the C++ MAX_PATTERN_DEPTH).
const maxPatternDepth = 100

// errUnsupportedPattern: a valid regular expression with no grammar
// equivalent; the string then accepts anything, with a warning.
type errUnsupportedPattern string

func (e errUnsupportedPattern) Error() string { return string(e) }

// errInvalidPattern: not a valid regular expression; the schema is refused.
type errInvalidPattern string

func (e errInvalidPattern) Error() string { return string(e) }

// escapeLength returns the length of the GBNF-compatible escape at
// pattern[pos] (\xHH, \uHHHH, \UHHHHHHHH, or \t \r \n \\ \" \[ \] \-),
// or 0 when there is none. Kept in sync with parse_char in llama-grammar.cpp.
func escapeLength(p string, pos int) int {
	if pos+1 >= len(p) || p[pos] != '\\' {
		return 0
	}
	nHex := 0
	switch p[pos+1] {
	case 'x':
		nHex = 2
	case 'u':
		nHex = 4
	case 'U':
		nHex = 8
	case 't', 'r', 'n', '\\', '"', '[', ']', '-':
		return 2
	default:
		return 0
	}
	if pos+2+nHex > len(p) {
		return 0
	}
	for _, h := range []byte(p[pos+2 : pos+2+nHex]) {
		if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
			return 0
		}
	}
	return 2 + nHex
}

func isNonLiteral(c byte) bool { return strings.IndexByte("|.()[]{}*+?^$", c) >= 0 }

// escapedInRegexpOnly are the characters a regexp escapes and a GBNF
// literal takes as they are.
func escapedInRegexpOnly(c byte) bool { return strings.IndexByte("^$.[]()|{}*+?", c) >= 0 }

// visitPattern adds a rule for a string matching pattern, or falls back to
// any string (with a warning) when the pattern cannot be expressed.
func (c *converter) visitPattern(pattern, name string) string {
	snapshot := maps.Clone(c.rules)
	rule, err := c.patternToRule(pattern, name)
	if err == nil {
		return rule
	}
	c.rules = snapshot
	var unsupported errUnsupportedPattern
	if errors.As(err, &unsupported) {
		c.warnings = append(c.warnings, "pattern "+strconv.Quote(pattern)+" is not supported ("+err.Error()+"), accepting any string")
		return c.addRule(name, c.addPrimitive("string", primitiveRules["string"]))
	}
	c.errs = append(c.errs, "invalid pattern "+strconv.Quote(pattern)+": "+err.Error())
	return ""
}

// seqItem is a literal (to be quoted) or a rule expression.
type seqItem struct {
	s       string
	literal bool
}

func (it seqItem) rule() string {
	if it.literal {
		return `"` + it.s + `"`
	}
	return it.s
}

func (c *converter) patternToRule(pattern, name string) (string, error) {
	top, err := c.patternSeq(pattern, name)
	if err != nil {
		return "", err
	}
	return c.addRule(name, `"\"" (`+top+`) "\""`), nil
}

// shorthandClasses are the character classes of the escapes \d, \w and \s
// and their negations, for FromRegex (the JSON schema converter keeps
// llama.cpp's behaviour and takes none).
var shorthandClasses = map[byte]string{
	'd': `[0-9]`, 'D': `[^0-9]`,
	'w': `[a-zA-Z0-9_]`, 'W': `[^a-zA-Z0-9_]`,
	's': `[ \t\n\r\x0B\x0C]`, 'S': `[^ \t\n\r\x0B\x0C]`,
}

// patternSeq converts pattern, anchored with '^' and '$', to a rule
// expression; name prefixes the rules it adds.
func (c *converter) patternSeq(pattern, name string) (string, error) {
	if len(pattern) < 2 || pattern[0] != '^' || pattern[len(pattern)-1] != '$' {
		return "", errUnsupportedPattern("not anchored with '^' and '$'")
	}
	sub := pattern[1 : len(pattern)-1]
	subRuleIDs := map[string]string{}
	i, depth := 0, 0
	n := len(sub)

	getDot := func() string { return c.addRule("dot", `[^\x0A\x0D]`) }

	var transform func() (seqItem, error)
	transform = func() (seqItem, error) {
		var seq []seqItem
		joinSeq := func() seqItem {
			var parts []string
			var lit strings.Builder
			flush := func() {
				if lit.Len() > 0 {
					parts = append(parts, seqItem{lit.String(), true}.rule())
					lit.Reset()
				}
			}
			for _, it := range seq {
				if it.literal {
					lit.WriteString(it.s)
				} else {
					flush()
					parts = append(parts, it.rule())
				}
			}
			flush()
			return seqItem{strings.Join(parts, " "), false}
		}
		for i < n {
			ch := sub[i]
			switch {
			case ch == '.':
				seq = append(seq, seqItem{getDot(), false})
				i++
			case ch == '(':
				i++
				if i < n && sub[i] == '?' {
					if i+1 < n && sub[i+1] == ':' {
						i += 2 // non-capturing group, taken as a group
					} else {
						return seqItem{}, errUnsupportedPattern("unsupported group syntax")
					}
				}
				depth++
				if depth > maxPatternDepth {
					return seqItem{}, errUnsupportedPattern("pattern nesting too deep")
				}
				inner, err := transform()
				if err != nil {
					return seqItem{}, err
				}
				seq = append(seq, seqItem{"(" + inner.rule() + ")", false})
			case ch == ')':
				i++
				if depth == 0 {
					return seqItem{}, errInvalidPattern("unbalanced parentheses")
				}
				depth--
				return joinSeq(), nil
			case ch == '^' || ch == '$':
				return seqItem{}, errUnsupportedPattern("anchor inside the pattern")
			case ch == '[':
				var sq strings.Builder
				sq.WriteByte('[')
				i++
				for i < n && sub[i] != ']' {
					if sub[i] == '\\' && c.shorthands && i+1 < n && strings.IndexByte("dws", sub[i+1]) >= 0 {
						cls := shorthandClasses[sub[i+1]]
						sq.WriteString(cls[1 : len(cls)-1])
						i += 2
						continue
					}
					if sub[i] == '\\' {
						l := escapeLength(sub, i)
						if l == 0 {
							return seqItem{}, errUnsupportedPattern("unsupported escape in character class: " + sub[i:min(i+2, n)])
						}
						sq.WriteString(sub[i : i+l])
						i += l
					} else {
						sq.WriteByte(sub[i])
						i++
					}
				}
				if i >= n {
					return seqItem{}, errInvalidPattern("unterminated character class")
				}
				sq.WriteByte(']')
				i++
				seq = append(seq, seqItem{sq.String(), false})
			case ch == '|':
				seq = append(seq, seqItem{"|", false})
				i++
			case ch == '*' || ch == '+' || ch == '?':
				if len(seq) == 0 {
					return seqItem{}, errInvalidPattern("nothing to repeat")
				}
				seq[len(seq)-1] = seqItem{seq[len(seq)-1].rule() + string(ch), false}
				i++
			case ch == '{':
				start := i + 1
				i++
				for i < n && sub[i] != '}' {
					i++
				}
				if i >= n {
					return seqItem{}, errUnsupportedPattern("unterminated curly brackets")
				}
				nums := strings.Split(sub[start:i], ",")
				i++
				minTimes, maxTimes := 0, math.MaxInt
				if len(nums) != 1 && len(nums) != 2 {
					return seqItem{}, errUnsupportedPattern("wrong number of values in curly brackets")
				}
				atoi := func(s string) (int, error) {
					v, err := strconv.Atoi(strings.TrimSpace(s))
					if err != nil {
						return 0, errUnsupportedPattern("invalid number in curly brackets")
					}
					return v, nil
				}
				var err error
				if len(nums) == 1 {
					if minTimes, err = atoi(nums[0]); err != nil {
						return seqItem{}, err
					}
					maxTimes = minTimes
				} else {
					if nums[0] != "" {
						if minTimes, err = atoi(nums[0]); err != nil {
							return seqItem{}, err
						}
					}
					if nums[1] != "" {
						if maxTimes, err = atoi(nums[1]); err != nil {
							return seqItem{}, err
						}
					}
				}
				if len(seq) == 0 {
					return seqItem{}, errInvalidPattern("nothing to repeat")
				}
				last := seq[len(seq)-1]
				item := `"` + last.s + `"`
				if !last.literal {
					id, ok := subRuleIDs[last.s]
					if !ok {
						// The C++ inserts the key before taking the size.
						id = c.addRule(name+"-"+strconv.Itoa(len(subRuleIDs)+1), last.s)
						subRuleIDs[last.s] = id
					}
					item = id
				}
				seq[len(seq)-1] = seqItem{buildRepetition(item, minTimes, maxTimes, ""), false}
			case ch == '\\' && c.shorthands && i+1 < n && shorthandClasses[sub[i+1]] != "":
				seq = append(seq, seqItem{shorthandClasses[sub[i+1]], false})
				i += 2
			default:
				var lit strings.Builder
				for i < n {
					switch {
					case sub[i] == '\\':
						if i == n-1 {
							return seqItem{}, errInvalidPattern("trailing backslash")
						}
						if c.shorthands && (shorthandClasses[sub[i+1]] != "" ||
							lit.Len() > 0 && i+2 < n && strings.IndexByte("*+?{", sub[i+2]) >= 0) {
							break // a class, or an escaped character a quantifier applies to alone
						}
						if next := sub[i+1]; c.shorthands && strings.IndexByte("/',:=!<>#&~%@;`", next) >= 0 {
							lit.WriteByte(next) // Python's escape of any punctuation
							i += 2
						} else if escapedInRegexpOnly(next) {
							lit.WriteByte(next)
							i += 2
						} else {
							l := escapeLength(sub, i)
							if l == 0 {
								return seqItem{}, errUnsupportedPattern("unsupported escape: " + sub[i:i+2])
							}
							lit.WriteString(sub[i : i+l])
							i += l
						}
						continue
					case sub[i] == '"':
						lit.WriteString(`\"`)
						i++
						continue
					case !isNonLiteral(sub[i]) && (i == n-1 || lit.Len() == 0 || sub[i+1] == '.' || !isNonLiteral(sub[i+1])):
						lit.WriteByte(sub[i])
						i++
						continue
					}
					break
				}
				if lit.Len() == 0 {
					return seqItem{}, errUnsupportedPattern("unsupported character: " + string(ch))
				}
				seq = append(seq, seqItem{lit.String(), true})
			}
		}
		return joinSeq(), nil
	}
	top, err := transform()
	if err != nil {
		return "", err
	}
	if depth != 0 {
		return "", errInvalidPattern("unbalanced parentheses")
	}
	return top.rule(), nil
}
