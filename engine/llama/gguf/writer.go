package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// KV is one metadata entry.
//
// Value holds one of the Go types that map to a GGUF value type: uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, or a slice of one of them (a GGUF array). The reader returns
// values as these same types.
type KV struct {
	Key   string
	Value any
}

// Writer collects the metadata and tensors of a GGUF file and writes it.
// The zero Writer is not ready: use NewWriter. A Writer is not safe for
// concurrent use.
type Writer struct {
	kvs     []KV
	keys    map[string]int // key -> index in kvs
	tensors []writerTensor
	names   map[string]bool
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns a Writer whose first metadata entry is
// general.alignment = DefaultAlignment (uint32), which Set may replace.
func NewWriter() *Writer {
	w := &Writer{keys: map[string]int{}, names: map[string]bool{}}
	w.kvs = append(w.kvs, KV{KeyAlignment, uint32(DefaultAlignment)})
	w.keys[KeyAlignment] = 0
	return w
}

// Set adds the metadata entry key = value, or replaces the value of key if
// it is already set (the entry keeps its place). Value must be of one of
// the types listed on KV; general.alignment must be a uint32 power of two.
func (w *Writer) Set(key string, value any) error {
	if _, _, err := appendValue(nil, value); err != nil {
		return fmt.Errorf("%w: key %q", err, key)
	}
	if key == KeyAlignment {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("%w: %s must be a uint32 power of two, got %T %v", ErrValueType, key, value, value)
		}
	}
	if i, ok := w.keys[key]; ok {
		w.kvs[i].Value = value
		return nil
	}
	w.keys[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{key, value})
	return nil
}

// AddTensor adds a tensor. Shape is ggml's ne, innermost dimension first
// (see TensorInfo.Shape); data is the tensor's elements, little-endian, and
// must be exactly its size (AppendF32 and AppendF16 make it). The Writer
// keeps data, unchanged, until WriteTo returns: the caller must not modify
// it before then. Tensors are written in the order they are added.
func (w *Writer) AddTensor(name string, typ TensorType, shape []int64, data []byte) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: name %q must have 1 to %d bytes", ErrTensor, name, MaxNameLen)
	}
	if w.names[name] {
		return fmt.Errorf("%w: tensor %q", ErrDuplicate, name)
	}
	if typ.ElemSize() == 0 {
		return fmt.Errorf("%w: %s has unsupported type %s", ErrTensor, name, typ)
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("%w: %s has %d dimensions, want 1 to %d", ErrTensor, name, len(shape), MaxDims)
	}
	n := int64(1)
	for _, d := range shape {
		if d <= 0 || d > math.MaxInt64/n {
			return fmt.Errorf("%w: %s has shape %v", ErrTensor, name, shape)
		}
		n *= d
	}
	info := TensorInfo{Name: name, Shape: append([]int64(nil), shape...), Type: typ}
	if int64(len(data)) != info.Size() {
		return fmt.Errorf("%w: %s %s %v needs %d bytes of data, got %d", ErrTensor, name, typ, shape, info.Size(), len(data))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{info, data})
	return nil
}

// Alignment is the alignment the file will be written with: the value of
// general.alignment.
func (w *Writer) Alignment() uint64 {
	return uint64(w.kvs[w.keys[KeyAlignment]].Value.(uint32))
}

