package remote

import "context"

// Embedder is implemented by a Client whose protocol serves embeddings
// (vLLM's and SGLang's Embed RPC); the remote engine asserts it, and
// sends it only to a worker whose Info says Embeddings. Safe for
// concurrent use.
type Embedder interface {
	// Embed returns the embedding of one tokenized input, or a
	// *WorkerError (ErrUnsupported when the worker's model is not an
	// embedding model and says so).
	Embed(ctx context.Context, id string, prompt []int32) (*Embedding, error)
}

// BatchEmbedder is an Embedder whose protocol takes many inputs in one
// call (llama-server's /v1/embeddings with arrays of token ids): the
// remote engine sends every input of a request in one EmbedBatch. Safe for
// concurrent use.
type BatchEmbedder interface {
	Embedder
	// EmbedBatch returns one embedding per input, in order, and the
	// prompt tokens the worker counted for all of them (0 when it does
	// not say), or a *WorkerError.
	EmbedBatch(ctx context.Context, id string, inputs [][]int32) ([]Embedding, int, error)
}

// Embedding is one input's embedding as the worker computed it.
type Embedding struct {
	Vector       []float32
	PromptTokens int
}
