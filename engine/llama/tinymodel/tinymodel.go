// Package tinymodel writes tiny random-weight models of llama.cpp's llama
// architecture, as GGUF files that llama.cpp loads and runs: a real
// byte-level BPE tokenizer with ChatML and tool-call special tokens, a
// Qwen-style chat template, and weights drawn from a seeded generator. The
// model's output is nonsense, but it is a real model, made in
// milliseconds, for tests and benchmarks of the engine around it.
package tinymodel

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/vajra-go/vajra/engine/llama/gguf"
)

// Config is the shape of a tiny model. A zero field takes its default.
type Config struct {
	// Layers is the number of transformer blocks (default 2).
	Layers int
	// Dim is the embedding width (default 64).
	Dim int
	// Heads is the number of attention heads (default 4); Dim/Heads, the
	// head size, must be even (RoPE rotates pairs).
	Heads int
	// KVHeads is the number of key/value heads (default 2); Heads must be a
	// multiple of it.
	KVHeads int
	// FF is the width of the feed-forward layer (default 176, 2.75 Dim).
	FF int
	// Context is the training context length, llama.context_length
	// (default 2048).
	Context int
	// Seed seeds the weights: the same Config gives the same bytes.
	Seed uint64
	// F16 stores the matrices as F16 instead of F32 (norms stay F32), which
	// halves the file.
	F16 bool
	// Name is general.name (default "vajra-tiny").
	Name string
	// Meta adds string metadata keys (tokenizer.chat_template.tool_use,
	// ...), written in key order so that the bytes stay the same.
	Meta map[string]string
}

// Defaults of Config.
const (
	DefaultLayers  = 2
	DefaultDim     = 64
	DefaultHeads   = 4
	DefaultKVHeads = 2
	DefaultFF      = 176
	DefaultContext = 2048
	DefaultName    = "vajra-tiny"
)

// Model hyperparameters that Config does not expose.
const (
	// RMSEpsilon is llama.attention.layer_norm_rms_epsilon.
	RMSEpsilon = 1e-6
	// RopeFreqBase is llama.rope.freq_base (Llama 2's).
	RopeFreqBase = 10000
)

// ErrConfig: a Config field is out of range or the fields disagree.
var ErrConfig = errors.New("tinymodel: invalid config")

// maxDim bounds every size of a Config: far above any useful tiny model,
// low enough that products of sizes cannot overflow.
const maxDim = 1 << 16

// withDefaults is cfg with its zero fields set to the defaults, checked.
func (cfg Config) withDefaults() (Config, error) {
	def := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	def(&cfg.Layers, DefaultLayers)
	def(&cfg.Dim, DefaultDim)
	def(&cfg.Heads, DefaultHeads)
	def(&cfg.KVHeads, DefaultKVHeads)
	def(&cfg.FF, DefaultFF)
	def(&cfg.Context, DefaultContext)
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", cfg.Layers}, {"dim", cfg.Dim}, {"heads", cfg.Heads}, {"kv heads", cfg.KVHeads}, {"ff", cfg.FF}} {
		if f.v < 0 || f.v > maxDim {
			return cfg, fmt.Errorf("%w: %s %d, want 1 to %d", ErrConfig, f.name, f.v, maxDim)
		}
	}
	if cfg.Context < 0 || cfg.Context > math.MaxInt32 {
		return cfg, fmt.Errorf("%w: context %d", ErrConfig, cfg.Context)
	}
	if cfg.Dim%cfg.Heads != 0 || (cfg.Dim/cfg.Heads)%2 != 0 {
		return cfg, fmt.Errorf("%w: dim %d must be heads %d times an even head size", ErrConfig, cfg.Dim, cfg.Heads)
	}
	if cfg.Heads%cfg.KVHeads != 0 {
		return cfg, fmt.Errorf("%w: heads %d must be a multiple of kv heads %d", ErrConfig, cfg.Heads, cfg.KVHeads)
	}
	return cfg, nil
}

// Write writes the model cfg describes to w as a GGUF file.
// Safe for concurrent use.
func Write(w io.Writer, cfg Config) error {
	gw, err := build(cfg)
	if err != nil {
		return err
	}
	_, err = gw.WriteTo(w)
	return err
}

