package wsproto

import (
	"fmt"
	"testing"
	"unicode/utf8"
)

// FuzzReader feeds arbitrary client bytes to the reader, whole and split
// in two at a point taken from the input, and checks that it never panics,
// never consumes more than it was given nor modifies what it did not
// consume (feed checks both), that the split changes nothing, and that
// every message it returns is valid UTF-8 within the maximum and every
// control payload within 125 bytes.
func FuzzReader(f *testing.F) {
	seeds := [][]byte{
		text("hello"),
		cat(frame(false, OpText, []byte("hel")), frame(true, OpPing, []byte("p")), frame(true, OpContinuation, []byte("lo"))),
		frame(true, OpText, make([]byte, 300)),
		frame(true, OpText, make([]byte, 70000)),
		closeFrame(1000, "bye"),
		frame(true, OpClose, nil),
		frame(true, OpPong, []byte("x")),
		rawFrame(true, 0, OpText, false, []byte("unmasked")),
		rawFrame(true, 4, OpText, true, []byte("deflated")),
		frame(true, OpBinary, []byte{0}),
		frame(true, 0xB, nil),
		text("\xff"),
		closeFrame(1005, ""),
		{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4},
		{0x81, 0xfe, 0, 1},
	}
	for _, s := range seeds {
		f.Add(s, uint16(len(s)/2))
	}
	const max = 4096
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole, errWhole := feed(t, max, append([]byte(nil), stream...))
		at := int(cut) % (len(stream) + 1)
		split, errSplit := feed(t, max, append([]byte(nil), stream...), at)
		if errWhole != errSplit || fmt.Sprint(whole) != fmt.Sprint(split) {
			t.Fatalf("split at %d: %v %v, whole: %v %v", at, split, errSplit, whole, errWhole)
		}
		for _, e := range whole {
			switch e.k {
			case Message:
				if len(e.p) > max || !utf8.ValidString(e.p) {
					t.Fatalf("bad message %v", e)
				}
			case Ping, Pong, Close:
				if len(e.p) > MaxControlPayload {
					t.Fatalf("long control payload %v", e)
				}
			}
		}
	})
}
