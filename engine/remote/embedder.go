package remote

import "context"

// Embedder is implemented by a Client whose protocol serves embeddings
// (vLLM's and SGLang's Embed RPC); the remote engine asserts it. Safe for
// concurrent use.
type Embedder interface {
	// Embed returns the embedding of one tokenized input, or a
	// *WorkerError (ErrUnsupported when the worker's model is not an
	// embedding model and says so).
	Embed(ctx context.Context, id string, prompt []int32) (*Embedding, error)
}

// Embedding is one input's embedding as the worker computed it.
type Embedding struct {
	Vector       []float32
	PromptTokens int
}
