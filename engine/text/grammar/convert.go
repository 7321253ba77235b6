package grammar

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// spaceRule is the optional whitespace between tokens: nothing, a space, or
// one or two newlines and up to 20 spaces or tabs of indent. The bound keeps
// a model from padding forever.
const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

// builtinRule is a primitive rule and the rules it uses.
type builtinRule struct {
	content string
	deps    []string
}

// primitiveRules are the C++ PRIMITIVE_RULES, byte for byte. Numbers are
// capped at 16 digits in each part, as llama.cpp does.
var primitiveRules = map[string]builtinRule{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
}

// stringFormatRules are the C++ STRING_FORMAT_RULES.
var stringFormatRules = map[string]builtinRule{
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

func isReservedName(name string) bool {
	if name == Root {
		return true
	}
	_, p := primitiveRules[name]
	_, f := stringFormatRules[name]
	return p || f
}

var invalidRuleChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// formatLiteral quotes s as a GBNF string literal.
func formatLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// converter builds the rules (common_chat_schema_converter).
type converter struct {
	rules     map[string]string
	resolving map[string]bool
	errs      []string
	warnings  []string
	// shorthands takes \d, \w, \s and their negations in patterns
	// (FromRegex).
	shorthands bool
}

func newConverter() *converter {
	return &converter{rules: map[string]string{"space": spaceRule}, resolving: map[string]bool{}}
}

// addRule adds a rule under name (made a valid rule name), or under name
// with a number appended when name already holds a different rule.
func (c *converter) addRule(name, rule string) string {
	esc := invalidRuleChars.ReplaceAllString(name, "-")
	if old, ok := c.rules[esc]; !ok || old == rule {
		c.rules[esc] = rule
		return esc
	}
	i := 0
	for {
		old, ok := c.rules[esc+strconv.Itoa(i)]
		if !ok || old == rule {
			break
		}
		i++
	}
	key := esc + strconv.Itoa(i)
	c.rules[key] = rule
	return key
}

func (c *converter) addPrimitive(name string, rule builtinRule) string {
	n := c.addRule(name, rule.content)
	for _, dep := range rule.deps {
		depRule, ok := primitiveRules[dep]
		if !ok {
			depRule, ok = stringFormatRules[dep]
		}
		if !ok {
			c.errs = append(c.errs, "rule "+dep+" not known")
			continue
		}
		if _, ok := c.rules[dep]; !ok {
			c.addPrimitive(dep, depRule)
		}
	}
	return n
}

func (c *converter) visitPrimitive(ruleName, typ string) string {
	name := typ
	if ruleName == Root {
		name = Root
	}
	return c.addPrimitive(name, primitiveRules[typ])
}

func constantRule(v *jvalue) string {
	var b strings.Builder
	v.dump(&b)
	return formatLiteral(b.String())
}

func (c *converter) unionRule(name string, alts []*node) string {
	rules := make([]string, len(alts))
	for i, alt := range alts {
		sub := name + "-" + strconv.Itoa(i)
		if name == "" {
			sub = "alternative-" + strconv.Itoa(i)
		}
		rules[i] = c.visit(alt, sub)
	}
	return strings.Join(rules, " | ")
}

func (c *converter) resolveRef(n *node) string {
	frag := n.ref
	if i := strings.IndexByte(frag, '#'); i >= 0 {
		frag = frag[i+1:]
	}
	refName := "ref" + invalidRuleChars.ReplaceAllString(frag, "-")
	if _, ok := c.rules[refName]; !ok && !c.resolving[n.ref] {
		if n.target == nil {
			c.errs = append(c.errs, "unresolved $ref "+n.ref)
			return ""
		}
		c.resolving[n.ref] = true
		refName = c.visit(n.target, refName)
		delete(c.resolving, n.ref)
	}
	return refName
}

func joinName(name, part string) string {
	if name == "" {
		return part
	}
	return name + "-" + part
}

func (c *converter) buildObjectRule(props []property, name string, additional *node) string {
	var requiredProps, optionalProps, propNames []string
	kvRules := map[string]string{}
	for _, p := range props {
		propRule := c.visit(p.schema, joinName(name, p.name))
		var key strings.Builder
		dumpString(&key, p.name)
		kvRules[p.name] = c.addRule(joinName(name, p.name+"-kv"), formatLiteral(key.String())+` space ":" space `+propRule)
		if p.required {
			requiredProps = append(requiredProps, p.name)
		} else {
			optionalProps = append(optionalProps, p.name)
		}
		propNames = append(propNames, p.name)
	}
	if additional != nil {
		sub := joinName(name, "additional")
		var valueRule string
		if additional.kind != kindAny {
			valueRule = c.visit(additional, sub+"-value")
		} else {
			valueRule = c.addPrimitive("value", primitiveRules["value"])
		}
		var keyRule string
		if len(propNames) == 0 {
			keyRule = c.addPrimitive("string", primitiveRules["string"])
		} else {
			keyRule = c.addRule(sub+"-k", c.notStrings(propNames))
		}
		kvRules["*"] = c.addRule(sub+"-kv", keyRule+` ":" space `+valueRule)
		optionalProps = append(optionalProps, "*")
	}
	if len(requiredProps) == 0 && len(optionalProps) == 0 {
		return `"{" space "}"`
	}
	var b strings.Builder
	b.WriteString(`"{" space `)
	for i, p := range requiredProps {
		if i > 0 {
			b.WriteString(` "," space `)
		}
		b.WriteString(kvRules[p])
	}
	if len(optionalProps) > 0 {
		b.WriteString(" (")
		if len(requiredProps) > 0 {
			b.WriteString(` "," space ( `)
		}
		var recursiveRefs func(ks []string, firstIsOptional bool) string
		recursiveRefs = func(ks []string, firstIsOptional bool) string {
			if len(ks) == 0 {
				return ""
			}
			k := ks[0]
			kv := kvRules[k]
			commaRef := `( "," space ` + kv + ` )`
			var res string
			switch {
			case firstIsOptional && k == "*":
				res = commaRef + "*"
			case firstIsOptional:
				res = commaRef + "?"
			case k == "*":
				res = kv + " " + commaRef + "*"
			default:
				res = kv
			}
			if len(ks) > 1 {
				res += " " + c.addRule(joinName(name, k+"-rest"), recursiveRefs(ks[1:], true))
			}
			return res
		}
		for i := range optionalProps {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(recursiveRefs(optionalProps[i:], false))
		}
		if len(requiredProps) > 0 {
			b.WriteString(" )")
		}
		b.WriteString(" )?")
	}
	b.WriteString(` space "}"`)
	return b.String()
}

// notStrings returns a rule matching a JSON string that is none of strs,
// by walking their trie:
//
//	notStrings({"a"}) = ["] ( [a] char+ | [^"a] char* )? ["]
func (c *converter) notStrings(strs []string) string {
	type trieNode struct {
		children map[rune]*trieNode
		end      bool
	}
	root := &trieNode{children: map[rune]*trieNode{}}
	for _, s := range strs {
		n := root
		for _, r := range s {
			next, ok := n.children[r]
			if !ok {
				next = &trieNode{children: map[rune]*trieNode{}}
				n.children[r] = next
			}
			n = next
		}
		n.end = true
	}
	charRule := c.addPrimitive("char", primitiveRules["char"])
	var b strings.Builder
	b.WriteString(`["] ( `)
	var visit func(n *trieNode)
	visit = func(n *trieNode) {
		keys := make([]rune, 0, len(n.children))
		for r := range n.children {
			keys = append(keys, r)
		}
		slices.Sort(keys)
		var rejects strings.Builder
		for i, r := range keys {
			rejects.WriteRune(r)
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString("[" + string(r) + "]")
			if child := n.children[r]; len(child.children) > 0 {
				b.WriteString(" (")
				visit(child)
				b.WriteString(")")
			} else {
				b.WriteString(" " + charRule + "+")
			}
		}
		if len(keys) > 0 {
			b.WriteString(` | [^"` + rejects.String() + `] ` + charRule + "*")
		}
	}
	visit(root)
	b.WriteString(" )")
	if !root.end {
		b.WriteString("?")
	}
	b.WriteString(` ["]`)
	return b.String()
}

func (c *converter) visitAllOf(n *node, name, ruleName string) string {
	required := map[string]bool{}
	var props []property
	enumCounts := map[string]int{}
	var addComponent func(comp *node, isRequired bool)
	addComponent = func(comp *node, isRequired bool) {
		switch comp.kind {
		case kindRef:
			if comp.target != nil {
				addComponent(comp.target, isRequired)
			}
		case kindObject:
			for _, p := range comp.properties {
				props = append(props, property{name: p.name, schema: p.schema})
				if isRequired {
					required[p.name] = true
				}
			}
		case kindEnum:
			for _, v := range comp.values {
				enumCounts[constantRule(v)]++
			}
		}
	}
	for _, child := range n.children {
		if child.kind == kindAnyOf {
			for _, alt := range child.children {
				addComponent(alt, false)
			}
		} else {
			addComponent(child, true)
		}
	}
	if len(enumCounts) > 0 {
		var inter []string
		for v, count := range enumCounts {
			if count == len(n.children) {
				inter = append(inter, v)
			}
		}
		sort.Strings(inter) // std::map order
		if len(inter) > 0 {
			return c.addRule(ruleName, "("+strings.Join(inter, " | ")+")")
		}
	}
	for i := range props {
		props[i].required = required[props[i].name]
	}
	return c.addRule(ruleName, c.buildObjectRule(props, name, nil))
}

// visit returns the name of a rule for n, adding it and the rules it needs.
func (c *converter) visit(n *node, name string) string {
	ruleName := name
	switch {
	case isReservedName(name):
		ruleName = name + "-"
	case name == "":
		ruleName = Root
	}
	subName := joinName(name, "")
	if name == "" {
		subName = ""
	}
	switch n.kind {
	case kindRef:
		return c.addRule(ruleName, c.resolveRef(n))
	case kindAnyOf:
		return c.addRule(ruleName, c.unionRule(name, n.children))
	case kindAllOf:
		return c.visitAllOf(n, name, ruleName)
	case kindConst:
		return c.addRule(ruleName, constantRule(n.value))
	case kindEnum:
		vals := make([]string, len(n.values))
		for i, v := range n.values {
			vals[i] = constantRule(v)
		}
		return c.addRule(ruleName, "("+strings.Join(vals, " | ")+")")
	case kindObject:
		if len(n.properties) == 0 && n.additional != nil && n.additional.kind == kindAny {
			return c.addRule(ruleName, c.addPrimitive("object", primitiveRules["object"]))
		}
		return c.addRule(ruleName, c.buildObjectRule(n.properties, name, n.additional))
	case kindTuple:
		var b strings.Builder
		b.WriteString(`"[" space `)
		for i, item := range n.children {
			if i > 0 {
				b.WriteString(` "," space `)
			}
			b.WriteString(c.visit(item, subName+"tuple-"+strconv.Itoa(i)))
		}
		b.WriteString(` space "]"`)
		return c.addRule(ruleName, b.String())
	case kindArray:
		if n.items.kind == kindAny && n.minItems == 0 && n.maxItems < 0 {
			return c.visitPrimitive(ruleName, "array")
		}
		item := c.visit(n.items, subName+"item")
		maxItems := n.maxItems
		if maxItems < 0 {
			maxItems = math.MaxInt
		}
		return c.addRule(ruleName, `"[" space `+buildRepetition(item, n.minItems, maxItems, `"," space`)+` space "]"`)
	case kindString:
		if n.pattern != "" {
			return c.visitPattern(n.pattern, ruleName)
		}
		if n.format == formatUUID {
			return c.visitPrimitive(ruleName, "uuid")
		}
		if n.format != formatNone {
			prim := map[stringFormat]string{formatDate: "date", formatTime: "time", formatDateTime: "date-time"}[n.format] + "-string"
			return c.addRule(ruleName, c.addPrimitive(prim, stringFormatRules[prim]))
		}
		if n.minLength > 0 || n.maxLength >= 0 {
			char := c.addPrimitive("char", primitiveRules["char"])
			maxLen := n.maxLength
			if maxLen < 0 {
				maxLen = math.MaxInt
			}
			return c.addRule(ruleName, `"\"" `+buildRepetition(char, n.minLength, maxLen, "")+` "\""`)
		}
		return c.visitPrimitive(ruleName, "string")
	case kindInteger:
		if n.minimum == math.MinInt64 && n.maximum == math.MaxInt64 {
			return c.visitPrimitive(ruleName, "integer")
		}
		var b strings.Builder
		b.WriteString("(")
		buildMinMaxInt(n.minimum, n.maximum, &b, 16, true)
		b.WriteString(")")
		return c.addRule(ruleName, b.String())
	case kindNumber:
		return c.visitPrimitive(ruleName, "number")
	case kindBoolean:
		return c.visitPrimitive(ruleName, "boolean")
	case kindNull:
		return c.visitPrimitive(ruleName, "null")
	}
	return c.addRule(ruleName, c.addPrimitive("value", primitiveRules["value"]))
}

// format writes the rules sorted by name, one per line.
func (c *converter) format() string {
	names := make([]string, 0, len(c.rules))
	for k := range c.rules {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", k, c.rules[k])
	}
	return b.String()
}

// buildRepetition repeats item between min and max times (max math.MaxInt
// for unbounded), with sep between items when given.
func buildRepetition(item string, minItems, maxItems int, sep string) string {
	hasMax := maxItems != math.MaxInt
	if maxItems == 0 {
		return ""
	}
	if minItems == 0 && maxItems == 1 {
		return item + "?"
	}
	if sep == "" {
		switch {
		case minItems == 1 && !hasMax:
			return item + "+"
		case minItems == 0 && !hasMax:
			return item + "*"
		}
		s := item + "{" + strconv.Itoa(minItems) + ","
		if hasMax {
			s += strconv.Itoa(maxItems)
		}
		return s + "}"
	}
	innerMin := max(minItems-1, 0)
	innerMax := maxItems
	if hasMax {
		innerMax = maxItems - 1
	}
	result := item + " " + buildRepetition("("+sep+" "+item+")", innerMin, innerMax, "")
	if minItems == 0 {
		result = "(" + result + ")?"
	}
	return result
}
