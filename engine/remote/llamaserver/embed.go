package llamaserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/vajra-go/vajra/engine/remote"
)

// Embeddings: llama-server's OpenAI-shaped POST /v1/embeddings takes an
// array of arrays of token ids and computes them all in one request, each
// vector pooled by the worker's --pooling and normalised (embd_normalize
// 2). It answers 501 when the worker was not started with --embeddings,
// and 400 when its pooling is none (a generative model without
// --pooling), whose per-token vectors only the non-OpenAI /embedding
// returns.

var _ remote.BatchEmbedder = (*Client)(nil)

// probeEmbeddings reports whether the worker computes pooled embeddings:
// one /v1/embeddings of token 0. A worker that cannot be reached is an
// error; any refusal is false.
func (c *Client) probeEmbeddings(ctx context.Context) (bool, error) {
	_, _, err := c.EmbedBatch(ctx, "probe", [][]int32{{0}})
	if err == nil {
		return true, nil
	}
	var we *remote.WorkerError
	if errors.As(err, &we) && we.Status == 0 {
		return false, err
	}
	return false, nil
}

// Embed implements remote.Embedder: EmbedBatch of one input.
func (c *Client) Embed(ctx context.Context, id string, prompt []int32) (*remote.Embedding, error) {
	embs, n, err := c.EmbedBatch(ctx, id, [][]int32{prompt})
	if err != nil {
		return nil, err
	}
	embs[0].PromptTokens = n
	return &embs[0], nil
}

// EmbedBatch implements remote.BatchEmbedder: one POST /v1/embeddings
// with every input's token ids. The id is not sent (llama-server has no
// request ids); ctx's end closes the connection, which cancels the task.
func (c *Client) EmbedBatch(ctx context.Context, _ string, inputs [][]int32) ([]remote.Embedding, int, error) {
	body := make([]byte, 0, 64+8*len(inputs))
	body = append(body, `{"encoding_format":"float","input":[`...)
	for i, in := range inputs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, '[')
		for j, id := range in {
			if j > 0 {
				body = append(body, ',')
			}
			body = strconv.AppendInt(body, int64(id), 10)
		}
		body = append(body, ']')
	}
	body = append(body, "]}"...)
	b, err := c.do(ctx, http.MethodPost, "/v1/embeddings", body)
	if err != nil {
		return nil, 0, err
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, 0, &remote.WorkerError{Worker: c.url, Status: 502, Message: "/v1/embeddings", Err: err}
	}
	embs := make([]remote.Embedding, len(inputs))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(embs) || embs[d.Index].Vector != nil {
			return nil, 0, &remote.WorkerError{Worker: c.url, Status: 502, Message: "/v1/embeddings",
				Err: fmt.Errorf("index %d in an answer to %d inputs", d.Index, len(inputs))}
		}
		embs[d.Index] = remote.Embedding{Vector: d.Embedding, PromptTokens: len(inputs[d.Index])}
	}
	for i := range embs {
		if embs[i].Vector == nil {
			return nil, 0, &remote.WorkerError{Worker: c.url, Status: 502, Message: "/v1/embeddings",
				Err: fmt.Errorf("no embedding for input %d of %d", i, len(inputs))}
		}
	}
	return embs, out.Usage.PromptTokens, nil
}
