package grammar

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// llamaCase is one case of llama.cpp's tests/test-json-schema-to-grammar.cpp
// (same release as the vendored libraries), extracted into
// testdata/llama_cpp_cases.json: the C++ converter's expected output.
type llamaCase struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Schema  string `json:"schema"`
	Grammar string `json:"grammar"`
}

// llamaCases reads testdata/llama_cpp_cases.json.
func llamaCases(t *testing.T) []llamaCase {
	t.Helper()
	data, err := os.ReadFile("testdata/llama_cpp_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []llamaCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 70 {
		t.Fatalf("only %d cases in testdata/llama_cpp_cases.json", len(cases))
	}
	return cases
}

var leadingSpace = regexp.MustCompile(`(^|\n)[ \t]+`)

// normalize is the C++ test's trim: outer whitespace and each line's indent
// removed.
func normalize(s string) string {
	return leadingSpace.ReplaceAllString(strings.TrimSpace(s), "$1")
}

// TestLlamaCppCases runs every case of llama.cpp's own converter test and
// requires the same grammar, byte for byte after the C++ test's trim, or a
// failure where the C++ fails.
func TestLlamaCppCases(t *testing.T) {
	for _, c := range llamaCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			got, err := FromJSONSchema([]byte(c.Schema))
			if c.Status == "FAILURE" {
				if err == nil {
					t.Fatalf("converted a schema the C++ refuses:\n%s", got)
				}
				if !errors.Is(err, ErrSchema) {
					t.Fatalf("error %v does not wrap ErrSchema", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromJSONSchema: %v", err)
			}
			if normalize(got) != normalize(c.Grammar) {
				t.Errorf("grammar differs from llama.cpp's\n--- got ---\n%s\n--- want ---\n%s", got, normalize(c.Grammar))
			}
		})
	}
}

// TestGolden converts the schemas in testdata/schemas and compares with the
// .gbnf beside each (rewritten under -update), checked by hand against the
// C++ converter's rules. The .warn files hold the expected warnings.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/schemas/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			schema, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, warnings, err := FromJSONSchemaWarnings(schema)
			if err != nil {
				t.Fatalf("FromJSONSchemaWarnings: %v", err)
			}
			if !strings.HasPrefix(got, "root ::= ") && !strings.Contains(got, "\nroot ::= ") {
				t.Errorf("no root rule:\n%s", got)
			}
			gotWarn := strings.Join(warnings, "\n")
			base := strings.TrimSuffix(f, ".json")
			if *update {
				if err := os.WriteFile(base+".gbnf", []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				if gotWarn != "" {
					if err := os.WriteFile(base+".warn", []byte(gotWarn+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want, err := os.ReadFile(base + ".gbnf")
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("grammar differs\n--- got ---\n%s\n--- want ---\n%s", got, want)
			}
			wantWarn, _ := os.ReadFile(base + ".warn")
			if gotWarn != strings.TrimSuffix(string(wantWarn), "\n") {
				t.Errorf("warnings: got %q, want %q", gotWarn, wantWarn)
			}
		})
	}
}

// TestErrors: refused schemas name the place and the keyword.
func TestErrors(t *testing.T) {
	f := func(schema, wantInError string) {
		t.Helper()
		g, err := FromJSONSchema([]byte(schema))
		if !errors.Is(err, ErrSchema) {
			t.Fatalf("%s: got %q, %v; want ErrSchema", schema, g, err)
		}
		if !strings.Contains(err.Error(), wantInError) {
			t.Errorf("%s: error %q does not mention %q", schema, err, wantInError)
		}
	}
	f(`[]`, "schema must be an object")
	f(`{"type": "object"`, "EOF")
	f(`{} {}`, "trailing data")
	f(`{"type": "decimal"}`, `unrecognized type "decimal"`)
	f(`{"type": 3}`, "type must be a string")
	f(`{"type": []}`, "type must not be empty")
	f(`{"$ref": "https://example.com/s.json"}`, "only references into the same document")
	f(`{"$ref": "#/$defs/missing"}`, "cannot resolve $ref #/$defs/missing")
	f(`{"type": "array", "minItems": -1}`, "minItems must be a non-negative integer")
	f(`{"type": "string", "maxLength": 1.5}`, "maxLength must be a non-negative integer")
	f(`{"type": "integer", "minimum": "0"}`, "minimum must be a number")
	f(`{"enum": []}`, "enum must be a non-empty array")
	f(`{"anyOf": {}}`, "must be an array of schemas")
	f(`{"type": "object", "properties": {"a": {"type": "string", "pattern": "^(ab$"}}}`, `invalid pattern "^(ab$": unbalanced parentheses`)
	f(`{"type": "object", "properties": {"a": 1}}`, "at #/properties/a: schema must be an object")
}

// TestJSONObject: the embedded json_object grammar is the vendored
// json.gbnf of the libraries in use.
func TestJSONObject(t *testing.T) {
	vendored, err := os.ReadFile("../../llama/json.gbnf")
	if err != nil {
		t.Fatalf("engine/llama/json.gbnf: %v", err)
	}
	if JSONObject != string(vendored) {
		t.Error("json.gbnf differs from engine/llama/json.gbnf")
	}
	if !strings.HasPrefix(JSONObject, "root   ::= object") {
		t.Errorf("JSONObject does not start with its root rule: %.40q", JSONObject)
	}
}
