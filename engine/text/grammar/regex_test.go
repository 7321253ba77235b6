package grammar

import (
	"errors"
	"testing"
)

// TestFromRegex: a regular expression becomes the grammar of the strings
// it matches whole, anchors or none, with the shorthand classes and
// escapes vLLM's users write; what a grammar cannot say is refused.
func TestFromRegex(t *testing.T) {
	cases := []struct{ re, want string }{
		{`\d{3}-\d{4}`, "root ::= root-1{3,3} \"-\" root-1{4,4}\nroot-1 ::= [0-9]\n"},
		{`^(yes|no)$`, "root ::= (\"yes\" | \"no\")\n"},
		{`yes|no`, "root ::= \"yes\" | \"no\"\n"},
		{`[A-Z][a-z]+ \w+`, "root ::= [A-Z] [a-z]+ \" \" [a-zA-Z0-9_]+\n"},
		{`a\/b\.+c`, "root ::= \"a/b\" \".\"+ \"c\"\n"},
		{`[\d.]+\s?\S`, "root ::= [0-9.]+ [ \\t\\n\\r\\x0B\\x0C]? [^ \\t\\n\\r\\x0B\\x0C]\n"},
		{`say "hi"`, "root ::= \"say \\\"hi\\\"\"\n"},
		{`price: \$\d+`, "root ::= \"price: $\" [0-9]+\n"},
	}
	for _, c := range cases {
		g, err := FromRegex(c.re)
		if err != nil || g != c.want {
			t.Errorf("FromRegex(%q) = %q, %v; want %q", c.re, g, err, c.want)
		}
	}
	for _, re := range []string{`(?=x)y`, `\bfoo`, `(a`, `*a`, `a$b`} {
		if g, err := FromRegex(re); !errors.Is(err, ErrRegex) {
			t.Errorf("FromRegex(%q) = %q, %v; want ErrRegex", re, g, err)
		}
	}
}

// TestFromRegexKeepsSchemaPatterns: the shorthands are FromRegex's only;
// a JSON schema's pattern converts as llama.cpp's converter does.
func TestFromRegexKeepsSchemaPatterns(t *testing.T) {
	_, warns, err := FromJSONSchemaWarnings([]byte(`{"type":"string","pattern":"^\\d+$"}`))
	if err != nil || len(warns) != 1 {
		t.Fatalf("schema pattern with \\d: warnings %q, err %v; want llama.cpp's one warning", warns, err)
	}
}

func TestFromChoices(t *testing.T) {
	got := FromChoices([]string{"yes", `no "x"`, "a\nb"})
	if want := "root ::= \"yes\" | \"no \\\"x\\\"\" | \"a\\nb\"\n"; got != want {
		t.Fatalf("FromChoices = %q, want %q", got, want)
	}
}
