package llama

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestKVCacheKnobs: the engine starts and generates with llama.cpp's knobs
// set as llama-server takes them (flash attention on, a q8_0 K and q4_0 V
// cache, the model read into locked memory, two prompt threads).
// (llama.cpp refuses a quantized cache whose blocks do not divide the
// head size, which shows the types reach it: the tiny model's default
// 16-wide heads fail with q8_0.)
func TestKVCacheKnobs(t *testing.T) {
	for _, cfg := range []Config{
		{Config: engine.Config{MaxModelLen: 256}, FlashAttn: "on", CacheTypeK: "q8_0", CacheTypeV: "q4_0", NoMMap: true, MLock: true, ThreadsBatch: 2},
		{Config: engine.Config{MaxModelLen: 256}, FlashAttn: "off", CacheTypeK: "q8_0", CacheTypeV: "f32", LoadMode: "mmap"},
		{Config: engine.Config{MaxModelLen: 256}, FlashAttn: "auto", CacheTypeK: "bf16", CacheTypeV: "iq4_nl"},
	} {
		// Heads of 32: quantized cache blocks are 32 wide.
		e := newTestEngine(t, cfg, tinymodel.Config{Heads: 2, KVHeads: 1})
		res, _ := run(t, e, chatReq("hello there", 12))
		if res.Err != nil || res.Usage.CompletionTokens == 0 {
			t.Fatalf("%+v: %v, %d tokens", cfg, res.Err, res.Usage.CompletionTokens)
		}
		e.Close()
	}
}

// TestKVCacheKnobErrors: bad values are refused at start with the flag and
// what it takes; a quantized V cache with flash attention off is refused
// as llama-server refuses it.
func TestKVCacheKnobErrors(t *testing.T) {
	f := func(cfg Config, want string) {
		t.Helper()
		err := cfg.normalizeKV()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%+v: %v, want %q", cfg, err, want)
		}
	}
	f(Config{FlashAttn: "maybe"}, `--flash-attn "maybe": want on, off or auto`)
	f(Config{CacheTypeK: "q3_k"}, `--cache-type-k "q3_k": want one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1`)
	f(Config{CacheTypeV: "f8"}, `--cache-type-v "f8"`)
	f(Config{FlashAttn: "off", CacheTypeV: "q8_0"}, "--cache-type-v q8_0 needs flash attention, which --flash-attn off turns off")
	f(Config{FlashAttn: "0", CacheTypeV: "q5_1"}, "needs flash attention")
	f(Config{LoadMode: "fast"}, `--load-mode "fast"`)
	// A quantized K cache needs no flash attention (llama.cpp checks V only).
	c := Config{FlashAttn: "off", CacheTypeK: "q4_0"}
	if err := c.normalizeKV(); err != nil || c.CacheTypeV != "f16" {
		t.Fatalf("q4_0 K without flash attention: %v, V %q", err, c.CacheTypeV)
	}
	lm := func(c Config, want int) {
		t.Helper()
		if got, err := c.loadMode(); err != nil || got != want {
			t.Fatalf("%+v: load mode %d, %v; want %d", c, got, err, want)
		}
	}
	lm(Config{}, -1)
	lm(Config{NoMMap: true}, 0)
	lm(Config{MLock: true}, 3)
	lm(Config{MLock: true, NoMMap: true}, 2)
	lm(Config{LoadMode: "mmap+mlock"}, 3)
}
