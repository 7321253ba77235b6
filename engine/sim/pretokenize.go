package sim

import (
	"hash/maphash"
	"math"
	"sync"
)

// This file is a fast path for (*vocab).encode on ASCII text. It produces
// exactly the token ids of tiktoken-go's o200k_base codec (v0.10.0), whose
// pre-tokenizer is the regexp2 (backtracking) pattern
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// run by regexp2's code-generated matcher (codec/regexp.gen.go), followed by
// byte-pair merging of each piece with the vocabulary's ranks (rank == id).
// That costs several allocations per piece (regexp2 match objects, captured
// strings, merge slices); this path costs none: a hand-written splitter
// equivalent to the pattern on ASCII input, and merging with stack or pooled
// scratch buffers. Any input with a byte >= 0x80 takes the library's path.
//
// On ASCII the Unicode classes reduce to: Lu = [A-Z], Ll = [a-z], Lt, Lm, Lo
// and M are empty, N = [0-9], and \s (the generated code calls
// unicode.IsSpace) = [\t\n\v\f\r ]. One quirk of the generated matcher is
// reproduced on purpose: its ASCII bitmaps for [^\r\n\p{L}\p{N}] and
// [^\s\p{L}\p{N}] leave out DEL (0x7f), so no alternative matches at a DEL
// and the regexp engine skips it: DEL produces no token at all. Another is
// in \s*[\r\n]+, see asciiPiece.
// FuzzPretokenizeASCII checks all of this against the library.

// fastASCII enables the fast path (the tests compare it with the library's
// path whatever its value).
const fastASCII = true

// ASCII character classes of the pattern, as tiktoken-go's matcher sees them.
const (
	clUpper  = 1 << iota // \p{Lu}: A-Z
	clLower              // \p{Ll}: a-z
	clDigit              // \p{N}: 0-9
	clSpace              // \s: \t \n \v \f \r and space
	clPrefix             // [^\r\n\p{L}\p{N}]: the optional char before letters
	clPunct              // [^\s\p{L}\p{N}]
)

var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		var k uint8
		switch {
		case 'A' <= c && c <= 'Z':
			k = clUpper
		case 'a' <= c && c <= 'z':
			k = clLower
		case '0' <= c && c <= '9':
			k = clDigit
		case c == '\r' || c == '\n':
			k = clSpace
		case c == '\t' || c == '\v' || c == '\f' || c == ' ':
			k = clSpace | clPrefix
		case c == 0x7f: // see above: in neither class of the generated matcher
		default:
			k = clPrefix | clPunct
		}
		t[c] = k
	}
	return t
}()

// isASCII reports whether s has no byte >= 0x80.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiPiece returns the end of the pre-token that starts at s[i], or i when
// no alternative of the pattern matches there (the regexp then moves on by
// one character). s must be ASCII and i < len(s). The alternatives are tried
// in the pattern's order, each with the match its backtracking finds first.
func asciiPiece(s string, i int) int {
	n := len(s)
	c := asciiClass[s[i]]

	// Alternatives 1 and 2: an optional prefix char, then letters. The
	// prefix can't be a letter, so taking it when the class allows is the
	// only way either can match. Alt 1 is [A-Z]*[a-z]+: the maximal upper
	// run followed by the maximal lower run, when there is one (giving back
	// upper case letters can't produce a lower case one). Otherwise alt 2 is
	// [A-Z]+[a-z]*, the maximal upper run (no lower case follows it). Both
	// end with the optional contraction.
	j := i
	if c&clPrefix != 0 {
		j++
	}
	l := j
	for l < n && asciiClass[s[l]]&clUpper != 0 {
		l++
	}
	for l < n && asciiClass[s[l]]&clLower != 0 {
		l++
	}
	if l > j {
		return l + contraction(s, l)
	}

	// Alternative 3: \p{N}{1,3}.
	if c&clDigit != 0 {
		e := i + 1
		for e < n && e < i+3 && asciiClass[s[e]]&clDigit != 0 {
			e++
		}
		return e
	}

	// Alternative 4: ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, all loops atomic.
	k := i
	if s[k] == ' ' {
		k++
	}
	if k < n && asciiClass[s[k]]&clPunct != 0 {
		for k++; k < n && asciiClass[s[k]]&clPunct != 0; k++ {
		}
		for k < n && (s[k] == '\r' || s[k] == '\n' || s[k] == '/') {
			k++
		}
		return k
	}

	if c&clSpace == 0 {
		return i // DEL: nothing matches
	}
	w, firstNL := i, -1
	for ; w < n && asciiClass[s[w]]&clSpace != 0; w++ {
		if firstNL < 0 && (s[w] == '\r' || s[w] == '\n') {
			firstNL = w
		}
	}
	// Alternative 5: \s*[\r\n]+. The pattern means the whitespace up to the
	// run's last CR or LF, but the generated matcher backtracks \s* straight
	// to the run's first CR or LF (IndexOfAny2 where .NET has LastIndexOfAny)
	// and then takes the CR/LF run there. Do as it does.
	if firstNL >= 0 {
		e := firstNL + 1
		for e < n && (s[e] == '\r' || s[e] == '\n') {
			e++
		}
		return e
	}
	// Alternative 6: \s+(?!\S): the whole run at the end of the text, else
	// all of it but the last char; that needs two or more chars, otherwise
	// alternative 7, \s+, takes the single char.
	if w == n || w-i == 1 {
		return w
	}
	return w - 1
}

