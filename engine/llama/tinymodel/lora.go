package tinymodel

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/vajra-go/vajra/engine/llama/gguf"
)

// LoRAConfig describes a random LoRA adapter for the tiny model Base
// describes: the GGUF layout llama.cpp loads (llama-adapter.cpp, as
// convert_lora_to_gguf.py writes it): general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, and per adapted weight W
// (ggml shape [in, out]) the pair W.lora_a [in, rank] and W.lora_b
// [rank, out]. llama.cpp adds scale * alpha/rank * B·A·x to W·x.
type LoRAConfig struct {
	// Base is the model the adapter is for (its shapes must match).
	Base Config
	// Rank is the adapters' inner width (default 4).
	Rank int
	// Alpha is adapter.lora.alpha (default Rank: a scale of 1).
	Alpha float32
	// Seed seeds the adapter's weights (mixed with Base.Seed); adapters of
	// different seeds differ.
	Seed uint64
	// Targets are the weights adapted in every block, by their name in
	// the block (default attn_q, attn_v, ffn_up).
	Targets []string
}

// WriteLoRA writes the adapter cfg describes to w as a GGUF file. Its
// weights have the scale of the base's (A of standard deviation
// 1/sqrt(in), B of 1/sqrt(rank)), so that the adapted model's greedy
// output differs from the base's. Safe for concurrent use.
func WriteLoRA(w io.Writer, cfg LoRAConfig) error {
	base, err := cfg.Base.withDefaults()
	if err != nil {
		return err
	}
	if cfg.Rank <= 0 {
		cfg.Rank = 4
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = float32(cfg.Rank)
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = []string{"attn_q", "attn_v", "ffn_up"}
	}
	kvDim := base.Dim / base.Heads * base.KVHeads
	shapes := map[string][2]int{ // [in, out] of each block weight
		"attn_q": {base.Dim, base.Dim}, "attn_k": {base.Dim, kvDim}, "attn_v": {base.Dim, kvDim},
		"attn_output": {base.Dim, base.Dim}, "ffn_gate": {base.Dim, base.FF}, "ffn_down": {base.FF, base.Dim},
		"ffn_up": {base.Dim, base.FF},
	}
	gw := gguf.NewWriter()
	set := func(key string, val any) {
		if err == nil {
			err = gw.Set(key, val)
		}
	}
	set("general.architecture", "llama")
	set("general.type", "adapter")
	set("general.name", base.Name+"-lora")
	set("adapter.type", "lora")
	set("adapter.lora.alpha", cfg.Alpha)
	seed := base.Seed ^ (cfg.Seed+1)*0x9e3779b97f4a7c15
	for i := range base.Layers {
		for _, t := range cfg.Targets {
			sh, ok := shapes[t]
			if !ok {
				return fmt.Errorf("tinymodel: no block weight %q to adapt", t)
			}
			name := fmt.Sprintf("blk.%d.%s.weight", i, t)
			in, out, r := sh[0], sh[1], cfg.Rank
			a := noise(seed, name+".lora_a", in*r, 1/math.Sqrt(float64(in)))
			b := noise(seed, name+".lora_b", r*out, 1/math.Sqrt(float64(r)))
			if err == nil {
				err = gw.AddTensor(name+".lora_a", gguf.TensorF32, []int64{int64(in), int64(r)}, gguf.AppendF32(nil, a))
			}
			if err == nil {
				err = gw.AddTensor(name+".lora_b", gguf.TensorF32, []int64{int64(r), int64(out)}, gguf.AppendF32(nil, b))
			}
		}
	}
	if err != nil {
		return err
	}
	_, err = gw.WriteTo(w)
	return err
}

// LoRATempFile writes the adapter cfg describes to a new file in dir,
// named tinylora-*.gguf, and returns its path (see TempFile).
func LoRATempFile(dir string, cfg LoRAConfig) (string, error) {
	f, err := os.CreateTemp(dir, "tinylora-*.gguf")
	if err != nil {
		return "", err
	}
	path := filepath.Clean(f.Name())
	err = WriteLoRA(f, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}
