package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/buger/jsonparser"
	"golang.org/x/text/unicode/norm"
)

// The files FromFiles reads, by name.
const (
	FileTokenizer        = "tokenizer.json"
	FileTokenizerConfig  = "tokenizer_config.json"
	FileSpecialTokensMap = "special_tokens_map.json"
	FileGenerationConfig = "generation_config.json"
	FileChatTemplate     = "chat_template.jinja"
)

// Load reads a tokenizer from path: a tokenizer.json file (with the
// tokenizer_config.json, generation_config.json and chat_template.jinja
// beside it when present), a folder holding them, or a GGUF file.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	dir, main := path, FileTokenizer
	if !st.IsDir() {
		if isGGUF(path) {
			return loadGGUF(path)
		}
		dir, main = filepath.Dir(path), filepath.Base(path)
	}
	files := map[string][]byte{}
	b, err := os.ReadFile(filepath.Join(dir, main))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	files[FileTokenizer] = b
	for _, name := range []string{FileTokenizerConfig, FileSpecialTokensMap, FileGenerationConfig, FileChatTemplate} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			files[name] = b
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	t, err := FromFiles(files)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return t, nil
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// FromFiles builds a tokenizer from the contents of a model's tokenizer
// files, keyed by file name (FileTokenizer is required; the config,
// special tokens map, generation config and chat template are optional),
// such as a worker streams them.
func FromFiles(files map[string][]byte) (*Tokenizer, error) {
	raw, ok := files[FileTokenizer]
	if !ok {
		return nil, fmt.Errorf("tokenizer: no %s", FileTokenizer)
	}
	var f hfFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", FileTokenizer, err)
	}
	t := &Tokenizer{bosID: -1, eosID: -1}
	if err := t.build(&f); err != nil {
		return nil, err
	}
	if err := t.configure(files); err != nil {
		return nil, err
	}
	return t, nil
}

type hfFile struct {
	AddedTokens   []hfAdded       `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         hfModel         `json:"model"`
}

type hfAdded struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// hfComponent is any normalizer, pre-tokenizer, decoder or post-processor.
type hfComponent struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Decoders       []json.RawMessage `json:"decoders"`
	Processors     []json.RawMessage `json:"processors"`
	Pattern        *hfPattern        `json:"pattern"`
	Content        json.RawMessage   `json:"content"`
	Prepend        string            `json:"prepend"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Replacement    string            `json:"replacement"`
	PrependScheme  string            `json:"prepend_scheme"`
	Split          *bool             `json:"split"`
	Individual     bool              `json:"individual_digits"`
	Start          int               `json:"start"`
	Stop           int               `json:"stop"`
	StripLeft      bool              `json:"strip_left"`
	StripRight     bool              `json:"strip_right"`
	Single         []hfTemplateItem  `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []int32 `json:"ids"`
	} `json:"special_tokens"`
	Cls []json.RawMessage `json:"cls"`
	Sep []json.RawMessage `json:"sep"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfTemplateItem struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

func isNull(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) == 0 || string(m) == "null"
}

func parseComponent(what string, m json.RawMessage) (*hfComponent, error) {
	var c hfComponent
	if err := json.Unmarshal(m, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", what, err)
	}
	return &c, nil
}

