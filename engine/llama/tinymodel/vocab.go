package tinymodel

import (
	"slices"
	"strings"
	"sync"
)

// Token types of tokenizer.ggml.token_type (llama_token_type in llama.h).
const (
	TypeNormal      = 1
	TypeControl     = 3
	TypeUserDefined = 4
)

// The token ids of the special tokens. Ids 0 to 255 are the bytes (token b
// is byte b, written as its GPT-2 character), the special tokens follow,
// and the learned merges come last, so these ids never move.
const (
	// TokenEndOfText is <|endoftext|> (control): BOS and padding.
	TokenEndOfText = 256 + iota
	// TokenIMStart is <|im_start|> (control).
	TokenIMStart
	// TokenIMEnd is <|im_end|> (control): EOS and EOT.
	TokenIMEnd
	// TokenThink is <think> (user-defined: always one token, always
	// rendered).
	TokenThink
	// TokenThinkEnd is </think> (user-defined).
	TokenThinkEnd
	// TokenToolCall is <tool_call> (user-defined).
	TokenToolCall
	// TokenToolCallEnd is </tool_call> (user-defined).
	TokenToolCallEnd
	// TokenToolResponse is <tool_response> (user-defined).
	TokenToolResponse
	// TokenToolResponseEnd is </tool_response> (user-defined).
	TokenToolResponseEnd
	firstMerge
)

// specials are the texts and types of the special tokens, in id order
// from TokenEndOfText.
var specials = [...]struct {
	text string
	typ  int32
}{
	{"<|endoftext|>", TypeControl},
	{"<|im_start|>", TypeControl},
	{"<|im_end|>", TypeControl},
	{"<think>", TypeUserDefined},
	{"</think>", TypeUserDefined},
	{"<tool_call>", TypeUserDefined},
	{"</tool_call>", TypeUserDefined},
	{"<tool_response>", TypeUserDefined},
	{"</tool_response>", TypeUserDefined},
}

// maxMerges is the most merges the vocabulary learns from the corpus.
// Training also stops when no pair occurs twice. With the corpus as it is,
// all 400 are learned (the test checks): the vocabulary has 665 tokens or
// fewer (two pairs may make the same text), small enough that the
// tiny model's embedding stays small, large enough that common English
// words are one or two tokens.
const maxMerges = 400

// Vocab is a byte-level BPE vocabulary in llama.cpp's "gpt2" form.
// A Vocab is read-only once built and safe for concurrent use.
type Vocab struct {
	// Tokens is the token texts by id, as stored in tokenizer.ggml.tokens:
	// normal tokens are strings of GPT-2 byte characters, special tokens
	// their literal text.
	Tokens []string
	// Types is the llama token type of each token (TypeNormal,
	// TypeControl, TypeUserDefined).
	Types []int32
	// Merges is tokenizer.ggml.merges: "left right", highest priority
	// first. Every merge's parts and result are tokens.
	Merges []string

	ids   map[string]int32
	ranks map[[2]string]int
}

// DefaultVocab is the vocabulary of every tiny model: the bytes, the
// special tokens and the merges learned from the package's built-in text.
// It is built on first use (in about a millisecond) and shared: callers
// must not modify it.
var DefaultVocab = sync.OnceValue(func() *Vocab { return train(corpus, maxMerges) })

// ID is the id of the token whose text is tok.
func (v *Vocab) ID(tok string) (int32, bool) {
	id, ok := v.ids[tok]
	return id, ok
}

