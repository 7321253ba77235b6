package gguf

import (
	"math"
	"testing"
)

func TestF16Bits(t *testing.T) {
	f := func(in float32, want uint16) {
		t.Helper()
		if got := F16Bits(in); got != want {
			t.Errorf("F16Bits(%g) = %#04x, want %#04x", in, got, want)
		}
	}
	f(0, 0)
	f(float32(math.Copysign(0, -1)), 0x8000)
	f(1, 0x3c00)
	f(-2, 0xc000)
	f(0.5, 0x3800)
	f(65504, 0x7bff)                   // largest half
	f(65519, 0x7bff)                   // rounds down
	f(65520, 0x7c00)                   // ties to even: up to infinity
	f(1+1.0/2048, 0x3c00)              // halfway between 1 and the next half: even is 1
	f(1+3.0/2048, 0x3c02)              // halfway, odd below: up
	f(1+1.0/2048+1.0/(1<<20), 0x3c01)  // just over halfway: up
	f(1.0/(1<<14), 0x0400)             // smallest normal
	f(1.0/(1<<24), 0x0001)             // smallest subnormal
	f(1.0/(1<<25), 0x0000)             // halfway to it: even is 0
	f(1.5/(1<<25), 0x0001)             // over halfway
	f(3.0/(1<<25), 0x0002)             // 1.5 subnormal units: even is 2
	f(1.0/(1<<14)-1.0/(1<<25), 0x0400) // rounds up into the normals
	f(float32(math.Inf(1)), 0x7c00)
	f(float32(math.Inf(-1)), 0xfc00)
	f(1e-30, 0)
	f(math.SmallestNonzeroFloat32, 0)
	if h := F16Bits(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN: %#04x", h)
	}
}

// TestF16RoundTrip: every half but NaNs survives F16Float then F16Bits.
func TestF16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		v := F16Float(uint16(h))
		if v != v {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decodes to NaN", h)
			}
			continue
		}
		if got := F16Bits(v); got != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, v, got)
		}
	}
}
