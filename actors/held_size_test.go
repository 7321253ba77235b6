package actors

import (
	"testing"
	"unsafe"
)

// TestHeldSessionSize guards the memory of a held stream: its session,
// with its mailbox and dialect, is one allocation (sessionWith) that lives
// as long as the stream, so a chat session must stay in the allocator's
// 1,280-byte size class (the next is 1,408). A field that pushes it over
// belongs behind a pointer allocated when used (as saveWait is), or in a
// one-byte slot next to the others.
func TestHeldSessionSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size classes checked are for 64-bit platforms")
	}
	var x struct {
		s session
		d chatDialect
	}
	if n := unsafe.Sizeof(x); n > 1280 {
		t.Fatalf("a chat session is %d bytes (session %d, chatDialect %d), over the 1,280-byte size class",
			n, unsafe.Sizeof(x.s), unsafe.Sizeof(x.d))
	}
}
