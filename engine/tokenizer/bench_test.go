package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchPrompts are the 8 KB prompts of testdata (made by gen_golden.py,
// and read by bench/tokenizer/hf_bench.py for the comparison with Hugging
// Face): English prose with code, and a mix of scripts, emoji, code,
// whitespace runs and special-token text.
var benchPrompts = []string{"en", "mixed"}

func readPrompt(tb testing.TB, kind string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "prompt-"+kind+".txt"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// BenchmarkEncode encodes each 8 KB prompt with each real tokenizer; it
// reports tokens/s beside B/s. Run on one core:
// taskset -c 1 go test -run - -bench Encode -cpu 1 ./engine/tokenizer/
func BenchmarkEncode(b *testing.B) {
	for _, name := range goldenNames {
		for _, kind := range benchPrompts {
			b.Run(name+"/"+kind, func(b *testing.B) {
				tok := loadReal(b, name)
				p := readPrompt(b, kind)
				dst := tok.Encode(nil, p)
				n := len(dst)
				b.SetBytes(int64(len(p)))
				b.ReportAllocs()
				start := time.Now()
				b.ResetTimer()
				for b.Loop() {
					dst = tok.Encode(dst[:0], p)
				}
				b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkDecode decodes the ids of each 8 KB prompt.
func BenchmarkDecode(b *testing.B) {
	for _, name := range goldenNames {
		b.Run(name, func(b *testing.B) {
			tok := loadReal(b, name)
			p := readPrompt(b, "mixed")
			ids := tok.Encode(nil, p)
			var out []byte
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				out = tok.Decode(out[:0], ids, false)
			}
		})
	}
}

// TestEncodeAllocs: in steady state (scratch pooled, word cache warm, dst
// big enough) Encode allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			tok := loadReal(t, name)
			for _, kind := range benchPrompts {
				p := readPrompt(t, kind)
				dst := tok.Encode(nil, p)
				if a := testing.AllocsPerRun(50, func() { dst = tok.Encode(dst[:0], p) }); a != 0 {
					t.Errorf("%s: Encode allocates %.1f times per call", kind, a)
				}
			}
		})
	}
}
