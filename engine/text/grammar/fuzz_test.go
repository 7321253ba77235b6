package grammar

import (
	"errors"
	"strings"
	"testing"
)

// FuzzFromJSONSchema: any request body's schema either converts or fails
// with an error; it never panics, and a grammar always has a root rule.
// Its EBNF for vLLM and SGLang keeps the root rule, has no empty
// alternative left, and is a fixed point of EBNF.
func FuzzFromJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`,
		`{"type":"array","items":{"anyOf":[{"type":"integer","minimum":-5,"maximum":99},{"type":"null"}]},"minItems":1,"maxItems":4}`,
		`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`,
		`{"type":"string","pattern":"^[a-z]{2,4}(-[0-9]+)?$"}`,
		`{"enum":["a",1,null,{"x":[true]}]}`,
		`{"allOf":[{"type":"object","properties":{"a":{"const":1}}},{"properties":{"b":{"type":"boolean"}}}]}`,
		`{"type":["string","null"],"format":"date-time"}`,
		`{"prefixItems":[{"type":"number"}],"items":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		g, err := FromJSONSchema(schema)
		if err != nil {
			return
		}
		if !strings.Contains(g, Root+" ::=") {
			t.Fatalf("grammar without a root rule for %q:\n%s", schema, g)
		}
		e := EBNF(g)
		if !strings.Contains(e, Root+" ::=") || strings.Contains(e, "::= |") || strings.Contains(e, "| |") {
			t.Fatalf("EBNF of %q:\n%s", schema, e)
		}
		if again := EBNF(e); again != e {
			t.Fatalf("EBNF is not a fixed point for %q:\n%s\n---\n%s", schema, e, again)
		}
	})
}

// FuzzFromRegex: any request's regex either converts or fails with
// ErrRegex; it never panics, a grammar has its root rule, and its EBNF
// keeps it.
func FuzzFromRegex(f *testing.F) {
	for _, s := range []string{`\d{3}-\d{4}`, `(yes|no)`, `[A-Z][a-z]+ \w+`, `a\.+b{2,}`, `"x"|\$[\d.]*`, `((a)|b)?c{0,3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, re string) {
		g, err := FromRegex(re)
		if err != nil {
			if !errors.Is(err, ErrRegex) {
				t.Fatalf("FromRegex(%q): %v does not wrap ErrRegex", re, err)
			}
			return
		}
		if !strings.HasPrefix(g, Root+" ::=") && !strings.Contains(g, "\n"+Root+" ::=") {
			t.Fatalf("grammar without a root rule for %q:\n%s", re, g)
		}
		if e := EBNF(g); !strings.Contains(e, Root+" ::=") {
			t.Fatalf("EBNF of %q:\n%s", re, e)
		}
	})
}
