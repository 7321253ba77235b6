package grammar

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

func TestEBNF(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`space ::= | " " | "\n"{1,2} [ \t]{0,20}`, `space ::= "" | " " | "\n"{1,2} [ \t]{0,20}`},
		{`a ::= "x" |` + "\n" + `b ::= "y"`, `a ::= "x" | ""` + "\n" + `b ::= "y"`},
		{`a ::= "x" |`, `a ::= "x" | ""`},
		{`a ::= ( | "x") (| "y" |)`, `a ::= ( "" | "x") ("" | "y" |"" )`},
		{`a ::= "x" |` + "\n" + `  "y"`, `a ::= "x" |` + "\n" + `  "y"`}, // a rule over two lines
		// Bars, parentheses and ::= inside literals and classes are text.
		{`a ::= "|" | "(|)" | [|(]` + "\n" + `b ::= "::= |" "\"|"`, `a ::= "|" | "(|)" | [|(]` + "\n" + `b ::= "::= |" "\"|"`},
		{`a ::= [^"\\\x7F\x00-\x1F] | "\\"`, `a ::= [^"\\\x7F\x00-\x1F] | "\\"`},
		{`a ::= "a\-b" "\." "\[x\]" "\"\\\n\x41"`, `a ::= "a-b" "." "[x]" "\"\\\n\x41"`},
		{"# a comment | with bars\na ::= | \"x\"", "# a comment | with bars\na ::= \"\" | \"x\""},
	} {
		if got := EBNF(c.in); got != c.want {
			t.Errorf("EBNF(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestEBNFXGrammar compiles every grammar the converter's tests hold
// (llama.cpp's own cases and the golden schemas), and the forced
// tool-call and json_object grammars, in the xgrammar that vLLM's venv
// (`make vllm`) carries, and checks that a few accept what they must and
// refuse what they must not. Skips without the venv, fails with
// VAJRA_REQUIRE_VLLM.
func TestEBNFXGrammar(t *testing.T) {
	bin := vllmserver.Need(t)
	var grammars []string
	for _, c := range llamaCases(t) {
		if c.Status == "SUCCESS" {
			grammars = append(grammars, normalize(c.Grammar))
		}
	}
	files, _ := filepath.Glob("testdata/schemas/*.gbnf")
	for _, f := range files {
		g, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, string(g))
	}
	weather := `{"type":"object","additionalProperties":false,"required":["city"],"properties":{"city":{"type":"string","enum":["Paris","Oslo"]}}}`
	tools := &engine.Request{
		Tools:      []engine.Tool{{Name: "get_weather", Parameters: []byte(weather)}},
		ToolChoice: engine.ToolChoice{Mode: engine.ToolChoiceRequired},
	}
	required, _, _, ferr := ForToolChoice(tools)
	if ferr != nil {
		t.Fatal(ferr)
	}
	answer, err := FromJSONSchema([]byte(`{"type":"object","required":["answer"],"additionalProperties":false,"properties":{"answer":{"type":"string","enum":["yes","no"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	object, err := FromJSONSchema([]byte(`{"type":"object"}`)) // response_format json_object
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		Grammar int    `json:"grammar"`
		Text    string `json:"text"`
		Accept  bool   `json:"accept"`
	}
	grammars = append(grammars, object, required, answer)
	checks := []check{
		{len(grammars) - 3, `{"a": [1, "x", {"b": null}], "c": true}`, true},
		{len(grammars) - 3, `[1]`, false},
		{len(grammars) - 2, `[{"name": "get_weather", "parameters": {"city": "Paris"}}]`, true},
		{len(grammars) - 2, `[{"name":"get_weather","parameters":{"city":"Oslo"}}, {"name":"get_weather","parameters":{"city":"Paris"}}]`, true},
		{len(grammars) - 2, `[{"name": "get_time", "parameters": {"city": "Paris"}}]`, false},
		{len(grammars) - 2, `[]`, false},
		{len(grammars) - 1, `{"answer": "yes"}`, true},
		{len(grammars) - 1, `{"answer":"no"}`, true},
		{len(grammars) - 1, `{"answer": "maybe"}`, false},
		{len(grammars) - 1, "{\n\n\n\"answer\": \"yes\"}", false}, // whitespace is bounded
	}
	for i := range grammars {
		grammars[i] = EBNF(grammars[i])
	}
	in, _ := json.Marshal(map[string]any{"grammars": grammars, "checks": checks})
	cmd := exec.Command(filepath.Join(bin, "python"), "-c", xgrammarCheck)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("xgrammar: %v\n%s", err, out)
	}
	var res struct {
		Version string   `json:"version"`
		Errors  []string `json:"errors"`
		Checks  []bool   `json:"checks"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("xgrammar %s compiled %d grammars", res.Version, len(grammars))
	for i, e := range res.Errors {
		if e != "" {
			t.Errorf("xgrammar refuses grammar %d: %s\n%s", i, e, grammars[i])
		}
	}
	for i, c := range checks {
		if res.Checks[i] != c.Accept {
			t.Errorf("xgrammar accepts %q: %v, want %v", c.Text, res.Checks[i], c.Accept)
		}
	}
}

// xgrammarCheck reads {"grammars", "checks"} on stdin and prints each
// grammar's compile error ("" when none) and each check's verdict.
const xgrammarCheck = `
import json, sys
from importlib.metadata import version
import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string
req = json.load(sys.stdin)
errors, compiled = [], []
for g in req["grammars"]:
    try:
        compiled.append(xgr.Grammar.from_ebnf(g))
        errors.append("")
    except Exception as e:
        compiled.append(None)
        errors.append(str(e))
checks = [compiled[c["grammar"]] is not None and bool(_is_grammar_accept_string(compiled[c["grammar"]], c["text"])) for c in req["checks"]]
print(json.dumps({"version": version("xgrammar"), "errors": errors, "checks": checks}))
`