// build sets up everything tokenizer.json describes.
func (t *Tokenizer) build(f *hfFile) error {
	if isNull(f.Model.Merges) && f.Model.Type == "" || f.Model.Type != "" && f.Model.Type != "BPE" {
		return errUnsupported("model %q (only BPE is implemented)", f.Model.Type)
	}
	if f.Model.Dropout != nil && *f.Model.Dropout != 0 {
		return errUnsupported("BPE dropout %v", *f.Model.Dropout)
	}
	if p := f.Model.ContinuingSubwordPrefix; p != nil && *p != "" {
		return errUnsupported("BPE continuing_subword_prefix %q", *p)
	}
	if p := f.Model.EndOfWordSuffix; p != nil && *p != "" {
		return errUnsupported("BPE end_of_word_suffix %q", *p)
	}
	if !isNull(f.Normalizer) {
		if err := t.addNormalizer(f.Normalizer); err != nil {
			return err
		}
	}
	if !isNull(f.PreTokenizer) {
		if err := t.addPreTokenizer(f.PreTokenizer); err != nil {
			return err
		}
	}
	byteLevel := false
	for i, p := range t.pretok {
		if p.kind == "ByteLevel" {
			if i != len(t.pretok)-1 {
				return errUnsupported("pre-tokenizer after ByteLevel")
			}
			byteLevel = true
		}
	}
	if !isNull(f.Decoder) {
		if err := t.addDecoder(f.Decoder); err != nil {
			return err
		}
	}
	t.byteLevelDecoder = len(t.decoders) == 1 && t.decoders[0].kind == "ByteLevel"

	merges, err := parseMerges(f.Model.Merges)
	if err != nil {
		return err
	}
	vocab, err := parseVocab(f.Model.Vocab)
	if err != nil {
		return err
	}
	var unk *string
	if f.Model.UnkToken != nil {
		unk = f.Model.UnkToken
	}
	if err := t.buildModel(vocab, merges, byteLevel, f.Model.ByteFallback, f.Model.IgnoreMerges, f.Model.FuseUnk, unk); err != nil {
		return err
	}
	added := make([]addedToken, 0, len(f.AddedTokens))
	for _, a := range f.AddedTokens {
		added = append(added, addedToken{id: a.ID, content: a.Content, singleWord: a.SingleWord,
			lstrip: a.LStrip, rstrip: a.RStrip, normalized: a.Normalized, special: a.Special})
	}
	t.buildTables(vocab, added)
	t.setSPDecoder()
	if !isNull(f.PostProcessor) {
		if err := t.addPostProcessor(f.PostProcessor); err != nil {
			return err
		}
	}
	return nil
}

// buildModel sets up the BPE model from the vocabulary as spelled in the
// file and the merges (pairs of vocabulary strings, in rank order).
func (t *Tokenizer) buildModel(vocab map[string]int32, merges [][2]string, byteLevel, byteFallback, ignoreMerges, fuseUnk bool, unk *string) error {
	m := &t.model
	m.byteLevel, m.ignoreMerges, m.fuseUnk = byteLevel, ignoreMerges, fuseUnk
	m.unk = -1
	if unk != nil {
		id, ok := vocab[*unk]
		if !ok {
			return fmt.Errorf("tokenizer: unk_token %q is not in the vocabulary", *unk)
		}
		m.unk = id
	}
	if byteLevel {
		m.vocab = make(map[string]int32, len(vocab))
		var buf []byte
		for s, id := range vocab {
			var ok bool
			if buf, ok = byteLevelDecode(buf[:0], s); ok {
				m.vocab[string(buf)] = id
			}
		}
		for b := range 256 {
			m.byteID[b] = -1
			if id, ok := vocab[string(byteToRune[b])]; ok {
				m.byteID[b] = id
			}
		}
	} else {
		m.vocab = vocab // read-only from here on
	}
	for b := range 256 {
		m.fallback[b] = -1
		if byteFallback {
			if id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
				m.fallback[b] = id
				m.hasFallback = true
			}
		}
	}
	if !byteLevel {
		m.runeID = make([]int32, 0x10000)
		for i := range m.runeID {
			m.runeID[i] = -1
		}
		for s, id := range vocab {
			if r, n := utf8.DecodeRuneInString(s); n == len(s) && r < 0x10000 && r != utf8.RuneError {
				m.runeID[r] = id
			}
		}
	}
	m.merges = newPairTable(len(merges))
	for rank, mg := range merges {
		a, ok1 := vocab[mg[0]]
		b, ok2 := vocab[mg[1]]
		n, ok3 := vocab[mg[0]+mg[1]]
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("tokenizer: merge %d (%q %q) uses a token not in the vocabulary", rank, mg[0], mg[1])
		}
		m.merges.set(pairKey(a, b), uint64(rank)<<32|uint64(uint32(n)))
	}
	return nil
}

