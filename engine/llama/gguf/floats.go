package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendF32 appends vals as little-endian float32: the data of an F32
// tensor.
func AppendF32(dst []byte, vals []float32) []byte {
	dst = growBytes(dst, 4*len(vals))
	for _, v := range vals {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst
}

// AppendF16 appends vals as little-endian IEEE 754 half floats (rounded
// with F16Bits): the data of an F16 tensor.
func AppendF16(dst []byte, vals []float32) []byte {
	dst = growBytes(dst, 2*len(vals))
	for _, v := range vals {
		dst = binary.LittleEndian.AppendUint16(dst, F16Bits(v))
	}
	return dst
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		return nb
	}
	return b
}

// F16Bits is f as an IEEE 754 binary16, rounded to nearest, ties to even
// (as ggml's conversion does). Values beyond the half range become
// infinities; NaN stays NaN.
func F16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // a quiet NaN
		}
		return sign | 0x7c00
	}
	// e is the biased half exponent: float32 bias 127, half bias 15.
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		// Normal: keep the top 10 of the 23 mantissa bits and round on the
		// other 13. A carry out of the mantissa correctly bumps the
		// exponent, up to infinity.
		q := uint16(e)<<10 | uint16(mant>>13)
		rem, half := mant&0x1fff, uint32(0x1000)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | q
	}
	// Subnormal half: the value is q * 2^-24. With the implicit bit the
	// float32 significand full is worth full * 2^(exp-150), so q is full
	// shifted right by 14-e. Beyond 24 bits even the rounding bit is gone.
	shift := uint(14 - e)
	if shift > 24 {
		return sign
	}
	full := mant | 0x800000
	q := full >> shift
	rem, half := full&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return sign | uint16(q)
}

// F16Float is the value of the IEEE 754 binary16 h.
func F16Float(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		f := float32(mant) / (1 << 24) // exact: mant has 10 bits
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// DecodeFloats appends to dst the elements of tensor data of type typ, as
// float32.
func DecodeFloats(dst []float32, typ TensorType, data []byte) ([]float32, error) {
	switch typ {
	case TensorF32:
		if len(data)%4 != 0 {
			return dst, fmt.Errorf("%w: F32 data of %d bytes", ErrTensor, len(data))
		}
		for i := 0; i < len(data); i += 4 {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))
		}
	case TensorF16:
		if len(data)%2 != 0 {
			return dst, fmt.Errorf("%w: F16 data of %d bytes", ErrTensor, len(data))
		}
		for i := 0; i < len(data); i += 2 {
			dst = append(dst, F16Float(binary.LittleEndian.Uint16(data[i:])))
		}
	default:
		return dst, fmt.Errorf("%w: unsupported type %s", ErrTensor, typ)
	}
	return dst, nil
}
