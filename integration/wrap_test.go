package integration_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/wiretest"
)

// counting is a program's middleware around an engine, as an embedder
// writes one: it embeds the Engine interface (which hides what the engine
// implements beyond it) and unwraps to it (engine.Wrapper).
type counting struct {
	engine.Engine
	prepared atomic.Int64
}

func (c *counting) Prepare(req *engine.Request) error {
	c.prepared.Add(1)
	return c.Engine.Prepare(req)
}

func (c *counting) Unwrap() engine.Engine { return c.Engine }

// TestWrappedEngineKeepsItsOptionalParts: an engine wrapped by a program's
// middleware keeps what it declares beyond the Engine interface: the
// simulator's embeddings (engine.Embedder), its context length
// (/v1/models, and the 400 for a prompt over it) and its output parsing
// (include_reasoning false hides the generated token ids). Before
// engine.Wrapper, a wrapper hid them: embeddings were refused, and the
// reported context length was the configuration's.
func TestWrappedEngineKeepsItsOptionalParts(t *testing.T) {
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	sc := cfg.Sim
	sc.ITL = time.Millisecond
	sc.MaxModelLen = 512 // not the configuration's: the server asks the engine
	e, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	w := &counting{Engine: e}
	cfg.Engine = w
	_, base := runServer(t, cfg)
	ctx := context.Background()
	client := newClient(base)
	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: vajra.DefaultModelName,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("the sea is blue")},
	})
	if err != nil {
		t.Fatalf("embeddings through a wrapped engine: %v", err)
	}
	if len(res.Data) != 1 || len(res.Data[0].Embedding) != sim.EmbedDim {
		t.Fatalf("embeddings through a wrapped engine: %s", res.RawJSON())
	}
	_, list := getJSON(t, base+"/v1/models")
	if got := dig(list, "data", 0, "max_model_len"); got != 512.0 {
		t.Fatalf("/v1/models max_model_len %v, the wrapped engine's is 512", got)
	}

	long := `{"model":"` + vajra.DefaultModelName + `","messages":[{"role":"user","content":"` +
		strings.Repeat("the sea and the sky ", 200) + `"}],"max_tokens":4}`
	if st, _, body := wiretest.Get(t, strings.TrimPrefix(base, "http://"), "POST", "/v1/chat/completions", long,
		"Content-Type", "application/json", "Authorization", "Bearer test-key"); st != 400 || !strings.Contains(body, "512") {
		t.Fatalf("a prompt over the wrapped engine's 512 tokens: %d %s", st, body)
	}

	// Hidden token ids: the engine parses its output, through the wrapper.
	for _, include := range []bool{true, false} {
		var body map[string]any
		err := client.Post(ctx, "chat/completions", map[string]any{
			"model": vajra.DefaultModelName, "max_tokens": 8, "return_token_ids": true,
			"include_reasoning": include,
			"messages":          []map[string]any{{"role": "user", "content": "Tell me about the sea."}},
		}, &body)
		if err != nil {
			t.Fatal(err)
		}
		ids := dig(body, "choices", 0, "token_ids")
		if shown := ids != nil; shown != include {
			t.Fatalf("include_reasoning %v: token_ids %v", include, ids)
		}
	}
	if n := w.prepared.Load(); n < 2 {
		t.Fatalf("the wrapper prepared %d requests: it was bypassed", n)
	}
}
