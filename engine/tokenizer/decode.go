package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// decoderStep is one step of tokenizer.json's decoder.
type decoderStep struct {
	kind        string // ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace
	pattern     string // Replace
	content     string // Replace
	strip       rune   // Strip
	start, stop int    // Strip
	replacement rune   // Metaspace
	prepend     int    // Metaspace
}

// decode runs the decoder chain over toks (Decoder::decode_chain of each
// step, then the pieces joined) and appends the text.
func (t *Tokenizer) decode(sc *scratch, dst []byte, toks []string) []byte {
	if len(t.decoders) == 0 {
		return append(dst, strings.Join(toks, " ")...)
	}
	for i := range t.decoders {
		toks = t.decoders[i].chain(sc, toks)
	}
	for _, s := range toks {
		dst = append(dst, s...)
	}
	return dst
}

func (d *decoderStep) chain(sc *scratch, toks []string) []string {
	switch d.kind {
	case "ByteLevel":
		buf := sc.buf[:0]
		for _, s := range toks {
			var ok bool
			if buf, ok = byteLevelDecode(buf, s); !ok {
				buf = append(buf, s...)
			}
		}
		out := string(appendLossy(nil, buf))
		sc.buf = buf[:0]
		return append(toks[:0], out)
	case "Replace":
		for i, s := range toks {
			toks[i] = strings.ReplaceAll(s, d.pattern, d.content)
		}
		return toks
	case "Fuse":
		return append(toks[:0], strings.Join(toks, ""))
	case "ByteFallback":
		out := toks[:0:0]
		var bytes []byte
		flush := func() {
			if len(bytes) == 0 {
				return
			}
			if utf8.Valid(bytes) {
				out = append(out, string(bytes))
			} else {
				for range bytes {
					out = append(out, "\uFFFD")
				}
			}
			bytes = bytes[:0]
		}
		for _, s := range toks {
			if b, ok := byteToken(s); ok {
				bytes = append(bytes, b)
				continue
			}
			flush()
			out = append(out, s)
		}
		flush()
		return out
	case "Strip":
		for i, s := range toks {
			r := []rune(s)
			a := 0
			for a < d.start && a < len(r) && r[a] == d.strip {
				a++
			}
			b := len(r)
			for k := 0; k < d.stop && b > a && r[b-1] == d.strip; k++ {
				b--
			}
			toks[i] = string(r[a:b])
		}
		return toks
	case "Metaspace":
		for i, s := range toks {
			var b strings.Builder
			for _, c := range s {
				if c == d.replacement {
					if i == 0 && d.prepend != prependNever {
						continue
					}
					c = ' '
				}
				b.WriteRune(c)
			}
			toks[i] = b.String()
		}
		return toks
	}
	return toks
}

// byteToken parses a byte fallback token, <0xNN>.
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	h := func(c byte) (byte, bool) {
		switch {
		case '0' <= c && c <= '9':
			return c - '0', true
		case 'A' <= c && c <= 'F':
			return c - 'A' + 10, true
		case 'a' <= c && c <= 'f':
			return c - 'a' + 10, true
		}
		return 0, false
	}
	hi, ok1 := h(s[3])
	lo, ok2 := h(s[4])
	return hi<<4 | lo, ok1 && ok2
}
