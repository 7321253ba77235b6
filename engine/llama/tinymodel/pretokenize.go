package tinymodel

import (
	"unicode"
	"unicode/utf8"
)

// PreTokenizer is the value of tokenizer.ggml.pre: llama.cpp splits text
// into words with Qwen2's pre-tokenizer (LLAMA_VOCAB_PRE_TYPE_QWEN2) and
// does not clean up spaces when it detokenizes, so detokenizing gives back
// the exact text.
const PreTokenizer = "qwen2"

// splitWords cuts text into the words BPE merges within, as llama.cpp's
// unicode_regex_split_custom_qwen2 (src/unicode.cpp) does. It implements
// the Qwen2 pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// by hand, branch for branch in the same order, since Go's regexp has no
// lookahead. The words are substrings of text and cover it. Letters,
// numbers and white space are Go's unicode.IsLetter, IsNumber and IsSpace,
// the same classes as llama.cpp's tables (\p{L}, \p{N}, \s). A byte that
// is not valid UTF-8 counts as a character of no class; llama.cpp would
// replace it first, so the two differ there only.
func splitWords(text string, words []string) []string {
	type cpt struct {
		r   rune
		off int
	}
	var buf [256]cpt
	cps := buf[:0]
	for off, r := range text {
		cps = append(cps, cpt{r, off})
	}
	n := len(cps)
	at := func(p int) rune {
		if p < n {
			return cps[p].r
		}
		return -1
	}
	letter := func(p int) bool { return p < n && unicode.IsLetter(cps[p].r) }
	number := func(p int) bool { return p < n && unicode.IsNumber(cps[p].r) }
	space := func(p int) bool { return p < n && unicode.IsSpace(cps[p].r) }
	// other: a character that is neither white space, a letter nor a number;
	// past the end, llama.cpp's flags are all clear, which also passes.
	other := func(p int) bool { return !space(p) && !letter(p) && !number(p) }
	offset := func(p int) int {
		if p < n {
			return cps[p].off
		}
		return len(text)
	}
	prev := 0
	add := func(end int) {
		if end > prev {
			words = append(words, text[offset(prev):offset(end)])
		}
		prev = end
	}
	for pos := 0; pos < n; {
		c := cps[pos].r
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)
		if c == '\'' && pos+1 < n {
			c1 := unicode.ToLower(at(pos + 1))
			if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
				pos += 2
				add(pos)
				continue
			}
			if pos+2 < n {
				c2 := unicode.ToLower(at(pos + 2))
				if c1 == 'r' && c2 == 'e' || c1 == 'v' && c2 == 'e' || c1 == 'l' && c2 == 'l' {
					pos += 3
					add(pos)
					continue
				}
			}
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if c != '\r' && c != '\n' && !number(pos) && (letter(pos) || letter(pos+1)) {
			pos++
			for letter(pos) {
				pos++
			}
			add(pos)
			continue
		}
		// \p{N}
		if number(pos) {
			pos++
			add(pos)
			continue
		}
		// " ?[^\s\p{L}\p{N}]+[\r\n]*"
		p2 := pos
		if c == ' ' {
			p2++
		}
		if other(p2) {
			pos = p2
			for pos < n && other(pos) {
				pos++
			}
			for at(pos) == '\r' || at(pos) == '\n' {
				pos++
			}
			add(pos)
			continue
		}
		nws, lastRN := 0, 0
		for space(pos + nws) {
			if r := at(pos + nws); r == '\r' || r == '\n' {
				lastRN = pos + nws + 1
			}
			nws++
		}
		switch {
		case lastRN > 0: // \s*[\r\n]+
			pos = lastRN
		case nws > 1 && pos+nws < n: // \s+(?!\S): leave the last space to the next word
			pos += nws - 1
		case nws > 0: // \s+
			pos += nws
		default: // no branch matches: a word of one character
			pos++
		}
		add(pos)
	}
	return words
}

// byteChars is GPT-2's bytes_to_unicode: byte b stands for the character
// byteChars[b] in token texts. Printable bytes stand for themselves;
// the others (controls, space, 0x7F-0xA0, 0xAD) for U+0100 on, in order,
// so that no token contains white space or a control character.
var byteChars = func() (m [256]rune) {
	n := rune(0)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}()

// charBytes inverts byteChars.
var charBytes = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteChars {
		m[r] = byte(b)
	}
	return m
}()

// appendByteChars appends each byte of s as its byteChars character.
func appendByteChars(dst []string, s string) []string {
	for i := 0; i < len(s); i++ {
		dst = append(dst, string(byteChars[s[i]]))
	}
	return dst
}

// appendBytes appends the bytes a token text of byteChars characters
// stands for, and reports whether every character was one of them.
func appendBytes(dst []byte, tok string) ([]byte, bool) {
	for _, r := range tok {
		b, ok := charBytes[r]
		if !ok {
			return dst, false
		}
		dst = append(dst, b)
	}
	return dst, utf8.ValidString(tok)
}