// train learns up to n merges from text with the classic BPE loop: split
// text into words, and repeatedly merge the most frequent adjacent pair of
// symbols (ties: the smaller left, then right, text). A merge whose result
// is already a token (the same text reached by other pairs) adds a merge
// but no token, since llama.cpp requires token texts to be unique.
func train(text string, n int) *Vocab {
	v := &Vocab{ids: map[string]int32{}, ranks: map[[2]string]int{}}
	addToken := func(s string, typ int32) {
		if _, ok := v.ids[s]; !ok {
			v.ids[s] = int32(len(v.Tokens))
			v.Tokens = append(v.Tokens, s)
			v.Types = append(v.Types, typ)
		}
	}
	for b := range 256 {
		addToken(string(byteChars[b]), TypeNormal)
	}
	for _, s := range specials {
		addToken(s.text, s.typ)
	}

	// Symbols are token ids while training, so that a pair is one uint64.
	type word struct {
		syms  []int32
		count int
	}
	counts := map[string]int{}
	var order []string
	for _, w := range splitWords(text, nil) {
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	words := make([]word, len(order))
	for i, w := range order {
		syms := make([]int32, len(w))
		for j := range len(w) {
			syms[j] = int32(w[j]) // token b is byte b
		}
		words[i] = word{syms, counts[w]}
	}
	pairs := map[uint64]int{}
	for len(v.Merges) < n {
		clear(pairs)
		for _, w := range words {
			for i := 1; i < len(w.syms); i++ {
				pairs[uint64(w.syms[i-1])<<32|uint64(w.syms[i])] += w.count
			}
		}
		var best uint64
		bestN := 0
		for p, c := range pairs {
			if c > bestN || c == bestN && v.pairLess(p, best) {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break
		}
		l, r := v.Tokens[best>>32], v.Tokens[uint32(best)]
		addToken(l+r, TypeNormal)
		joined := v.ids[l+r]
		for i := range words {
			words[i].syms = mergePair(words[i].syms, int32(best>>32), int32(uint32(best)), joined)
		}
		v.ranks[[2]string{l, r}] = len(v.Merges)
		v.Merges = append(v.Merges, l+" "+r)
	}
	return v
}

// mergePair replaces, left to right, each adjacent l, r in syms by
// joined, in place.
func mergePair(syms []int32, l, r, joined int32) []int32 {
	out := syms[:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == l && syms[i+1] == r {
			out = append(out, joined)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}

// pairLess orders training pairs (left id << 32 | right id) by the texts
// of their tokens, left first: the tie-break between equally frequent
// pairs, independent of map order.
func (v *Vocab) pairLess(a, b uint64) bool {
	al, bl := v.Tokens[a>>32], v.Tokens[b>>32]
	if al != bl {
		return al < bl
	}
	return v.Tokens[uint32(a)] < v.Tokens[uint32(b)]
}

// Encode tokenizes text as llama.cpp's llama_tokenize does for this
// vocabulary with add_special false: user-defined tokens are always one
// token; control tokens (<|im_start|> and the like) only with
// parseSpecial, otherwise their text is tokenized as text. The rest is
// split into words (splitWords) and each word's bytes merged by rank.
func (v *Vocab) Encode(text string, parseSpecial bool) []int32 {
	var ids []int32
	var words, syms []string
	for len(text) > 0 {
		i, id := v.nextSpecial(text, parseSpecial)
		words = splitWords(text[:i], words[:0])
		for _, w := range words {
			syms = v.bpe(appendByteChars(syms[:0], w))
			for _, s := range syms {
				ids = append(ids, v.ids[s])
			}
		}
		if id < 0 {
			break
		}
		ids = append(ids, id)
		text = text[i+len(v.Tokens[id]):]
	}
	return ids
}

// nextSpecial finds the first special token in text that Encode must keep
// whole: its byte index and id, or len(text) and -1. At one index the
// longest token wins, as llama.cpp tries special tokens longest first.
func (v *Vocab) nextSpecial(text string, parseSpecial bool) (int, int32) {
	for i := 0; i < len(text); i++ {
		if text[i] != '<' { // every special token starts with '<'
			continue
		}
		best := int32(-1)
		for k, s := range specials {
			if s.typ == TypeControl && !parseSpecial || !strings.HasPrefix(text[i:], s.text) {
				continue
			}
			if best < 0 || len(s.text) > len(v.Tokens[best]) {
				best = int32(TokenEndOfText + k)
			}
		}
		if best >= 0 {
			return i, best
		}
	}
	return len(text), -1
}

// bpe merges the symbols of one word, lowest rank first and, among equal
// ranks, leftmost first, as llama.cpp's llm_tokenizer_bpe_session does.
func (v *Vocab) bpe(syms []string) []string {
	for len(syms) > 1 {
		best, bestRank := -1, 0
		for i := 1; i < len(syms); i++ {
			if r, ok := v.ranks[[2]string{syms[i-1], syms[i]}]; ok && (best < 0 || r < bestRank) {
				best, bestRank = i-1, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = slices.Delete(syms, best+1, best+2)
	}
	return syms
}

// Decode is the text of ids, as llama_detokenize gives it with
// unparse_special true: special tokens as their text, normal tokens as the
// bytes they stand for. Ids out of range are skipped.
func (v *Vocab) Decode(ids []int32) string {
	var b []byte
	for _, id := range ids {
		if id < 0 || int(id) >= len(v.Tokens) {
			continue
		}
		if v.Types[id] != TypeNormal {
			b = append(b, v.Tokens[id]...)
			continue
		}
		b, _ = appendBytes(b, v.Tokens[id])
	}
	return string(b)
}
