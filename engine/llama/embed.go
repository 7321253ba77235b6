package llama

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
)

// Embeddings (POST /v1/embeddings) run on a llama.cpp context of their
// own, made on the first request: embeddings on, pooling from
// Config.Pooling or the GGUF, a KV cache of one MaxModelLen shared by up
// to embedSeqs sequences, and a batch as large, so that every input fits
// one decode whole (a non-causal model needs that). One Embed call packs
// its inputs into as few decodes as fit (at most embedSeqs inputs and
// MaxModelLen tokens each), clearing the cache before each. Calls are
// serialised by embedState's lock; they run beside the scheduler's steps
// on the same model (llama.cpp allows contexts on several threads), and
// compete with them for the CPU.

// embedSeqs is the most inputs of one embeddings decode.
const embedSeqs = 16

var _ engine.Embedder = (*Engine)(nil)

// embedState is the embeddings context; mu guards it all.
type embedState struct {
	mu    sync.Mutex
	ctx   *capi.Context
	batch *capi.Batch
	err   error // the context's creation failed (reported to every call)
	done  bool  // closed
}

// poolingType maps Config.Pooling to llama.cpp's pooling type, or reports
// a name it does not know.
func poolingType(name string) (int, error) {
	switch name {
	case "":
		return capi.PoolingUnspecified, nil
	case "mean":
		return capi.PoolingMean, nil
	case "cls":
		return capi.PoolingCLS, nil
	case "last":
		return capi.PoolingLast, nil
	}
	return 0, fmt.Errorf("--pooling %q: want mean, cls or last", name)
}

// open makes the embeddings context; called with mu held.
func (st *embedState) open(e *Engine) error {
	if st.ctx != nil || st.err != nil {
		return st.err
	}
	pool, err := poolingType(e.cfg.Pooling)
	if err != nil {
		st.err = err
		return err
	}
	if pool == capi.PoolingUnspecified {
		// The GGUF's own, when it has one that pools; else last.
		pool = capi.PoolingLast
		if arch, ok := e.model.Meta("general.architecture"); ok {
			if v, ok := e.model.Meta(arch + ".pooling_type"); ok {
				if n, err := strconv.Atoi(v); err == nil && n >= capi.PoolingMean && n <= capi.PoolingLast {
					pool = n
				}
			}
		}
	}
	n := e.cfg.MaxModelLen
	c, err := capi.NewEmbedContext(e.model, capi.ContextParams{
		Ctx: n, Batch: n, SeqMax: min(embedSeqs, capi.MaxParallelSequences()),
		Threads: e.cfg.Threads, FlashAttn: -1, KVUnified: true, OffloadKQV: true,
	}, pool)
	if err != nil {
		st.err = err
		return err
	}
	st.ctx, st.batch = c, capi.NewBatch(n)
	return nil
}

// close frees the context; later calls fail with KindClosed.
func (st *embedState) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	if st.ctx != nil {
		st.batch.Free()
		st.ctx.Free()
		st.ctx, st.batch = nil, nil
	}
}

// Embed implements engine.Embedder: see the top of this file.
func (e *Engine) Embed(ctx context.Context, req *engine.EmbedRequest) (*engine.EmbedResult, error) {
	if e.closed.Load() {
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "The engine is shutting down."}
	}
	total := 0
	for i, toks := range req.Inputs {
		if len(toks) == 0 {
			return nil, &engine.Error{Kind: engine.KindInvalid, Param: "input", Message: "input[" + strconv.Itoa(i) + "] is empty."}
		}
		if len(toks) > e.cfg.MaxModelLen {
			return nil, &engine.Error{Kind: engine.KindContextLength, Param: "input",
				Message: "input[" + strconv.Itoa(i) + "] has " + strconv.Itoa(len(toks)) + " tokens; the model's context length is " + strconv.Itoa(e.cfg.MaxModelLen) + "."}
		}
		for _, t := range toks {
			if t < 0 || int(t) >= e.vocabN {
				return nil, &engine.Error{Kind: engine.KindInvalid, Param: "input",
					Message: "input[" + strconv.Itoa(i) + "] holds token id " + strconv.Itoa(int(t)) + ", outside the vocabulary of " + strconv.Itoa(e.vocabN) + " tokens."}
			}
		}
		total += len(toks)
	}
	st := &e.emb
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "The engine is shutting down."}
	}
	if err := st.open(e); err != nil {
		return nil, &engine.Error{Kind: engine.KindInternal, Message: "Embeddings are not available: " + err.Error()}
	}
	dim := e.model.EmbedDim()
	res := &engine.EmbedResult{Dim: dim, Vectors: make([][]float32, len(req.Inputs)), PromptTokens: total}
	flat := make([]float32, dim*len(req.Inputs))
	seqMax := st.ctx.SeqMax()
	for first := 0; first < len(req.Inputs); {
		if ctx.Err() != nil {
			return nil, &engine.Error{Kind: engine.KindAborted, Message: "The request was aborted."}
		}
		st.ctx.Clear()
		st.batch.Reset()
		last := first
		for last < len(req.Inputs) && last-first < seqMax && st.batch.Len()+len(req.Inputs[last]) <= st.batch.Cap() {
			for pos, t := range req.Inputs[last] {
				st.batch.Add(t, pos, last-first, true)
			}
			last++
		}
		if rc := st.ctx.Decode(st.batch); rc != 0 {
			return nil, &engine.Error{Kind: engine.KindInternal, Message: "llama.cpp failed to compute the embeddings (llama_decode returned " + strconv.Itoa(rc) + ")."}
		}
		for i := first; i < last; i++ {
			src := st.ctx.SeqEmbedding(i - first)
			if src == nil {
				return nil, &engine.Error{Kind: engine.KindInternal, Message: "llama.cpp returned no pooled embedding (the context does not pool)."}
			}
			v := flat[i*dim : (i+1)*dim : (i+1)*dim]
			copy(v, src)
			normalize(v)
			res.Vectors[i] = v
		}
		first = last
	}
	return res, nil
}

// normalize scales v to unit length (L2, as llama-server's embd_normalize
// 2 and vLLM's normalize do); a zero vector stays zero.
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for k := range v {
		v[k] = float32(float64(v[k]) * inv)
	}
}
