package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	id         int32
	content    string
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// addedMatcher finds added tokens in text as Hugging Face's AddedVocabulary
// does: the leftmost-longest non-overlapping matches of their contents
// (the Aho-Corasick automaton of find_matches), each then checked for
// single_word and widened over the whitespace around it for lstrip and
// rstrip. It is a byte trie; positions whose byte starts no token are
// skipped with a table (or strings.IndexByte when one byte starts them
// all). Read-only after build.
type addedMatcher struct {
	start   [256]bool
	one     int // the only start byte, or -1
	edges   map[uint32]int32
	tok     []int32 // node -> index into toks, or -1
	toks    []addedToken
	maxLen  int
	hasFlag bool // some token has single_word, lstrip or rstrip
}

func newAddedMatcher(toks []addedToken, content func(addedToken) string) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{edges: make(map[uint32]int32), tok: []int32{-1}, toks: toks, one: -1}
	nstart := 0
	for ti, t := range toks {
		s := content(t)
		if s == "" {
			continue
		}
		if !m.start[s[0]] {
			m.start[s[0]] = true
			nstart++
			m.one = int(s[0])
		}
		node := int32(0)
		for i := 0; i < len(s); i++ {
			k := uint32(node)<<8 | uint32(s[i])
			nx, ok := m.edges[k]
			if !ok {
				nx = int32(len(m.tok))
				m.tok = append(m.tok, -1)
				m.edges[k] = nx
			}
			node = nx
		}
		// A later entry with the same content wins, as it does in the
		// vocabulary's map.
		m.tok[node] = int32(ti)
		m.maxLen = max(m.maxLen, len(s))
		if t.singleWord || t.lstrip || t.rstrip {
			m.hasFlag = true
		}
	}
	if nstart != 1 {
		m.one = -1
	}
	if len(m.tok) == 1 {
		return nil
	}
	return m
}

// longest returns the end and token of the longest token at s[i:], or -1.
func (m *addedMatcher) longest(s string, i int) (int, int32) {
	end, tok := -1, int32(-1)
	node := int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := m.edges[uint32(node)<<8|uint32(s[j])]
		if !ok {
			break
		}
		node = nx
		if t := m.tok[node]; t >= 0 {
			end, tok = j+1, t
		}
	}
	return end, tok
}

// find returns the next raw match at or after s[from:]: start, end, token.
func (m *addedMatcher) find(s string, from int) (int, int, int32) {
	for i := from; i < len(s); i++ {
		if m.one >= 0 {
			k := strings.IndexByte(s[i:], byte(m.one))
			if k < 0 {
				return -1, -1, -1
			}
			i += k
		} else if !m.start[s[i]] {
			continue
		}
		if e, t := m.longest(s, i); e >= 0 {
			return i, e, t
		}
	}
	return -1, -1, -1
}

// matchState is the position of a walk over a text's added tokens.
type matchState struct {
	scan   int // where the automaton resumes (the last raw match's end)
	offset int // the end of the last accepted split (start_offset)
}

// next returns the next accepted match after st: start and end (widened by
// lstrip/rstrip) and id; ok false when there is none. The text between
// st.offset (before the call) and start is a plain segment.
func (m *addedMatcher) next(s string, st *matchState) (start, end int, id int32, ok bool) {
	for {
		ms, me, ti := m.find(s, st.scan)
		if ms < 0 {
			return 0, 0, 0, false
		}
		st.scan = me
		t := &m.toks[ti]
		if t.singleWord {
			startSpace := ms == 0 || !endsWithWord(s[:ms])
			stopSpace := me == len(s) || !startsWithWord(s[me:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.lstrip {
			ms = max(spaceStartAtEnd(s[:ms]), st.offset)
		}
		if t.rstrip {
			me += spaceLenAtStart(s[me:])
		}
		if ms < st.offset {
			ms = st.offset // an earlier rstrip took these bytes already
		}
		st.offset = me
		return ms, me, t.id, true
	}
}

// isWord is Rust regex's Unicode \w: Alphabetic, M, Nd, Pc, Join_Control.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200c || r == 0x200d
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r != utf8.RuneError && isWord(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r != utf8.RuneError && isWord(r)
}

// spaceStartAtEnd is where the whitespace at the end of s begins (\s*$).
func spaceStartAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= w
	}
	return i
}

// spaceLenAtStart is the length of the whitespace that starts s (^\s*).
func spaceLenAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
	}
	return i
}
