package wsproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// testKey is the masking key of the test frames (any key will do; this one
// has four different bytes so a misaligned unmask shows).
var testKey = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// frame builds one client frame: masked unless op has the unmasked bit
// (0x100) set, with rsv bits from the second argument.
func frame(fin bool, op byte, payload []byte) []byte {
	return rawFrame(fin, 0, op, true, payload)
}

func rawFrame(fin bool, rsv, op byte, masked bool, payload []byte) []byte {
	b0 := op | rsv<<4
	if fin {
		b0 |= 0x80
	}
	var b []byte
	var m byte
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, b0, m|byte(n))
	case n <= 0xffff:
		b = append(b, b0, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, b0, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !masked {
		return append(b, payload...)
	}
	b = append(b, testKey[:]...)
	for i, c := range payload {
		b = append(b, c^testKey[i&3])
	}
	return b
}

func text(s string) []byte { return frame(true, OpText, []byte(s)) }

func closeFrame(code int, reason string) []byte {
	p := []byte{byte(code >> 8), byte(code)}
	return frame(true, OpClose, append(p, reason...))
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// event is one thing the reader returned, for comparisons.
type event struct {
	k Kind
	p string
}

func (e event) String() string {
	name := [...]string{"none", "msg", "ping", "pong", "close"}[e.k]
	if len(e.p) > 40 {
		return fmt.Sprintf("%s(%d bytes)", name, len(e.p))
	}
	return fmt.Sprintf("%s(%q)", name, e.p)
}

// feed runs a Reader over stream as netio does, the stream arriving in
// pieces cut at the given offsets: unconsumed bytes stay buffered and the
// next piece is appended to them. It also checks that bytes not consumed
// are never modified (the reader unmasks in place only what it consumes;
// after a breach the input is dead anyway).
func feed(t testing.TB, max int, stream []byte, cuts ...int) ([]event, error) {
	var r Reader
	r.Init(max)
	var evs []event
	var in []byte
	prev := 0
	cuts = append(cuts, len(stream))
	for _, cut := range cuts {
		in = append(in, stream[prev:cut]...)
		prev = cut
		for {
			orig := append([]byte(nil), in...)
			n, k, p, err := r.Next(in)
			if n < 0 || n > len(in) {
				t.Fatalf("consumed %d of %d bytes", n, len(in))
			}
			if err == nil && !bytes.Equal(in[n:], orig[n:]) {
				t.Fatalf("the reader modified bytes it did not consume")
			}
			if err != nil {
				if n2, _, _, err2 := r.Next(in[n:]); err2 != err || n2 != 0 {
					t.Fatalf("broken reader: got (%d, %v) after %v", n2, err2, err)
				}
				return evs, err
			}
			if k != None {
				evs = append(evs, event{k, string(p)})
			}
			in = append([]byte(nil), in[n:]...) // discard, as gnet does
			if k == None && (n == 0 || len(in) == 0) {
				break
			}
		}
	}
	return evs, nil
}

const testMax = 1 << 20

// TestReader: one line per case, raw client bytes in, events or the
// breach out; each case is also fed split at every offset, and byte by
// byte, with the same result.
func TestReader(t *testing.T) {
	long := strings.Repeat("x", 70000)
	f := func(name string, stream []byte, wantErr error, want ...event) {
		t.Helper()
		check := func(how string, evs []event, err error) {
			t.Helper()
			if err != wantErr {
				t.Fatalf("%s (%s): error %v, want %v", name, how, err, wantErr)
			}
			if fmt.Sprint(evs) != fmt.Sprint(want) {
				t.Fatalf("%s (%s): events %v, want %v", name, how, evs, want)
			}
		}
		evs, err := feed(t, testMax, stream)
		check("whole", evs, err)
		if len(stream) > 300 {
			for _, cut := range []int{1, 2, 7, 100, len(stream) / 2, len(stream) - 1} {
				evs, err = feed(t, testMax, stream, cut)
				check(fmt.Sprintf("cut at %d", cut), evs, err)
			}
			return
		}
		for cut := 0; cut <= len(stream); cut++ {
			evs, err = feed(t, testMax, stream, cut)
			check(fmt.Sprintf("cut at %d", cut), evs, err)
		}
		var every []int
		for i := 1; i < len(stream); i++ {
			every = append(every, i)
		}
		evs, err = feed(t, testMax, stream, every...)
		check("byte by byte", evs, err)
	}
	msg := func(s string) event { return event{Message, s} }

	f("empty text", text(""), nil, msg(""))
	f("small text", text("hello"), nil, msg("hello"))
	f("125 bytes", text(long[:125]), nil, msg(long[:125]))
	f("126 bytes", text(long[:126]), nil, msg(long[:126]))
	f("65535 bytes", text(long[:65535]), nil, msg(long[:65535]))
	f("65536 bytes", text(long[:65536]), nil, msg(long[:65536]))
	f("two messages", cat(text("a"), text("bc")), nil, msg("a"), msg("bc"))
	f("utf-8", text("héllo ☃ 🌊"), nil, msg("héllo ☃ 🌊"))
	f("fragmented", cat(frame(false, OpText, []byte("hel")), frame(false, OpContinuation, []byte("lo ")),
		frame(true, OpContinuation, []byte("sea"))), nil, msg("hello sea"))
	f("fragmented with empty pieces", cat(frame(false, OpText, nil), frame(false, OpContinuation, []byte("ab")),
		frame(true, OpContinuation, nil)), nil, msg("ab"))
	f("ping inside a fragmented message", cat(frame(false, OpText, []byte("hel")), frame(true, OpPing, []byte("p1")),
		frame(true, OpContinuation, []byte("lo"))), nil, event{Ping, "p1"}, msg("hello"))
	f("rune split across fragments", cat(frame(false, OpText, []byte("☃")[:1]), frame(true, OpContinuation, []byte("☃")[1:])),
		nil, msg("☃"))
	f("ping", frame(true, OpPing, []byte("are you there")), nil, event{Ping, "are you there"})
	f("ping 125", frame(true, OpPing, []byte(long[:125])), nil, event{Ping, long[:125]})
	f("pong", frame(true, OpPong, nil), nil, event{Pong, ""})
	f("close empty", frame(true, OpClose, nil), nil, event{Close, ""})
	f("close code", closeFrame(1000, ""), nil, event{Close, "\x03\xe8"})
	f("close code reason", closeFrame(4000, "bye"), nil, event{Close, "\x0f\xa0bye"})

	f("unmasked", rawFrame(true, 0, OpText, false, []byte("hi")), ErrUnmasked)
	f("rsv1 (deflate)", rawFrame(true, 4, OpText, true, []byte("hi")), ErrReservedBits)
	f("rsv3", rawFrame(true, 1, OpText, true, []byte("hi")), ErrReservedBits)
	f("opcode 3", frame(true, 3, nil), ErrOpcode)
	f("opcode 0xB", frame(true, 0xB, nil), ErrOpcode)
	f("binary", frame(true, OpBinary, []byte{1, 2}), ErrBinary)
	f("fragmented ping", frame(false, OpPing, nil), ErrControlFragmented)
	f("long ping", frame(true, OpPing, []byte(long[:126])), ErrControlTooLong)
	f("lone continuation", frame(true, OpContinuation, []byte("x")), ErrContinuation)
	f("text inside a message", cat(frame(false, OpText, []byte("a")), text("b")), ErrInterleaved)
	f("invalid utf-8", text("\xff\xfe"), ErrInvalidUTF8)
	f("invalid utf-8 fragmented", cat(frame(false, OpText, []byte("ok")), frame(true, OpContinuation, []byte{0xc3})), ErrInvalidUTF8)
	f("surrogate", text("\xed\xa0\x80"), ErrInvalidUTF8)
	f("close one byte", frame(true, OpClose, []byte{3}), ErrClosePayload)
	f("close code 1005", closeFrame(1005, ""), ErrCloseCode)
	f("close code 999", closeFrame(999, ""), ErrCloseCode)
	f("close code 5000", closeFrame(5000, ""), ErrCloseCode)
	f("close reason invalid", closeFrame(1000, "\xff"), ErrCloseReason)
	f("non-minimal 16-bit length", []byte{0x81, 0x80 | 126, 0, 5, 1, 2, 3, 4, 'a', 'b', 'c', 'd', 'e'}, ErrLength)
	f("non-minimal 64-bit length", cat([]byte{0x81, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, 200), testKey[:]), ErrLength)
	f("64-bit length MSB", cat([]byte{0x81, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, 1<<63), testKey[:]), ErrLength)
	f("message before a breach", cat(text("ok"), frame(true, OpBinary, nil)), ErrBinary, msg("ok"))
}

// TestReaderMaxMessage: a message over the maximum is refused with 1009 as
// soon as its header says so, whole or fragmented; one at the maximum
// passes.
func TestReaderMaxMessage(t *testing.T) {
	const max = 1000
	at := strings.Repeat("a", max)
	if evs, err := feed(t, max, text(at)); err != nil || len(evs) != 1 || evs[0].p != at {
		t.Fatalf("message at the maximum: %v, %v", evs, err)
	}
	if evs, err := feed(t, max, cat(frame(false, OpText, []byte(at[:600])), frame(true, OpContinuation, []byte(at[:400])))); err != nil || len(evs) != 1 || evs[0].p != at {
		t.Fatalf("fragmented message at the maximum: %v, %v", evs, err)
	}
	if _, err := feed(t, max, text(at+"b")); err != ErrTooBig {
		t.Fatalf("over the maximum: %v, want ErrTooBig", err)
	}
	// Refused on the header: the payload need not arrive.
	hdr := text(at + "b")[:8]
	if _, err := feed(t, max, hdr); err != ErrTooBig {
		t.Fatalf("over the maximum, header only: %v, want ErrTooBig", err)
	}
	if _, err := feed(t, max, cat(frame(false, OpText, []byte(at[:600])), frame(true, OpContinuation, []byte(at[:401])))); err != ErrTooBig {
		t.Fatalf("fragmented over the maximum: %v, want ErrTooBig", err)
	}
}

// TestReaderZeroCopy: a whole one-frame message comes back as a slice of
// the input (unmasked in place); a fragmented one from the reader's buffer.
func TestReaderZeroCopy(t *testing.T) {
	var r Reader
	r.Init(testMax)
	in := text("in place")
	n, k, p, err := r.Next(in)
	if err != nil || k != Message || n != len(in) || string(p) != "in place" {
		t.Fatalf("got %d %v %q %v", n, k, p, err)
	}
	if &p[0] != &in[6] {
		t.Fatal("a whole one-frame message was copied")
	}
}

// TestReaderReleasesBigBuffer: after a message bigger than keepMessageCap
// was reassembled, the reader lets its buffer go.
func TestReaderReleasesBigBuffer(t *testing.T) {
	var r Reader
	r.Init(testMax)
	big := frame(true, OpText, bytes.Repeat([]byte("z"), 100<<10))
	if _, k, _, err := r.Next(big[:1000]); err != nil || k != None {
		t.Fatal(k, err)
	}
	n, k, _, err := r.Next(big[1000:])
	if err != nil || k != Message || n != len(big)-1000+0 {
		t.Fatalf("got %d %v %v", n, k, err)
	}
	if _, _, _, err := r.Next(nil); err != nil || cap(r.msg) != 0 {
		t.Fatalf("kept a %d-byte buffer", cap(r.msg))
	}
}

func TestReaderErrorsAreErrors(t *testing.T) {
	var err error = ErrTooBig
	var we *Error
	if !errors.As(err, &we) || we.Code != CloseMessageTooBig || !strings.Contains(err.Error(), "1009") {
		t.Fatalf("%v", err)
	}
}

// TestUnmask: the word-at-a-time unmask equals the byte-at-a-time
// definition (§5.3) at every key position and length.
func TestUnmask(t *testing.T) {
	for pos := 0; pos < 4; pos++ {
		for n := 0; n < 70; n++ {
			b := make([]byte, n)
			want := make([]byte, n)
			for i := range b {
				b[i] = byte(i * 7)
				want[i] = b[i] ^ testKey[(pos+i)&3]
			}
			if end := unmask(testKey, pos, b); end != (pos+n)&3 || !bytes.Equal(b, want) {
				t.Fatalf("pos %d len %d: got %x end %d", pos, n, b, end)
			}
		}
	}
}

// TestReaderNoAllocationAhead: a header announcing a big message makes the
// reader hold only what arrived, not the announced length.
func TestReaderNoAllocationAhead(t *testing.T) {
	var r Reader
	r.Init(16 << 20)
	in := frame(true, OpText, bytes.Repeat([]byte("a"), 8<<20))[:14+100]
	n, k, _, err := r.Next(in)
	if err != nil || k != None || n != len(in) {
		t.Fatalf("got %d %v %v", n, k, err)
	}
	if c := cap(r.msg); c > 64<<10 {
		t.Fatalf("holds %d bytes for 100 received", c)
	}
}

// TestReaderFailsFast: invalid UTF-8 in the first piece of a long text
// message fails it at once, before the rest arrives; a rune split between
// pieces (and between fragments) does not.
func TestReaderFailsFast(t *testing.T) {
	var r Reader
	r.Init(testMax)
	msg := append([]byte("ok\xff"), bytes.Repeat([]byte("a"), 10000)...)
	in := frame(true, OpText, msg)[:100]
	if _, _, _, err := r.Next(in); err != ErrInvalidUTF8 {
		t.Fatalf("got %v, want ErrInvalidUTF8 on the first piece", err)
	}
	// A 4-byte rune split at every offset of a long message.
	long := append(bytes.Repeat([]byte("b"), 300), "🌊 sea"...)
	wire := frame(true, OpText, long)
	for cut := 300; cut < len(wire); cut++ {
		evs, err := feed(t, testMax, wire, cut)
		if err != nil || len(evs) != 1 || evs[0].p != string(long) {
			t.Fatalf("cut at %d: %v %v", cut, evs, err)
		}
	}
	// A message that ends inside a rune.
	if _, err := feed(t, testMax, cat(frame(false, OpText, []byte("x\xf0\x9f")), frame(true, OpContinuation, []byte("\x8c")))); err != ErrInvalidUTF8 {
		t.Fatalf("truncated rune: %v", err)
	}
}