// contraction returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i:],
// or 0.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	switch s[i+1] | 0x20 { // for these letters, c|0x20 == x iff c is x or X
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return 3
		}
	}
	return 0
}

// noRank marks a pair that does not merge.
const noRank = math.MaxUint32

// rankTable maps a token's bytes to its rank, which in o200k_base is its id:
// an open-addressing hash table of id+1 (0 = empty) keyed by strs[id]. It is
// 2 MiB, less than a map[string]uint32 of the vocabulary, and a lookup does
// not allocate. Read-only after newRankTable.
type rankTable struct {
	seed   maphash.Seed
	slots  []uint32
	mask   uint64
	strs   *tokenTable
	byteID [256]uint32
}

func newRankTable(strs *tokenTable) *rankTable {
	size := 1
	for size < 2*strs.len() {
		size <<= 1
	}
	t := &rankTable{seed: maphash.MakeSeed(), slots: make([]uint32, size), mask: uint64(size - 1), strs: strs}
	for id := range strs.len() {
		s := strs.at(id)
		if s == "" {
			continue
		}
		i := maphash.String(t.seed, s) & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = uint32(id) + 1
	}
	for b := range t.byteID {
		r, ok := t.rank(string([]byte{byte(b)}))
		if !ok {
			return nil // every byte is a token of o200k_base; refuse otherwise
		}
		t.byteID[b] = r
	}
	return t
}

// rank returns the rank (== id) of token s.
func (t *rankTable) rank(s string) (uint32, bool) {
	for i := maphash.String(t.seed, s) & t.mask; ; i = (i + 1) & t.mask {
		x := t.slots[i]
		if x == 0 {
			return noRank, false
		}
		if t.strs.at(int(x-1)) == s {
			return x - 1, true
		}
	}
}

// rankOr returns the rank of s, or noRank.
func (t *rankTable) rankOr(s string) uint32 {
	r, _ := t.rank(s)
	return r
}

// mergeHeapThreshold is tiktoken-go's switch from its O(n²) scan to its heap
// merging; both give the standard BPE result (repeatedly merge the leftmost
// pair of lowest rank), and so do ours, split the same way.
const mergeHeapThreshold = 96

// appendPiece appends the ids of one pre-token.
func (t *rankTable) appendPiece(dst []int, piece string) []int {
	if id, ok := t.rank(piece); ok {
		return append(dst, int(id))
	}
	if len(piece) < mergeHeapThreshold {
		return t.mergeScan(dst, piece)
	}
	return t.mergeHeap(dst, piece)
}

