package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// tinyJSON is tokenizer.json for the tiny model's vocabulary, in Hugging
// Face's format, with the given extra top-level fields replaced.
func tinyJSON(t testing.TB, edit func(m map[string]any)) []byte {
	t.Helper()
	v := tinymodel.DefaultVocab()
	vocab := map[string]int32{}
	var added []map[string]any
	for id, s := range v.Tokens {
		vocab[s] = int32(id)
		if v.Types[id] != tinymodel.TypeNormal {
			added = append(added, map[string]any{"id": id, "content": s, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": v.Types[id] == tinymodel.TypeControl})
		}
	}
	m := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": v.Merges},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFromFilesMatchesGGUF: the same vocabulary as tokenizer.json and as
// GGUF encodes the corpus the same way.
func TestFromFilesMatchesGGUF(t *testing.T) {
	_, g := tinyModel(t)
	h, err := FromFiles(map[string][]byte{FileTokenizer: tinyJSON(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	corpus := readJSONLines[string](t, filepath.Join("testdata", "corpus.jsonl.gz"))
	for _, s := range corpus {
		if a, b := h.Encode(nil, s), g.Encode(nil, s); !slices.Equal(a, b) {
			t.Fatalf("Encode(%q): tokenizer.json %v, GGUF %v", s, a, b)
		}
	}
}

// TestConfig: tokenizer_config.json's special tokens, add_bos_token and
// named chat templates, generation_config.json's EOS ids, and a template
// in chat_template.jinja.
func TestConfig(t *testing.T) {
	files := map[string][]byte{
		FileTokenizer: tinyJSON(t, func(m map[string]any) {
			m["post_processor"] = map[string]any{"type": "TemplateProcessing",
				"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<|endoftext|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"special_tokens": map[string]any{"<|endoftext|>": map[string]any{"id": "<|endoftext|>", "ids": []int{tinymodel.TokenEndOfText}, "tokens": []string{"<|endoftext|>"}}}}
		}),
		FileTokenizerConfig: []byte(`{"bos_token": {"content": "<|endoftext|>", "lstrip": false}, "eos_token": "<|im_end|>",
			"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`),
		FileGenerationConfig: []byte(`{"eos_token_id": [258, 257]}`),
	}
	tok, err := FromFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if s, id, ok := tok.BOS(); s != "<|endoftext|>" || id != tinymodel.TokenEndOfText || !ok {
		t.Errorf("BOS() = %q %d %v", s, id, ok)
	}
	if s, id, ok := tok.EOS(); s != "<|im_end|>" || id != tinymodel.TokenIMEnd || !ok {
		t.Errorf("EOS() = %q %d %v", s, id, ok)
	}
	if got := tok.EOSIDs(); !slices.Equal(got, []int32{tinymodel.TokenIMEnd, tinymodel.TokenIMStart}) {
		t.Errorf("EOSIDs() = %v", got)
	}
	if !tok.AddBOS() {
		t.Error("AddBOS() = false; the post-processor adds BOS")
	}
	if tok.ChatTemplate() != "D" || tok.NamedTemplates()["tool_use"] != "T" {
		t.Errorf("templates %q %v", tok.ChatTemplate(), tok.NamedTemplates())
	}
	ids := tok.EncodeWithSpecial(nil, "hi")
	if ids[0] != tinymodel.TokenEndOfText || slices.Contains(tok.Encode(nil, "hi"), tinymodel.TokenEndOfText) {
		t.Errorf("EncodeWithSpecial = %v", ids)
	}
	if got := tok.Decode(nil, []int32{tinymodel.TokenIMStart, 104, 105, tinymodel.TokenThink}, true); string(got) != "hi<think>" {
		t.Errorf("Decode(skip special) = %q", got)
	}
	if id, ok := tok.TokenID("<|im_start|>"); !ok || id != tinymodel.TokenIMStart {
		t.Errorf("TokenID = %d %v", id, ok)
	}
	if got := tok.AppendPiece(nil, tinymodel.TokenIMStart); string(got) != "<|im_start|>" {
		t.Errorf("AppendPiece = %q", got)
	}

	files[FileTokenizerConfig] = []byte(`{"add_bos_token": false, "chat_template": "S"}`)
	files[FileChatTemplate] = []byte("J")
	if tok, err = FromFiles(files); err != nil {
		t.Fatal(err)
	}
	if tok.AddBOS() || tok.ChatTemplate() != "J" {
		t.Errorf("AddBOS %v, ChatTemplate %q", tok.AddBOS(), tok.ChatTemplate())
	}

	// Load takes a folder or the tokenizer.json in it.
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, FileTokenizer)} {
		tok, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if tok.ChatTemplate() != "J" || tok.EOSIDs()[0] != tinymodel.TokenIMEnd {
			t.Errorf("Load(%s): template %q, EOS ids %v", p, tok.ChatTemplate(), tok.EOSIDs())
		}
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing path succeeded")
	}
}

// TestUnsupported: components this package does not implement are named
// in Load's error.
func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		field string
		value any
		want  string
	}{
		{"normalizer", map[string]any{"type": "BertNormalizer"}, `normalizer "BertNormalizer"`},
		{"pre_tokenizer", map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}, "behavior": "Isolated"}, `Split regex "\\w+"`},
		{"pre_tokenizer", map[string]any{"type": "Punctuation"}, `pre-tokenizer "Punctuation"`},
		{"decoder", map[string]any{"type": "WordPiece"}, `decoder "WordPiece"`},
		{"post_processor", map[string]any{"type": "Whatever"}, `post-processor "Whatever"`},
		{"model", map[string]any{"type": "Unigram", "vocab": []any{}}, `model "Unigram"`},
	} {
		_, err := FromFiles(map[string][]byte{FileTokenizer: tinyJSON(t, func(m map[string]any) { m[c.field] = c.value })})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: error %v, want ErrUnsupported naming %s", c.field, c.value, err, c.want)
		}
	}
	if _, err := FromFiles(map[string][]byte{}); err == nil {
		t.Error("FromFiles without tokenizer.json succeeded")
	}
	if _, err := FromFiles(map[string][]byte{FileTokenizer: []byte("{")}); err == nil {
		t.Error("FromFiles of bad JSON succeeded")
	}
}