// WriteTo writes the file to dst. It returns the number of bytes written
// and the first error from dst. It may be called more than once.
func (w *Writer) WriteTo(dst io.Writer) (int64, error) {
	align := w.Alignment()
	hdr := make([]byte, 0, 4096)
	hdr = append(hdr, Magic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, Version)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(w.tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		hdr = appendString(hdr, kv.Key)
		var err error
		// Set checked every value; this cannot fail.
		if hdr, _, err = appendValue(hdr, kv.Value); err != nil {
			return 0, err
		}
	}
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		hdr = appendString(hdr, t.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			hdr = binary.LittleEndian.AppendUint64(hdr, uint64(d))
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(t.Type))
		hdr = binary.LittleEndian.AppendUint64(hdr, t.Offset)
		off += pad(uint64(t.Size()), align)
	}
	hdr = appendZeros(hdr, pad(uint64(len(hdr)), align)-uint64(len(hdr)))

	cw := &countWriter{w: dst}
	bw := bufio.NewWriterSize(cw, 64<<10)
	bw.Write(hdr)
	var zeros [256]byte // the padding after one tensor is under the alignment
	for _, t := range w.tensors {
		bw.Write(t.data)
		p := pad(uint64(len(t.data)), align) - uint64(len(t.data))
		for p > 0 {
			k := min(p, uint64(len(zeros)))
			bw.Write(zeros[:k])
			p -= k
		}
	}
	// bufio.Writer keeps the first error of dst and returns it from Flush.
	err := bw.Flush()
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func appendZeros(dst []byte, n uint64) []byte {
	for ; n > 0; n-- {
		dst = append(dst, 0)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendValue appends the type and encoding of v.
func appendValue(dst []byte, v any) ([]byte, Type, error) {
	le := binary.LittleEndian
	typ := func(t Type) []byte { return le.AppendUint32(dst, uint32(t)) }
	switch v := v.(type) {
	case uint8:
		return append(typ(TypeUint8), v), TypeUint8, nil
	case int8:
		return append(typ(TypeInt8), byte(v)), TypeInt8, nil
	case uint16:
		return le.AppendUint16(typ(TypeUint16), v), TypeUint16, nil
	case int16:
		return le.AppendUint16(typ(TypeInt16), uint16(v)), TypeInt16, nil
	case uint32:
		return le.AppendUint32(typ(TypeUint32), v), TypeUint32, nil
	case int32:
		return le.AppendUint32(typ(TypeInt32), uint32(v)), TypeInt32, nil
	case float32:
		return le.AppendUint32(typ(TypeFloat32), math.Float32bits(v)), TypeFloat32, nil
	case bool:
		return append(typ(TypeBool), boolByte(v)), TypeBool, nil
	case string:
		return appendString(typ(TypeString), v), TypeString, nil
	case uint64:
		return le.AppendUint64(typ(TypeUint64), v), TypeUint64, nil
	case int64:
		return le.AppendUint64(typ(TypeInt64), uint64(v)), TypeInt64, nil
	case float64:
		return le.AppendUint64(typ(TypeFloat64), math.Float64bits(v)), TypeFloat64, nil
	case []uint8:
		return appendArray(typ(TypeArray), TypeUint8, v, func(b []byte, x uint8) []byte { return append(b, x) }), TypeArray, nil
	case []int8:
		return appendArray(typ(TypeArray), TypeInt8, v, func(b []byte, x int8) []byte { return append(b, byte(x)) }), TypeArray, nil
	case []uint16:
		return appendArray(typ(TypeArray), TypeUint16, v, le.AppendUint16), TypeArray, nil
	case []int16:
		return appendArray(typ(TypeArray), TypeInt16, v, func(b []byte, x int16) []byte { return le.AppendUint16(b, uint16(x)) }), TypeArray, nil
	case []uint32:
		return appendArray(typ(TypeArray), TypeUint32, v, le.AppendUint32), TypeArray, nil
	case []int32:
		return appendArray(typ(TypeArray), TypeInt32, v, func(b []byte, x int32) []byte { return le.AppendUint32(b, uint32(x)) }), TypeArray, nil
	case []float32:
		return appendArray(typ(TypeArray), TypeFloat32, v, func(b []byte, x float32) []byte { return le.AppendUint32(b, math.Float32bits(x)) }), TypeArray, nil
	case []bool:
		return appendArray(typ(TypeArray), TypeBool, v, func(b []byte, x bool) []byte { return append(b, boolByte(x)) }), TypeArray, nil
	case []string:
		return appendArray(typ(TypeArray), TypeString, v, appendString), TypeArray, nil
	case []uint64:
		return appendArray(typ(TypeArray), TypeUint64, v, le.AppendUint64), TypeArray, nil
	case []int64:
		return appendArray(typ(TypeArray), TypeInt64, v, func(b []byte, x int64) []byte { return le.AppendUint64(b, uint64(x)) }), TypeArray, nil
	case []float64:
		return appendArray(typ(TypeArray), TypeFloat64, v, func(b []byte, x float64) []byte { return le.AppendUint64(b, math.Float64bits(x)) }), TypeArray, nil
	}
	return dst, 0, fmt.Errorf("%w: %T", ErrValueType, v)
}

func appendArray[T any](dst []byte, elem Type, vs []T, app func([]byte, T) []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(elem))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(vs)))
	for _, v := range vs {
		dst = app(dst, v)
	}
	return dst
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