// parseMerges reads merges as "a b" strings or as ["a", "b"] pairs.
// jsonparser walks the hundreds of thousands of them several times faster
// than encoding/json's reflection.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	pairs := make([][2]string, 0, bytes.Count(raw, []byte{','})+1)
	var perr error
	_, err := jsonparser.ArrayEach(raw, func(v []byte, typ jsonparser.ValueType, _ int, err error) {
		if perr != nil {
			return
		}
		if err != nil {
			perr = err
			return
		}
		switch typ {
		case jsonparser.String:
			s, err := jsonparser.ParseString(v)
			a, b, ok := strings.Cut(s, " ")
			if err != nil || !ok {
				perr = fmt.Errorf("merge %d (%q) is not two tokens", len(pairs), v)
				return
			}
			pairs = append(pairs, [2]string{a, b})
		case jsonparser.Array:
			var p [2]string
			n := 0
			_, err := jsonparser.ArrayEach(v, func(e []byte, et jsonparser.ValueType, _ int, _ error) {
				if n < 2 && et == jsonparser.String {
					p[n], _ = jsonparser.ParseString(e)
				}
				n++
			})
			if err != nil || n != 2 {
				perr = fmt.Errorf("merge %d (%s) is not two tokens", len(pairs), v)
				return
			}
			pairs = append(pairs, p)
		default:
			perr = fmt.Errorf("merge %d (%s) is not a string or a pair", len(pairs), v)
		}
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: merges: %w", err)
	}
	return pairs, nil
}

