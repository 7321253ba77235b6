package sim

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// vocab is the tokenizer (o200k_base, with its ranks embedded in the binary,
// so it works offline) plus the text of every token id, decoded once so that
// the scheduler never calls the tokenizer per token. It is read-only after
// load and shared by every Engine of the process.
type vocab struct {
	codec tokenizer.Codec
	// strs[id] is the raw bytes of token id (possibly part of a UTF-8
	// character); "" for ids the encoding does not define.
	strs []string
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
		v := &vocab{codec: codec, strs: make([]string, vocabSize)}
		one := make([]uint, 1)
		for id := range v.strs {
			one[0] = uint(id)
			if s, err := codec.Decode(one); err == nil {
				v.strs[id] = s
			}
		}
		shared.v = v
		shared.c = buildCorpus(v, corpusText)
	})
	return shared.v, shared.c, shared.err
}

// encode tokenizes text. Safe for concurrent use.
func (v *vocab) encode(text string) []int {
	if text == "" {
		return nil
	}
	ids, _, err := v.codec.Encode(text)
	if err != nil {
		return nil // ErrorModeNone never fails on input
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// valid reports whether id is a token of the vocabulary.
func (v *vocab) valid(id int) bool {
	return id >= 0 && id < len(v.strs) && v.strs[id] != ""
}

// text returns the raw text of token id ("" when unknown).
func (v *vocab) text(id int) string {
	if id < 0 || id >= len(v.strs) {
		return ""
	}
	return v.strs[id]
}

// appendText appends the text of ids to dst.
func (v *vocab) appendText(dst []byte, ids []int) []byte {
	for _, id := range ids {
		dst = append(dst, v.text(id)...)
	}
	return dst
}