// mergeScan is byte-pair merging with a linear scan for the lowest rank and
// fixed-size scratch on the stack: parts are [offs[i], offs[i+1]), ids[i]
// its id, ranks[i] the rank of merging part i with part i+1.
func (t *rankTable) mergeScan(dst []int, piece string) []int {
	var offs [mergeHeapThreshold + 1]int32
	var ids, ranks [mergeHeapThreshold]uint32
	np := len(piece) // number of parts
	for i := range np {
		offs[i] = int32(i)
		ids[i] = t.byteID[piece[i]]
	}
	offs[np] = int32(np)
	for i := 0; i+1 < np; i++ {
		ranks[i] = t.rankOr(piece[i : i+2])
	}
	ranks[np-1] = noRank
	for np > 1 {
		minRank, m := uint32(noRank), 0
		for i, r := range ranks[:np-1] {
			if r < minRank {
				minRank, m = r, i
			}
		}
		if minRank == noRank {
			break
		}
		// Merge part m+1 into part m.
		ids[m] = minRank
		copy(offs[m+1:np], offs[m+2:np+1])
		copy(ids[m+1:np-1], ids[m+2:np])
		copy(ranks[m+1:np-1], ranks[m+2:np])
		np--
		if m+1 < np {
			ranks[m] = t.rankOr(piece[offs[m]:offs[m+2]])
		} else {
			ranks[m] = noRank
		}
		if m > 0 {
			ranks[m-1] = t.rankOr(piece[offs[m-1]:offs[m+1]])
		}
	}
	for _, id := range ids[:np] {
		dst = append(dst, int(id))
	}
	return dst
}

// mergeNode is a part in mergeHeap's doubly linked list, indexed by its
// start offset; rank is that of merging it with the next part.
type mergeNode struct {
	prev, next int32
	rank, id   uint32
}

type mergeCandidate struct {
	rank   uint32
	offset int32
}

// mergeScratch is mergeHeap's reusable memory.
type mergeScratch struct {
	nodes []mergeNode
	heap  []mergeCandidate
}

var mergeScratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// mergeHeap is byte-pair merging in O(n log n) for long pieces: a min-heap
// of candidate merges ordered by rank then offset (so the leftmost of equal
// ranks merges first), with stale entries skipped when popped.
func (t *rankTable) mergeHeap(dst []int, piece string) []int {
	sc := mergeScratchPool.Get().(*mergeScratch)
	n := int32(len(piece))
	nodes := sc.nodes[:0]
	for i := range n + 1 {
		var id uint32
		if i < n {
			id = t.byteID[piece[i]]
		}
		nodes = append(nodes, mergeNode{prev: i - 1, next: i + 1, rank: noRank, id: id})
	}
	nodes[n].next = -1
	rankOf := func(i int32) uint32 {
		j := nodes[i].next
		if j < 0 {
			return noRank
		}
		k := nodes[j].next
		if k < 0 {
			return noRank
		}
		return t.rankOr(piece[i:k])
	}
	h := sc.heap[:0]
	for i := int32(0); i+2 <= n; i++ {
		if r := rankOf(i); r != noRank {
			nodes[i].rank = r
			h = append(h, mergeCandidate{r, i})
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
		i := top.offset
		if nodes[i].rank != top.rank {
			continue
		}
		j := nodes[i].next
		k := nodes[j].next
		nodes[j].rank = noRank
		nodes[i].next = k
		nodes[i].id = top.rank
		if k >= 0 {
			nodes[k].prev = i
		}
		for _, b := range [2]int32{i, nodes[i].prev} {
			if b < 0 {
				continue
			}
			nodes[b].rank = rankOf(b)
			if nodes[b].rank != noRank {
				h = append(h, mergeCandidate{nodes[b].rank, b})
				heapUp(h, len(h)-1)
			}
		}
	}
	for i := int32(0); i >= 0 && i < n; i = nodes[i].next {
		dst = append(dst, int(nodes[i].id))
	}
	if cap(nodes) <= 1<<16 {
		sc.nodes, sc.heap = nodes[:0], h[:0]
		mergeScratchPool.Put(sc)
	}
	return dst
}

func candLess(h []mergeCandidate, a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].offset < h[b].offset
}

func heapUp(h []mergeCandidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !candLess(h, i, p) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []mergeCandidate, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && candLess(h, r, c) {
			c = r
		}
		if !candLess(h, c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// appendASCII appends the ids of ASCII text.
func (t *rankTable) appendASCII(dst []int, text string) []int {
	for i := 0; i < len(text); {
		e := asciiPiece(text, i)
		if e == i {
			i++ // the regexp skips a char no alternative matches
			continue
		}
		dst = t.appendPiece(dst, text[i:e])
		i = e
	}
	return dst
}
