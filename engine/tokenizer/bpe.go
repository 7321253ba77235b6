package tokenizer

import (
	"hash/maphash"
	"unicode/utf8"
)

// bpe is the BPE model of a tokenizer.json ("model": {"type": "BPE"}) or of
// a GGUF vocabulary. Read-only after load.
type bpe struct {
	// byteLevel: words are raw bytes and every byte starts as its own
	// symbol (the vocabulary is stored decoded from GPT-2's alphabet).
	// Otherwise words are the normalized text and every UTF-8 char starts
	// as a symbol.
	byteLevel bool
	// vocab maps a token's text (raw bytes when byteLevel) to its id.
	vocab map[string]int32
	// byteID is the id of each one-byte token (byteLevel), or -1.
	byteID [256]int32
	// merges maps pairKey(left, right) to rank<<32 | merged id.
	merges pairTable
	// runeID is the id of each one-char token below U+10000 (-1: none),
	// when not byteLevel; vocab has the others.
	runeID []int32
	// ignoreMerges: a word that is a token is that token, unmerged.
	ignoreMerges bool
	// fallback is the id of <0xNN> for each byte with byte_fallback, or -1.
	fallback    [256]int32
	hasFallback bool
	unk         int32 // -1: none
	fuseUnk     bool
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// noMerge is the rank of a pair that does not merge.
const noMerge = ^uint32(0)

func (m *bpe) merge(a, b int32) (rank uint32, id int32) {
	v, ok := m.merges.get(pairKey(a, b))
	if !ok {
		return noMerge, -1
	}
	return uint32(v >> 32), int32(uint32(v))
}

// pairTable is an open-addressing hash table from pair keys to merges: one
// multiply and, mostly, one probe of a 16-byte slot, where a Go map costs
// several times that on the merge loop's hottest line. Read-only after
// building.
type pairTable struct {
	slots []pairSlot
	shift uint
}

type pairSlot struct{ key, val uint64 }

// emptyPair marks a free slot: no pair key has both halves' top bits set
// (ids are below 2³¹).
const emptyPair = ^uint64(0)

func newPairTable(n int) pairTable {
	size, bits := 16, uint(4)
	for size < 2*n {
		size <<= 1
		bits++
	}
	t := pairTable{slots: make([]pairSlot, size), shift: 64 - bits}
	for i := range t.slots {
		t.slots[i].key = emptyPair
	}
	return t
}

func (t *pairTable) index(key uint64) uint64 { return (key * 0x9e3779b97f4a7c15) >> t.shift }

// set inserts or replaces key's value.
func (t *pairTable) set(key, val uint64) {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == emptyPair || s.key == key {
			s.key, s.val = key, val
			return
		}
	}
}

func (t *pairTable) get(key uint64) (uint64, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.val, true
		}
		if s.key == emptyPair {
			return 0, false
		}
	}
}

// symbol is a part of a word being merged: a node of a doubly linked list
// over the initial symbols.
type symbol struct {
	id         int32
	prev, next int32
	dead       bool
}

// scanMax is the longest word merged by scanning for the lowest rank
// (O(n²) but cache-friendly); longer words use a heap as Hugging Face's
// Word::merge_all does. Both merge the leftmost pair of lowest rank first.
const scanMax = 48

// encodeWord appends the ids of one pre-tokenized word (non-empty).
func (m *bpe) encodeWord(sc *scratch, dst []int32, w string) []int32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(dst, id)
		}
	}
	if len(w) < cacheMaxWord {
		if ids, ok := sc.cache.get(w); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	syms := m.initial(sc.syms[:0], w)
	if len(syms) <= scanMax {
		dst = m.mergeScan(sc, dst, syms)
	} else {
		dst = m.mergeHeap(sc, dst, syms)
	}
	sc.syms = syms[:0]
	if len(w) < cacheMaxWord {
		sc.cache.put(w, dst[start:])
	}
	return dst
}

