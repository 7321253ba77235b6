package remote

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestGenerationConfigDefaults: the sampling parameters of the model's
// generation_config.json are the defaults of the requests that leave
// them out, as vLLM's front end takes them (--generation-config auto): a
// field the request gives is its own, max_new_tokens caps a chat that
// gives no max_tokens, a request with nothing marked unset (an
// embedder's) takes none, and "vllm" takes none.
func TestGenerationConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"),
		[]byte(`{"temperature":0.6,"top_p":0.9,"top_k":20,"repetition_penalty":1.1,"min_p":null,"max_new_tokens":7,"eos_token_id":[1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e, f := newFake(t, Config{GenerationConfig: dir}, false)
	req := chat("hi", 0)
	req.Sampling.Temperature, req.Sampling.TopP = 1, 1 // the dialect's defaults, not given
	req.Sampling.Unset = engine.AllSamplingFields
	_, s, c := start(t, e, f, req)
	if sp := c.g.Sampling; sp.Temperature != 0.6 || sp.TopP != 0.9 || sp.TopK != 20 || sp.RepetitionPenalty != 1.1 || sp.MinP != 0 || c.g.MaxTokens != 7 {
		t.Fatalf("defaults not applied: %+v, max tokens %d", *sp, c.g.MaxTokens)
	}
	s.Abort()

	given := chat("hi", 30)
	given.Sampling.Temperature, given.Sampling.TopP = 0, 1
	given.Sampling.Unset = engine.AllSamplingFields &^ engine.FieldTemperature &^ engine.FieldMaxTokens
	_, s, c = start(t, e, f, given)
	if sp := c.g.Sampling; sp.Temperature != 0 || sp.TopP != 0.9 || c.g.MaxTokens != 30 {
		t.Fatalf("a given field was replaced: %+v, max tokens %d", *sp, c.g.MaxTokens)
	}
	s.Abort()

	// A request an embedder builds (nothing marked unset) is as set.
	embedded := chat("hi", 0)
	embedded.Sampling.Temperature, embedded.Sampling.TopP = 1, 1
	_, s, c = start(t, e, f, embedded)
	if sp := c.g.Sampling; sp.Temperature != 1 || sp.TopK != 0 || c.g.MaxTokens <= 7 {
		t.Fatalf("defaults applied to a request with nothing unset: %+v, max tokens %d", *sp, c.g.MaxTokens)
	}
	s.Abort()

	none, f2 := newFake(t, Config{GenerationConfig: "vllm"}, false)
	req = chat("hi", 0)
	req.Sampling.Temperature, req.Sampling.TopP = 1, 1
	req.Sampling.Unset = engine.AllSamplingFields
	_, s, c = start(t, none, f2, req)
	if sp := c.g.Sampling; sp.Temperature != 1 || sp.TopK != 0 || c.g.MaxTokens <= 7 {
		t.Fatalf("--generation-config vllm applied defaults: %+v, max tokens %d", *sp, c.g.MaxTokens)
	}
	s.Abort()

	if _, err := New(Config{Workers: []string{"fake://x"}, GenerationConfig: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a --generation-config folder that is not there was accepted")
	}
}
