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

// ProcHolder is an Engine whose own threads sit in long C calls (llama.cpp's
// compute): a cgo call keeps its goroutine's P until sysmon takes it back,
// one to two of sysmon's ticks later, and those back off to 10 ms while the
// Go side of the process is quiet. HeldProcs is how many Ps such calls hold
// at once; the server adds them to GOMAXPROCS (internal/spareproc), so
// that a goroutine woken during a step (a session forwarding that step's
// tokens, an event loop sending them) finds a free P instead of waiting for
// sysmon. Optional; constant after the engine starts.
type ProcHolder interface {
	HeldProcs() int
}
