//go:build !race

package v032

import "testing"

// TestDecodeAllocs guards the output path's decoding: once its slices
// have grown, a message costs no allocation, inline or out-of-line
// logprobs alike.
func TestDecodeAllocs(t *testing.T) {
	for _, rows := range []int{1, 40} {
		msg, aux := AppendOutputs(nil, nil, sampleOutputs(rows))
		frames := append([][]byte{msg}, aux...)
		var o Outputs
		if err := o.Decode(frames); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(100, func() { _ = o.Decode(frames) }); a > 0 {
			t.Fatalf("rows %d: %.1f allocations per decode", rows, a)
		}
	}
}
