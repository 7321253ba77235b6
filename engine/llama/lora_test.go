package llama

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/allocs"
)

// greedyText runs a greedy request for model and returns its text.
func greedyText(t *testing.T, e *Engine, model, prompt string, maxTokens int) string {
	t.Helper()
	req := chatReq(prompt, maxTokens)
	req.Model = model
	req.Sampling.IgnoreEOS = true
	res, _ := run(t, e, req)
	if res.Err != nil || len(res.Choices) != 1 || res.Usage.CompletionTokens != maxTokens {
		t.Fatalf("%s: %v, usage %+v", model, res.Err, res.Usage)
	}
	return res.Choices[0].Text
}

// TestLoRAAdapterPerRequest: a request naming an adapter's model generates
// with it (greedy output differs from the base model's), one naming the
// base does not (its output equals an engine's without adapters), and
// requests of the base and of two adapters running at once give each the
// output it gives alone: a step holds one adapter's requests, and a prefix
// cached under one adapter is not reused by another (the prompts are the
// same, prefix caching on).
func TestLoRAAdapterPerRequest(t *testing.T) {
	dir := t.TempDir()
	mc := tinymodel.Config{}
	a1, err := tinymodel.LoRATempFile(dir, tinymodel.LoRAConfig{Base: mc, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := tinymodel.LoRATempFile(dir, tinymodel.LoRAConfig{Base: mc, Seed: 2, Rank: 8, Targets: []string{"attn_k", "ffn_down"}})
	if err != nil {
		t.Fatal(err)
	}
	const prompt, n = "Tell me about the sea and the sky.", 48
	plain := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 512}, PrefixCaching: true}, mc)
	want := greedyText(t, plain, "tiny", prompt, n)
	plain.Close()
	adapters := []Adapter{{Name: "one", Path: a1}, {Name: "two", Path: a2, Scale: 0.5}}
	// The reference outputs, one request at a time and no prefix cache.
	ref := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 512}, Adapters: adapters}, mc)
	one := greedyText(t, ref, "one", prompt, n)
	two := greedyText(t, ref, "two", prompt, n)
	base := greedyText(t, ref, "tiny", prompt, n)
	ref.Close()
	if base != want {
		t.Fatalf("base model with adapters loaded:\n  %q\nwant (no adapters)\n  %q", base, want)
	}
	if one == base || two == base || one == two {
		t.Fatalf("outputs do not differ by adapter:\n  base %q\n  one  %q\n  two  %q", base, one, two)
	}

	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 512, MaxNumSeqs: 8}, PrefixCaching: true, Adapters: adapters}, mc)
	if got := e.AdapterNames(); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("adapter names %v", got)
	}
	// One after the other, each after the same prompt under another
	// model: a cached prefix of the wrong adapter would change them.
	for _, m := range []string{"tiny", "one", "two", "tiny"} {
		if got, w := greedyText(t, e, m, prompt, n), map[string]string{"tiny": base, "one": one, "two": two}[m]; got != w {
			t.Fatalf("%s after the others:\n  %q\nwant\n  %q", m, got, w)
		}
	}
	// The same model again, right after itself: its prefix is in the slot
	// the last request left, under its own adapter, and is reused.
	hits := e.Stats().PrefixHits
	if got := greedyText(t, e, "tiny", prompt, n); got != base {
		t.Fatalf("tiny after tiny:\n  %q\nwant\n  %q", got, base)
	}
	if e.Stats().PrefixHits == hits {
		t.Fatalf("tiny right after tiny reused no prefix (%d queried): the test does not exercise the cache", e.Stats().PrefixQueries)
	}
	// Again, all at once, several of each, after the cache holds each
	// adapter's prefix of the same prompt.
	models := []string{"tiny", "one", "two", "one", "tiny", "two"}
	wantOf := map[string]string{"tiny": base, "one": one, "two": two}
	got := make([]string, len(models))
	var wg sync.WaitGroup
	for i, m := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := chatReq(prompt, n)
			req.Model = m
			req.Sampling.IgnoreEOS = true
			res, _ := run(t, e, req)
			if res.Err == nil && len(res.Choices) == 1 {
				got[i] = res.Choices[0].Text
			}
		}()
	}
	wg.Wait()
	for i, m := range models {
		if got[i] != wantOf[m] {
			t.Errorf("concurrent request %d (%s):\n  %q\nwant\n  %q", i, m, got[i], wantOf[m])
		}
	}
}

