package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// allValues has one entry of every value type the package encodes.
var allValues = []KV{
	{"u8", uint8(200)},
	{"i8", int8(-100)},
	{"u16", uint16(60000)},
	{"i16", int16(-30000)},
	{"u32", uint32(4000000000)},
	{"i32", int32(-2000000000)},
	{"f32", float32(1.5e-6)},
	{"bool.t", true},
	{"bool.f", false},
	{"str", "héllo\x00world"},
	{"str.empty", ""},
	{"u64", uint64(1) << 63},
	{"i64", int64(-1) << 62},
	{"f64", math.Pi},
	{"a.u8", []uint8{1, 2, 255}},
	{"a.i8", []int8{-1, 0, 1}},
	{"a.u16", []uint16{7, 65535}},
	{"a.i16", []int16{-7, 7}},
	{"a.u32", []uint32{1, 2, 3}},
	{"a.i32", []int32{-1, 0, 1 << 30}},
	{"a.f32", []float32{0.25, -3, float32(math.Inf(1))}},
	{"a.bool", []bool{true, false, true}},
	{"a.str", []string{"a", "", "Ġthe", "<|im_end|>"}},
	{"a.str.empty", []string{}},
	{"a.u64", []uint64{math.MaxUint64}},
	{"a.i64", []int64{math.MinInt64}},
	{"a.f64", []float64{-0.5, 1e300}},
}

func TestRoundTrip(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	f32 := []float32{1, -2, 3.5, 0, 1e-3, -1e6}
	f16 := []float32{1, -2, 3.5, 0, 0.099975586, 65504} // all exact in half
	must(t, w.AddTensor("a.weight", TensorF32, []int64{3, 2}, AppendF32(nil, f32)))
	must(t, w.AddTensor("b.weight", TensorF16, []int64{6}, AppendF16(nil, f16)))
	must(t, w.AddTensor("c.weight", TensorF32, []int64{1, 1, 1, 5}, AppendF32(nil, f32[:5])))
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d, %v; buffer has %d", n, err, buf.Len())
	}
	b := buf.Bytes()

	f, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]KV{{KeyAlignment, uint32(32)}}, allValues...)
	if !reflect.DeepEqual(f.KV, want) {
		t.Errorf("metadata:\n got %v\nwant %v", f.KV, want)
	}
	if f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	wantT := []TensorInfo{
		{"a.weight", []int64{3, 2}, TensorF32, 0},
		{"b.weight", []int64{6}, TensorF16, 32},
		{"c.weight", []int64{1, 1, 1, 5}, TensorF32, 64},
	}
	if !reflect.DeepEqual(f.Tensors, wantT) {
		t.Errorf("tensors:\n got %v\nwant %v", f.Tensors, wantT)
	}
	// The file ends with the last tensor's padded data.
	if want := f.DataOffset + 64 + 32; int64(len(b)) != want {
		t.Errorf("file is %d bytes, want %d", len(b), want)
	}
	for _, c := range []struct {
		name string
		want []float32
	}{{"a.weight", f32}, {"b.weight", f16}, {"c.weight", f32[:5]}} {
		data, err := f.TensorData(bytes.NewReader(b), c.name)
		must(t, err)
		ti, _ := f.Tensor(c.name)
		got, err := DecodeFloats(nil, ti.Type, data)
		must(t, err)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := f.TensorData(bytes.NewReader(b), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v", err)
	}

	// Writing twice gives the same bytes.
	var again bytes.Buffer
	w.WriteTo(&again)
	if !bytes.Equal(again.Bytes(), b) {
		t.Error("second WriteTo differs")
	}
}

