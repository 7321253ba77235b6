package sim

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
)

// Why a prompt cache: tokenizing the rendered prompt is the largest part
// of the engine's work for a short request (BenchmarkEncodePrompt), and
// most of a prompt repeats: the system prompt, the tool list, the earlier
// turns of a conversation, or the whole prompt of a client that retries or
// benchmarks. The cache keeps the ids of repeated prompt segments.
//
// A segment ends after a turn's "<|im_end|>\n" where the next turn's "<"
// follows. That cut is a boundary of o200k_base's pre-tokenizer whatever
// surrounds it: the pre-token that holds the "\n" is the punctuation run
// "...|>" with its trailing newlines ([^\s\p{L}\p{N}]+[\r\n/]*), which
// stops before "<", as it stops at the end of the text; and no pattern
// looks behind, so the next segment pre-tokenizes from its start as it
// does inside the whole prompt. BPE works within pre-tokens, so the ids of
// a prompt are the concatenation of its segments' ids
// (TestPromptCacheExact checks it against the whole prompt's, both paths).

// promptSlots is the number of cached segments (a power of two), and
// maxCachedSegment the longest segment cached: the cache holds at most
// 256 x 8 KiB of text and its ids (about 6 MiB) however many prompts pass.
const (
	promptSlots      = 256
	maxCachedSegment = 8 << 10
)

// segmentCut is the text a cut falls in: after its "\n", before its "<".
const segmentCut = "<|im_end|>\n<"

// promptCache maps segments to their ids: one slot per hash, the last
// segment stored wins. A segment is stored the second time it is seen in a
// row in its slot (seen remembers the last hash that missed), so that a
// prompt seen once (a new user turn) costs no allocation and evicts
// nothing. Lookups are one atomic load; entries are immutable. Safe for
// concurrent use.
type promptCache struct {
	seed  maphash.Seed
	slots [promptSlots]atomic.Pointer[promptSegment]
	seen  [promptSlots]atomic.Uint64
}

type promptSegment struct {
	text string
	ids  []int
}

func newPromptCache() *promptCache { return &promptCache{seed: maphash.MakeSeed()} }

// appendPrompt appends the ids of a rendered ChatML prompt, segment by
// segment, through the cache.
func (v *vocab) appendPrompt(dst []int, text string) []int {
	for text != "" {
		seg := text
		if i := strings.Index(text, segmentCut); i >= 0 {
			seg = text[:i+len(segmentCut)-1]
		}
		dst = v.appendSegment(dst, seg)
		text = text[len(seg):]
	}
	return dst
}

// appendSegment appends the ids of one segment, from the cache when it
// holds them.
func (v *vocab) appendSegment(dst []int, seg string) []int {
	c := v.prompts
	if c == nil || len(seg) > maxCachedSegment {
		return v.encodeAppend(dst, seg)
	}
	h := maphash.String(c.seed, seg)
	i := h & (promptSlots - 1) // c.index
	if e := c.slots[i].Load(); e != nil && e.text == seg {
		return append(dst, e.ids...)
	}
	n := len(dst)
	dst = v.encodeAppend(dst, seg)
	if c.seen[i].Swap(h) == h {
		// Cloned: seg is a view of a pooled render buffer.
		c.slots[i].Store(&promptSegment{text: strings.Clone(seg), ids: slices.Clone(dst[n:])})
	}
	return dst
}

// index is the slot of seg (for tests).
func (c *promptCache) index(seg string) uint64 {
	return maphash.String(c.seed, seg) & (promptSlots - 1)
}