// TestLoRABadAdapter: a file that is not an adapter of this model is
// refused at start, naming the adapter.
func TestLoRABadAdapter(t *testing.T) {
	dir := t.TempDir()
	other, err := tinymodel.LoRATempFile(dir, tinymodel.LoRAConfig{Base: tinymodel.Config{Dim: 128, Heads: 4, KVHeads: 2, FF: 256}})
	if err != nil {
		t.Fatal(err)
	}
	path, err := tinymodel.TempFile(dir, tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Config: engine.Config{MaxModelLen: 256}, ModelPath: path, LibDir: needLib(t), Threads: 1, Adapters: []Adapter{{Name: "wrong", Path: other}}})
	if err == nil {
		t.Fatal("an adapter of another shape was loaded")
	}
	if want := "--lora wrong: llama.cpp could not load the LoRA adapter"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// BenchmarkLoRAMix measures what serving an adapter beside the base costs
// the scheduler: 8 concurrent greedy streams of 64 tokens on an 8x512
// model, all on the base model, all on one adapter, and 4 of each. A step
// holds one adapter's requests, so the mixed streams take alternate steps
// of 4 sequences each: tokens/s falls to what 4-wide steps give, and each
// stream's inter-token gap doubles. Reported per op (one round of the 8
// streams of each case): tokens/s over all streams, per case.
func BenchmarkLoRAMix(b *testing.B) {
	mc := tinymodel.Config{Layers: 8, Dim: 512, Heads: 8, KVHeads: 4, FF: 1408}
	ad, err := tinymodel.LoRATempFile(b.TempDir(), tinymodel.LoRAConfig{Base: mc, Rank: 16})
	if err != nil {
		b.Fatal(err)
	}
	e := newTestEngine(b, Config{Config: engine.Config{MaxModelLen: 256, MaxNumSeqs: 8}, Adapters: []Adapter{{Name: "ad", Path: ad}}}, mc)
	const streams, tokens = 8, 64
	round := func(b *testing.B, adapted int) {
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := chatReq("benchmark prompt "+strings.Repeat("x", i), tokens)
				req.Sampling.IgnoreEOS = true
				if i < adapted {
					req.Model = "ad"
				}
				if res, _ := run(b, e, req); res.Err != nil {
					b.Error(res.Err)
				}
			}()
		}
		wg.Wait()
	}
	// The three cases interleaved, one round each per op (A, B, C, A, B,
	// C...), so that a shared machine's load falls on all alike.
	round(b, 4) // warm
	var spent [3]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for k, adapted := range []int{0, 4, 8} {
			t0 := time.Now()
			round(b, adapted)
			spent[k] += time.Since(t0)
		}
	}
	rate := func(d time.Duration) float64 { return float64(b.N*streams*tokens) / d.Seconds() }
	b.ReportMetric(rate(spent[0]), "base8-tokens/s")
	b.ReportMetric(rate(spent[1]), "mixed4+4-tokens/s")
	b.ReportMetric(rate(spent[2]), "adapter8-tokens/s")
	b.ReportMetric(rate(spent[1])/rate(spent[0]), "mixed/base")
}

// TestLoRATokenPathAllocations: a step's adapter switch allocates nothing.
// Two streams, one on the base model and one on an adapter, take
// alternate steps (an adapter switch each step); 1,200 tokens each
// against 200 each, so that the requests' setup cancels out, as in
// TestTokenPathAllocations.
func TestLoRATokenPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	mc := tinymodel.Config{}
	ad, err := tinymodel.LoRATempFile(t.TempDir(), tinymodel.LoRAConfig{Base: mc})
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 1300}, Adapters: []Adapter{{Name: "ad", Path: ad}}}, mc)
	pair := func(n int) {
		ns := [2]*nopStream{{done: make(chan *engine.Result, 1)}, {done: make(chan *engine.Result, 1)}}
		for i, model := range []string{"tiny", "ad"} {
			req := chatReq("Tell me about the sea.", n)
			req.Model = model
			req.Sampling.IgnoreEOS, req.Stream, req.Formatter = true, true, ns[i]
			if _, err := e.Start(req, ns[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range ns {
			if res := <-s.done; res.Err != nil || res.Usage.CompletionTokens != n {
				t.Fatalf("err %v usage %+v", res.Err, res.Usage)
			}
		}
	}
	mallocs := func(n int) uint64 { return allocs.Fewest(func() { pair(n) }) }
	pair(1200) // warm the engine's buffers
	short, long := mallocs(200), mallocs(1200)
	if per := (float64(long) - float64(short)) / 2000; per > 0.02 {
		t.Fatalf("%.4f allocations per token: %d for 2x1,200 tokens, %d for 2x200", per, long, short)
	}
}
