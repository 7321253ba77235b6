package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The split regexes of the byte-level tokenizers, hand-written as state
// machines. Go's regexp has no lookahead, and a backtracking regexp engine
// allocates per match; these allocate nothing and give the matches
// Oniguruma (the engine Hugging Face tokenizers uses) finds: at each
// position the first alternative that matches, each with the match its
// backtracking finds first.
//
// The patterns differ only in a few alternatives, so one machine takes a
// description of which variant each alternative is.
const (
	// patGPT2 is GPT-2's pattern, also the ByteLevel pre-tokenizer's when
	// use_regex is set.
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// patLlama3 is Llama 3's (and SmolLM3's, and DeepSeek-V3's kin).
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patQwen2 is Qwen 2's and Qwen 3's: Llama 3's with single digits.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitPattern describes one of the patterns above.
type splitPattern struct {
	// foldCase: the contractions are (?i:...), else case-sensitive.
	foldCase bool
	// llamaLetters: [^\r\n\p{L}\p{N}]?\p{L}+, else ` ?\p{L}+`.
	llamaLetters bool
	// maxDigits bounds the run of \p{N}: 1 or 3 without an optional space
	// before, 0 for GPT-2's ` ?\p{N}+`.
	maxDigits int
	// punctNewlines: ` ?[^\s\p{L}\p{N}]+[\r\n]*`, else without [\r\n]*.
	punctNewlines bool
	// newlineRun: the alternative \s*[\r\n]+ is there.
	newlineRun bool
}

// knownPatterns are the Split regexes this package runs.
var knownPatterns = map[string]*splitPattern{
	patGPT2:   {},
	patLlama3: {foldCase: true, llamaLetters: true, maxDigits: 3, punctNewlines: true, newlineRun: true},
	patQwen2:  {foldCase: true, llamaLetters: true, maxDigits: 1, punctNewlines: true, newlineRun: true},
}

// Character classes of the patterns for ASCII; other runes are classified
// with the unicode package (\p{L} = unicode.IsLetter, \p{N} =
// unicode.IsNumber, \s = unicode.IsSpace, which are Oniguruma's Unicode
// classes).
const (
	cLetter = 1 << iota
	cNumber
	cSpace
)

var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			t[c] = cLetter
		case '0' <= c && c <= '9':
			t[c] = cNumber
		case c == ' ', '\t' <= c && c <= '\r':
			t[c] = cSpace
		}
	}
	return t
}()

// classAt returns the class of the rune at s[i] and its width. An invalid
// byte is a width-1 rune of no class (like punctuation).
func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return 0, 1
	}
	switch {
	case unicode.IsLetter(r):
		return cLetter, w
	case unicode.IsNumber(r):
		return cNumber, w
	case unicode.IsSpace(r):
		return cSpace, w
	}
	return 0, w
}

// next returns the end of the match that starts at s[i] (i < len(s)).
// Every rune matches some alternative, so the end is > i.
func (p *splitPattern) next(s string, i int) int {
	n := len(s)
	c0 := s[i]
	// Contractions.
	if c0 == '\'' && i+1 < n {
		if e := p.contraction(s, i+1); e > 0 {
			return e
		}
	}
	cl, w := classAt(s, i)
	// Letters, with the optional char before them.
	if cl&cLetter != 0 {
		return letterRun(s, i+w)
	}
	if p.llamaLetters {
		if cl == 0 || (cl == cSpace && c0 != '\r' && c0 != '\n') {
			if i+w < n {
				if c2, w2 := classAt(s, i+w); c2&cLetter != 0 {
					return letterRun(s, i+w+w2)
				}
			}
		}
	} else if c0 == ' ' && i+1 < n {
		if c2, w2 := classAt(s, i+1); c2&cLetter != 0 {
			return letterRun(s, i+1+w2)
		} else if c2&cNumber != 0 {
			return numberRun(s, i+1+w2, 0, 1)
		}
	}
	// Numbers.
	if cl&cNumber != 0 {
		return numberRun(s, i+w, p.maxDigits, 1)
	}
	// Punctuation: ` ?[^\s\p{L}\p{N}]+` and maybe [\r\n]*.
	k := i
	if c0 == ' ' {
		k++
	}
	if k < n {
		if c2, w2 := classAt(s, k); c2 == 0 {
			k += w2
			for k < n {
				c3, w3 := classAt(s, k)
				if c3 != 0 {
					break
				}
				k += w3
			}
			if p.punctNewlines {
				for k < n && (s[k] == '\r' || s[k] == '\n') {
					k++
				}
			}
			return k
		}
	}
	// Whitespace: cl is cSpace here.
	end, last, lastNL := i, i, -1
	for end < n {
		c3, w3 := classAt(s, end)
		if c3 != cSpace {
			break
		}
		if s[end] == '\r' || s[end] == '\n' {
			lastNL = end
		}
		last = end
		end += w3
	}
	if p.newlineRun && lastNL >= 0 {
		// \s*[\r\n]+: \s* backtracks to the run's last CR or LF.
		return lastNL + 1
	}
	// \s+(?!\S): the whole run at the end of the text, else all of it but
	// its last rune, which needs two or more; otherwise \s+ takes the one.
	if end == n || last == i {
		return end
	}
	return last
}

// contraction returns the end of 's|'t|'re|'ve|'m|'ll|'d after the quote
// (s[j] is the char after it), or 0. With foldCase it is case-insensitive
// as Oniguruma is: s also matches U+017F (ſ), whose case fold is s.
func (p *splitPattern) contraction(s string, j int) int {
	n := len(s)
	at := func(k int, want byte) int {
		if k >= n {
			return 0
		}
		c := s[k]
		if c == want || (p.foldCase && c|0x20 == want) {
			return 1
		}
		if p.foldCase && want == 's' && k+1 < n && c == 0xc5 && s[k+1] == 0xbf {
			return 2
		}
		return 0
	}
	for _, alt := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		k := j
		ok := true
		for a := 0; a < len(alt); a++ {
			w := at(k, alt[a])
			if w == 0 {
				ok = false
				break
			}
			k += w
		}
		if ok {
			return k
		}
	}
	return 0
}

func letterRun(s string, k int) int {
	for k < len(s) {
		c, w := classAt(s, k)
		if c&cLetter == 0 {
			break
		}
		k += w
	}
	return k
}

// numberRun extends a run of \p{N} whose first rune ends at k and which
// has count runes so far, to max runes (0: unbounded).
func numberRun(s string, k, max, count int) int {
	for k < len(s) && (max == 0 || count < max) {
		c, w := classAt(s, k)
		if c&cNumber == 0 {
			break
		}
		k += w
		count++
	}
	return k
}