// TestGolden checks the encoding byte by byte against the layout in
// gguf.h, written out by hand, so that a mistake shared by the writer and
// the reader cannot hide.
func TestGolden(t *testing.T) {
	w := NewWriter()
	must(t, w.Set("k", uint32(7)))
	must(t, w.Set("s", []string{"ab"}))
	must(t, w.AddTensor("t", TensorF16, []int64{2}, AppendF16(nil, []float32{1, -2})))
	var buf bytes.Buffer
	w.WriteTo(&buf)

	le := binary.LittleEndian
	var g []byte
	g = append(g, "GGUF"...)
	g = le.AppendUint32(g, 3)
	g = le.AppendUint64(g, 1) // tensors
	g = le.AppendUint64(g, 3) // metadata
	g = le.AppendUint64(g, 17)
	g = append(g, "general.alignment"...)
	g = le.AppendUint32(g, 4) // uint32
	g = le.AppendUint32(g, 32)
	g = le.AppendUint64(g, 1)
	g = append(g, 'k')
	g = le.AppendUint32(g, 4)
	g = le.AppendUint32(g, 7)
	g = le.AppendUint64(g, 1)
	g = append(g, 's')
	g = le.AppendUint32(g, 9) // array
	g = le.AppendUint32(g, 8) // of string
	g = le.AppendUint64(g, 1)
	g = le.AppendUint64(g, 2)
	g = append(g, "ab"...)
	g = le.AppendUint64(g, 1)
	g = append(g, 't')
	g = le.AppendUint32(g, 1) // dims
	g = le.AppendUint64(g, 2) // ne[0]
	g = le.AppendUint32(g, 1) // F16
	g = le.AppendUint64(g, 0) // offset
	for len(g)%32 != 0 {
		g = append(g, 0)
	}
	g = append(g, 0x00, 0x3c, 0x00, 0xc0) // 1.0 and -2.0 in half
	for len(g)%32 != 0 {
		g = append(g, 0)
	}
	if !bytes.Equal(buf.Bytes(), g) {
		t.Errorf("got\n%x\nwant\n%x", buf.Bytes(), g)
	}
}

