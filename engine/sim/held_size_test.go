package sim

import (
	"testing"
	"unsafe"
)

// TestHeldRequestSize guards the memory of a held stream in the engine: a
// one-choice request's prepared state, group and choice are one allocation
// (preparedOne) that lives as long as the stream, and must stay in the
// allocator's 1 KiB size class (the next is 1,152 bytes). Its prompt's ids
// are int32 (half of []int's memory) and its block hashes are not kept
// (allocGroup computes them at admission).
func TestHeldRequestSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size classes checked are for 64-bit platforms")
	}
	if n := unsafe.Sizeof(preparedOne{}); n > 1024 {
		t.Fatalf("a one-choice request is %d bytes (prepared %d, group %d, seq %d), over the 1 KiB size class",
			n, unsafe.Sizeof(prepared{}), unsafe.Sizeof(group{}), unsafe.Sizeof(seq{}))
	}
	e, err := newEngineNoLoop(Config{})
	if err != nil {
		t.Fatal(err)
	}
	req := chatReq("hello there", 4)
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if cap(req.PromptTokens) != len(req.PromptTokens) {
		t.Fatalf("prompt ids: len %d cap %d, want an exact fit", len(req.PromptTokens), cap(req.PromptTokens))
	}
}