// parseVocab reads the model's vocabulary, an object of token: id.
func parseVocab(raw json.RawMessage) (map[string]int32, error) {
	vocab := make(map[string]int32, bytes.Count(raw, []byte{','})+1)
	err := jsonparser.ObjectEach(raw, func(k, v []byte, typ jsonparser.ValueType, _ int) error {
		id, err := jsonparser.ParseInt(v)
		if err != nil || typ != jsonparser.Number || id < 0 || id > 1<<31-1 {
			return fmt.Errorf("token %q: id %s", k, v)
		}
		vocab[string(k)] = int32(id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: model vocab: %w", err)
	}
	return vocab, nil
}

// buildTables fills the per-id tables and the added-token matchers.
func (t *Tokenizer) buildTables(vocab map[string]int32, added []addedToken) {
	n := 0
	for _, id := range vocab {
		n = max(n, int(id)+1)
	}
	for _, a := range added {
		n = max(n, int(a.id)+1)
	}
	t.tokText = make([]string, n)
	t.special = make([]bool, n)
	t.byText = make(map[string]int32, len(vocab)+len(added))
	for s, id := range vocab {
		if id >= 0 {
			t.tokText[id] = s
			t.byText[s] = id
		}
	}
	var raw, normd []addedToken
	for _, a := range added {
		if a.id < 0 {
			continue
		}
		t.tokText[a.id] = a.content
		t.special[a.id] = a.special
		t.byText[a.content] = a.id
		if a.normalized {
			normd = append(normd, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawAdded = newAddedMatcher(raw, func(a addedToken) string { return a.content })
	t.normAdded = newAddedMatcher(normd, func(a addedToken) string {
		sc := new(scratch)
		return strings.Clone(t.normalize(sc, a.content))
	})
	t.pieceOff = make([]uint32, n+1)
	t.pieces = make([]byte, 0, 8*n)
	for id := range n {
		t.pieces = t.appendPieceOf(t.pieces, t.tokText[id])
		t.pieceOff[id+1] = uint32(len(t.pieces))
	}
}

// appendPieceOf appends the bytes a token text stands for: the decoder's
// per-token steps (ByteLevel, Replace, ByteFallback, Metaspace).
func (t *Tokenizer) appendPieceOf(dst []byte, s string) []byte {
	if t.byteLevelDecoder {
		if b, ok := byteLevelDecode(dst, s); ok {
			return b
		}
		return append(dst, s...)
	}
	for _, d := range t.decoders {
		switch d.kind {
		case "ByteLevel":
			if b, ok := byteLevelDecode(nil, s); ok {
				s = string(b)
			}
		case "Replace":
			s = strings.ReplaceAll(s, d.pattern, d.content)
		case "ByteFallback":
			if b, ok := byteToken(s); ok {
				s = string([]byte{b})
			}
		case "Metaspace":
			s = strings.ReplaceAll(s, string(d.replacement), " ")
		}
	}
	return append(dst, s...)
}

func (t *Tokenizer) addNormalizer(m json.RawMessage) error {
	c, err := parseComponent("normalizer", m)
	if err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, x := range c.Normalizers {
			if err := t.addNormalizer(x); err != nil {
				return err
			}
		}
	case "NFC", "NFD", "NFKC", "NFKD", "Lowercase":
		forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
		t.normalizers = append(t.normalizers, normalizer{kind: c.Type, form: forms[c.Type]})
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil {
			return errUnsupported("Replace normalizer with a regex pattern")
		}
		var content string
		if err := json.Unmarshal(c.Content, &content); err != nil {
			return fmt.Errorf("tokenizer: Replace normalizer content: %w", err)
		}
		if *c.Pattern.String == "" {
			return errUnsupported("Replace normalizer with an empty pattern")
		}
		t.normalizers = append(t.normalizers, normalizer{kind: "Replace", pattern: *c.Pattern.String, content: content})
	case "Prepend":
		t.normalizers = append(t.normalizers, normalizer{kind: "Prepend", content: c.Prepend})
	case "Strip":
		t.normalizers = append(t.normalizers, normalizer{kind: "Strip", left: c.StripLeft, right: c.StripRight})
	default:
		return errUnsupported("normalizer %q", c.Type)
	}
	return nil
}

var behaviors = map[string]int{"Removed": behRemoved, "Isolated": behIsolated,
	"MergedWithPrevious": behMergedWithPrevious, "MergedWithNext": behMergedWithNext, "Contiguous": behContiguous}

func parsePrepend(c *hfComponent) (int, error) {
	switch c.PrependScheme {
	case "always":
		return prependAlways, nil
	case "first":
		return prependFirst, nil
	case "never":
		return prependNever, nil
	case "":
		if c.AddPrefixSpace == nil || *c.AddPrefixSpace {
			return prependAlways, nil
		}
		return prependNever, nil
	}
	return 0, errUnsupported("Metaspace prepend_scheme %q", c.PrependScheme)
}

func (t *Tokenizer) addPreTokenizer(m json.RawMessage) error {
	c, err := parseComponent("pre_tokenizer", m)
	if err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, x := range c.Pretokenizers {
			if err := t.addPreTokenizer(x); err != nil {
				return err
			}
		}
	case "Split":
		beh, ok := behaviors[c.Behavior]
		if !ok {
			return errUnsupported("Split behavior %q", c.Behavior)
		}
		if c.Invert {
			return errUnsupported("Split with invert")
		}
		p := preTokenizer{kind: "Split", behavior: beh}
		switch {
		case c.Pattern != nil && c.Pattern.Regex != nil:
			re, ok := knownPatterns[*c.Pattern.Regex]
			if !ok {
				return errUnsupported("Split regex %q (known: the GPT-2, Llama 3 and Qwen 2 patterns)", *c.Pattern.Regex)
			}
			p.regex = re
		case c.Pattern != nil && c.Pattern.String != nil && *c.Pattern.String != "":
			p.literal = *c.Pattern.String
		default:
			return errUnsupported("Split without a pattern")
		}
		t.pretok = append(t.pretok, p)
	case "ByteLevel":
		p := preTokenizer{kind: "ByteLevel", addPrefixSpace: c.AddPrefixSpace != nil && *c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex {
			p.regex = knownPatterns[patGPT2]
		}
		t.pretok = append(t.pretok, p)
	case "Metaspace":
		prep, err := parsePrepend(c)
		if err != nil {
			return err
		}
		rep := c.Replacement
		if rep == "" {
			rep = "▁"
		}
		t.pretok = append(t.pretok, preTokenizer{kind: "Metaspace", replacement: rep, prepend: prep, split: c.Split == nil || *c.Split})
	case "Digits":
		t.pretok = append(t.pretok, preTokenizer{kind: "Digits", individual: c.Individual})
	case "WhitespaceSplit":
		t.pretok = append(t.pretok, preTokenizer{kind: "WhitespaceSplit"})
	default:
		return errUnsupported("pre-tokenizer %q", c.Type)
	}
	return nil
}

func (t *Tokenizer) addDecoder(m json.RawMessage) error {
	c, err := parseComponent("decoder", m)
	if err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, x := range c.Decoders {
			if err := t.addDecoder(x); err != nil {
				return err
			}
		}
	case "ByteLevel", "ByteFallback", "Fuse":
		t.decoders = append(t.decoders, decoderStep{kind: c.Type})
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || *c.Pattern.String == "" {
			return errUnsupported("Replace decoder without a string pattern")
		}
		var content string
		if err := json.Unmarshal(c.Content, &content); err != nil {
			return fmt.Errorf("tokenizer: Replace decoder content: %w", err)
		}
		t.decoders = append(t.decoders, decoderStep{kind: "Replace", pattern: *c.Pattern.String, content: content})
	case "Strip":
		var content string
		if err := json.Unmarshal(c.Content, &content); err != nil || len([]rune(content)) != 1 {
			return fmt.Errorf("tokenizer: Strip decoder content %s: want one char", c.Content)
		}
		t.decoders = append(t.decoders, decoderStep{kind: "Strip", strip: []rune(content)[0], start: c.Start, stop: c.Stop})
	case "Metaspace":
		prep, err := parsePrepend(c)
		if err != nil {
			return err
		}
		rep := []rune(c.Replacement)
		if len(rep) != 1 {
			rep = []rune("▁")
		}
		t.decoders = append(t.decoders, decoderStep{kind: "Metaspace", replacement: rep[0], prepend: prep})
	default:
		return errUnsupported("decoder %q", c.Type)
	}
	return nil
}

func (t *Tokenizer) addPostProcessor(m json.RawMessage) error {
	c, err := parseComponent("post_processor", m)
	if err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, x := range c.Processors {
			if err := t.addPostProcessor(x); err != nil {
				return err
			}
		}
	case "ByteLevel":
		// Offsets only.
	case "TemplateProcessing":
		seen := false
		for _, it := range c.Single {
			switch {
			case it.Sequence != nil:
				seen = true
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return fmt.Errorf("tokenizer: TemplateProcessing: special token %q is not in special_tokens", it.SpecialToken.ID)
				}
				if seen {
					t.postSuf = append(t.postSuf, st.IDs...)
				} else {
					t.postPre = append(t.postPre, st.IDs...)
				}
			}
		}
	case "BertProcessing", "RobertaProcessing":
		id := func(pair []json.RawMessage) (int32, error) {
			var v int32
			if len(pair) != 2 {
				return 0, fmt.Errorf("tokenizer: %s: want [token, id]", c.Type)
			}
			return v, json.Unmarshal(pair[1], &v)
		}
		cls, err := id(c.Cls)
		if err != nil {
			return err
		}
		sep, err := id(c.Sep)
		if err != nil {
			return err
		}
		t.postPre = append(t.postPre, cls)
		t.postSuf = append(t.postSuf, sep)
	default:
		return errUnsupported("post-processor %q", c.Type)
	}
	return nil
}

// configure reads tokenizer_config.json, special_tokens_map.json,
// generation_config.json and chat_template.jinja.
func (t *Tokenizer) configure(files map[string][]byte) error {
	var cfg struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	for _, name := range []string{FileSpecialTokensMap, FileTokenizerConfig} {
		b, ok := files[name]
		if !ok {
			continue
		}
		var c = cfg
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("tokenizer: %s: %w", name, err)
		}
		if !isNull(c.BOS) {
			cfg.BOS = c.BOS
		}
		if !isNull(c.EOS) {
			cfg.EOS = c.EOS
		}
		cfg.AddBOS, cfg.ChatTemplate = c.AddBOS, c.ChatTemplate
	}
	if s, ok := tokenString(cfg.BOS); ok {
		t.bos = s
		if id, ok := t.byText[s]; ok {
			t.bosID = id
		}
	}
	if s, ok := tokenString(cfg.EOS); ok {
		t.eos = s
		if id, ok := t.byText[s]; ok {
			t.eosID = id
		}
	}
	if cfg.AddBOS != nil {
		t.addBOS = *cfg.AddBOS
	} else {
		t.addBOS = t.bosID >= 0 && len(t.postPre) > 0 && t.postPre[0] == t.bosID
	}
	if err := t.setTemplates(cfg.ChatTemplate); err != nil {
		return err
	}
	if b, ok := files[FileChatTemplate]; ok {
		t.chatTemplate = string(b)
		if t.templates == nil {
			t.templates = map[string]string{}
		}
		t.templates["default"] = t.chatTemplate
	}
	if t.eosID >= 0 {
		t.eosIDs = append(t.eosIDs, t.eosID)
	}
	if b, ok := files[FileGenerationConfig]; ok {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			return fmt.Errorf("tokenizer: %s: %w", FileGenerationConfig, err)
		}
		t.genSampling, _ = GenerationSampling(b) // well formed: decoded above
		var one int32
		var many []int32
		if json.Unmarshal(g.EOS, &one) == nil && !isNull(g.EOS) {
			many = []int32{one}
		} else {
			_ = json.Unmarshal(g.EOS, &many)
		}
		for _, id := range many {
			if !containsID(t.eosIDs, id) {
				t.eosIDs = append(t.eosIDs, id)
			}
		}
	}
	return nil
}