// initial appends the word's initial symbols, as BPE::merge_word does:
// each char (byte, when byteLevel) is its token; a char that is not a token
// becomes its bytes' <0xNN> tokens with byte_fallback, else the unknown
// token (consecutive ones fused with fuse_unk), else nothing.
func (m *bpe) initial(syms []symbol, w string) []symbol {
	add := func(syms []symbol, id int32) []symbol {
		n := int32(len(syms))
		return append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	pendingUnk := false
	if m.byteLevel {
		for i := 0; i < len(w); i++ {
			if id := m.byteID[w[i]]; id >= 0 {
				syms = add(syms, id)
			} else if m.unk >= 0 {
				if !(m.fuseUnk && len(syms) > 0 && syms[len(syms)-1].id == m.unk) {
					syms = add(syms, m.unk)
				}
			}
		}
	} else {
		for i := 0; i < len(w); {
			r, sz := rune(w[i]), 1
			if r >= utf8.RuneSelf {
				r, sz = utf8.DecodeRuneInString(w[i:])
				if r == utf8.RuneError && sz == 1 {
					r = -1 // an invalid byte: no char token
				}
			}
			ch := w[i : i+sz]
			i += sz
			id, ok := int32(-1), false
			if r >= 0 && int(r) < len(m.runeID) {
				id = m.runeID[r]
				ok = id >= 0
			} else if r >= 0 {
				id, ok = m.vocab[ch]
			}
			if ok {
				if pendingUnk {
					syms = add(syms, m.unk)
					pendingUnk = false
				}
				syms = add(syms, id)
				continue
			}
			if m.hasFallback {
				all := true
				for k := 0; k < len(ch); k++ {
					if m.fallback[ch[k]] < 0 {
						all = false
					}
				}
				if all {
					// As merge_word does, a pending unknown token stays
					// pending across byte-fallback tokens.
					for k := 0; k < len(ch); k++ {
						syms = add(syms, m.fallback[ch[k]])
					}
					continue
				}
			}
			if m.unk >= 0 {
				if pendingUnk && !m.fuseUnk {
					syms = add(syms, m.unk)
				}
				pendingUnk = true
			}
		}
		if pendingUnk {
			syms = add(syms, m.unk)
		}
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// mergeScan merges a short word by repeatedly scanning for the pair of
// lowest rank (the leftmost of equal ones).
func (m *bpe) mergeScan(sc *scratch, dst []int32, syms []symbol) []int32 {
	var ids [scanMax]int32
	var ranks [scanMax]uint32
	var news [scanMax]int32
	n := len(syms)
	for i := range n {
		ids[i] = syms[i].id
	}
	for i := 0; i+1 < n; i++ {
		ranks[i], news[i] = m.merge(ids[i], ids[i+1])
	}
	if n > 0 {
		ranks[n-1] = noMerge
	}
	for n > 1 {
		best, at := noMerge, -1
		for i, r := range ranks[:n-1] {
			if r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		ids[at] = news[at]
		copy(ids[at+1:n-1], ids[at+2:n])
		copy(ranks[at+1:n-1], ranks[at+2:n])
		copy(news[at+1:n-1], news[at+2:n])
		n--
		if at+1 < n {
			ranks[at], news[at] = m.merge(ids[at], ids[at+1])
		} else {
			ranks[at] = noMerge
		}
		if at > 0 {
			ranks[at-1], news[at-1] = m.merge(ids[at-1], ids[at])
		}
	}
	return append(dst, ids[:n]...)
}

// mergeHeap is Word::merge_all: a min-heap of candidate merges ordered by
// rank then position, an entry skipped when its pair has changed since.
// An entry is rank<<32 | position, so one integer comparison orders them;
// it is current when the pair now at its position has its rank (a pair has
// one rank, so that is Hugging Face's check that the pair still makes the
// same token).
func (m *bpe) mergeHeap(sc *scratch, dst []int32, syms []symbol) []int32 {
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if r, _ := m.merge(syms[i].id, syms[i+1].id); r != noMerge {
			h = append(h, uint64(r)<<32|uint64(i))
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
	for len(h) > 0 {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		heapDown(h, 0)
		pos := int32(uint32(top))
		s := &syms[pos]
		if s.dead || s.next < 0 {
			continue
		}
		right := syms[s.next]
		r, id := m.merge(s.id, right.id)
		if r != uint32(top>>32) {
			continue
		}
		s.id = id
		syms[s.next].dead = true
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = pos
		}
		if s.prev >= 0 {
			if r, _ := m.merge(syms[s.prev].id, s.id); r != noMerge {
				h = append(h, uint64(r)<<32|uint64(s.prev))
				heapUp(h, len(h)-1)
			}
		}
		if s.next >= 0 {
			if r, _ := m.merge(s.id, syms[s.next].id); r != noMerge {
				h = append(h, uint64(r)<<32|uint64(pos))
				heapUp(h, len(h)-1)
			}
		}
	}
	sc.heap = h[:0]
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	return dst
}

func heapUp(h []uint64, i int) {
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= x {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
}

func heapDown(h []uint64, i int) {
	n := len(h)
	if n == 0 {
		return
	}
	x := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r] < h[c] {
			c = r
		}
		if x <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
}

// The word cache: per scratch (so per goroutine using it, no lock), like
// Hugging Face's thread-local BPE cache. Keys and ids live in two arenas
// and the slots are open addressing, so a hit or an insert allocates
// nothing once the arenas have grown; when full, it is cleared.
const (
	cacheMaxWord = 256 // Hugging Face's MAX_LENGTH: longer words are not cached
	cacheSlots   = 1 << 13
	cacheMaxKeys = 256 << 10 // bytes of keys before a reset
)

type cacheSlot struct {
	hash       uint64
	koff, klen uint32
	ioff, ilen uint32
}

type wordCache struct {
	seed  maphash.Seed
	slots []cacheSlot
	keys  []byte
	ids   []int32
	n     int
}

func (c *wordCache) get(w string) ([]int32, bool) {
	if c.slots == nil {
		return nil, false
	}
	h := maphash.String(c.seed, w) | 1
	for i := h & (cacheSlots - 1); ; i = (i + 1) & (cacheSlots - 1) {
		s := &c.slots[i]
		if s.hash == 0 {
			return nil, false
		}
		if s.hash == h && int(s.klen) == len(w) && string(c.keys[s.koff:s.koff+s.klen]) == w {
			return c.ids[s.ioff : s.ioff+s.ilen], true
		}
	}
}

func (c *wordCache) put(w string, ids []int32) {
	if c.slots == nil {
		c.seed = maphash.MakeSeed()
		c.slots = make([]cacheSlot, cacheSlots)
	}
	if c.n >= cacheSlots/2 || len(c.keys)+len(w) > cacheMaxKeys {
		clear(c.slots)
		c.keys, c.ids, c.n = c.keys[:0], c.ids[:0], 0
	}
	h := maphash.String(c.seed, w) | 1
	i := h & (cacheSlots - 1)
	for c.slots[i].hash != 0 {
		i = (i + 1) & (cacheSlots - 1)
	}
	c.slots[i] = cacheSlot{hash: h, koff: uint32(len(c.keys)), klen: uint32(len(w)), ioff: uint32(len(c.ids)), ilen: uint32(len(ids))}
	c.keys = append(c.keys, w...)
	c.ids = append(c.ids, ids...)
	c.n++
}
