package wsproto

import (
	"fmt"
	"testing"
)

// BenchmarkReader reads one masked text message per iteration, whole in
// the input (the zero-copy path) and in 4 KiB pieces (the reassembly
// path, as a large message arrives over several reads).
func BenchmarkReader(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 64 << 10, 1 << 20} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = 'a' + byte(i%26)
		}
		wire := text(string(msg))
		b.Run(fmt.Sprintf("whole/%d", size), func(b *testing.B) {
			var r Reader
			r.Init(16 << 20)
			in := make([]byte, len(wire))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(in, wire) // the reader unmasks in place
				if n, k, _, err := r.Next(in); err != nil || k != Message || n != len(in) {
					b.Fatal(n, k, err)
				}
			}
		})
		b.Run(fmt.Sprintf("pieces/%d", size), func(b *testing.B) {
			var r Reader
			r.Init(16 << 20)
			in := make([]byte, len(wire))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(in, wire)
				got := false
				for off := 0; off < len(in); {
					end := min(off+4096, len(in))
					n, k, _, err := r.Next(in[off:end])
					if err != nil {
						b.Fatal(err)
					}
					got = got || k == Message
					off += n
					if n == 0 {
						b.Fatal("stuck")
					}
				}
				if !got {
					b.Fatal("no message")
				}
			}
		})
	}
}
