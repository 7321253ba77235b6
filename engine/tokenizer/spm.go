package tokenizer

import (
	"math"
	"unicode/utf8"
)

// spmModel is llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm, GGUF
// tokenizer.ggml.model "llama"): the text's chars merged pairwise, the
// pair whose concatenation is the token of highest score first (the
// leftmost of equal scores), until no adjacent pair is a token; a char
// that is no token becomes its bytes' <0xNN> tokens. Read-only after load.
type spmModel struct {
	vocab  map[string]int32
	scores []float32
	byteID [256]int32 // <0xNN>, or -1
	unk    int32
}

// spmBigram is a candidate merge: key orders the heap (score descending,
// then left position ascending), size is the merged text's length, which
// tells a stale entry.
type spmBigram struct {
	key         uint64
	left, right int32
	size        int32
}

type spmSym struct {
	off, n     int32
	prev, next int32
}

// scoreKey maps a score to a uint32 whose order is the scores' reversed
// (so that a min-heap pops the highest score first).
func scoreKey(f float32) uint32 {
	b := math.Float32bits(f)
	if b&0x80000000 != 0 {
		b = ^b
	} else {
		b |= 0x80000000
	}
	return ^b
}

// encode appends the ids of s, already prefixed and with spaces as ▁.
func (m *spmModel) encode(sc *scratch, dst []int32, s string) []int32 {
	syms := sc.spmSyms[:0]
	for off := 0; off < len(s); {
		_, n := utf8.DecodeRuneInString(s[off:])
		i := int32(len(syms))
		syms = append(syms, spmSym{off: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1
	h := sc.spmHeap[:0]
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		text := s[syms[l].off : syms[r].off+syms[r].n]
		id, ok := m.vocab[text]
		if !ok || int(id) >= len(m.scores) {
			return
		}
		h = append(h, spmBigram{key: uint64(scoreKey(m.scores[id]))<<32 | uint64(l), left: l, right: r, size: int32(len(text))})
		spmUp(h, len(h)-1)
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for len(h) > 0 {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		spmDown(h, 0)
		l, r := &syms[top.left], &syms[top.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != top.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		add(l.prev, top.left)
		add(top.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		text := s[syms[i].off : syms[i].off+syms[i].n]
		if id, ok := m.vocab[text]; ok {
			dst = append(dst, id)
			continue
		}
		for k := 0; k < len(text); k++ {
			if id := m.byteID[text[k]]; id >= 0 {
				dst = append(dst, id)
			} else if m.unk >= 0 {
				dst = append(dst, m.unk)
			}
		}
	}
	sc.spmSyms, sc.spmHeap = syms[:0], h[:0]
	return dst
}

func spmLess(a, b *spmBigram) bool { return a.key < b.key }

func spmUp(h []spmBigram, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !spmLess(&h[i], &h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func spmDown(h []spmBigram, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && spmLess(&h[r], &h[c]) {
			c = r
		}
		if !spmLess(&h[c], &h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
