package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// File is the header of a GGUF file: its metadata and tensor infos. The
// tensor data stays in the file; DataOffset and TensorInfo.Offset locate it.
type File struct {
	// Version is the format version (3).
	Version uint32
	// KV is the metadata in file order.
	KV []KV
	// Tensors is the tensor infos in file order.
	Tensors []TensorInfo
	// Alignment is the data alignment: general.alignment or
	// DefaultAlignment.
	Alignment uint64
	// DataOffset is where the data section starts in the file.
	DataOffset int64
}

// Value is the value of the metadata entry key (of one of the types listed
// on KV), or nil and false.
func (f *File) Value(key string) (any, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Tensor is the info of the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// TensorData reads the data of the tensor called name from r, the file f
// was read from.
func (f *File) TensorData(r io.ReaderAt, name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q", ErrNotFound, name)
	}
	b := make([]byte, t.Size())
	if _, err := r.ReadAt(b, f.DataOffset+int64(t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: reading tensor %q: %w", name, err)
	}
	return b, nil
}

// ReadFile reads the header of the GGUF file at path (see Read).
func ReadFile(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return Read(fd)
}

// Read reads the header of a GGUF v3 file from r: everything up to the
// data section, which it does not read. It checks the layout the way
// gguf.cpp does: known value types, tensor names unique and at most
// MaxNameLen bytes, at most MaxDims positive dimensions, supported tensor
// types (F32 and F16), and each tensor offset the padded end of the one
// before. Counts and lengths over the reader's limits give ErrLimit; any
// other defect gives ErrFormat.
func Read(r io.Reader) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10)}
	f, err := d.file()
	if err != nil {
		return nil, fmt.Errorf("%w (at byte %d)", err, d.off)
	}
	return f, nil
}

type decoder struct {
	r   *bufio.Reader
	off int64
	buf [8]byte
}

func (d *decoder) read(n int) ([]byte, error) {
	k, err := io.ReadFull(d.r, d.buf[:n])
	d.off += int64(k)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return d.buf[:n], nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 count and checks it against limit.
func (d *decoder) count(what string, limit uint64) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, fmt.Errorf("%w: %s %d > %d", ErrLimit, what, n, limit)
	}
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.count("string length", MaxStringLen)
	if err != nil {
		return "", err
	}
	// Read in pieces so that a length the file does not back costs no
	// more memory than the bytes that are there.
	var b []byte
	for len(b) < n {
		k := min(n-len(b), 64<<10)
		b = growBytes(b, k)
		got, err := io.ReadFull(d.r, b[len(b):len(b)+k])
		d.off += int64(got)
		if err != nil {
			return "", fmt.Errorf("%w: string: %w", ErrFormat, io.ErrUnexpectedEOF)
		}
		b = b[:len(b)+k]
	}
	return string(b), nil
}

func (d *decoder) file() (*File, error) {
	b, err := d.read(4)
	if err != nil {
		return nil, err
	}
	if string(b) != Magic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrFormat, b, Magic)
	}
	f := &File{Alignment: DefaultAlignment}
	if f.Version, err = d.u32(); err != nil {
		return nil, err
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrFormat, f.Version, Version)
	}
	nt, err := d.count("tensor count", MaxCount)
	if err != nil {
		return nil, err
	}
	nkv, err := d.count("metadata count", MaxCount)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for range nkv {
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: key %q", ErrDuplicate, key)
		}
		seen[key] = true
		t, err := d.u32()
		if err != nil {
			return nil, err
		}
		v, err := d.value(Type(t), true)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if key == KeyAlignment {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("%w: %s = %v (%T), want a uint32 power of two", ErrFormat, key, v, v)
			}
			f.Alignment = uint64(a)
		}
		f.KV = append(f.KV, KV{key, v})
	}
	clear(seen)
	var next uint64 // the offset the next tensor must have
	for range nt {
		t, err := d.tensorInfo()
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: tensor %q", ErrDuplicate, t.Name)
		}
		seen[t.Name] = true
		if t.Offset != next {
			return nil, fmt.Errorf("%w: tensor %q at offset %d, want %d", ErrFormat, t.Name, t.Offset, next)
		}
		next += pad(uint64(t.Size()), f.Alignment)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = int64(pad(uint64(d.off), f.Alignment))
	return f, nil
}

func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str(); err != nil {
		return t, err
	}
	if t.Name == "" || len(t.Name) > MaxNameLen {
		return t, fmt.Errorf("%w: tensor name of %d bytes", ErrFormat, len(t.Name))
	}
	nd, err := d.u32()
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > MaxDims {
		return t, fmt.Errorf("%w: tensor %q has %d dimensions", ErrFormat, t.Name, nd)
	}
	n := int64(1)
	for range nd {
		v, err := d.u64()
		if err != nil {
			return t, err
		}
		// Bound the element count so that Size cannot overflow.
		if v == 0 || v > math.MaxInt64/8/uint64(n) {
			return t, fmt.Errorf("%w: tensor %q has dimension %d", ErrFormat, t.Name, v)
		}
		n *= int64(v)
		t.Shape = append(t.Shape, int64(v))
	}
	typ, err := d.u32()
	if err != nil {
		return t, err
	}
	t.Type = TensorType(typ)
	if t.Type.ElemSize() == 0 {
		return t, fmt.Errorf("%w: tensor %q has unsupported type %s", ErrFormat, t.Name, t.Type)
	}
	if t.Offset, err = d.u64(); err != nil {
		return t, err
	}
	return t, nil
}

// value reads a value of type t. Arrays may not nest (gguf.cpp refuses
// them too).
func (d *decoder) value(t Type, arrayOK bool) (any, error) {
	if t == TypeArray {
		if !arrayOK {
			return nil, fmt.Errorf("%w: nested array", ErrFormat)
		}
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		n, err := d.count("array length", MaxArrayLen)
		if err != nil {
			return nil, err
		}
		return d.array(Type(et), n)
	}
	if t == TypeString {
		return d.str()
	}
	sz := t.size()
	if sz == 0 {
		return nil, fmt.Errorf("%w: value type %d", ErrFormat, uint32(t))
	}
	b, err := d.read(sz)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, fmt.Errorf("%w: bool %d", ErrFormat, b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	}
	return math.Float64frombits(le.Uint64(b)), nil // TypeFloat64
}

// array reads n elements of type et into a slice of the matching Go type.
// Slices grow as elements arrive rather than being sized from n up front.
func (d *decoder) array(et Type, n int) (any, error) {
	switch et {
	case TypeUint8:
		return readArray[uint8](d, et, n)
	case TypeInt8:
		return readArray[int8](d, et, n)
	case TypeUint16:
		return readArray[uint16](d, et, n)
	case TypeInt16:
		return readArray[int16](d, et, n)
	case TypeUint32:
		return readArray[uint32](d, et, n)
	case TypeInt32:
		return readArray[int32](d, et, n)
	case TypeFloat32:
		return readArray[float32](d, et, n)
	case TypeBool:
		return readArray[bool](d, et, n)
	case TypeString:
		return readArray[string](d, et, n)
	case TypeUint64:
		return readArray[uint64](d, et, n)
	case TypeInt64:
		return readArray[int64](d, et, n)
	case TypeFloat64:
		return readArray[float64](d, et, n)
	}
	return nil, fmt.Errorf("%w: array of type %d", ErrFormat, uint32(et))
}

func readArray[T any](d *decoder, et Type, n int) ([]T, error) {
	out := make([]T, 0, min(n, 1024))
	for range n {
		v, err := d.value(et, false)
		if err != nil {
			return nil, err
		}
		out = append(out, v.(T))
	}
	return out, nil
}
