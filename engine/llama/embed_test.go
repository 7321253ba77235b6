package llama

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/realmodel"
)

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func embedTokens(t *testing.T, e *Engine, texts ...string) *engine.EmbedRequest {
	req := &engine.EmbedRequest{}
	for _, s := range texts {
		var toks []int32
		for _, id := range e.Tokenize(s) {
			toks = append(toks, int32(id))
		}
		req.Inputs = append(req.Inputs, toks)
	}
	return req
}

// On the real model: unit vectors of the model's width, the same vector
// for an input alone or in a batch, related sentences closer than
// unrelated ones, for every pooling.
func TestEmbedRealModel(t *testing.T) {
	model := realmodel.Need(t)
	for _, pool := range []string{"", "mean", "cls"} {
		t.Run("pooling="+pool, func(t *testing.T) {
			e, err := New(Config{Config: engine.Config{MaxModelLen: 512}, ModelPath: model, LibDir: needLib(t), Threads: 1, Pooling: pool})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			req := embedTokens(t, e, "The cat sat on the mat.", "A kitten was sitting on the rug.", "Stock markets fell sharply on Tuesday.")
			res, err := e.Embed(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Dim != 576 || len(res.Vectors) != 3 {
				t.Fatalf("dim %d, %d vectors", res.Dim, len(res.Vectors))
			}
			want := len(req.Inputs[0]) + len(req.Inputs[1]) + len(req.Inputs[2])
			if res.PromptTokens != want {
				t.Fatalf("prompt tokens %d, want %d", res.PromptTokens, want)
			}
			for i, v := range res.Vectors {
				if n := dot(v, v); math.Abs(n-1) > 1e-4 {
					t.Fatalf("vector %d has squared norm %v", i, n)
				}
			}
			if pool != "cls" { // the first token alone says nothing of the sentence
				if near, far := dot(res.Vectors[0], res.Vectors[1]), dot(res.Vectors[0], res.Vectors[2]); near <= far {
					t.Fatalf("cat·kitten %.4f <= cat·stocks %.4f", near, far)
				}
			}
			alone, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: req.Inputs[1:2]})
			if err != nil {
				t.Fatal(err)
			}
			if d := dot(alone.Vectors[0], res.Vectors[1]); d < 0.999 {
				t.Fatalf("input alone against in a batch: cosine %.5f", d)
			}
		})
	}
}

func TestEmbedErrors(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 64}}, tinymodel.Config{})
	for _, tc := range []struct {
		in   [][]int32
		kind engine.ErrorKind
	}{
		{[][]int32{{1, 2}, {}}, engine.KindInvalid},
		{[][]int32{{1, 1 << 30}}, engine.KindInvalid},
		{[][]int32{make([]int32, 65)}, engine.KindContextLength},
	} {
		_, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: tc.in})
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Kind != tc.kind || ee.Param != "input" {
			t.Fatalf("%v: err %v, want kind %v", tc.in, err, tc.kind)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, &engine.EmbedRequest{Inputs: [][]int32{{1, 2}}}); engine.AsError(err).Kind != engine.KindAborted {
		t.Fatalf("cancelled: %v", err)
	}
	res, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1, 2, 3}}})
	if err != nil || len(res.Vectors[0]) != res.Dim {
		t.Fatalf("tiny model: %v %+v", err, res)
	}
	e.Close()
	if _, err := e.Embed(context.Background(), &engine.EmbedRequest{Inputs: [][]int32{{1}}}); engine.AsError(err).Kind != engine.KindClosed {
		t.Fatalf("after Close: %v", err)
	}
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{ModelPath: path, LibDir: needLib(t), Pooling: "max"}); err == nil || !strings.Contains(err.Error(), "--pooling") {
		t.Fatalf("--pooling max: %v", err)
	}
}
