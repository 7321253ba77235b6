package text

import "unicode/utf8"

// replacement is U+FFFD, the text that stands for bytes that can never be
// part of valid UTF-8.
const replacement = "\uFFFD"

// UTF8Stream assembles the byte pieces of generated tokens into valid UTF-8.
// A byte-level BPE model may split one character across tokens, and a model
// with random weights emits arbitrary bytes: UTF8Stream holds an incomplete
// trailing sequence (at most 3 bytes) until the next piece completes it and
// replaces every ill-formed part with U+FFFD at once.
//
// Ill-formed input is replaced the way the Unicode Standard recommends
// (chapter 3, "U+FFFD Substitution of Maximal Subparts", the practice of
// Python's and Rust's lossy decoders): a byte that cannot start a sequence
// (0x80–0xBF, 0xC0, 0xC1, 0xF5–0xFF) is one U+FFFD; a valid prefix of a
// sequence that the next byte breaks is one U+FFFD, and the breaking byte is
// then read afresh. The second-byte ranges of Table 3-7 reject overlong forms
// (E0 80–9F, F0 80–8F), surrogates (ED A0–BF) and code points past U+10FFFF
// (F4 90–BF) at the byte where they become impossible.
//
// The zero value is ready to use. A UTF8Stream is not safe for concurrent
// use; it never allocates beyond the dst it is given.
type UTF8Stream struct {
	held [utf8.UTFMax]byte
	n    uint8 // bytes held
	need uint8 // length of the sequence being held; 0 when n is 0
}

// Append appends to dst the valid UTF-8 that piece completes and returns the
// extended slice. The output is always valid UTF-8; an incomplete trailing
// sequence stays held for the next call or Flush.
func (s *UTF8Stream) Append(dst, piece []byte) []byte {
	i := 0
	// Complete (or break) the held sequence first.
	for s.n > 0 && i < len(piece) {
		lo, hi := byte(0x80), byte(0xBF)
		if s.n == 1 {
			_, lo, hi = lead(s.held[0])
		}
		c := piece[i]
		if c < lo || c > hi {
			// The held prefix can never complete: one U+FFFD for it, and c
			// is read again below as the start of something new.
			dst = append(dst, replacement...)
			s.n, s.need = 0, 0
			break
		}
		s.held[s.n] = c
		s.n++
		i++
		if s.n == s.need {
			dst = append(dst, s.held[:s.n]...)
			s.n, s.need = 0, 0
		}
	}
	for i < len(piece) {
		c := piece[i]
		if c < utf8.RuneSelf {
			// ASCII run: copy it in one append.
			j := i + 1
			for j < len(piece) && piece[j] < utf8.RuneSelf {
				j++
			}
			dst = append(dst, piece[i:j]...)
			i = j
			continue
		}
		if r, size := utf8.DecodeRune(piece[i:]); r != utf8.RuneError || size > 1 {
			dst = append(dst, piece[i:i+size]...)
			i += size
			continue
		}
		// Ill-formed or incomplete: measure the maximal subpart.
		n, lo, hi := lead(c)
		if n == 0 {
			dst = append(dst, replacement...)
			i++
			continue
		}
		m := 1
		for m < n && i+m < len(piece) {
			b := piece[i+m]
			l, h := byte(0x80), byte(0xBF)
			if m == 1 {
				l, h = lo, hi
			}
			if b < l || b > h {
				break
			}
			m++
		}
		if i+m == len(piece) && m < n {
			// A valid prefix cut by the end of the piece: hold it.
			s.n = uint8(copy(s.held[:], piece[i:]))
			s.need = uint8(n)
			return dst
		}
		dst = append(dst, replacement...)
		i += m
	}
	return dst
}

// Flush appends U+FFFD to dst if an incomplete sequence is held (the output
// ended inside a character) and forgets it. Call it once at the end of a
// stream.
func (s *UTF8Stream) Flush(dst []byte) []byte {
	if s.n > 0 {
		dst = append(dst, replacement...)
	}
	s.n, s.need = 0, 0
	return dst
}

// Pending reports how many bytes of an incomplete sequence are held.
func (s *UTF8Stream) Pending() int { return int(s.n) }

// Reset forgets any held bytes.
func (s *UTF8Stream) Reset() { s.n, s.need = 0, 0 }

// lead returns the length of the sequence that the byte c starts and the
// range its second byte must be in (Unicode Table 3-7, "Well-Formed UTF-8
// Byte Sequences"); n is 0 for a byte that cannot start a multi-byte
// sequence.
func lead(c byte) (n int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF // below A0 would be overlong
	case c == 0xED:
		return 3, 0x80, 0x9F // A0–BF would encode surrogates
	case c >= 0xE1 && c <= 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF // below 90 would be overlong
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F // 90 and above is past U+10FFFF
	}
	return 0, 0, 0
}
