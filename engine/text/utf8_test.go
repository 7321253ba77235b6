package text

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// decodeAll runs pieces through a fresh UTF8Stream and flushes it.
func decodeAll(pieces ...[]byte) string {
	var s UTF8Stream
	var out []byte
	for _, p := range pieces {
		out = s.Append(out, p)
	}
	return string(s.Flush(out))
}

func TestUTF8Stream(t *testing.T) {
	const R = "\uFFFD"
	f := func(in, want string) {
		t.Helper()
		b := []byte(in)
		if got := decodeAll(b); got != want {
			t.Fatalf("%q: got %q, want %q", in, got, want)
		}
		for i := 0; i <= len(b); i++ {
			for j := i; j <= len(b); j++ {
				if got := decodeAll(b[:i], b[i:j], b[j:]); got != want {
					t.Fatalf("%q split at %d,%d: got %q, want %q", in, i, j, got, want)
				}
			}
		}
	}
	f("", "")
	f("plain ascii", "plain ascii")
	f("é世🎉", "é世🎉")
	f("\x80", R)                   // unexpected continuation
	f("\xc0\xaf", R+R)             // C0 can never start a sequence
	f("\xe0\x80\xaf", R+R+R)       // overlong: E0 needs A0..BF next
	f("\xed\xa0\x80", R+R+R)       // surrogate U+D800
	f("\xf4\x90\x80\x80", R+R+R+R) // past U+10FFFF
	f("\xf5\xff", R+R)
	f("\xe4\xb8x", R+"x") // a valid prefix broken by the next byte: one U+FFFD
	f("\xf0\x9f\x8e", R)  // cut short at the end: U+FFFD on Flush
	f("a\xf0\x9f\x8e\xf0\x9f\x8e\x89", "a"+R+"🎉")
	f("\xe4\xb8\xe4\xb8\x96", R+"世")
	f("\xed\x9f\xbf", "\ud7ff")
	f("\xf4\x8f\xbf\xbf", "\U0010FFFF")
}

func TestUTF8StreamHolds(t *testing.T) {
	var s UTF8Stream
	out := s.Append(nil, []byte("a\xf0\x9f"))
	if string(out) != "a" || s.Pending() != 2 {
		t.Fatalf("%q, %d pending", out, s.Pending())
	}
	out = s.Append(out[:0], []byte("\x8e"))
	if len(out) != 0 || s.Pending() != 3 {
		t.Fatalf("%q, %d pending", out, s.Pending())
	}
	if out = s.Append(out[:0], []byte("\x89")); string(out) != "🎉" || s.Pending() != 0 {
		t.Fatalf("%q, %d pending", out, s.Pending())
	}
}

// TestUTF8StreamProperties: random bytes in random pieces always give valid
// UTF-8, the same as in one piece; valid input comes out unchanged.
func TestUTF8StreamProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte("a\x80\xbf\xc2\xdf\xe0\xe4\xed\xef\xf0\xf4\xf5\xa0\x90\x8f\xb8")
	for range 3000 {
		in := make([]byte, rng.IntN(24))
		for i := range in {
			if rng.IntN(3) == 0 {
				in[i] = byte(rng.Uint32())
			} else {
				in[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		whole := decodeAll(in)
		if !utf8.ValidString(whole) {
			t.Fatalf("%q: invalid output %q", in, whole)
		}
		if utf8.Valid(in) && whole != string(in) {
			t.Fatalf("valid %q changed to %q", in, whole)
		}
		var pieces [][]byte
		for rest := in; len(rest) > 0; {
			n := min(rng.IntN(4), len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		if got := decodeAll(pieces...); got != whole {
			t.Fatalf("%q in pieces %q: %q, whole %q", in, pieces, got, whole)
		}
	}
}

func FuzzUTF8Stream(f *testing.F) {
	f.Add([]byte("é世🎉"), 1)
	f.Add([]byte("\xe4\xb8x\xf0\x9f\x8e"), 2)
	f.Add([]byte("\xed\xa0\x80\xf4\x90"), 3)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		whole := decodeAll(in)
		if !utf8.ValidString(whole) {
			t.Fatalf("invalid output %q", whole)
		}
		if utf8.Valid(in) && whole != string(in) {
			t.Fatalf("valid %q changed to %q", in, whole)
		}
		if len(in) > 0 {
			cut = int(uint(cut) % uint(len(in)+1))
			if got := decodeAll(in[:cut], in[cut:]); got != whole {
				t.Fatalf("split at %d: %q, whole %q", cut, got, whole)
			}
		}
		// Byte at a time.
		pieces := make([][]byte, len(in))
		for i := range in {
			pieces[i] = in[i : i+1]
		}
		if got := decodeAll(pieces...); got != whole {
			t.Fatalf("bytewise: %q, whole %q", got, whole)
		}
	})
}

func BenchmarkUTF8Stream(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"ascii", "The quick brown fox jumps over the lazy dog. "},
		{"cjk", "快速的棕色狐狸跳过了懒狗。"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			toks := tokenize(bc.text, 3)
			var s UTF8Stream
			out := make([]byte, 0, 64)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				for _, tok := range toks {
					out = s.Append(out[:0], tok)
				}
			}
		})
	}
}