// TestAddedTokenFlags: lstrip, rstrip and single_word as Hugging Face's
// AddedVocabulary applies them.
func TestAddedTokenFlags(t *testing.T) {
	tok, err := FromFiles(map[string][]byte{FileTokenizer: tinyJSON(t, func(m map[string]any) {
		added := m["added_tokens"].([]map[string]any)
		for _, a := range added {
			switch a["content"] {
			case "<think>":
				a["lstrip"], a["rstrip"] = true, true
			case "<tool_call>":
				a["single_word"] = true
			}
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) []int32 { return tok.Encode(nil, s) }
	// lstrip/rstrip: the spaces around <think> belong to it.
	if got, want := enc("a  <think>  b"), slices.Concat(enc("a"), []int32{tinymodel.TokenThink}, enc("b")); !slices.Equal(got, want) {
		t.Errorf("lstrip/rstrip: %v, want %v", got, want)
	}
	// single_word: inside a word it is not the token.
	if got := enc("x<tool_call>y"); slices.Contains(got, tinymodel.TokenToolCall) {
		t.Errorf("single_word matched inside a word: %v", got)
	}
	if got := enc("x <tool_call> y"); !slices.Contains(got, tinymodel.TokenToolCall) {
		t.Errorf("single_word not matched between spaces: %v", got)
	}
}

// TestConcurrentEncode: one Tokenizer used from 8 goroutines gives the
// same ids as sequentially (run with -race).
func TestConcurrentEncode(t *testing.T) {
	_, tok := tinyModel(t)
	corpus := readJSONLines[string](t, filepath.Join("testdata", "corpus.jsonl.gz"))[:1500]
	want := make([][]int32, len(corpus))
	for i, s := range corpus {
		want[i] = tok.Encode(nil, s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []int32
			var text []byte
			for k := range corpus {
				i := (k*7 + g*131) % len(corpus)
				ids = tok.Encode(ids[:0], corpus[i])
				text = tok.Decode(text[:0], ids, false)
				if !slices.Equal(ids, want[i]) || string(text) != corpus[i] {
					errs <- corpus[i]
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode/Decode of %q differs", s)
	}
}
