package integration_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/openai/openai-go/v3"
)

// POST /v1/embeddings through Vajra in front of a real llama-server
// started with --embeddings: the vectors are the worker's own, for token
// ids and for text, in float and base64; a worker without --embeddings
// gives a 400 naming the model.

// workerEmbeddings is llama-server's own /v1/embeddings of input.
func workerEmbeddings(t *testing.T, url string, input any) [][]float64 {
	t.Helper()
	var out struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	postJSON(t, url+"/v1/embeddings", map[string]any{"input": input}, &out)
	vs := make([][]float64, len(out.Data))
	for i, d := range out.Data {
		vs[i] = d.Embedding
	}
	return vs
}

func sameVector(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%s: %d dimensions, llama-server's %d", what, len(got), len(want))
	}
	for k := range got {
		if math.Abs(got[k]-want[k]) > 1e-6 {
			t.Fatalf("%s [%d]: %v through Vajra, %v from llama-server", what, k, got[k], want[k])
		}
	}
}

func TestRemoteEmbeddingsLlamaServer(t *testing.T) {
	w := startWorker(t, "-np", "2", "-c", "2048", "-t", "1", "--embeddings", "--pooling", "last")
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	ctx := context.Background()

	ids := [][]int64{{1, 2, 3, 4, 5}, {40, 41}, {7, 8, 9}}
	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: tinyName, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: ids},
	})
	if err != nil {
		t.Fatal(err)
	}
	own := workerEmbeddings(t, w.URL(), ids)
	if len(res.Data) != 3 || res.Usage.PromptTokens != 10 || len(own) != 3 {
		t.Fatalf("response %s", res.RawJSON())
	}
	for i := range res.Data {
		if res.Data[i].Index != int64(i) {
			t.Fatalf("data[%d].index %d", i, res.Data[i].Index)
		}
		sameVector(t, "token input", res.Data[i].Embedding, own[i])
	}

	// Text: Vajra tokenizes it as llama-server does (with BOS).
	texts := []string{"the sea is blue", "stocks fell"}
	tres, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: tinyName, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
	})
	if err != nil {
		t.Fatal(err)
	}
	town := workerEmbeddings(t, w.URL(), texts)
	for i := range texts {
		sameVector(t, "text input "+texts[i], tres.Data[i].Embedding, town[i])
	}

	// base64: the same vectors as little-endian float32s.
	var raw struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := client.Post(ctx, "embeddings", map[string]any{"model": tinyName, "input": ids[0], "encoding_format": "base64"}, &raw); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(raw.Data[0].Embedding)
	if err != nil || len(b) != 4*len(own[0]) {
		t.Fatalf("base64: %v, %d bytes", err, len(b))
	}
	for k := range own[0] {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:])); got != float32(res.Data[0].Embedding[k]) {
			t.Fatalf("base64 [%d] %v, float %v", k, got, res.Data[0].Embedding[k])
		}
	}

	// dimensions: refused as on the in-process engines.
	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: tinyName, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}, Dimensions: openai.Int(8),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "dimensions" {
		t.Fatalf("dimensions: %v", err)
	}
}

// TestRemoteEmbeddingsNotServed: a worker started without --embeddings:
// the route answers 400 on model, and generation still works.
func TestRemoteEmbeddingsNotServed(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	_, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: tinyName, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "model" {
		t.Fatalf("embeddings without --embeddings: %v", err)
	}
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(4),
	}, greedyEOS...)
	if err != nil || res.Usage.CompletionTokens != 4 {
		t.Fatalf("chat: %v", err)
	}
}
