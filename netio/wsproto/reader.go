package wsproto

import (
	"encoding/binary"
	"unicode/utf8"
)

// Kind is what Reader.Next found.
type Kind uint8

const (
	// None: nothing complete yet; Next wants more bytes.
	None Kind = iota
	// Message: a complete text message, reassembled if it was fragmented.
	Message
	// Ping, Pong: a control frame; the payload is its application data.
	Ping
	Pong
	// Close: the client's close frame (§5.5.1); the payload, validated, is
	// empty or a code and a UTF-8 reason (see CloseCode).
	Close
)

// keepMessageCap is the largest reassembly buffer a Reader keeps between
// messages: a connection that once received a 15 MiB audio append does not
// hold 15 MiB for the rest of its life, and one that exchanges small
// fragmented messages reuses its buffer.
const keepMessageCap = 64 << 10

// Reader reads client frames incrementally. The zero value is not ready:
// call Init. Not safe for concurrent use (one per connection, on its loop).
//
// Next is fed the bytes buffered so far and reports how many it consumed;
// the caller discards those and feeds the rest, plus what arrives, later.
// A frame whose header is incomplete, and a control frame (at most 131
// bytes) whose payload is incomplete, consume nothing and wait. A data
// frame is consumed as its bytes arrive: a 15 MiB message does not sit in
// the caller's input buffer (which gnet copies whole on every Peek once it
// wraps), it is unmasked into the Reader's message buffer piece by piece.
//
// Zero copy: a message that is one frame wholly in buf (the usual case) is
// unmasked in place and returned as a slice of buf; only fragmented or
// partially arrived messages are copied, once, into the message buffer.
// The input is modified only in bytes that the same call consumes.
type Reader struct {
	max int // the longest message accepted, in bytes

	// The data frame being read (inFrame): whether it is final, its mask
	// key and the key's position, and the payload bytes still to come.
	inFrame bool
	fin     bool
	key     [4]byte
	keyPos  int
	left    uint64

	// msgOp is OpText while a message is being reassembled from frames
	// (or a one-frame message's payload is arriving), 0 between messages.
	msgOp byte
	msg   []byte
	// valid is how much of msg is known to be valid UTF-8: text is checked
	// as it arrives, so an invalid byte fails the message at once (§8.1
	// allows failing fast), not after 16 MiB more.
	valid int
	// delivered: the last Next returned msg, which is reset at the next.
	delivered bool

	err *Error // the breach that broke the stream; sticky
}

// Init readies r for a new connection whose messages may be up to
// maxMessage bytes (after reassembly).
func (r *Reader) Init(maxMessage int) {
	*r = Reader{max: maxMessage, msg: r.msg[:0]}
}

// Next consumes what it can of buf, the client's bytes not consumed yet,
// up to and including the first complete message or control frame. It
// returns the number of bytes consumed, what was found and its payload:
// for a Message, the whole unmasked message; for a control frame, its
// unmasked payload. The payload is a slice of buf or of the Reader's own
// buffer and is valid until the next call of Next or until the caller
// discards the consumed bytes of buf, whichever comes first.
//
// A breach of the protocol returns an *Error (one of the Err values) whose
// Code the caller sends in its close frame; the stream is then broken and
// every later call returns the same error.
func (r *Reader) Next(buf []byte) (n int, k Kind, payload []byte, err error) {
	if r.err != nil {
		return 0, None, nil, r.err
	}
	if r.delivered {
		r.delivered = false
		if cap(r.msg) > keepMessageCap {
			r.msg = nil
		} else {
			r.msg = r.msg[:0]
		}
		r.valid = 0
	}
	for {
		if !r.inFrame {
			hn, k, p, e := r.header(buf[n:])
			if e != nil {
				r.err = e
				return n, None, nil, e
			}
			if hn == 0 {
				return n, None, nil, nil
			}
			n += hn
			if k != None {
				return n, k, p, nil
			}
		}
		// Inside a data frame: take what has arrived of its payload.
		take := min(r.left, uint64(len(buf)-n))
		start := len(r.msg)
		r.grow(int(take))
		r.msg = append(r.msg, buf[n:n+int(take)]...)
		r.keyPos = unmask(r.key, r.keyPos, r.msg[start:])
		n += int(take)
		r.left -= take
		if !r.validate() {
			r.err = ErrInvalidUTF8
			return n, None, nil, r.err
		}
		if r.left > 0 {
			return n, None, nil, nil
		}
		r.inFrame = false
		if !r.fin {
			if n == len(buf) {
				return n, None, nil, nil
			}
			continue // the next fragment may be here already
		}
		r.msgOp = 0
		if r.valid != len(r.msg) {
			// A rune left incomplete at the message's end.
			r.err = ErrInvalidUTF8
			return n, None, nil, r.err
		}
		r.delivered = true
		return n, Message, r.msg, nil
	}
}

