package sim

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/mailru/easyjson/jlexer"

	"github.com/vajra-go/vajra/codegen"
)

// schemaKind is the JSON type a schema node asks for.
type schemaKind uint8

const (
	kindAny schemaKind = iota
	kindString
	kindNumber
	kindInteger
	kindBoolean
	kindArray
	kindObject
	kindNull
)

// schema is the part of a JSON Schema the simulator honours when it writes a
// value: type (a list takes its first non-null entry), properties in
// declaration order, required, items, enum, const, numeric bounds, array and
// string lengths, format for a few string formats, anyOf/oneOf (first
// non-null branch), allOf (first branch) and local $ref into $defs or
// definitions.
type schema struct {
	kind     schemaKind
	props    []schemaProp
	items    *schema
	enum     [][]byte // raw JSON values
	constVal []byte
	anyOf    []*schema
	ref      string
	defs     map[string]*schema // at the root only
	format   string

	min, max             float64
	hasMin, hasMax       bool
	exclMin, exclMax     bool
	minItems, maxItems   int
	minLength, maxLength int
}

type schemaProp struct {
	name     string
	s        *schema
	required bool
}

// maxSchemaDepth bounds nesting, in parsing and in writing values (a
// recursive $ref would otherwise never end).
const maxSchemaDepth = 16

var errSchemaDepth = errors.New("schema nested too deeply")

// parseSchema parses raw JSON Schema bytes once per request, with a
// streaming lexer (no reflection). Empty input is the empty schema.
func parseSchema(data []byte) (*schema, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return &schema{kind: kindObject}, nil
	}
	l := jlexer.Lexer{Data: data}
	root := &schema{}
	parseNode(&l, root, root, 0)
	l.Consumed()
	if err := l.Error(); err != nil {
		return nil, err
	}
	return root, nil
}

// parseNode fills s from the lexer's next value; defs collects $defs at the
// root.
func parseNode(l *jlexer.Lexer, s, root *schema, depth int) {
	if depth > maxSchemaDepth {
		l.AddError(errSchemaDepth)
		return
	}
	switch l.CurrentToken() {
	case jlexer.TokenBool, jlexer.TokenNull:
		l.Skip() // true / false schemas: anything (or nothing) goes
		return
	}
	var required []string
	l.Delim('{')
	for !l.IsDelim('}') && l.Ok() {
		key := l.UnsafeFieldName(false)
		l.WantColon()
		switch key {
		case "type":
			if l.IsDelim('[') {
				l.Delim('[')
				for !l.IsDelim(']') && l.Ok() {
					if k := kindOf(l.UnsafeString()); s.kind == kindAny || s.kind == kindNull {
						s.kind = k
					}
					l.WantComma()
				}
				l.Delim(']')
			} else {
				s.kind = kindOf(l.UnsafeString())
			}
		case "properties":
			l.Delim('{')
			for !l.IsDelim('}') && l.Ok() {
				name := strings.Clone(l.UnsafeFieldName(false))
				l.WantColon()
				child := &schema{}
				parseNode(l, child, root, depth+1)
				s.props = append(s.props, schemaProp{name: name, s: child})
				l.WantComma()
			}
			l.Delim('}')
		case "required":
			l.Delim('[')
			for !l.IsDelim(']') && l.Ok() {
				required = append(required, l.String())
				l.WantComma()
			}
			l.Delim(']')
		case "items":
			if l.IsDelim('[') { // tuple form: the first item's schema for all
				l.Delim('[')
				for i := 0; !l.IsDelim(']') && l.Ok(); i++ {
					if i == 0 {
						s.items = &schema{}
						parseNode(l, s.items, root, depth+1)
					} else {
						l.SkipRecursive()
					}
					l.WantComma()
				}
				l.Delim(']')
			} else {
				s.items = &schema{}
				parseNode(l, s.items, root, depth+1)
			}
		case "enum":
			l.Delim('[')
			for !l.IsDelim(']') && l.Ok() {
				s.enum = append(s.enum, append([]byte(nil), l.Raw()...))
				l.WantComma()
			}
			l.Delim(']')
		case "const":
			s.constVal = append([]byte(nil), l.Raw()...)
		case "anyOf", "oneOf", "allOf":
			l.Delim('[')
			for !l.IsDelim(']') && l.Ok() {
				c := &schema{}
				parseNode(l, c, root, depth+1)
				s.anyOf = append(s.anyOf, c)
				l.WantComma()
			}
			l.Delim(']')
		case "$ref":
			s.ref = l.String()
		case "$defs", "definitions":
			l.Delim('{')
			for !l.IsDelim('}') && l.Ok() {
				name := key + "/" + l.UnsafeFieldName(false)
				l.WantColon()
				c := &schema{}
				parseNode(l, c, root, depth+1)
				if root.defs == nil {
					root.defs = map[string]*schema{}
				}
				root.defs["#/"+name] = c
				l.WantComma()
			}
			l.Delim('}')
		case "format":
			s.format = l.String()
		case "minimum":
			s.min, s.hasMin = l.Float64(), true
		case "maximum":
			s.max, s.hasMax = l.Float64(), true
		case "exclusiveMinimum":
			if l.CurrentToken() == jlexer.TokenNumber {
				s.min, s.hasMin, s.exclMin = l.Float64(), true, true
			} else {
				s.exclMin = l.Bool() // draft 4
			}
		case "exclusiveMaximum":
			if l.CurrentToken() == jlexer.TokenNumber {
				s.max, s.hasMax, s.exclMax = l.Float64(), true, true
			} else {
				s.exclMax = l.Bool()
			}
		case "minItems":
			s.minItems = l.Int()
		case "maxItems":
			s.maxItems = l.Int() + 1 // stored +1 so that 0 means "none"
		case "minLength":
			s.minLength = l.Int()
		case "maxLength":
			s.maxLength = l.Int() + 1
		default:
			l.SkipRecursive()
		}
		l.WantComma()
	}
	l.Delim('}')
	for _, r := range required {
		for i := range s.props {
			if s.props[i].name == r {
				s.props[i].required = true
			}
		}
	}
	if s.kind == kindAny {
		switch {
		case len(s.props) > 0:
			s.kind = kindObject
		case s.items != nil:
			s.kind = kindArray
		}
	}
}

