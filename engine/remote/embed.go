package remote

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/vajra-go/vajra/engine"
)

// Embeddings (POST /v1/embeddings) go to one worker whose Info says it
// serves them (a llama-server started with --embeddings and a pooling, a
// vLLM or SGLang worker of an embedding model) and whose client is an
// Embedder. A BatchEmbedder (llama-server) gets every input of the request
// in one call; the gRPC protocols take one input per Embed RPC, so the
// inputs go as concurrent RPCs (at most embedParallel at once) on the
// worker's one connection, where its engine batches them. A worker that
// cannot be reached, or refuses before answering (UNAVAILABLE, a 503),
// hands the request to the next such worker. Vectors come back
// L2-normalised: the workers' own are (vLLM's normalize, llama-server's
// embd_normalize 2), and one that is not is normalised here.

// embedParallel caps the Embed RPCs of one request in flight at once.
const embedParallel = 16

var _ engine.Embedder = (*Engine)(nil)

// Embed implements engine.Embedder: see the top of this file. It fails
// with KindClosed when no worker is healthy, KindInvalid when none of the
// healthy ones serves embeddings, KindContextLength for an input longer
// than the workers' context, KindAborted when ctx ends first.
func (e *Engine) Embed(ctx context.Context, req *engine.EmbedRequest) (*engine.EmbedResult, error) {
	m := e.model.Load()
	if m == nil || e.closed.Load() {
		return nil, e.unavailable()
	}
	total := 0
	for i, toks := range req.Inputs {
		if len(toks) == 0 {
			return nil, &engine.Error{Kind: engine.KindInvalid, Param: "input", Message: "input[" + strconv.Itoa(i) + "] is empty."}
		}
		if len(toks) > m.maxLen {
			return nil, &engine.Error{Kind: engine.KindContextLength, Param: "input",
				Message: "input[" + strconv.Itoa(i) + "] has " + strconv.Itoa(len(toks)) + " tokens; the model's context length is " + strconv.Itoa(m.maxLen) + "."}
		}
		for _, t := range toks {
			if t < 0 || int(t) >= m.vocab {
				return nil, &engine.Error{Kind: engine.KindInvalid, Param: "input",
					Message: "input[" + strconv.Itoa(i) + "] holds token id " + strconv.Itoa(int(t)) + ", outside the vocabulary of " + strconv.Itoa(m.vocab) + " tokens."}
			}
		}
		total += len(toks)
	}
	id := "vajra-emb-" + strconv.FormatUint(e.callSeq.Add(1), 36)
	var tried []*Worker
	for {
		w, err := e.pickEmbedder(tried)
		if err != nil {
			return nil, err
		}
		w.inflight.Add(1)
		res, err := e.embedOn(ctx, w, id, req.Inputs)
		if w.inflight.Add(-1) == 0 && w.draining.Load() {
			e.retire(w)
		}
		if err == nil {
			if res.PromptTokens == 0 {
				res.PromptTokens = total
			}
			e.promptN.Add(uint64(res.PromptTokens))
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, &engine.Error{Kind: engine.KindAborted, Message: "The request was aborted."}
		}
		var ee *engine.Error
		if errors.As(err, &ee) {
			return nil, ee
		}
		var we *WorkerError
		if errors.As(err, &we) && we.Status == 501 {
			// The worker no longer serves embeddings (a llama-server
			// restarted without --embeddings): it is not asked again,
			// and the next one is.
			if info := w.info.Load(); info != nil && info.Embeddings {
				cp := *info
				cp.Embeddings = false
				w.info.CompareAndSwap(info, &cp)
			}
			tried = append(tried, w)
			continue
		}
		if !errors.As(err, &we) || !we.Retryable || len(tried) >= 4 {
			return nil, workerError(err)
		}
		if we.Status == 0 {
			e.failed(w)
		}
		tried = append(tried, w)
	}
}

// pickEmbedder chooses a healthy worker not in tried that serves
// embeddings, by the engine's Picker.
func (e *Engine) pickEmbedder(tried []*Worker) (*Worker, error) {
	var buf [8]*Worker
	ws := buf[:0]
	healthy := false
	for _, w := range e.list() {
		if !w.healthy.Load() || w.draining.Load() || slices.Contains(tried, w) {
			continue
		}
		healthy = true
		if info := w.info.Load(); info != nil && info.Embeddings {
			if _, ok := w.client.(Embedder); ok {
				ws = append(ws, w)
			}
		}
	}
	switch {
	case len(ws) == 1:
		return ws[0], nil
	case len(ws) > 1:
		if w := e.picker.Pick(ws); w != nil {
			return w, nil
		}
		return nil, e.unavailable() // a Router refused them all
	case !healthy:
		return nil, e.unavailable()
	}
	return nil, &engine.Error{Kind: engine.KindInvalid, Param: "model",
		Message: "None of this model's engine workers computes embeddings (a llama-server worker needs --embeddings and, for a generative model, --pooling mean|cls|last; a vLLM or SGLang worker an embedding model)."}
}

// embedOn computes every input's vector on w.
func (e *Engine) embedOn(ctx context.Context, w *Worker, id string, inputs [][]int32) (*engine.EmbedResult, error) {
	res := &engine.EmbedResult{Vectors: make([][]float32, len(inputs))}
	if be, ok := w.client.(BatchEmbedder); ok {
		embs, counted, err := be.EmbedBatch(ctx, id, inputs)
		if err != nil {
			return nil, err
		}
		if len(embs) != len(inputs) {
			return nil, &engine.Error{Kind: engine.KindInternal, Message: "the engine worker " + w.url + " returned " +
				strconv.Itoa(len(embs)) + " embeddings for " + strconv.Itoa(len(inputs)) + " inputs"}
		}
		for i := range embs {
			res.Vectors[i] = embs[i].Vector
		}
		res.PromptTokens = counted
		return res, finishVectors(w, res)
	}
	em := w.client.(Embedder)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, embedParallel)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	counted := 0
	for i, in := range inputs {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			emb, err := em.Embed(ctx, id+"-"+strconv.Itoa(i), in)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			res.Vectors[i] = emb.Vector
			counted += emb.PromptTokens
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.PromptTokens = counted
	return res, finishVectors(w, res)
}

// finishVectors checks that every vector has one length, sets Dim, and
// normalises a vector that is not of unit length.
func finishVectors(w *Worker, res *engine.EmbedResult) error {
	for i, v := range res.Vectors {
		if len(v) == 0 || i > 0 && len(v) != len(res.Vectors[0]) {
			return &engine.Error{Kind: engine.KindInternal, Message: "the engine worker " + w.url + " returned an embedding of " +
				strconv.Itoa(len(v)) + " dimensions for input " + strconv.Itoa(i)}
		}
		normalize(v)
	}
	res.Dim = len(res.Vectors[0])
	return nil
}

// normalize scales v to unit length (L2) unless it is already within
// float32 rounding of it (a worker's own normalised vector is kept bit for
// bit); a zero vector stays zero.
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.Abs(s-1) < 1e-5 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for k := range v {
		v[k] = float32(float64(v[k]) * inv)
	}
}
