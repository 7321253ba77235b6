package chattemplate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// tojsonFilter is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), each keyword overridable.
// The engine's own tojson sorts keys and escapes <, > and & once indent is
// given, which changes Llama 3.1's tool prompt; rewriteFilters points every
// "| tojson" here instead.
func tojsonFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, errors.New("tojson: no value")
	}
	var e jsonEncoder
	e.itemSep, e.keySep = ", ", ": "
	if v, ok := arg(args, kwargs, 1, "indent"); ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsInt():
			e.indent = strings.Repeat(" ", max(int(v.AsInt()), 0))
		case v.IsString():
			e.indent = v.AsString()
		default:
			return jinja.Value{}, fmt.Errorf("tojson: indent must be an integer or a string, not %s", v.String())
		}
		e.indented = true
		e.itemSep = ","
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Value{}, errors.New("tojson: separators must be a pair of strings")
		}
		e.itemSep, e.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		e.ensureASCII = v.IsTruthy()
	}
	if err := e.value(args[0], 0); err != nil {
		return jinja.Value{}, err
	}
	return jinja.NewString(e.buf.String()), nil
}

// arg returns positional argument i or keyword name.
func arg(args []jinja.Value, kwargs map[string]jinja.Value, i int, name string) (jinja.Value, bool) {
	if v, ok := kwargs[name]; ok {
		return v, true
	}
	if i < len(args) {
		return args[i], true
	}
	return jinja.Value{}, false
}

// jsonEncoder writes Python json.dumps output.
type jsonEncoder struct {
	buf         strings.Builder
	indent      string
	indented    bool
	itemSep     string
	keySep      string
	sortKeys    bool
	ensureASCII bool
}

// newline starts a line at the given depth (indented output only).
func (e *jsonEncoder) newline(depth int) {
	e.buf.WriteByte('\n')
	for range depth {
		e.buf.WriteString(e.indent)
	}
}

func (e *jsonEncoder) value(v jinja.Value, depth int) error {
	switch {
	case v.IsNone(), v.IsUndefined():
		e.buf.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			e.buf.WriteString("true")
		} else {
			e.buf.WriteString("false")
		}
	case v.IsInt():
		e.buf.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		e.buf.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.str(v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			e.buf.WriteString("[]")
			return nil
		}
		e.buf.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				e.buf.WriteString(e.itemSep)
			}
			if e.indented {
				e.newline(depth + 1)
			}
			if err := e.value(item, depth+1); err != nil {
				return err
			}
		}
		if e.indented {
			e.newline(depth)
		}
		e.buf.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		if d.Len() == 0 {
			e.buf.WriteString("{}")
			return nil
		}
		keys := d.Keys
		if e.sortKeys {
			keys = slices.Clone(keys)
			slices.Sort(keys)
		}
		e.buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.buf.WriteString(e.itemSep)
			}
			if e.indented {
				e.newline(depth + 1)
			}
			e.str(k)
			e.buf.WriteString(e.keySep)
			val, _ := d.Get(k)
			if err := e.value(val, depth+1); err != nil {
				return err
			}
		}
		if e.indented {
			e.newline(depth)
		}
		e.buf.WriteByte('}')
	default:
		return fmt.Errorf("tojson: a %s is not JSON serializable", v.String())
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// str writes s as Python's json encoder does: '"', '\\' and the control
// characters below U+0020 escaped (\n, \r, \t, \b, \f by name, the rest as
// \u00xx), everything else literal unless ensureASCII. Invalid UTF-8 becomes
// U+FFFD (a Python str cannot hold it).
func (e *jsonEncoder) str(s string) {
	b := &e.buf
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		case r >= 0x80 && e.ensureASCII:
			if r > 0xffff {
				r -= 0x10000
				writeU16(b, 0xd800+(r>>10))
				writeU16(b, 0xdc00+(r&0x3ff))
			} else {
				writeU16(b, r)
			}
		default:
			if r == utf8.RuneError {
				b.WriteString("\uFFFD")
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func writeU16(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}

// pyFloat formats f as Python's repr: the shortest digits that round-trip,
// in positional notation with at least one decimal (1.0, 0.0001) when the
// decimal exponent is in [-4, 16), else in exponent notation with a signed
// two-digit-minimum exponent (1e-05, 1e+16). json.dumps spells the
// non-finite values NaN, Infinity and -Infinity.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.LastIndexByte(sci, 'e')
	exp, _ := strconv.Atoi(sci[i+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
