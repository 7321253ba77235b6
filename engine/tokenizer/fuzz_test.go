package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzEncode: Encode never panics, gives ids below VocabSize, and for
// valid UTF-8 Decode(Encode(s)) == s wherever the tokenizer is lossless:
// the tiny GGUF model and Llama 3 always, Qwen 3 on NFC text (its
// normalizer is NFC), Gemma 3 on text without ▁ (its normalizer turns
// spaces into ▁). The concatenated pieces are the decoded bytes too for
// the byte-level ones. The real tokenizers join in when make tokenizers
// has fetched them.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "  \t\n\r\n x", "<|im_start|>user\nhi<|im_end|>",
		"<start_of_turn>", "日本語のテキスト", "👩‍💻👍🏽", "e\u0301", "don't I'LL", "12345678", "\xff\xfe",
		"a▁b", strings.Repeat("ab", 100), "<|eot_id|><|eot", "\u00a0\u3000 "} {
		f.Add(s)
	}
	type subject struct {
		name     string
		tok      *Tokenizer
		lossless func(string) bool
		pieces   bool
	}
	_, tiny := tinyModel(f)
	subjects := []subject{{"tiny", tiny, func(string) bool { return true }, true}}
	for _, name := range goldenNames {
		dir, err := realDir(name)
		if err != nil {
			continue
		}
		tok, err := Load(dir)
		if err != nil {
			f.Fatal(err)
		}
		s := subject{name: name, tok: tok}
		switch name {
		case "qwen3":
			s.lossless, s.pieces = norm.NFC.IsNormalString, true
		case "llama3":
			s.lossless, s.pieces = func(string) bool { return true }, true
		case "gemma3":
			s.lossless = func(x string) bool { return !strings.Contains(x, "▁") }
		}
		subjects = append(subjects, s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sub := range subjects {
			ids := sub.tok.Encode(nil, s)
			var pieces []byte
			for _, id := range ids {
				if id < 0 || int(id) >= sub.tok.VocabSize() {
					t.Fatalf("%s: Encode(%q) gave id %d (vocab %d)", sub.name, s, id, sub.tok.VocabSize())
				}
				pieces = sub.tok.AppendPiece(pieces, id)
			}
			dec := sub.tok.Decode(nil, ids, false)
			if !utf8.Valid(dec) {
				t.Fatalf("%s: Decode gave invalid UTF-8 %q", sub.name, dec)
			}
			if utf8.ValidString(s) && sub.lossless(s) {
				if string(dec) != s {
					t.Fatalf("%s: Decode(Encode(%q)) = %q", sub.name, s, dec)
				}
				if sub.pieces && string(pieces) != s {
					t.Fatalf("%s: pieces of Encode(%q) = %q", sub.name, s, pieces)
				}
			}
			_ = sub.tok.EncodeWithSpecial(ids[:0], s)
		}
	})
}
