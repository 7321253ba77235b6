package engine

// Describer is an Engine that describes the model it serves: the root and
// meta of GET /v1/models, and GET /props (llama-server's). Optional, like
// Embedder. ModelInfo is constant after the engine starts; safe for
// concurrent use.
type Describer interface {
	ModelInfo() ModelInfo
}

// ModelInfo describes a served model, in llama-server's terms.
type ModelInfo struct {
	// Path is the model file (vLLM's root).
	Path string
	// VocabType is llama.cpp's vocabulary type (1 SPM, 2 BPE, ...).
	VocabType int
	NVocab    int
	NCtxTrain int
	NEmbd     int
	NParams   uint64
	// Size is the bytes of the model's tensors.
	Size uint64
	// NCtx is one sequence's context (--max-model-len); Slots the
	// sequences decoded together (--max-num-seqs).
	NCtx, Slots int
	// ChatTemplate is the template that renders chat prompts.
	ChatTemplate       string
	BOSToken, EOSToken string
	// BuildInfo names the engine's build (llama.cpp's release).
	BuildInfo string
}
