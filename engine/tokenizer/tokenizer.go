// Package tokenizer turns text into token ids and back exactly as Hugging
// Face tokenizers does, for the byte-level BPE tokenizers (Llama 3,
// Qwen 2/3, SmolLM, GPT-2) and the SentencePiece-style BPE ones (Gemma,
// Mistral, Llama 2), read from a tokenizer.json (with tokenizer_config.json
// beside it) or from a GGUF file's tokenizer.ggml.* metadata.
//
// It is pure Go and depends on no engine: any engine that needs ids (the
// remote engine, which sends them to workers) can use it.
//
// A *Tokenizer is immutable after Load and safe for concurrent use by any
// number of goroutines. Encode and Decode take their scratch memory from a
// per-Tokenizer sync.Pool (no lock is shared on the way), so in steady
// state they allocate only when dst must grow.
package tokenizer

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"
)

// ErrUnsupported is wrapped by Load's error when the tokenizer uses a
// component (model, normalizer, pre-tokenizer, regex, decoder or
// post-processor) this package does not implement; the message names it.
var ErrUnsupported = errors.New("tokenizer: unsupported")

// Tokenizer encodes text to token ids and decodes ids to text.
type Tokenizer struct {
	model bpe
	// spm, when set, replaces model, pre-tokenization and the normalizers'
	// output is its input (GGUF "llama" vocabularies).
	spm         *spmModel
	normalizers []normalizer
	pretok      []preTokenizer
	// rawAdded matches added tokens with normalized false on the input;
	// normAdded those with normalized true on the normalized text.
	rawAdded, normAdded *addedMatcher
	// post is the post-processor's ids around a single sequence.
	postPre, postSuf []int32
	decoders         []decoderStep
	byteLevelDecoder bool // decoders is [ByteLevel]
	// spDecoder: decoders is SentencePiece's Replace..., ByteFallback,
	// Fuse, Strip... (Gemma, Llama 2), decoded from the pieces table;
	// byteOf[id] is a byte fallback token's byte, or -1.
	spDecoder bool
	byteOf    []int16

	// Per id: the text Hugging Face's id_to_token gives (added tokens
	// first), the bytes the token stands for (pieces[pieceOff[id]:
	// pieceOff[id+1]]) and whether it is special.
	tokText  []string
	pieces   []byte
	pieceOff []uint32
	special  []bool
	byText   map[string]int32

	chatTemplate string
	templates    map[string]string
	bos, eos     string
	bosID, eosID int32
	eosIDs       []int32
	// genSampling is generation_config.json's sampling parameters.
	genSampling map[string]float64
	addBOS      bool

	pool sync.Pool
}

