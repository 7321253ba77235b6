// Package grammar converts JSON Schemas into GBNF, the grammar language of
// llama.cpp's grammar sampler (see llama.cpp's grammars/README.md).
//
// FromJSONSchema is a port of llama.cpp's common/json-schema-to-grammar.cpp
// and common/json-schema.cpp (the release whose libraries `make llama`
// installs): for a given schema it produces the same rules, so what a model
// may generate under response_format json_schema or a forced tool call
// matches llama.cpp's own server.
//
// Supported, as in the C++:
//   - type object: properties (in the schema's order), required,
//     additionalProperties false, true or a schema; {"type": "object"} alone
//     is any object. Required properties come first in schema order, then
//     the optional ones, each optional at most once and in order.
//   - type array: items (a schema, or an array of schemas as a tuple),
//     prefixItems (a tuple), minItems, maxItems.
//   - type string: minLength, maxLength, pattern (a regular expression
//     anchored with ^ and $; see below), format date, time, date-time and
//     uuid (uuid1..uuid5); other formats are ignored.
//   - type integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum
//     (fractional bounds rounded inwards); type number (bounds ignored);
//     boolean; null.
//   - enum, const (any JSON value, matched as its compact JSON text).
//   - anyOf, oneOf (both as a union), allOf (the merge of its objects'
//     properties, the intersection of its enums), type arrays such as
//     ["string", "null"] (a union of one schema per type).
//   - $ref to any JSON pointer in the same document (#/$defs/x,
//     #/definitions/x, ...), recursion included.
//
// Refused with an error wrapping ErrSchema that names the place and the
// keyword: a schema that is not an object, an unknown type, a $ref that
// leaves the document or does not resolve, malformed counts (minItems and
// the like), bounds or enums, and a pattern that is not a valid regular
// expression.
//
// Ignored, as the C++ ignores them: every other keyword (not, if/then/else,
// uniqueItems, multipleOf, number bounds, minProperties, patternProperties,
// dependentRequired, ...), and a pattern the grammar cannot express (not
// anchored, lookarounds, named groups, backreferences, \d-style classes):
// such a string accepts any string, and FromJSONSchemaWarnings names it.
package grammar

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

// JSONObject is the grammar for response_format json_object: any JSON
// object. It is llama.cpp's grammars/json.gbnf, the same text as
// engine/llama/json.gbnf.
//
//go:embed json.gbnf
var JSONObject string

// ErrSchema reports a JSON Schema the converter cannot turn into a grammar.
var ErrSchema = errors.New("grammar: unsupported JSON schema")

// ErrRegex reports a regular expression FromRegex cannot turn into a
// grammar.
var ErrRegex = errors.New("grammar: unsupported regular expression")

// Root is the name of the start rule of every grammar this package returns.
const Root = "root"

// FromJSONSchema converts a JSON Schema into a GBNF grammar whose start
// rule is Root. Errors wrap ErrSchema. Parts of the schema the grammar
// cannot enforce are dropped silently; FromJSONSchemaWarnings names them.
//
// Safe for concurrent use.
func FromJSONSchema(schema []byte) (string, error) {
	g, _, err := FromJSONSchemaWarnings(schema)
	return g, err
}

// FromJSONSchemaWarnings is FromJSONSchema that also returns warnings naming
// the parts of the schema the grammar does not enforce (patterns it cannot
// express); they are for logs, the grammar is usable.
//
// Safe for concurrent use.
func FromJSONSchemaWarnings(schema []byte) (gbnf string, warnings []string, err error) {
	n, err := parseSchema(schema)
	if err != nil {
		return "", nil, err
	}
	c := newConverter()
	c.visit(n, "")
	if len(c.errs) > 0 {
		return "", nil, fmt.Errorf("%w: %s", ErrSchema, strings.Join(c.errs, "; "))
	}
	return c.format(), c.warnings, nil
}

// FromRegex converts a regular expression into a GBNF grammar whose start
// rule is Root and whose sentences are the strings it matches whole, as
// vLLM's structured_outputs.regex constrains an answer ('^' and '$' may
// be given or left out). It takes what the JSON schema converter takes
// in a pattern, and also \d, \w, \s, their negations and escaped
// punctuation; lookarounds, backreferences and other anchors it refuses
// with an error wrapping ErrRegex.
//
// Safe for concurrent use.
func FromRegex(re string) (string, error) {
	p := re
	if !strings.HasPrefix(p, "^") {
		p = "^" + p
	}
	if !strings.HasSuffix(p, "$") || strings.HasSuffix(p, `\$`) && !strings.HasSuffix(p, `\\$`) {
		p += "$"
	}
	c := newConverter()
	c.shorthands = true
	delete(c.rules, "space")
	top, err := c.patternSeq(p, Root)
	if err != nil {
		return "", fmt.Errorf("%w %q: %v", ErrRegex, re, err)
	}
	c.rules[Root] = top
	return c.format(), nil
}

// FromChoices returns a GBNF grammar whose start rule is Root and whose
// sentences are exactly choices (vLLM's structured_outputs.choice).
func FromChoices(choices []string) string {
	var b strings.Builder
	b.WriteString(Root + " ::= ")
	for i, s := range choices {
		if i > 0 {
			b.WriteString(" | ")
		}
		b.WriteString(formatLiteral(s))
	}
	b.WriteByte('\n')
	return b.String()
}
