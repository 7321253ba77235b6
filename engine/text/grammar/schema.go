package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// jkind is the type of a decoded JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jvalue is a decoded JSON value that keeps object keys in order (the order
// of properties decides the order of keys in the output).
type jvalue struct {
	kind jkind
	b    bool
	num  json.Number
	str  string
	arr  []*jvalue
	keys []string
	vals []*jvalue
}

func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != jObject {
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

func (v *jvalue) has(key string) bool { return v.get(key) != nil }

// isInt reports whether v is a number written without fraction or exponent
// (nlohmann's is_number_integer).
func (v *jvalue) isInt() bool {
	return v.kind == jNumber && !strings.ContainsAny(string(v.num), ".eE")
}

// dump writes v as compact JSON (nlohmann's dump()): no spaces, non-ASCII
// literal, control characters escaped. Numbers keep their source text.
func (v *jvalue) dump(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		b.WriteString(string(v.num))
	case jString:
		dumpString(b, v.str)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.dump(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			dumpString(b, k)
			b.WriteByte(':')
			v.vals[i].dump(b)
		}
		b.WriteByte('}')
	}
}

func dumpString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func decodeJSON(data []byte) (*jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the schema")
	}
	return v, nil
}

func decodeJValue(dec *json.Decoder) (*jvalue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v := &jvalue{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				e, err := decodeJValue(dec)
				if err != nil {
					return nil, err
				}
				if i := indexOf(v.keys, k); i >= 0 {
					v.vals[i] = e
				} else {
					v.keys = append(v.keys, k)
					v.vals = append(v.vals, e)
				}
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jvalue{kind: jArray}
		for dec.More() {
			e, err := decodeJValue(dec)
			if err != nil {
				return nil, err
			}
			v.arr = append(v.arr, e)
		}
		_, err := dec.Token()
		return v, err
	case json.Number:
		return &jvalue{kind: jNumber, num: t}, nil
	case string:
		return &jvalue{kind: jString, str: t}, nil
	case bool:
		return &jvalue{kind: jBool, b: t}, nil
	}
	return &jvalue{kind: jNull}, nil
}

func indexOf(s []string, x string) int {
	for i, e := range s {
		if e == x {
			return i
		}
	}
	return -1
}

// nodeKind is the kind of a normalized schema node (common_chat_schema).
type nodeKind uint8

const (
	kindAny nodeKind = iota
	kindRef
	kindAnyOf
	kindAllOf
	kindConst
	kindEnum
	kindNull
	kindBoolean
	kindNumber
	kindInteger
	kindString
	kindArray
	kindTuple
	kindObject
)

// stringFormat is a string format the converter knows.
type stringFormat uint8

const (
	formatNone stringFormat = iota
	formatDate
	formatTime
	formatDateTime
	formatUUID
)

// property is one entry of an object's properties.
type property struct {
	name     string
	schema   *node
	required bool
}

// node is a normalized schema: the C++ common_chat_schema hierarchy as one
// struct; the fields used depend on kind.
type node struct {
	kind nodeKind

	ref    string // kindRef
	target *node  // kindRef, set once every $ref is built

	children []*node   // kindAnyOf, kindAllOf; kindTuple items
	value    *jvalue   // kindConst
	values   []*jvalue // kindEnum

	properties []property // kindObject
	additional *node      // kindObject; nil means none allowed

	items              *node // kindArray
	minItems, maxItems int   // kindArray; maxItems -1 means none

	pattern              string       // kindString
	format               stringFormat // kindString
	minLength, maxLength int          // kindString; maxLength -1 means none

	minimum, maximum int64 // kindInteger; MinInt64/MaxInt64 mean none
}

// builder normalizes a decoded schema (common_chat_schema_builder).
type builder struct {
	root    *jvalue
	refs    map[string]*node
	pending []*node
}

func fail(path, msg string) error {
	return fmt.Errorf("%w: at %s: %s", ErrSchema, path, msg)
}

func getCount(s *jvalue, key, path string, def int) (int, error) {
	v := s.get(key)
	if v == nil {
		return def, nil
	}
	n, err := strconv.ParseInt(string(v.num), 10, 32)
	if !v.isInt() || err != nil || n < 0 {
		return 0, fail(path, key+" must be a non-negative integer")
	}
	return int(n), nil
}

