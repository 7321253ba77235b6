package tokenizer

import (
	"fmt"
	"strings"

	"github.com/vajra-go/vajra/engine/llama/gguf"
)

// GGUF token types (tokenizer.ggml.token_type, llama_token_type).
const (
	ggufControl     = 3
	ggufUserDefined = 4
)

// ggufPre maps tokenizer.ggml.pre to the split pattern llama.cpp uses for
// it (llama-vocab.cpp), and whether it ignores merges for whole-token words.
var ggufPre = map[string]struct {
	pattern      string
	ignoreMerges bool
	addBOS       bool // llama.cpp's default for add_bos_token
}{
	"qwen2":     {patQwen2, false, false},
	"llama-bpe": {patLlama3, true, true},
	"llama3":    {patLlama3, true, true},
	"llama-v3":  {patLlama3, true, true},
	"gpt-2":     {patGPT2, false, false},
	"gpt2":      {patGPT2, false, false},
}

func loadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := fromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return t, nil
}

// fromGGUF builds the tokenizer a GGUF file's tokenizer.ggml.* metadata
// describes, as llama.cpp tokenizes: the "gpt2" (byte-level BPE) model
// with one of the pre-tokenizers of ggufPre, control and user-defined
// tokens matched in text (control ones special), no normalizer, the
// ByteLevel decoder.
func fromGGUF(f *gguf.File) (*Tokenizer, error) {
	str := func(key string) string {
		v, _ := f.Value(key)
		s, _ := v.(string)
		return s
	}
	model := str("tokenizer.ggml.model")
	if model != "gpt2" {
		return nil, errUnsupported("GGUF tokenizer.ggml.model %q (only gpt2, byte-level BPE, is implemented)", model)
	}
	pre := str("tokenizer.ggml.pre")
	p, ok := ggufPre[pre]
	if !ok {
		return nil, errUnsupported("GGUF tokenizer.ggml.pre %q", pre)
	}
	v, _ := f.Value("tokenizer.ggml.tokens")
	tokens, ok := v.([]string)
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("tokenizer: GGUF has no tokenizer.ggml.tokens")
	}
	v, _ = f.Value("tokenizer.ggml.token_type")
	types, _ := v.([]int32)
	if types != nil && len(types) != len(tokens) {
		return nil, fmt.Errorf("tokenizer: GGUF has %d token types for %d tokens", len(types), len(tokens))
	}
	v, _ = f.Value("tokenizer.ggml.merges")
	mergeStrs, _ := v.([]string)

	t := &Tokenizer{bosID: -1, eosID: -1}
	t.pretok = []preTokenizer{
		{kind: "Split", regex: knownPatterns[p.pattern], behavior: behIsolated},
		{kind: "ByteLevel"},
	}
	t.decoders = []decoderStep{{kind: "ByteLevel"}}
	t.byteLevelDecoder = true

	vocab := make(map[string]int32, len(tokens))
	var added []addedToken
	for id, s := range tokens {
		if _, dup := vocab[s]; !dup {
			vocab[s] = int32(id)
		}
		if types != nil && (types[id] == ggufControl || types[id] == ggufUserDefined) {
			added = append(added, addedToken{id: int32(id), content: s, special: types[id] == ggufControl})
		}
	}
	merges := make([][2]string, len(mergeStrs))
	for i, m := range mergeStrs {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("tokenizer: GGUF merge %d (%q) is not two tokens", i, m)
		}
		merges[i] = [2]string{a, b}
	}
	if err := t.buildModel(vocab, merges, true, false, p.ignoreMerges, false, nil); err != nil {
		return nil, err
	}
	t.buildTables(vocab, added)

	id := func(key string) int32 {
		v, ok := f.Value(key)
		if !ok {
			return -1
		}
		switch x := v.(type) {
		case uint32:
			return int32(x)
		case int32:
			return x
		case uint64:
			return int32(x)
		case int64:
			return int32(x)
		}
		return -1
	}
	flag := func(key string, def bool) bool {
		v, ok := f.Value(key)
		if b, isBool := v.(bool); ok && isBool {
			return b
		}
		return def
	}
	valid := func(i int32) bool { return i >= 0 && int(i) < len(tokens) }
	if b := id("tokenizer.ggml.bos_token_id"); valid(b) {
		t.bos, t.bosID = tokens[b], b
	}
	if e := id("tokenizer.ggml.eos_token_id"); valid(e) {
		t.eos, t.eosID = tokens[e], e
		t.eosIDs = append(t.eosIDs, e)
	}
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if e := id(key); valid(e) && !containsID(t.eosIDs, e) {
			t.eosIDs = append(t.eosIDs, e)
		}
	}
	t.addBOS = flag("tokenizer.ggml.add_bos_token", p.addBOS) && t.bosID >= 0
	if t.addBOS {
		t.postPre = []int32{t.bosID}
	}
	if flag("tokenizer.ggml.add_eos_token", false) && t.eosID >= 0 {
		t.postSuf = []int32{t.eosID}
	}
	t.chatTemplate = str("tokenizer.chat_template")
	for _, kv := range f.KV {
		name, ok := strings.CutPrefix(kv.Key, "tokenizer.chat_template.")
		if s, isStr := kv.Value.(string); ok && isStr {
			if t.templates == nil {
				t.templates = map[string]string{}
			}
			t.templates[name] = s
		}
	}
	if t.chatTemplate != "" {
		if t.templates == nil {
			t.templates = map[string]string{}
		}
		t.templates["default"] = t.chatTemplate
	}
	return t, nil
}
