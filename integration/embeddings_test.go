package integration_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/sim"
)

// POST /v1/embeddings through openai-go: on the simulated engine (the
// shapes, encodings and errors) and on the real model (vectors that mean
// something).

func cosine(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestEmbeddingsSim(t *testing.T) {
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	_, base := runServer(t, cfg)
	client := newClient(base)
	ctx := context.Background()
	model := vajra.DefaultModelName

	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: model,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the sea is blue", "the sea is blue", "stocks fell"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || res.Model != model || res.Object != "list" || res.Usage.PromptTokens == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens {
		t.Fatalf("response %s", res.RawJSON())
	}
	for i, d := range res.Data {
		if d.Index != int64(i) || len(d.Embedding) != sim.EmbedDim || math.Abs(cosine(d.Embedding, d.Embedding)-1) > 1e-5 {
			t.Fatalf("data[%d]: index %d, %d dims", i, d.Index, len(d.Embedding))
		}
	}
	if c := cosine(res.Data[0].Embedding, res.Data[1].Embedding); math.Abs(c-1) > 1e-6 {
		t.Fatalf("the same input twice: cosine %v", c)
	}

	// Token ids, and base64: the same vectors as little-endian float32s.
	one, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("stocks fell")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	err = client.Post(ctx, "embeddings", map[string]any{"model": model, "input": "stocks fell", "encoding_format": "base64"}, &raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(raw.Data[0].Embedding)
	if err != nil || len(b) != 4*sim.EmbedDim {
		t.Fatalf("base64: %v, %d bytes", err, len(b))
	}
	for k := range sim.EmbedDim {
		// The JSON numbers are float32s in their shortest form.
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:])); got != float32(one.Data[0].Embedding[k]) {
			t.Fatalf("base64 [%d] %v, float %v", k, got, one.Data[0].Embedding[k])
		}
	}
	tok, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{10, 20, 30}, {40}}},
	})
	if err != nil || len(tok.Data) != 2 || tok.Usage.PromptTokens != 4 {
		t.Fatalf("token arrays: %v %+v", err, tok)
	}

	for _, tc := range []struct {
		name   string
		params openai.EmbeddingNewParams
		opts   []option.RequestOption
		status int
		param  string
	}{
		{"dimensions", openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}, Dimensions: openai.Int(8)}, nil, 400, "dimensions"},
		{"empty", openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("")}}, nil, 400, "input"},
		{"empty array", openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}}}, nil, 400, "input"},
		{"format", openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}, []option.RequestOption{option.WithJSONSet("encoding_format", "int8")}, 400, "encoding_format"},
		{"model", openai.EmbeddingNewParams{Model: "nope", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}, nil, 404, "model"},
	} {
		_, err := client.Embeddings.New(ctx, tc.params, tc.opts...)
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Param != tc.param {
			t.Errorf("%s: %v, want %d on %s", tc.name, err, tc.status, tc.param)
		}
	}
}

func TestEmbeddingsRealModel(t *testing.T) {
	_, base := startReal(t, nil)
	client := newClient(base)
	res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: realModelName,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{
			"The cat sat on the mat.", "A kitten was sitting on the rug.", "Stock markets fell sharply on Tuesday."}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || len(res.Data[0].Embedding) != 576 || res.Usage.PromptTokens < 15 {
		t.Fatalf("%d vectors of %d, usage %+v", len(res.Data), len(res.Data[0].Embedding), res.Usage)
	}
	v := res.Data
	if near, far := cosine(v[0].Embedding, v[1].Embedding), cosine(v[0].Embedding, v[2].Embedding); near <= far {
		t.Fatalf("cat·kitten %.4f <= cat·stocks %.4f", near, far)
	}
}
