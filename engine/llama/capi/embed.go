package capi

/*
#include "wrappers.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Pooling types (llama_pooling_type).
const (
	PoolingUnspecified = -1
	PoolingNone        = 0
	PoolingMean        = 1
	PoolingCLS         = 2
	PoolingLast        = 3
	PoolingRank        = 4
)

// EmbedDim is the length of the model's embeddings (llama_model_n_embd).
func (m *Model) EmbedDim() int { return int(C.vjw_llama_model_n_embd(m.p)) }

// NewEmbedContext makes a context that outputs pooled embeddings
// (embeddings on, pooling as given: PoolingMean, PoolingCLS or
// PoolingLast, or PoolingUnspecified for the model's own) instead of
// logits. cp.Batch is also the physical batch: a non-causal model needs
// each sequence whole in one ubatch.
func NewEmbedContext(m *Model, cp ContextParams, pooling int) (*Context, error) {
	p := C.vjw_llama_context_default_params()
	p.n_ctx = C.uint32_t(cp.Ctx)
	p.n_batch = C.uint32_t(cp.Batch)
	p.n_ubatch = C.uint32_t(cp.Batch)
	p.n_seq_max = C.uint32_t(cp.SeqMax)
	p.n_threads = C.int32_t(cp.Threads)
	p.n_threads_batch = C.int32_t(cp.Threads)
	p.flash_attn_type = C.enum_llama_flash_attn_type(cp.FlashAttn)
	p.kv_unified = C.bool(cp.KVUnified)
	p.offload_kqv = C.bool(cp.OffloadKQV)
	p.embeddings = true
	p.pooling_type = C.enum_llama_pooling_type(pooling)
	p.no_perf = true
	c := C.vjw_llama_init_from_model(m.p, p)
	if c == nil {
		return nil, errors.New("llama.cpp could not create the embeddings context")
	}
	return &Context{p: c, mem: C.vjw_llama_get_memory(c), m: m}, nil
}

// Pooling is the context's pooling type.
func (c *Context) Pooling() int { return int(C.vjw_llama_pooling_type(c.p)) }

// SeqEmbedding is the pooled embedding of sequence seq after the last
// Decode (an embeddings context with pooling), valid until the next Decode;
// nil without pooling.
func (c *Context) SeqEmbedding(seq int) []float32 {
	p := C.vjw_llama_get_embeddings_seq(c.p, C.llama_seq_id(seq))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.m.EmbedDim())
}
