package sim

import (
	"slices"
	"testing"
)

func TestCopyIDsAndText(t *testing.T) {
	f := func(ids []int, text string) {
		t.Helper()
		srcIDs, srcText := slices.Clone(ids), []byte(text)
		gotIDs, gotText := copyIDsAndText(srcIDs, srcText)
		clear(srcIDs) // the engine reuses its buffers
		clear(srcText)
		if !slices.Equal(gotIDs, ids) || gotText != text || gotIDs == nil || cap(gotIDs) != len(ids) {
			t.Fatalf("copyIDsAndText(%v, %q) = %v (cap %d), %q", ids, text, gotIDs, cap(gotIDs), gotText)
		}
		_ = append(gotIDs, -1, -1, -1) // the receiver's: may append
		if gotText != text {
			t.Fatalf("appending to the ids changed the text to %q", gotText)
		}
	}
	f(nil, "")
	f([]int{1}, "")
	f(nil, "abc")
	f([]int{1, 2, 3}, "a")
	f([]int{1, 2, 3}, "12345678")
	f([]int{1, 2, 3}, "123456789 héllo")
}