// GenerationSamplingKeys are the sampling parameters of
// generation_config.json that vLLM takes as a request's defaults
// (ModelConfig.get_diff_sampling_param, vLLM 0.32; max_new_tokens is its
// max_tokens).
var GenerationSamplingKeys = []string{"repetition_penalty", "presence_penalty", "frequency_penalty",
	"temperature", "top_k", "top_p", "min_p", "max_new_tokens"}

// GenerationSampling reads the sampling parameters of a
// generation_config.json (GenerationSamplingKeys) that are numbers, by
// name; nil when there are none.
func GenerationSampling(generationConfig []byte) (map[string]float64, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(generationConfig, &all); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", FileGenerationConfig, err)
	}
	var g map[string]float64
	for _, k := range GenerationSamplingKeys {
		var v float64
		if raw, ok := all[k]; ok && !isNull(raw) && json.Unmarshal(raw, &v) == nil {
			if g == nil {
				g = map[string]float64{}
			}
			g[k] = v
		}
	}
	return g, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// tokenString reads a token setting: a string or {"content": ...}.
func tokenString(m json.RawMessage) (string, bool) {
	if isNull(m) {
		return "", false
	}
	var s string
	if json.Unmarshal(m, &s) == nil {
		return s, true
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(m, &o) == nil && o.Content != "" {
		return o.Content, true
	}
	return "", false
}

func (t *Tokenizer) setTemplates(m json.RawMessage) error {
	if isNull(m) {
		return nil
	}
	var s string
	if json.Unmarshal(m, &s) == nil {
		t.chatTemplate = s
		t.templates = map[string]string{"default": s}
		return nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(m, &list); err != nil {
		return fmt.Errorf("tokenizer: chat_template: %w", err)
	}
	t.templates = map[string]string{}
	for _, x := range list {
		t.templates[x.Name] = x.Template
	}
	t.chatTemplate = t.templates["default"]
	return nil
}