func kindOf(t string) schemaKind {
	switch t {
	case "string":
		return kindString
	case "number":
		return kindNumber
	case "integer":
		return kindInteger
	case "boolean":
		return kindBoolean
	case "array":
		return kindArray
	case "object":
		return kindObject
	case "null":
		return kindNull
	}
	return kindAny
}

// jsonObjectSchema is what response_format json_object writes: an object
// with one answer string.
var jsonObjectSchema = &schema{kind: kindObject, props: []schemaProp{
	{name: "answer", s: &schema{kind: kindString, minLength: 12}, required: true},
}}

// appendValue appends a JSON value valid for s (for the keywords schema
// honours) to dst, drawing choices from r and words from c. root resolves
// $ref.
func (s *schema) appendValue(dst []byte, c *corpus, r *rng, depth int) []byte {
	return s.write(dst, s, c, r, depth)
}

func (s *schema) write(dst []byte, root *schema, c *corpus, r *rng, depth int) []byte {
	if depth > maxSchemaDepth {
		return append(dst, "null"...)
	}
	if s.ref != "" {
		if d, ok := root.defs[s.ref]; ok {
			return d.write(dst, root, c, r, depth+1)
		}
	}
	if s.constVal != nil {
		return append(dst, s.constVal...)
	}
	if len(s.enum) > 0 {
		return append(dst, s.enum[r.intn(len(s.enum))]...)
	}
	if s.kind == kindAny && len(s.anyOf) > 0 {
		pick := s.anyOf[0]
		for _, a := range s.anyOf {
			if a.kind != kindNull {
				pick = a
				break
			}
		}
		return pick.write(dst, root, c, r, depth+1)
	}
	switch s.kind {
	case kindObject:
		dst = append(dst, '{')
		n := 0
		for _, p := range s.props {
			if !p.required && r.intn(2) == 0 {
				continue
			}
			if n > 0 {
				dst = append(dst, ", "...)
			}
			n++
			dst = codegen.AppendJSONStringS(dst, p.name)
			dst = append(dst, ": "...)
			dst = p.s.write(dst, root, c, r, depth+1)
		}
		return append(dst, '}')
	case kindArray:
		n := max(s.minItems, 1+r.intn(3))
		if s.maxItems > 0 {
			n = min(n, s.maxItems-1)
		}
		dst = append(dst, '[')
		for i := range n {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			if s.items != nil {
				dst = s.items.write(dst, root, c, r, depth+1)
			} else {
				dst = codegen.AppendJSONStringS(dst, c.word(r))
			}
		}
		return append(dst, ']')
	case kindInteger:
		lo, hi := 1.0, 100.0
		if s.hasMin {
			lo = math.Ceil(s.min)
			if s.exclMin && lo == s.min {
				lo++
			}
		}
		if s.hasMax {
			hi = math.Floor(s.max)
			if s.exclMax && hi == s.max {
				hi--
			}
		}
		if !s.hasMax || hi < lo {
			hi = max(hi, lo+99)
		}
		if !s.hasMin && s.hasMax {
			lo = min(lo, hi)
		}
		v := int64(lo) + int64(r.intn(int(min(hi-lo, 1<<30))+1))
		return strconv.AppendInt(dst, v, 10)
	case kindNumber:
		lo, hi := 0.0, 100.0
		if s.hasMin {
			lo = s.min
		}
		if s.hasMax {
			hi = s.max
		} else {
			hi = lo + 100
		}
		if s.hasMax && !s.hasMin {
			lo = hi - 100
		}
		v := lo + (hi-lo)*(0.1+0.8*r.float())
		if r2 := math.Round(v*100) / 100; r2 > lo && r2 < hi {
			v = r2
		}
		return strconv.AppendFloat(dst, v, 'f', -1, 64)
	case kindBoolean:
		if r.intn(2) == 0 {
			return append(dst, "false"...)
		}
		return append(dst, "true"...)
	case kindNull:
		return append(dst, "null"...)
	default:
		return s.writeString(dst, c, r)
	}
}

// writeString writes a string value: a date, time, email or URI for those
// formats, else a few corpus words, within minLength and maxLength.
func (s *schema) writeString(dst []byte, c *corpus, r *rng) []byte {
	var b []byte
	switch s.format {
	case "date":
		b = append(b, "2024-05-17"...)
	case "date-time":
		b = append(b, "2024-05-17T09:30:00Z"...)
	case "time":
		b = append(b, "09:30:00"...)
	case "email":
		b = append(append(b, c.word(r)...), "@example.com"...)
	case "uri", "url":
		b = append(append(b, "https://example.com/"...), c.word(r)...)
	case "uuid":
		const hex = "0123456789abcdef"
		for i := range 36 {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				b = append(b, '-')
			} else {
				b = append(b, hex[r.intn(16)])
			}
		}
	default:
		b = c.phrase(b, r, 1+r.intn(4))
	}
	for len(b) < s.minLength {
		b = append(append(b, ' '), c.word(r)...)
	}
	if s.maxLength > 0 && len(b) > s.maxLength-1 {
		b = b[:s.maxLength-1] // corpus text is ASCII
	}
	return codegen.AppendJSONString(dst, b)
}
