package engine

import "context"

// Embedder is an Engine that computes embeddings (POST /v1/embeddings).
// It is optional: the dialect asks the engine for it with a type
// assertion, and a server whose engine lacks it answers the route with a
// 400 that says so. Safe for concurrent use; an engine may serialise the
// calls (a llama.cpp context computes one batch at a time).
type Embedder interface {
	// Embed computes one vector per input of req, all in one call (the
	// engine batches them as it can). It returns when every vector is
	// ready, or fails with an *Error: KindInvalid (an input the model
	// cannot take, such as a token id outside its vocabulary),
	// KindContextLength (an input longer than the context), KindAborted
	// when ctx ends first, KindClosed after Close. Embed does not keep req
	// or its slices after it returns.
	Embed(ctx context.Context, req *EmbedRequest) (*EmbedResult, error)
}

// EmbedRequest is one embeddings request: its inputs, tokenized.
type EmbedRequest struct {
	Model string
	// Inputs are the token ids of each input, in order; none is empty.
	Inputs [][]int32
}

// EmbedResult holds the vectors of an EmbedRequest.
type EmbedResult struct {
	// Dim is the length of every vector.
	Dim int
	// Vectors[i] is input i's embedding, L2-normalised (unit length), as
	// OpenAI's, vLLM's and llama-server's are.
	Vectors [][]float32
	// PromptTokens is the number of input tokens, all inputs together.
	PromptTokens int
}