// WriteFile writes the model cfg describes to the file path, replacing
// it. On error the file may be left incomplete. Safe for concurrent use
// (on different paths).
func WriteFile(path string, cfg Config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, cfg); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TempFile writes the model cfg describes to a new file in dir (the
// system's temporary directory if dir is ""), named tinymodel-*.gguf, and
// returns its path. The caller removes it; tests pass t.TempDir() as dir.
// Safe for concurrent use.
func TempFile(dir string, cfg Config) (string, error) {
	f, err := os.CreateTemp(dir, "tinymodel-*.gguf")
	if err != nil {
		return "", err
	}
	path := filepath.Clean(f.Name())
	err = Write(f, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// build lays out the whole model in a gguf.Writer.
func build(cfg Config) (*gguf.Writer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := DefaultVocab()
	nVocab := len(v.Tokens)
	headDim := cfg.Dim / cfg.Heads
	kvDim := headDim * cfg.KVHeads
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if cfg.F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}

	w := gguf.NewWriter()
	set := func(key string, val any) {
		if err == nil {
			err = w.Set(key, val)
		}
	}
	u32 := func(n int) uint32 { return uint32(n) }
	set("general.architecture", "llama")
	set("general.name", cfg.Name)
	set("general.file_type", fileType)
	set("llama.context_length", u32(cfg.Context))
	set("llama.embedding_length", u32(cfg.Dim))
	set("llama.block_count", u32(cfg.Layers))
	set("llama.feed_forward_length", u32(cfg.FF))
	set("llama.attention.head_count", u32(cfg.Heads))
	set("llama.attention.head_count_kv", u32(cfg.KVHeads))
	set("llama.attention.layer_norm_rms_epsilon", float32(RMSEpsilon))
	set("llama.rope.freq_base", float32(RopeFreqBase))
	set("llama.rope.dimension_count", u32(headDim))
	set("llama.vocab_size", u32(nVocab))
	set("tokenizer.ggml.model", "gpt2")
	set("tokenizer.ggml.pre", PreTokenizer)
	set("tokenizer.ggml.tokens", v.Tokens)
	set("tokenizer.ggml.token_type", v.Types)
	set("tokenizer.ggml.merges", v.Merges)
	set("tokenizer.ggml.bos_token_id", uint32(TokenEndOfText))
	set("tokenizer.ggml.eos_token_id", uint32(TokenIMEnd))
	set("tokenizer.ggml.eot_token_id", uint32(TokenIMEnd))
	set("tokenizer.ggml.padding_token_id", uint32(TokenEndOfText))
	set("tokenizer.ggml.add_bos_token", false)
	set("tokenizer.chat_template", ChatTemplate)
	for _, k := range slices.Sorted(maps.Keys(cfg.Meta)) {
		set(k, cfg.Meta[k])
	}
	if err != nil {
		return nil, err
	}

	// Weights: uniform noise with the standard deviation 1/sqrt(fan_in)
	// (LeCun), so each projection keeps activations near unit scale. The
	// embedding has standard deviation 1 (RMS norm follows it anyway), and
	// the norms are 1. The output matrix is its own (not tied to the
	// embedding, which would make the model echo its input) with scale
	// 2/sqrt(dim): logits of standard deviation about 2, peaked enough that
	// greedy decoding follows the context, spread enough that it does not
	// fall into one token.
	mat := func(name string, in, out int, std float64) {
		if err != nil {
			return
		}
		vals := noise(cfg.Seed, name, in*out, std)
		typ, data := gguf.TensorF32, gguf.AppendF32(nil, vals)
		if cfg.F16 {
			typ, data = gguf.TensorF16, gguf.AppendF16(nil, vals)
		}
		err = w.AddTensor(name, typ, []int64{int64(in), int64(out)}, data)
	}
	ones := make([]float32, cfg.Dim)
	for i := range ones {
		ones[i] = 1
	}
	norm := func(name string) {
		if err == nil {
			err = w.AddTensor(name, gguf.TensorF32, []int64{int64(cfg.Dim)}, gguf.AppendF32(nil, ones))
		}
	}
	fanIn := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	mat("token_embd.weight", cfg.Dim, nVocab, 1)
	norm("output_norm.weight")
	mat("output.weight", cfg.Dim, nVocab, 2*fanIn(cfg.Dim))
	for i := range cfg.Layers {
		blk := fmt.Sprintf("blk.%d.", i)
		norm(blk + "attn_norm.weight")
		mat(blk+"attn_q.weight", cfg.Dim, cfg.Dim, fanIn(cfg.Dim))
		mat(blk+"attn_k.weight", cfg.Dim, kvDim, fanIn(cfg.Dim))
		mat(blk+"attn_v.weight", cfg.Dim, kvDim, fanIn(cfg.Dim))
		mat(blk+"attn_output.weight", cfg.Dim, cfg.Dim, fanIn(cfg.Dim))
		norm(blk + "ffn_norm.weight")
		mat(blk+"ffn_gate.weight", cfg.Dim, cfg.FF, fanIn(cfg.Dim))
		mat(blk+"ffn_down.weight", cfg.FF, cfg.Dim, fanIn(cfg.FF))
		mat(blk+"ffn_up.weight", cfg.Dim, cfg.FF, fanIn(cfg.Dim))
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// noise is n uniform values of standard deviation std (uniform on
// [-sqrt(3) std, sqrt(3) std]). The stream depends only on seed and the
// tensor's name, so a tensor does not change when others are added.
func noise(seed uint64, name string, n int, std float64) []float32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := seed ^ h.Sum64()
	scale := std * math.Sqrt(3) * 2 / (1 << 53)
	half := std * math.Sqrt(3)
	out := make([]float32, n)
	for i := range out {
		// splitmix64 (Steele, Lea and Flood 2014): one add and a mix per
		// value, fully specified, so the bytes never depend on a library.
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		out[i] = float32(float64(z>>11)*scale - half)
	}
	return out
}
