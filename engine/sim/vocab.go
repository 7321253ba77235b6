package sim

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/tiktoken-go/tokenizer"
)

// vocab is the tokenizer (o200k_base, with its ranks embedded in the binary,
// so it works offline) plus the text of every token id, decoded once so that
// the scheduler never calls the tokenizer per token. It is read-only after
// load and shared by every Engine of the process.
type vocab struct {
	codec tokenizer.Codec
	// strs holds the raw bytes of every token id (possibly part of a
	// UTF-8 character); "" for ids the encoding does not define.
	strs *tokenTable
	// ranks serves encode's fast path for ASCII text (pretokenize.go); nil
	// disables it.
	ranks *rankTable
	// prompts caches the ids of repeated prompt segments (promptcache.go);
	// nil disables it.
	prompts *promptCache
}

var shared struct {
	once sync.Once
	v    *vocab
	c    *corpus
	err  error
}

// vocabSize is one past the largest o200k_base id (<|endofprompt|>).
const vocabSize = 200019

// loadShared loads the tokenizer, the token text table and the corpus, once
// per process (about 100ms).
func loadShared() (*vocab, *corpus, error) {
	shared.once.Do(func() {
		codec, err := tokenizer.Get(tokenizer.O200kBase)
		if err != nil {
			shared.err = fmt.Errorf("sim: tokenizer o200k_base: %w", err)
			return
		}
		v := &vocab{codec: codec, strs: newTokenTable(codec)}
		v.ranks = newRankTable(v.strs)
		v.prompts = newPromptCache()
		shared.v = v
		shared.c = buildCorpus(v, corpusText)
	})
	return shared.v, shared.c, shared.err
}

// encode tokenizes text into a slice of its exact length. Safe for
// concurrent use.
func (v *vocab) encode(text string) []int {
	if text == "" {
		return nil
	}
	sp := idScratchPool.Get().(*[]int)
	ids := v.encodeAppend((*sp)[:0], text)
	out := make([]int, len(ids))
	copy(out, ids)
	putIDScratch(sp, ids)
	return out
}

// encodePrompt tokenizes a prompt into int32 ids (engine.Request's
// PromptTokens), a slice of its exact length: a held stream keeps them, at
// half the memory of []int. A ChatML prompt (chatML) goes through the
// prompt cache. Safe for concurrent use.
func (v *vocab) encodePrompt(text string, chatML bool) []int32 {
	if text == "" {
		return nil
	}
	sp := idScratchPool.Get().(*[]int)
	var ids []int
	if chatML {
		ids = v.appendPrompt((*sp)[:0], text)
	} else {
		ids = v.encodeAppend((*sp)[:0], text)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id) // ids are below vocabSize
	}
	putIDScratch(sp, ids)
	return out
}

// putIDScratch returns a scratch slice to its pool unless it grew large.
func putIDScratch(sp *[]int, ids []int) {
	if cap(ids) <= 1<<16 {
		*sp = ids[:0]
		idScratchPool.Put(sp)
	}
}

// idScratchPool holds encode's scratch id slices.
var idScratchPool = sync.Pool{New: func() any { s := make([]int, 0, 512); return &s }}

// encodeAppend appends the ids of text to dst: the ids tiktoken-go's Encode
// gives, computed without allocating for ASCII text (pretokenize.go). Safe
// for concurrent use.
func (v *vocab) encodeAppend(dst []int, text string) []int {
	if fastASCII && v.ranks != nil && isASCII(text) {
		return v.ranks.appendASCII(dst, text)
	}
	return v.encodeAppendSlow(dst, text)
}

// encodeAppendSlow is encodeAppend through tiktoken-go's Encode.
func (v *vocab) encodeAppendSlow(dst []int, text string) []int {
	if text == "" {
		return dst
	}
	ids, _, err := v.codec.Encode(text)
	if err != nil {
		return dst // ErrorModeNone never fails on input
	}
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}

// valid reports whether id is a token of the vocabulary.
func (v *vocab) valid(id int) bool {
	return v.strs.at(id) != ""
}

// text returns the raw text of token id ("" when unknown).
func (v *vocab) text(id int) string {
	return v.strs.at(id)
}

// appendText appends the text of ids to dst.
func (v *vocab) appendText(dst []byte, ids []int) []byte {
	for _, id := range ids {
		dst = append(dst, v.text(id)...)
	}
	return dst
}

// tokenTable is the raw text of every token id in one pointer-free block.
// As 200,019 separate strings it was as many objects (3 MiB of string
// headers besides) for the garbage collector to visit in every cycle of a
// server whose live heap is otherwise small; a []byte and a []uint32 are
// never scanned. Read-only after newTokenTable.
type tokenTable struct {
	blob   []byte
	off    []uint32 // token id's bytes are blob[off[id]:off[id+1]]
	maxLen int      // the longest token's bytes
}

// newTokenTable decodes every id of codec once.
func newTokenTable(codec tokenizer.Codec) *tokenTable {
	t := &tokenTable{off: make([]uint32, vocabSize+1), blob: make([]byte, 0, 2<<20)}
	one := make([]uint, 1)
	for id := 0; id < vocabSize; id++ {
		one[0] = uint(id)
		if s, err := codec.Decode(one); err == nil {
			t.blob = append(t.blob, s...)
		}
		t.off[id+1] = uint32(len(t.blob))
		t.maxLen = max(t.maxLen, int(t.off[id+1]-t.off[id]))
	}
	return t
}

// len is the number of ids (defined or not).
func (t *tokenTable) len() int { return len(t.off) - 1 }

// at returns token id's text, a view of the table ("" when id is unknown).
func (t *tokenTable) at(id int) string {
	if id < 0 || id >= t.len() {
		return ""
	}
	b := t.blob[t.off[id]:t.off[id+1]]
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b)) // the table never changes
}