// header reads the frame header at the start of b. It returns 0 when b
// holds too little to act on. A control frame, and a data frame that is a
// whole message wholly in b, are consumed with their payload and returned
// (k != None); any other data frame's header is consumed and the frame
// becomes the one in progress.
func (r *Reader) header(b []byte) (n int, k Kind, payload []byte, err *Error) {
	if len(b) < 2 {
		return 0, None, nil, nil
	}
	b0, b1 := b[0], b[1]
	fin := b0&0x80 != 0
	op := b0 & 0x0f
	// Everything that the first two bytes decide is refused at once,
	// without waiting for the rest of the frame.
	if b0&0x70 != 0 {
		return 0, None, nil, ErrReservedBits // §5.2: no extension negotiated
	}
	if b1&0x80 == 0 {
		return 0, None, nil, ErrUnmasked // §5.1
	}
	l7 := int(b1 & 0x7f)
	control := op >= 0x8
	switch op {
	case OpContinuation:
		if r.msgOp == 0 {
			return 0, None, nil, ErrContinuation // §5.4
		}
	case OpText, OpBinary:
		if r.msgOp != 0 {
			return 0, None, nil, ErrInterleaved // §5.4
		}
		if op == OpBinary {
			return 0, None, nil, ErrBinary // §7.4.1: 1003, data we cannot accept
		}
	case OpClose, OpPing, OpPong:
		if !fin {
			return 0, None, nil, ErrControlFragmented // §5.5
		}
		if l7 > MaxControlPayload {
			return 0, None, nil, ErrControlTooLong // §5.5
		}
	default:
		return 0, None, nil, ErrOpcode // §5.2: reserved opcodes
	}
	hn := 2 + 4
	switch l7 {
	case 126:
		hn += 2
	case 127:
		hn += 8
	}
	if len(b) < hn {
		return 0, None, nil, nil
	}
	plen := uint64(l7)
	switch l7 {
	case 126:
		plen = uint64(binary.BigEndian.Uint16(b[2:]))
		if plen < 126 {
			return 0, None, nil, ErrLength // §5.2: the minimal number of bytes
		}
	case 127:
		plen = binary.BigEndian.Uint64(b[2:])
		if plen>>63 != 0 || plen <= 0xffff {
			return 0, None, nil, ErrLength // §5.2: MSB 0, minimal form
		}
	}
	var key [4]byte
	copy(key[:], b[hn-4:hn])

	if control {
		end := hn + int(plen)
		if len(b) < end {
			return 0, None, nil, nil // ≤ 131 bytes: wait for the whole frame
		}
		p := b[hn:end]
		unmask(key, 0, p)
		switch op {
		case OpPing:
			return end, Ping, p, nil
		case OpPong:
			return end, Pong, p, nil
		}
		if err := checkClose(p); err != nil {
			return 0, None, nil, err
		}
		return end, Close, p, nil
	}

	if plen > uint64(r.max-len(r.msg)) {
		return 0, None, nil, ErrTooBig // §10.4: a limit on frame and message size
	}
	if r.msgOp == 0 && fin && uint64(len(b)-hn) >= plen {
		// The whole message is here: unmask in place, no copy.
		p := b[hn : hn+int(plen)]
		unmask(key, 0, p)
		if !utf8.Valid(p) {
			return 0, None, nil, ErrInvalidUTF8 // §8.1
		}
		return hn + int(plen), Message, p, nil
	}
	if op != OpContinuation {
		r.msgOp = op
	}
	r.inFrame, r.fin, r.key, r.keyPos, r.left = true, fin, key, 0, plen
	return hn, None, nil, nil
}

// validate checks the text that arrived since the last call, up to the
// start of a rune the bytes so far leave incomplete (at most 3 bytes, held
// over to the next piece), and reports whether it is valid UTF-8.
func (r *Reader) validate() bool {
	end := len(r.msg)
	// Back up over a trailing incomplete rune: from the last rune start
	// within the final 3 bytes, if its bytes are not all here yet.
	for i := end - 1; i >= max(r.valid, end-3); i-- {
		if b := r.msg[i]; b&0xC0 != 0x80 { // not a continuation byte: a rune starts here
			if !utf8.FullRune(r.msg[i:end]) {
				end = i
			}
			break
		}
	}
	if !utf8.Valid(r.msg[r.valid:end]) {
		return false
	}
	r.valid = end
	return true
}

// grow makes room in the message buffer for take more bytes of the frame
// in progress. The buffer grows with what arrived, never ahead of it to
// the announced length (a header alone must not make the server hold 16
// MiB: thousands of connections could each announce that and send nothing
// more): to the frame's end when that is within keepMessageCap, else by
// doubling, capped at the frame's end, so a big message costs a few
// allocations and at most twice the bytes that arrived.
func (r *Reader) grow(take int) {
	need := len(r.msg) + take
	if need <= cap(r.msg) {
		return
	}
	end := len(r.msg) + int(r.left) // the frame's end
	size := end
	if end > keepMessageCap {
		size = min(end, max(2*cap(r.msg), need, keepMessageCap))
	}
	r.msg = append(make([]byte, 0, size), r.msg...)
}

// checkClose validates a close frame's payload (§5.5.1, §7.4): empty, or a
// code valid on the wire followed by a UTF-8 reason.
func checkClose(p []byte) *Error {
	switch {
	case len(p) == 0:
		return nil
	case len(p) == 1:
		return ErrClosePayload
	case !ValidCloseCode(CloseCode(p)):
		return ErrCloseCode
	case !utf8.Valid(p[2:]):
		return ErrCloseReason
	}
	return nil
}

// unmask XORs b with the masking key (§5.3), starting at position pos of
// the key, and returns the position after b. Eight bytes at a time: the
// key repeats every four, so a 64-bit word of it lines up with any
// 8-byte run once rotated to pos.
func unmask(key [4]byte, pos int, b []byte) int {
	if len(b) >= 16 {
		var rk [4]byte
		for i := range rk {
			rk[i] = key[(pos+i)&3]
		}
		k32 := uint64(binary.LittleEndian.Uint32(rk[:]))
		k64 := k32<<32 | k32
		for len(b) >= 8 {
			binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)^k64)
			b = b[8:]
		}
	}
	for i := range b {
		b[i] ^= key[pos&3]
		pos++
	}
	return pos & 3
}