func TestAlignment(t *testing.T) {
	w := NewWriter()
	must(t, w.Set(KeyAlignment, uint32(64)))
	must(t, w.AddTensor("x", TensorF32, []int64{3}, AppendF32(nil, []float32{1, 2, 3})))
	must(t, w.AddTensor("y", TensorF32, []int64{1}, AppendF32(nil, []float32{4})))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, err := Read(bytes.NewReader(buf.Bytes()))
	must(t, err)
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 || int64(buf.Len()) != f.DataOffset+128 {
		t.Errorf("alignment %d, data at %d, y at %d, size %d", f.Alignment, f.DataOffset, f.Tensors[1].Offset, buf.Len())
	}
	if len(f.KV) != 1 {
		t.Errorf("general.alignment set twice: %v", f.KV)
	}
	for _, bad := range []any{uint32(0), uint32(48), int32(64), uint64(64)} {
		if err := w.Set(KeyAlignment, bad); !errors.Is(err, ErrValueType) {
			t.Errorf("alignment %T %v: %v", bad, bad, err)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	f := func(name string, typ TensorType, shape []int64, n int, want error) {
		t.Helper()
		w := NewWriter()
		must(t, w.AddTensor("dup", TensorF32, []int64{1}, make([]byte, 4)))
		if err := w.AddTensor(name, typ, shape, make([]byte, n)); !errors.Is(err, want) {
			t.Errorf("%q %s %v %d bytes: %v, want %v", name, typ, shape, n, err, want)
		}
	}
	f("ok", TensorF16, []int64{2, 3}, 12, nil)
	f("dup", TensorF32, []int64{1}, 4, ErrDuplicate)
	f("", TensorF32, []int64{1}, 4, ErrTensor)
	f(strings.Repeat("n", MaxNameLen), TensorF32, []int64{1}, 4, nil)
	f(strings.Repeat("n", MaxNameLen+1), TensorF32, []int64{1}, 4, ErrTensor)
	f("q8", TensorType(8), []int64{32}, 34, ErrTensor)
	f("nodims", TensorF32, nil, 0, ErrTensor)
	f("5dims", TensorF32, []int64{1, 1, 1, 1, 1}, 4, ErrTensor)
	f("zero", TensorF32, []int64{0}, 0, ErrTensor)
	f("negative", TensorF32, []int64{-1}, 4, ErrTensor)
	f("short", TensorF32, []int64{2, 2}, 15, ErrTensor)
	f("long", TensorF16, []int64{2, 2}, 9, ErrTensor)

	w := NewWriter()
	for _, v := range []any{int(1), nil, []any{1}, [][]string{{"a"}}, map[string]int{}} {
		if err := w.Set("k", v); !errors.Is(err, ErrValueType) {
			t.Errorf("Set(%T): %v", v, err)
		}
	}
}

// TestReadTruncated reads every prefix of a valid file: each must fail
// with ErrFormat, never panic, until the whole header is there.
func TestReadTruncated(t *testing.T) {
	b := sampleFile(t)
	f, err := Read(bytes.NewReader(b))
	must(t, err)
	// The header ends within the padding before the data section.
	i := 0
	for ; ; i++ {
		_, err := Read(bytes.NewReader(b[:i]))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
	if int64(i) <= f.DataOffset-int64(f.Alignment) || int64(i) > f.DataOffset {
		t.Errorf("header read from %d bytes; data at %d", i, f.DataOffset)
	}
}

func TestReadErrors(t *testing.T) {
	le := binary.LittleEndian
	head := func(nt, nkv uint64) []byte {
		b := le.AppendUint32([]byte("GGUF"), 3)
		return le.AppendUint64(le.AppendUint64(b, nt), nkv)
	}
	kv := func(b []byte, key string, typ uint32, val ...byte) []byte {
		b = appendString(b, key)
		return append(le.AppendUint32(b, typ), val...)
	}
	tensor := func(b []byte, name string, ne []uint64, typ uint32, off uint64) []byte {
		b = le.AppendUint32(appendString(b, name), uint32(len(ne)))
		for _, n := range ne {
			b = le.AppendUint64(b, n)
		}
		return le.AppendUint64(le.AppendUint32(b, typ), off)
	}
	u64 := func(v uint64) []byte { return le.AppendUint64(nil, v) }
	f := func(name string, b []byte, want error) {
		t.Helper()
		if _, err := Read(bytes.NewReader(b)); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	f("ok", tensor(head(1, 0), "t", []uint64{4}, 0, 0), nil)
	f("magic", append([]byte("GGUG"), head(0, 0)[4:]...), ErrFormat)
	f("version 2", le.AppendUint64(le.AppendUint64(le.AppendUint32([]byte("GGUF"), 2), 0), 0), ErrFormat)
	f("too many tensors", head(MaxCount+1, 0), ErrLimit)
	f("too many kv", head(0, 1<<62), ErrLimit)
	f("long key", append(head(0, 1), u64(MaxStringLen+1)...), ErrLimit)
	f("huge array", kv(head(0, 1), "a", 9, append(le.AppendUint32(nil, 4), u64(1<<40)...)...), ErrLimit)
	f("value type 13", kv(head(0, 1), "k", 13, 0, 0, 0, 0), ErrFormat)
	f("nested array", kv(head(0, 1), "a", 9, append(le.AppendUint32(nil, 9), u64(1)...)...), ErrFormat)
	f("bool 2", kv(head(0, 1), "b", 7, 2), ErrFormat)
	f("duplicate key", kv(kv(head(0, 2), "k", 0, 1), "k", 0, 1), ErrDuplicate)
	f("alignment int32", kv(head(0, 1), KeyAlignment, 5, 32, 0, 0, 0), ErrFormat)
	f("alignment 24", kv(head(0, 1), KeyAlignment, 4, 24, 0, 0, 0), ErrFormat)
	f("duplicate tensor", tensor(tensor(head(2, 0), "t", []uint64{8}, 0, 0), "t", []uint64{8}, 0, 32), ErrDuplicate)
	f("bad offset", tensor(tensor(head(2, 0), "t", []uint64{9}, 0, 0), "u", []uint64{8}, 0, 36), ErrFormat)
	f("good offset", tensor(tensor(head(2, 0), "t", []uint64{9}, 0, 0), "u", []uint64{8}, 0, 64), nil)
	f("first offset", tensor(head(1, 0), "t", []uint64{4}, 0, 32), ErrFormat)
	f("5 dims", tensor(head(1, 0), "t", []uint64{1, 1, 1, 1, 1}, 0, 0), ErrFormat)
	f("zero dim", tensor(head(1, 0), "t", []uint64{0}, 0, 0), ErrFormat)
	f("overflowing dims", tensor(head(1, 0), "t", []uint64{1 << 32, 1 << 32}, 0, 0), ErrFormat)
	f("q4_0", tensor(head(1, 0), "t", []uint64{32}, 2, 0), ErrFormat)
	f("long name", tensor(head(1, 0), strings.Repeat("x", 64), []uint64{1}, 0, 0), ErrFormat)
}

func sampleFile(t testing.TB) []byte {
	w := NewWriter()
	for _, kv := range allValues {
		must(t, w.Set(kv.Key, kv.Value))
	}
	must(t, w.AddTensor("a", TensorF32, []int64{3, 2}, make([]byte, 24)))
	must(t, w.AddTensor("b", TensorF16, []int64{5}, make([]byte, 10)))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	return buf.Bytes()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