func (t *Tokenizer) get() *scratch {
	if sc, ok := t.pool.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// put returns sc to the pool unless a huge input made it too big to keep.
func (t *Tokenizer) put(sc *scratch) {
	if cap(sc.arena) > 1<<20 || cap(sc.syms) > 1<<18 {
		sc.arena, sc.syms, sc.heap = nil, nil, nil
	}
	sc.arena = sc.arena[:0]
	t.pool.Put(sc)
}

// Encode appends the ids of text to dst and returns it. Text that spells an
// added or special token (such as "<|im_start|>") becomes that token, as
// Hugging Face's encode does; no BOS or EOS is added (chat templates write
// them). Invalid UTF-8 is encoded byte by byte where the vocabulary allows
// (byte-level or byte fallback), which Hugging Face cannot be given.
func (t *Tokenizer) Encode(dst []int32, text string) []int32 {
	sc := t.get()
	dst = t.encode(sc, dst, text)
	t.put(sc)
	return dst
}

// EncodeWithSpecial is Encode plus the ids the post-processor puts around
// a sequence (Hugging Face's encode with add_special_tokens=True), such as
// Gemma's <bos>: for the prompts of completions.
func (t *Tokenizer) EncodeWithSpecial(dst []int32, text string) []int32 {
	dst = append(dst, t.postPre...)
	dst = t.Encode(dst, text)
	return append(dst, t.postSuf...)
}

func (t *Tokenizer) encode(sc *scratch, dst []int32, text string) []int32 {
	if t.rawAdded == nil {
		return t.encodeSegment(sc, dst, text, true)
	}
	var st matchState
	for {
		prev := st.offset
		ms, _, id, ok := t.rawAdded.next(text, &st)
		if !ok {
			break
		}
		if ms > prev {
			dst = t.encodeSegment(sc, dst, text[prev:ms], prev == 0)
		}
		dst = append(dst, id)
	}
	if st.offset < len(text) {
		dst = t.encodeSegment(sc, dst, text[st.offset:], st.offset == 0)
	}
	return dst
}

// encodeSegment encodes text between added tokens: normalization, the
// normalized added tokens, pre-tokenization and the model.
func (t *Tokenizer) encodeSegment(sc *scratch, dst []int32, s string, first bool) []int32 {
	if len(t.normalizers) > 0 {
		s = t.normalize(sc, s)
	}
	if t.normAdded == nil {
		return t.encodeNormalized(sc, dst, s, first)
	}
	var st matchState
	for {
		prev := st.offset
		ms, _, id, ok := t.normAdded.next(s, &st)
		if !ok {
			break
		}
		if ms > prev {
			dst = t.encodeNormalized(sc, dst, s[prev:ms], first && prev == 0)
		}
		dst = append(dst, id)
	}
	if st.offset < len(s) {
		dst = t.encodeNormalized(sc, dst, s[st.offset:], first && st.offset == 0)
	}
	return dst
}

func (t *Tokenizer) encodeNormalized(sc *scratch, dst []int32, s string, first bool) []int32 {
	if s == "" {
		return dst
	}
	if t.spm != nil {
		return t.spm.encode(sc, dst, s)
	}
	if len(t.pretok) == 0 {
		return t.model.encodeWord(sc, dst, s)
	}
	// The common case, one regex then ByteLevel, streams its pieces.
	if len(t.pretok) == 2 && t.pretok[0].kind == "Split" && t.pretok[0].regex != nil &&
		t.pretok[0].behavior == behIsolated && t.pretok[1].kind == "ByteLevel" &&
		t.pretok[1].regex == nil && !t.pretok[1].addPrefixSpace {
		re := t.pretok[0].regex
		for i := 0; i < len(s); {
			e := re.next(s, i)
			dst = t.model.encodeWord(sc, dst, s[i:e])
			i = e
		}
		return dst
	}
	pieces := t.pretokenize(sc, s, first)
	for _, p := range pieces {
		if p.s != "" {
			dst = t.model.encodeWord(sc, dst, p.s)
		}
	}
	return dst
}

// AppendPiece appends the bytes token id stands for: byte-level tokens
// decoded from GPT-2's alphabet, SentencePiece's ▁ as a space, a byte
// fallback token <0xNN> as that byte, an added or special token as its
// text. A token may be part of a UTF-8 sequence, so a stream of pieces
// must be cut at character boundaries before it is shown. The pieces of a
// sequence concatenate to its Decode except for what a decoder does to
// the whole text: Llama 2's Strip and Metaspace's drop of the first
// token's leading space, and the U+FFFD replacement of invalid UTF-8. An
// unknown id appends nothing. Allocation-free; safe for concurrent use.
func (t *Tokenizer) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(t.special) {
		return dst
	}
	return append(dst, t.pieces[t.pieceOff[id]:t.pieceOff[id+1]]...)
}

// IsSpecial reports whether id is a special token (an added token marked
// special).
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// VocabSize is one more than the largest id (vocabulary and added tokens),
// Hugging Face's get_vocab_size(with_added_tokens=True).
func (t *Tokenizer) VocabSize() int { return len(t.special) }

