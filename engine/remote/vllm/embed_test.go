package vllm

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/testworker"
)

// byteTok is a byte-level remote.Tokenizer for the engine tests.
type byteTok struct{}

func (byteTok) Encode(dst []int32, s string) []int32 {
	for i := 0; i < len(s); i++ {
		dst = append(dst, int32(s[i]))
	}
	return dst
}
func (byteTok) AppendPiece(dst []byte, id int32) []byte {
	if id < 256 {
		return append(dst, byte(id))
	}
	return dst
}
func (byteTok) IsSpecial(id int32) bool { return id >= 256 }
func (byteTok) VocabSize() int          { return 258 }
func (byteTok) ChatTemplate() string    { return "" }
func (byteTok) BOS() int32              { return -1 }
func (byteTok) EOS() int32              { return 257 }
func (byteTok) AddBOS() bool            { return false }

// newEngine starts the remote engine in front of the workers at addrs and
// waits until it is healthy.
func newEngine(t *testing.T, addrs ...string) *remote.Engine {
	t.Helper()
	var urls []string
	for _, a := range addrs {
		urls = append(urls, "vllm://"+a)
	}
	e, err := remote.New(remote.Config{Workers: urls, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	testworker.WaitFor(t, 5*time.Second, "engine healthy", func() bool { return e.Stats().Healthy })
	return e
}

func unit(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(s))
	}
	return out
}

// TestEngineEmbed: the remote engine's Embed sends each input as an Embed
// RPC of its own to a worker of an embedding model, in parallel, and
// returns the worker's vectors normalised, in input order, with the
// worker's token counts.
func TestEngineEmbed(t *testing.T) {
	s := testworker.Start(t, testworker.Config{Embedding: true, Step: 20 * time.Millisecond})
	e := newEngine(t, s.Addr)
	inputs := [][]int32{{1, 2, 3, 4, 5}, {7}, {10, 20, 30}}
	res, err := e.Embed(context.Background(), &engine.EmbedRequest{Model: "test-model", Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dim != 4 || len(res.Vectors) != 3 || res.PromptTokens != 9 {
		t.Fatalf("dim %d, %d vectors, %d prompt tokens", res.Dim, len(res.Vectors), res.PromptTokens)
	}
	for i, in := range inputs {
		ids := make([]uint32, len(in))
		for k, id := range in {
			ids[k] = uint32(id)
		}
		want := unit(testworker.EmbedVector(ids))
		for k := range want {
			if math.Abs(float64(res.Vectors[i][k]-want[k])) > 1e-6 {
				t.Fatalf("input %d: %v, want the worker's %v normalised", i, res.Vectors[i], want)
			}
		}
	}
	ids, most := s.Embeds()
	if len(ids) != 3 || most < 2 {
		t.Fatalf("the worker got Embed RPCs %v, at most %d at once", ids, most)
	}
	slices.Sort(ids)
	if ids[0] == ids[1] || ids[1] == ids[2] {
		t.Fatalf("request ids not unique: %v", ids)
	}
	_, err = e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 999999}}})
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Kind != engine.KindInvalid {
		t.Fatalf("an id outside the vocabulary: %v", err)
	}
}

// TestEngineEmbedNotServed: in front of a generative model's worker Embed
// is a 400 naming the model, and sends the worker nothing.
func TestEngineEmbedNotServed(t *testing.T) {
	s := testworker.Start(t, testworker.Config{})
	e := newEngine(t, s.Addr)
	_, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 2}}})
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Kind != engine.KindInvalid || ee.Param != "model" {
		t.Fatalf("embed on a generative worker: %v", err)
	}
	if ids, _ := s.Embeds(); len(ids) != 0 {
		t.Fatalf("the worker got %v", ids)
	}
}

// TestEngineEmbedFailover: a worker that is down is skipped for the next
// embedding worker.
func TestEngineEmbedFailover(t *testing.T) {
	a := testworker.Start(t, testworker.Config{Embedding: true})
	b := testworker.Start(t, testworker.Config{Embedding: true})
	e := newEngine(t, a.Addr, b.Addr)
	testworker.WaitFor(t, 5*time.Second, "both workers healthy", func() bool {
		return e.Workers()[0].Healthy() && e.Workers()[1].Healthy()
	})
	a.Stop()
	for i := range 4 {
		res, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 2, 3}}})
		if err != nil || len(res.Vectors) != 1 {
			t.Fatalf("embed %d with one worker stopped: %v", i, err)
		}
	}
	if ids, _ := b.Embeds(); len(ids) != 4 {
		t.Fatalf("the live worker got %d Embed RPCs, want 4", len(ids))
	}
}

// TestEngineEmbedUnimplemented: a worker that said it serves embeddings
// and then answers UNIMPLEMENTED (a llama-server restarted without
// --embeddings answers 501 alike) is not asked again; the next one is.
func TestEngineEmbedUnimplemented(t *testing.T) {
	a := testworker.Start(t, testworker.Config{Embedding: true, EmbedRefuse: codes.Unimplemented})
	b := testworker.Start(t, testworker.Config{Embedding: true})
	e := newEngine(t, a.Addr, b.Addr)
	testworker.WaitFor(t, 5*time.Second, "both workers healthy", func() bool {
		return e.Workers()[0].Healthy() && e.Workers()[1].Healthy()
	})
	for i := range 4 {
		if _, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 2}}}); err != nil {
			t.Fatalf("embed %d: %v", i, err)
		}
	}
	ra, _ := a.Embeds()
	rb, _ := b.Embeds()
	if len(ra) > 1 || len(rb) != 4 || e.Workers()[0].Info().Embeddings {
		t.Fatalf("Embed RPCs: %d on the refusing worker, %d on the other", len(ra), len(rb))
	}
}
