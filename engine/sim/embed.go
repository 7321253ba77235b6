package sim

import (
	"context"
	"math"
	"strconv"

	"github.com/vajra-go/vajra/engine"
)

// EmbedDim is the length of the simulated engine's embeddings.
const EmbedDim = 384

var _ engine.Embedder = (*Engine)(nil)

// Embed implements engine.Embedder with deterministic vectors: each token
// id adds a fixed pseudo-random vector (a hash of the id and the
// coordinate), and the sum is L2-normalised. The same input always gets
// the same vector, and inputs that share tokens point the same way (a bag
// of tokens), so that clients can check similarity; there is no meaning in
// them. It costs no simulated time.
func (e *Engine) Embed(ctx context.Context, req *engine.EmbedRequest) (*engine.EmbedResult, error) {
	if e.isClosing() {
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "The engine is shutting down."}
	}
	res := &engine.EmbedResult{Dim: EmbedDim, Vectors: make([][]float32, len(req.Inputs))}
	flat := make([]float32, EmbedDim*len(req.Inputs))
	for i, toks := range req.Inputs {
		if err := ctx.Err(); err != nil {
			return nil, &engine.Error{Kind: engine.KindAborted, Message: "The request was aborted."}
		}
		if len(toks) > e.cfg.MaxModelLen {
			return nil, &engine.Error{Kind: engine.KindContextLength, Param: "input",
				Message: "input[" + strconv.Itoa(i) + "] has " + strconv.Itoa(len(toks)) + " tokens; the model's context is " + strconv.Itoa(e.cfg.MaxModelLen) + "."}
		}
		v := flat[i*EmbedDim : (i+1)*EmbedDim : (i+1)*EmbedDim]
		for _, t := range toks {
			h := uint64(uint32(t))*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
			for k := range v {
				h ^= h >> 31
				h *= 0xbf58476d1ce4e5b9
				h ^= h >> 29
				v[k] += float32(int64(h)>>11) * (1.0 / (1 << 52))
			}
		}
		normalize(v)
		res.Vectors[i] = v
		res.PromptTokens += len(toks)
	}
	return res, nil
}

// normalize scales v to unit length (a zero vector stays zero).
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for k := range v {
		v[k] *= inv
	}
}
