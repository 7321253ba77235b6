package tinymodel

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/gguf"
)

func write(t testing.TB, cfg Config) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDefaultModel(t *testing.T) {
	// Its speed (milliseconds) is BenchmarkWrite's to show: a timed
	// assertion here would flake on a loaded machine.
	b := write(t, Config{})
	if len(b) > 1<<20 {
		t.Errorf("default model is %d bytes, want under 1 MiB", len(b))
	}
	f, err := gguf.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	v := DefaultVocab()
	want := map[string]any{
		"general.alignment":                      uint32(32),
		"general.architecture":                   "llama",
		"general.name":                           "vajra-tiny",
		"general.file_type":                      uint32(0),
		"llama.context_length":                   uint32(2048),
		"llama.embedding_length":                 uint32(64),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(176),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(2),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-6),
		"llama.rope.freq_base":                   float32(10000),
		"llama.rope.dimension_count":             uint32(16),
		"llama.vocab_size":                       uint32(len(v.Tokens)),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "qwen2",
		"tokenizer.ggml.tokens":                  v.Tokens,
		"tokenizer.ggml.token_type":              v.Types,
		"tokenizer.ggml.merges":                  v.Merges,
		"tokenizer.ggml.bos_token_id":            uint32(TokenEndOfText),
		"tokenizer.ggml.eos_token_id":            uint32(TokenIMEnd),
		"tokenizer.ggml.eot_token_id":            uint32(TokenIMEnd),
		"tokenizer.ggml.padding_token_id":        uint32(TokenEndOfText),
		"tokenizer.ggml.add_bos_token":           false,
		"tokenizer.chat_template":                ChatTemplate,
	}
	if len(f.KV) != len(want) {
		t.Errorf("%d metadata entries, want %d", len(f.KV), len(want))
	}
	for k, w := range want {
		if got, ok := f.Value(k); !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %v (%T), want %v (%T)", k, got, got, w, w)
		}
	}

	nv := int64(len(v.Tokens))
	shapes := map[string][]int64{
		"token_embd.weight":  {64, nv},
		"output_norm.weight": {64},
		"output.weight":      {64, nv},
	}
	for i := range 2 {
		p := fmt.Sprintf("blk.%d.", i)
		shapes[p+"attn_norm.weight"] = []int64{64}
		shapes[p+"attn_q.weight"] = []int64{64, 64}
		shapes[p+"attn_k.weight"] = []int64{64, 32}
		shapes[p+"attn_v.weight"] = []int64{64, 32}
		shapes[p+"attn_output.weight"] = []int64{64, 64}
		shapes[p+"ffn_norm.weight"] = []int64{64}
		shapes[p+"ffn_gate.weight"] = []int64{64, 176}
		shapes[p+"ffn_down.weight"] = []int64{176, 64}
		shapes[p+"ffn_up.weight"] = []int64{64, 176}
	}
	if len(f.Tensors) != len(shapes) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(shapes))
	}
	for _, ti := range f.Tensors {
		if w := shapes[ti.Name]; !reflect.DeepEqual(ti.Shape, w) || ti.Type != gguf.TensorF32 {
			t.Errorf("%s: %v %s, want %v F32", ti.Name, ti.Shape, ti.Type, w)
		}
		data, err := f.TensorData(bytes.NewReader(b), ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := gguf.DecodeFloats(nil, ti.Type, data)
		mean, std := stats(vals)
		switch {
		case len(ti.Shape) == 1:
			if mean != 1 || std != 0 {
				t.Errorf("%s: norm weights mean %g std %g, want all 1", ti.Name, mean, std)
			}
		default:
			wantStd := 1 / math.Sqrt(float64(ti.Shape[0]))
			switch ti.Name {
			case "token_embd.weight":
				wantStd = 1
			case "output.weight":
				wantStd *= 2
			}
			if math.Abs(mean) > wantStd/5 || math.Abs(std-wantStd) > wantStd/10 {
				t.Errorf("%s: mean %g std %g, want about 0 and %g", ti.Name, mean, std, wantStd)
			}
		}
	}
}

func stats(v []float32) (mean, std float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

func TestDeterministic(t *testing.T) {
	a, b := write(t, Config{Seed: 7}), write(t, Config{Seed: 7})
	if !bytes.Equal(a, b) {
		t.Error("same seed, different bytes")
	}
	c := write(t, Config{Seed: 8})
	if len(c) != len(a) || bytes.Equal(a, c) {
		t.Error("another seed should change the weights only")
	}
	// A tensor's values depend on the seed and its name only.
	if got, want := noise(7, "x", 4, 1), noise(7, "x", 8, 1)[:4]; !reflect.DeepEqual(got, want) {
		t.Errorf("noise prefix %v, want %v", got, want)
	}
}

func TestF16AndShapes(t *testing.T) {
	cfg := Config{Layers: 3, Dim: 96, Heads: 6, KVHeads: 3, FF: 256, Context: 512, F16: true, Name: "f16"}
	b := write(t, cfg)
	f, err := gguf.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, w := range map[string]any{"general.file_type": uint32(1), "llama.block_count": uint32(3), "llama.rope.dimension_count": uint32(16), "general.name": "f16", "llama.context_length": uint32(512)} {
		if got, _ := f.Value(k); got != w {
			t.Errorf("%s = %v, want %v", k, got, w)
		}
	}
	for name, want := range map[string]struct {
		shape []int64
		typ   gguf.TensorType
	}{
		"blk.2.attn_k.weight":   {[]int64{96, 48}, gguf.TensorF16},
		"blk.2.ffn_down.weight": {[]int64{256, 96}, gguf.TensorF16},
		"blk.2.ffn_norm.weight": {[]int64{96}, gguf.TensorF32},
		"token_embd.weight":     {[]int64{96, int64(len(DefaultVocab().Tokens))}, gguf.TensorF16},
	} {
		ti, ok := f.Tensor(name)
		if !ok || !reflect.DeepEqual(ti.Shape, want.shape) || ti.Type != want.typ {
			t.Errorf("%s: %v %s, want %v %s", name, ti.Shape, ti.Type, want.shape, want.typ)
		}
	}
	if _, ok := f.Tensor("blk.3.attn_q.weight"); ok {
		t.Error("a fourth layer")
	}
}

func TestConfigErrors(t *testing.T) {
	f := func(cfg Config) {
		t.Helper()
		if err := Write(new(bytes.Buffer), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", cfg, err)
		}
	}
	f(Config{Layers: -1})
	f(Config{Dim: 65})              // not a multiple of 4 heads
	f(Config{Dim: 12, Heads: 4})    // head size 3 is odd
	f(Config{Heads: 4, KVHeads: 3}) // 4 heads over 3 kv heads
	f(Config{FF: maxDim + 1})
	f(Config{Context: -5})
}

func TestTempFile(t *testing.T) {
	dir := t.TempDir()
	p, err := TempFile(dir, Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, write(t, Config{Seed: 3})) {
		t.Error("TempFile wrote other bytes than Write")
	}
	q := dir + "/m.gguf"
	if err := WriteFile(q, Config{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if got2, _ := os.ReadFile(q); !bytes.Equal(got2, got) {
		t.Error("WriteFile wrote other bytes than Write")
	}
	if _, err := TempFile(dir+"/missing", Config{}); err == nil {
		t.Error("TempFile in a missing directory")
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{{"default", Config{}}, {"8x512-f16", Config{Layers: 8, Dim: 512, Heads: 8, KVHeads: 4, FF: 1408, F16: true}}} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := Write(&buf, c.cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
}
