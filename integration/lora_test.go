package integration_test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/llamaserver"
)

// TestLoRAMatchesLlamaServer: a LoRA adapter given to `vajra serve` is
// served as its own model in /v1/models; greedy output naming it differs
// from the base model's and equals llama-server's with the same --lora,
// while the base model's equals llama-server's with the adapter's scale
// set to 0 for the request (its per-request "lora" field).
func TestLoRAMatchesLlamaServer(t *testing.T) {
	llamaserver.Need(t)
	lib, err := llama.FindLibDir()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	model, err := tinymodel.TempFile(dir, tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := tinymodel.LoRATempFile(dir, tinymodel.LoRAConfig{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ls := llamaserver.Start(t, model, "-np", "1", "-c", "1024", "-t", "1", "--jinja", "--lora", adapter)
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	cfg.ServedModelNames = []string{tinyName}
	cfg.Driver, cfg.DriverConfig = llama.DriverName, &llama.Config{ModelPath: model, LibDir: lib, Threads: 1, PrefixCaching: true,
		Adapters: []llama.Adapter{{Name: "tiny-lora", Path: adapter}}}
	cfg.EngineConfig.MaxModelLen = 1024
	_, base := runServer(t, cfg)

	_, models := getJSON(t, base+"/v1/models")
	var ids []string
	data, _ := models["data"].([]any)
	for _, m := range data {
		id, _ := m.(map[string]any)["id"].(string)
		ids = append(ids, id)
	}
	if !slices.Equal(ids, []string{tinyName, "tiny-lora"}) {
		t.Fatalf("/v1/models lists %v, want the base and the adapter", ids)
	}

	chat := func(url, model, extra string) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Write about rivers and stones."}],`+
			`"max_tokens":32,"temperature":0,"ignore_eos":true%s}`, model, extra)
		var res struct {
			Choices []struct{ Message struct{ Content string } }
		}
		post(t, url+"/v1/chat/completions", body, &res)
		if len(res.Choices) != 1 {
			t.Fatalf("%s: %d choices", url, len(res.Choices))
		}
		return res.Choices[0].Message.Content
	}
	withLoRA, plain := chat(base, "tiny-lora", ""), chat(base, tinyName, "")
	if withLoRA == plain {
		t.Fatalf("the adapter changed nothing: %q", plain)
	}
	if l := chat(ls.URL(), tinyName, ""); withLoRA != l {
		t.Errorf("with the adapter:\n  vajra        %q\n  llama-server %q", withLoRA, l)
	}
	if l := chat(ls.URL(), tinyName, `,"lora":[{"id":0,"scale":0}]`); plain != l {
		t.Errorf("base model:\n  vajra        %q\n  llama-server %q (adapter scale 0)", plain, l)
	}
	// The adapter's request is counted under its own model name (the
	// observer runs as the session ends: polled, bounded).
	eventually.True(t, "vllm:request_success_total of tiny-lora is 1", func() bool {
		return scrapeSum(t, base, `vllm:request_success_total{finished_reason="length",model_name="tiny-lora"}`) == 1
	})
	// Requests naming the base after the adapter get the base's output:
	// the adapter's cached prefix is not reused for them.
	if again := chat(base, tinyName, ""); again != plain {
		t.Errorf("base model after the adapter: %q, want %q", again, plain)
	}
}