// TokenID returns the id of the token spelled text as the vocabulary
// spells it (an added token's content, or a model token such as "Ġthe" or
// "▁the").
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.byText[text]
	return id, ok
}

// ChatTemplate is the default chat template (tokenizer_config.json's
// chat_template, the one named "default" when it is a list, or
// chat_template.jinja; GGUF's tokenizer.chat_template), or "".
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// NamedTemplates returns the named chat templates (such as "tool_use"),
// the default one under "default". The map must not be modified.
func (t *Tokenizer) NamedTemplates() map[string]string { return t.templates }

// BOS returns the beginning-of-sequence token's text and id.
func (t *Tokenizer) BOS() (string, int32, bool) { return t.bos, t.bosID, t.bosID >= 0 }

// EOS returns the end-of-sequence token's text and id.
func (t *Tokenizer) EOS() (string, int32, bool) { return t.eos, t.eosID, t.eosID >= 0 }

// GenerationSampling returns the sampling parameters
// generation_config.json sets (GenerationSamplingKeys), by name; nil when
// it sets none or there is none. The map must not be modified.
func (t *Tokenizer) GenerationSampling() map[string]float64 { return t.genSampling }

// EOSIDs returns the ids that end generation: the EOS token and
// generation_config.json's eos_token_id (GGUF: eos and eot). The slice must
// not be modified.
func (t *Tokenizer) EOSIDs() []int32 { return t.eosIDs }

// AddBOS reports whether a prompt should start with BOS: tokenizer_config's
// add_bos_token when set, else whether the post-processor adds it.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// Decode appends the text of ids to dst as Hugging Face's decode does: the
// tokens' texts through the tokenizer's decoder (ByteLevel, or
// SentencePiece's Replace/ByteFallback/Fuse/Strip/Metaspace), invalid UTF-8
// replaced by U+FFFD as Rust's from_utf8_lossy does; with skipSpecial the
// special tokens are left out. Unknown ids are left out. It does not do
// transformers' clean_up_tokenization_spaces (Python-side, off for the
// models here).
func (t *Tokenizer) Decode(dst []byte, ids []int32, skipSpecial bool) []byte {
	sc := t.get()
	if t.byteLevelDecoder {
		// The ByteLevel decoder alone: every token's bytes are its piece.
		buf := sc.buf[:0]
		for _, id := range ids {
			if id < 0 || int(id) >= len(t.tokText) || (skipSpecial && t.special[id]) {
				continue
			}
			buf = append(buf, t.pieces[t.pieceOff[id]:t.pieceOff[id+1]]...)
		}
		dst = appendLossy(dst, buf)
		sc.buf = buf[:0]
		t.put(sc)
		return dst
	}
	if t.spDecoder {
		dst = t.decodeSP(sc, dst, ids, skipSpecial)
		t.put(sc)
		return dst
	}
	toks := sc.toks[:0]
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.tokText) || t.tokText[id] == "" {
			continue
		}
		if skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, t.tokText[id])
	}
	dst = t.decode(sc, dst, toks)
	sc.toks = toks[:0]
	t.put(sc)
	return dst
}

// appendLossy appends b with each maximal invalid UTF-8 subsequence
// replaced by U+FFFD, as Rust's String::from_utf8_lossy does.
func appendLossy(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return append(dst, b...)
	}
	for len(b) > 0 {
		r, w := utf8.DecodeRune(b)
		if r != utf8.RuneError || w > 1 {
			dst = append(dst, b[:w]...)
			b = b[w:]
			continue
		}
		dst = append(dst, "\uFFFD"...)
		b = b[invalidLen(b):]
	}
	return dst
}

// invalidLen is the length of the maximal prefix of b that starts a valid
// UTF-8 sequence but is not one (at least 1): the unit from_utf8_lossy
// replaces with one U+FFFD.
func invalidLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf)
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return i
}

func errUnsupported(what string, args ...any) error {
	return fmt.Errorf("%w %s", ErrUnsupported, fmt.Sprintf(what, args...))
}