// getBound reads an integer bound; a fractional one is rounded inwards.
func getBound(s *jvalue, key, path string, roundUp bool) (int64, error) {
	v := s.get(key)
	if v.kind != jNumber {
		return 0, fail(path, key+" must be a number")
	}
	if v.isInt() {
		if n, err := strconv.ParseInt(string(v.num), 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := v.num.Float64()
	if err != nil {
		return 0, fail(path, key+" must be a number")
	}
	if roundUp {
		f = math.Ceil(f)
	} else {
		f = math.Floor(f)
	}
	// Clamp: the C++ cast of an out-of-range double is undefined.
	if f <= math.MinInt64 {
		return math.MinInt64 + 1, nil
	}
	if f >= math.MaxInt64 {
		return math.MaxInt64 - 1, nil
	}
	return int64(f), nil
}

func getFormat(s *jvalue, path string) (stringFormat, error) {
	v := s.get("format")
	if v == nil {
		return formatNone, nil
	}
	if v.kind != jString {
		return 0, fail(path, "format must be a string")
	}
	switch f := v.str; {
	case f == "date":
		return formatDate, nil
	case f == "time":
		return formatTime, nil
	case f == "date-time":
		return formatDateTime, nil
	case f == "uuid", len(f) == 5 && strings.HasPrefix(f, "uuid") && f[4] >= '1' && f[4] <= '5':
		return formatUUID, nil
	}
	return formatNone, nil
}

func (b *builder) resolveRef(ref, path string) (*jvalue, error) {
	target := b.root
	tokens := strings.Split(ref[1:], "/")
	for _, sel := range tokens[1:] {
		// JSON pointer escapes (RFC 6901 section 4).
		sel = strings.ReplaceAll(strings.ReplaceAll(sel, "~1", "/"), "~0", "~")
		switch {
		case target.kind == jObject && target.has(sel):
			target = target.get(sel)
		case target.kind == jArray:
			idx, err := strconv.ParseUint(sel, 10, 64)
			if err != nil || idx >= uint64(len(target.arr)) {
				return nil, fail(path, "cannot resolve $ref "+ref+", "+sel+" is out of range")
			}
			target = target.arr[idx]
		default:
			return nil, fail(path, "cannot resolve $ref "+ref+", "+sel+" not found")
		}
	}
	return target, nil
}

func (b *builder) buildRef(v *jvalue, path string) (*node, error) {
	if v.kind != jString {
		return nil, fail(path, "$ref must be a string")
	}
	ref := v.str
	if !strings.HasPrefix(ref, "#/") {
		return nil, fail(path, "unsupported $ref "+strconv.Quote(ref)+", only references into the same document are supported")
	}
	if _, ok := b.refs[ref]; !ok {
		// Reserve the key first, so that a cycle back to this $ref stops here.
		b.refs[ref] = nil
		target, err := b.resolveRef(ref, path)
		if err != nil {
			return nil, err
		}
		n, err := b.build(target, ref)
		if err != nil {
			return nil, err
		}
		b.refs[ref] = n
	}
	n := &node{kind: kindRef, ref: ref}
	b.pending = append(b.pending, n)
	return n, nil
}

func (b *builder) buildAlternatives(kind nodeKind, alts *jvalue, path string) (*node, error) {
	if alts.kind != jArray {
		return nil, fail(path, "must be an array of schemas")
	}
	if len(alts.arr) == 0 {
		return nil, fail(path, "must not be empty")
	}
	n := &node{kind: kind}
	for i, alt := range alts.arr {
		c, err := b.build(alt, path+"/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, c)
	}
	return n, nil
}

func (b *builder) buildObject(s *jvalue, path string) (*node, error) {
	n := &node{kind: kindObject}
	required := map[string]bool{}
	if r := s.get("required"); r != nil && r.kind == jArray {
		for _, name := range r.arr {
			if name.kind == jString {
				required[name.str] = true
			}
		}
	}
	if props := s.get("properties"); props != nil {
		if props.kind != jObject {
			return nil, fail(path, "properties must be an object")
		}
		for i, name := range props.keys {
			c, err := b.build(props.vals[i], path+"/properties/"+name)
			if err != nil {
				return nil, err
			}
			n.properties = append(n.properties, property{name, c, required[name]})
		}
	}
	if add := s.get("additionalProperties"); add != nil {
		switch add.kind {
		case jBool:
			if add.b {
				n.additional = &node{kind: kindAny}
			}
		case jObject:
			c, err := b.build(add, path+"/additionalProperties")
			if err != nil {
				return nil, err
			}
			n.additional = c
		default:
			return nil, fail(path, "additionalProperties must be a boolean or a schema")
		}
	} else if !s.has("properties") {
		// {"type": "object"} on its own accepts any object.
		n.additional = &node{kind: kindAny}
	}
	return n, nil
}

func (b *builder) buildArray(s *jvalue, path string) (*node, error) {
	n := &node{kind: kindArray}
	if s.has("items") || s.has("prefixItems") {
		// "items" wins when both are present; an array is a tuple.
		key := "items"
		if !s.has("items") {
			key = "prefixItems"
		}
		items := s.get(key)
		if items.kind == jArray {
			t := &node{kind: kindTuple}
			for i, item := range items.arr {
				c, err := b.build(item, path+"/"+key+"/"+strconv.Itoa(i))
				if err != nil {
					return nil, err
				}
				t.children = append(t.children, c)
			}
			return t, nil
		}
		c, err := b.build(items, path+"/"+key)
		if err != nil {
			return nil, err
		}
		n.items = c
	} else {
		n.items = &node{kind: kindAny}
	}
	var err error
	if n.minItems, err = getCount(s, "minItems", path, 0); err != nil {
		return nil, err
	}
	if n.maxItems, err = getCount(s, "maxItems", path, -1); err != nil {
		return nil, err
	}
	return n, nil
}

func (b *builder) buildString(s *jvalue, path string) (*node, error) {
	n := &node{kind: kindString}
	if p := s.get("pattern"); p != nil {
		if p.kind != jString {
			return nil, fail(path, "pattern must be a string")
		}
		n.pattern = p.str
	}
	var err error
	if n.format, err = getFormat(s, path); err != nil {
		return nil, err
	}
	if n.minLength, err = getCount(s, "minLength", path, 0); err != nil {
		return nil, err
	}
	if n.maxLength, err = getCount(s, "maxLength", path, -1); err != nil {
		return nil, err
	}
	return n, nil
}

func (b *builder) buildInteger(s *jvalue, path string) (*node, error) {
	n := &node{kind: kindInteger, minimum: math.MinInt64, maximum: math.MaxInt64}
	var err error
	if s.has("minimum") {
		n.minimum, err = getBound(s, "minimum", path, true)
	} else if s.has("exclusiveMinimum") {
		n.minimum, err = getBound(s, "exclusiveMinimum", path, false)
		n.minimum++
	}
	if err != nil {
		return nil, err
	}
	if s.has("maximum") {
		n.maximum, err = getBound(s, "maximum", path, false)
	} else if s.has("exclusiveMaximum") {
		n.maximum, err = getBound(s, "exclusiveMaximum", path, true)
		n.maximum--
	}
	return n, err
}

// build normalizes one schema (build_node in the C++).
func (b *builder) build(s *jvalue, path string) (*node, error) {
	if s.kind != jObject {
		return nil, fail(path, "schema must be an object")
	}
	if r := s.get("$ref"); r != nil {
		return b.buildRef(r, path)
	}
	if s.has("oneOf") || s.has("anyOf") {
		key := "anyOf"
		if s.has("oneOf") {
			key = "oneOf"
		}
		return b.buildAlternatives(kindAnyOf, s.get(key), path+"/"+key)
	}
	typ := s.get("type")
	if typ != nil && typ.kind == jArray {
		// {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}.
		if len(typ.arr) == 0 {
			return nil, fail(path, "type must not be empty")
		}
		n := &node{kind: kindAnyOf}
		for i, t := range typ.arr {
			alt := &jvalue{kind: jObject, keys: s.keys, vals: append([]*jvalue(nil), s.vals...)}
			alt.vals[indexOf(alt.keys, "type")] = t
			c, err := b.build(alt, path+"/type/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
		return n, nil
	}
	if c := s.get("const"); c != nil {
		return &node{kind: kindConst, value: c}, nil
	}
	if e := s.get("enum"); e != nil {
		if e.kind != jArray || len(e.arr) == 0 {
			return nil, fail(path, "enum must be a non-empty array")
		}
		return &node{kind: kindEnum, values: e.arr}, nil
	}
	if typ != nil && typ.kind != jNull && typ.kind != jString {
		return nil, fail(path, "type must be a string or an array of strings")
	}
	typeName := ""
	if typ != nil && typ.kind == jString {
		typeName = typ.str
	}
	add := s.get("additionalProperties")
	hasProperties := s.has("properties") || (add != nil && !(add.kind == jBool && add.b))

	switch typeName {
	case "":
		// Without a type the structural keywords decide.
		if hasProperties {
			return b.buildObject(s, path)
		}
		if s.has("allOf") {
			return b.buildAlternatives(kindAllOf, s.get("allOf"), path+"/allOf")
		}
		if s.has("items") || s.has("prefixItems") {
			return b.buildArray(s, path)
		}
		f, err := getFormat(s, path)
		if err != nil {
			return nil, err
		}
		if s.has("pattern") || s.has("minLength") || s.has("maxLength") || f != formatNone {
			return b.buildString(s, path)
		}
		return &node{kind: kindAny}, nil
	case "object":
		if !hasProperties && s.has("allOf") {
			return b.buildAlternatives(kindAllOf, s.get("allOf"), path+"/allOf")
		}
		return b.buildObject(s, path)
	case "string":
		if s.has("allOf") {
			return b.buildAlternatives(kindAllOf, s.get("allOf"), path+"/allOf")
		}
		return b.buildString(s, path)
	case "array":
		return b.buildArray(s, path)
	case "integer":
		return b.buildInteger(s, path)
	case "number":
		return &node{kind: kindNumber}, nil
	case "boolean":
		return &node{kind: kindBoolean}, nil
	case "null":
		return &node{kind: kindNull}, nil
	}
	return nil, fail(path, "unrecognized type "+strconv.Quote(typeName))
}

// parseSchema decodes and normalizes a schema document.
func parseSchema(data []byte) (*node, error) {
	root, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	b := &builder{root: root, refs: map[string]*node{}}
	n, err := b.build(root, "#")
	if err != nil {
		return nil, err
	}
	for _, r := range b.pending {
		r.target = b.refs[r.ref]
	}
	return n, nil
}
