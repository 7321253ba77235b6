package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// scratch is the reusable memory of one Encode or Decode call. Strings made
// from arena stay valid while the call runs: the arena only grows (a
// reallocation leaves the old bytes in place for the strings that use
// them) and is reset by the next call that takes the scratch.
type scratch struct {
	arena  []byte
	pa, pb []piece
	syms   []symbol
	heap   []uint64
	cache  wordCache
	ids    []int32
	toks   []string
	buf    []byte
	spans  []span
	iter   norm.Iter
}

// piece is a pre-token: its text, and whether it starts at the input's
// first byte (Metaspace's prepend_scheme "first" asks).
type piece struct {
	s     string
	first bool
}

// str returns arena[from:] as a string (see scratch).
func (sc *scratch) str(from int) string {
	if from == len(sc.arena) {
		return ""
	}
	return unsafe.String(&sc.arena[from], len(sc.arena)-from)
}

// normalizer is one step of tokenizer.json's normalizer.
type normalizer struct {
	kind    string // NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip
	form    norm.Form
	pattern string // Replace
	content string // Replace, Prepend
	left    bool   // Strip
	right   bool
}

func (t *Tokenizer) normalize(sc *scratch, s string) string {
	for i := range t.normalizers {
		n := &t.normalizers[i]
		switch n.kind {
		case "NFC", "NFD", "NFKC", "NFKD":
			// QuickSpanString and an Iter kept in the scratch allocate
			// nothing (IsNormalString and AppendString do).
			if isASCII(s) || n.form.QuickSpanString(s) == len(s) {
				continue
			}
			from := len(sc.arena)
			sc.iter.InitString(n.form, s)
			for !sc.iter.Done() {
				sc.arena = append(sc.arena, sc.iter.Next()...)
			}
			s = sc.str(from)
		case "Lowercase":
			if !hasUpper(s) {
				continue
			}
			from := len(sc.arena)
			for _, r := range s {
				sc.arena = utf8.AppendRune(sc.arena, unicode.ToLower(r))
			}
			s = sc.str(from)
		case "Replace":
			if !strings.Contains(s, n.pattern) {
				continue
			}
			from := len(sc.arena)
			for {
				k := strings.Index(s, n.pattern)
				if k < 0 {
					break
				}
				sc.arena = append(sc.arena, s[:k]...)
				sc.arena = append(sc.arena, n.content...)
				s = s[k+len(n.pattern):]
			}
			sc.arena = append(sc.arena, s...)
			s = sc.str(from)
		case "Prepend":
			if s == "" {
				continue
			}
			from := len(sc.arena)
			sc.arena = append(sc.arena, n.content...)
			sc.arena = append(sc.arena, s...)
			s = sc.str(from)
		case "Strip":
			if n.left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if n.right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
		}
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for _, r := range s {
		if unicode.ToLower(r) != r {
			return true
		}
	}
	return false
}

// Split behaviours (SplitDelimiterBehavior).
const (
	behRemoved = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

// preTokenizer is one step of tokenizer.json's pre_tokenizer.
type preTokenizer struct {
	kind string // Split, ByteLevel, Metaspace, Digits, WhitespaceSplit
	// Split: a known regex, or a literal string.
	regex    *splitPattern
	literal  string
	behavior int
	// ByteLevel.
	addPrefixSpace bool
	// Metaspace.
	replacement string
	prepend     int // 0 always, 1 first, 2 never
	split       bool
	// Digits.
	individual bool
}

const (
	prependAlways = iota
	prependFirst
	prependNever
)

// span is a match or a gap of a split, in bytes of the piece.
type span struct {
	start, end int
	match      bool
}

// pretokenize appends the pre-tokens of s to out.
func (t *Tokenizer) pretokenize(sc *scratch, s string, first bool) []piece {
	cur := append(sc.pa[:0], piece{s, first})
	other := sc.pb[:0]
	for i := range t.pretok {
		p := &t.pretok[i]
		other = other[:0]
		for _, pc := range cur {
			other = p.apply(sc, other, pc)
		}
		cur, other = other, cur
	}
	sc.pa, sc.pb = cur, other
	return cur
}

// apply appends the pieces that pc splits into.
func (p *preTokenizer) apply(sc *scratch, out []piece, pc piece) []piece {
	s := pc.s
	switch p.kind {
	case "ByteLevel":
		if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
			from := len(sc.arena)
			sc.arena = append(sc.arena, ' ')
			sc.arena = append(sc.arena, s...)
			s = sc.str(from)
		}
		if p.regex == nil {
			return append(out, piece{s, pc.first})
		}
		return p.splitRegex(sc, out, s, pc.first, behIsolated)
	case "Split":
		if p.regex != nil {
			return p.splitRegex(sc, out, s, pc.first, p.behavior)
		}
		return splitBy(sc, out, s, pc.first, p.behavior, func(s string, i int) (int, int) {
			k := strings.Index(s[i:], p.literal)
			if k < 0 {
				return -1, -1
			}
			return i + k, i + k + len(p.literal)
		})
	case "Metaspace":
		if strings.Contains(s, " ") {
			from := len(sc.arena)
			for {
				k := strings.IndexByte(s, ' ')
				if k < 0 {
					break
				}
				sc.arena = append(sc.arena, s[:k]...)
				sc.arena = append(sc.arena, p.replacement...)
				s = s[k+1:]
			}
			sc.arena = append(sc.arena, s...)
			s = sc.str(from)
		}
		if (p.prepend == prependAlways || (p.prepend == prependFirst && pc.first)) && !strings.HasPrefix(s, p.replacement) {
			from := len(sc.arena)
			sc.arena = append(sc.arena, p.replacement...)
			sc.arena = append(sc.arena, s...)
			s = sc.str(from)
		}
		if !p.split {
			return append(out, piece{s, pc.first})
		}
		rep := p.replacement
		return splitBy(sc, out, s, pc.first, behMergedWithNext, func(s string, i int) (int, int) {
			k := strings.Index(s[i:], rep)
			if k < 0 {
				return -1, -1
			}
			return i + k, i + k + len(rep)
		})
	case "Digits":
		beh := behContiguous
		if p.individual {
			beh = behIsolated
		}
		return splitBy(sc, out, s, pc.first, beh, func(s string, i int) (int, int) {
			for i < len(s) {
				r, w := utf8.DecodeRuneInString(s[i:])
				if unicode.IsNumber(r) {
					return i, i + w
				}
				i += w
			}
			return -1, -1
		})
	case "WhitespaceSplit":
		return splitBy(sc, out, s, pc.first, behRemoved, func(s string, i int) (int, int) {
			for i < len(s) {
				r, w := utf8.DecodeRuneInString(s[i:])
				if unicode.IsSpace(r) {
					return i, i + w
				}
				i += w
			}
			return -1, -1
		})
	}
	return append(out, pc)
}

// splitRegex splits s by one of the known patterns: every rune is in some
// match, so with Isolated the matches are the pieces.
func (p *preTokenizer) splitRegex(sc *scratch, out []piece, s string, first bool, beh int) []piece {
	if beh == behIsolated {
		for i := 0; i < len(s); {
			e := p.regex.next(s, i)
			out = append(out, piece{s[i:e], first && i == 0})
			i = e
		}
		return out
	}
	return splitBy(sc, out, s, first, beh, func(s string, i int) (int, int) {
		if i >= len(s) {
			return -1, -1
		}
		return i, p.regex.next(s, i)
	})
}

// splitBy is NormalizedString::split: find returns the next match at or
// after i (start, end; -1 when none); the matches and the gaps between
// them are then grouped by the behaviour. Empty pieces are dropped.
func splitBy(sc *scratch, out []piece, s string, first bool, beh int, find func(string, int) (int, int)) []piece {
	// Collect the spans first (gap, match, gap, ...).
	spans := sc.spans[:0]
	defer func() { sc.spans = spans[:0] }()
	pos := 0
	for pos <= len(s) {
		ms, me := find(s, pos)
		if ms < 0 {
			break
		}
		if me == ms { // an empty match: step over a rune
			if ms >= len(s) {
				break
			}
			_, w := utf8.DecodeRuneInString(s[ms:])
			pos = ms + w
			continue
		}
		if ms > pos {
			spans = append(spans, span{pos, ms, false})
		}
		spans = append(spans, span{ms, me, true})
		pos = me
	}
	if pos < len(s) {
		spans = append(spans, span{pos, len(s), false})
	}
	emit := func(out []piece, a, b int) []piece {
		if a < b {
			out = append(out, piece{s[a:b], first && a == 0})
		}
		return out
	}
	switch beh {
	case behRemoved:
		for _, sp := range spans {
			if !sp.match {
				out = emit(out, sp.start, sp.end)
			}
		}
	case behIsolated:
		for _, sp := range spans {
			out = emit(out, sp.start, sp.end)
		}
	case behContiguous:
		for i := 0; i < len(spans); {
			j := i + 1
			if spans[i].match {
				for j < len(spans) && spans[j].match {
					j++
				}
			}
			out = emit(out, spans[i].start, spans[j-1].end)
			i = j
		}
	case behMergedWithPrevious:
		// A match joins the piece before it, unless that piece ended
		// with a match.
		start, end, prevMatch, have := 0, 0, false, false
		for _, sp := range spans {
			if sp.match && !prevMatch && have {
				end = sp.end
			} else {
				if have {
					out = emit(out, start, end)
				}
				start, end, have = sp.start, sp.end, true
			}
			prevMatch = sp.match
		}
		if have {
			out = emit(out, start, end)
		}
	case behMergedWithNext:
		// A match starts the piece after it, unless that one starts
		// with a match: walk backwards as Hugging Face does.
		n0 := len(out)
		start, end, nextMatch, have := 0, 0, false, false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !nextMatch && have {
				start = sp.start
			} else {
				if have {
					out = emit(out, start, end)
				}
				start, end, have = sp.start, sp.end, true
			}
			nextMatch = sp.match
		}
		if have {
			out = emit(out, start, end)
		}
		for i, j := n0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}
