package tokenizer

import "testing"

// BenchmarkLoad reads each real tokenizer's files and builds it.
func BenchmarkLoad(b *testing.B) {
	for _, name := range goldenNames {
		b.Run(name, func(b *testing.B) {
			dir := tokenizerDir(b, name)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
