// Package gguf writes and reads GGUF files, the model format of llama.cpp
// (ggml/include/gguf.h, vendored at engine/llama/include/gguf.h).
//
// A GGUF v3 file is, in order and all little-endian:
//
//	magic "GGUF", uint32 version (3), int64 tensor count, int64 metadata count
//	metadata: key (uint64 length + bytes), int32 value type, value
//	tensor infos: name, uint32 dims, int64 ne[dims], int32 ggml type, uint64 offset
//	padding to the alignment, then each tensor's data padded to the alignment
//
// Strings are a uint64 byte length and the bytes, with no terminator. An
// array value is an int32 element type, a uint64 count and the elements.
// Tensor offsets are relative to the start of the data section and must be
// the running sum of the padded sizes of the tensors before (gguf.cpp
// rejects any other layout). The alignment is the uint32 value of
// general.alignment, 32 when absent.
//
// The package is pure Go. It covers what tiny test models need: every
// metadata value type, and tensors of type F32 and F16.
package gguf

import (
	"errors"
	"fmt"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the format version this package writes and reads (GGUF_VERSION).
const Version = 3

// DefaultAlignment is the data alignment in bytes when a file has no
// general.alignment key (GGUF_DEFAULT_ALIGNMENT).
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the alignment (a uint32 power
// of two).
const KeyAlignment = "general.alignment"

// Limits of ggml that the writer enforces, so that a file it accepts is one
// llama.cpp loads.
const (
	// MaxDims is the most dimensions a tensor has (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxNameLen is the longest tensor name in bytes: GGML_MAX_NAME is 64
	// including the terminating NUL.
	MaxNameLen = 63
)

// Limits of the reader. They bound what a malformed or hostile file can
// make it allocate before the bytes arrive; real files are far below them
// (the largest tokenizer arrays hold a few hundred thousand entries, the
// longest strings are chat templates of some kilobytes).
const (
	// MaxStringLen is the longest string the reader accepts, in bytes.
	MaxStringLen = 16 << 20
	// MaxArrayLen is the most elements the reader accepts in one array.
	MaxArrayLen = 16 << 20
	// MaxCount is the most metadata entries, and the most tensors, the
	// reader accepts.
	MaxCount = 1 << 20
)

// Type is the type of a metadata value (enum gguf_type).
type Type uint32

// The metadata value types. The numbers are the format's.
const (
	TypeUint8   Type = 0
	TypeInt8    Type = 1
	TypeUint16  Type = 2
	TypeInt16   Type = 3
	TypeUint32  Type = 4
	TypeInt32   Type = 5
	TypeFloat32 Type = 6
	TypeBool    Type = 7
	TypeString  Type = 8
	TypeArray   Type = 9
	TypeUint64  Type = 10
	TypeInt64   Type = 11
	TypeFloat64 Type = 12
	typeCount   Type = 13
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t Type) String() string {
	if t < typeCount {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size value of type t, 0 for string
// and array.
func (t Type) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// TensorType is the element type of a tensor (enum ggml_type). The package
// writes and reads F32 and F16 only.
type TensorType uint32

// The supported tensor types. The numbers are ggml's.
const (
	TensorF32 TensorType = 0
	TensorF16 TensorType = 1
)

func (t TensorType) String() string {
	switch t {
	case TensorF32:
		return "F32"
	case TensorF16:
		return "F16"
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// ElemSize is the size in bytes of one element of type t, 0 for a type the
// package does not support.
func (t TensorType) ElemSize() int {
	switch t {
	case TensorF32:
		return 4
	case TensorF16:
		return 2
	}
	return 0
}

// Errors. Each error the package returns wraps one of these; compare with
// errors.Is.
var (
	// ErrFormat: the bytes are not a well-formed GGUF v3 file.
	ErrFormat = errors.New("gguf: malformed file")
	// ErrLimit: a count or length in the file is over one of the reader's
	// limits (MaxStringLen, MaxArrayLen, MaxCount).
	ErrLimit = errors.New("gguf: over limit")
	// ErrValueType: a metadata value has a Go type the package cannot
	// encode, or an array mixes types.
	ErrValueType = errors.New("gguf: unsupported value type")
	// ErrTensor: a tensor is invalid: bad name, shape, type or data size.
	ErrTensor = errors.New("gguf: invalid tensor")
	// ErrDuplicate: a metadata key or tensor name is given twice.
	ErrDuplicate = errors.New("gguf: duplicate name")
	// ErrNotFound: no tensor of that name.
	ErrNotFound = errors.New("gguf: not found")
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	// Name is the tensor's name, like "blk.0.attn_q.weight".
	Name string
	// Shape is ggml's ne: the number of elements along each dimension,
	// innermost (contiguous) first. A weight of n_out rows of n_in inputs
	// is {n_in, n_out}.
	Shape []int64
	// Type is the element type.
	Type TensorType
	// Offset is where the data starts, relative to the data section.
	Offset uint64
}

// Elems is the number of elements of the tensor.
func (t *TensorInfo) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size is the size of the tensor's data in bytes, without padding.
func (t *TensorInfo) Size() int64 { return t.Elems() * int64(t.Type.ElemSize()) }

// pad is n rounded up to a multiple of align (a power of two).
func pad(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }
