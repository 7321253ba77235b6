package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"go.uber.org/zap"
)

// Defaults of Config.
const (
	// DefaultMaxNumSeqs is the default number of sequences decoded together.
	// vLLM's 256 suits a GPU; llama.cpp on a CPU gains little past a few
	// dozen, and each sequence needs KV room.
	DefaultMaxNumSeqs = 32
	// DefaultMaxNumBatchedTokens is the token budget of one step (decode
	// tokens plus prefill chunks), llama.cpp's default n_batch.
	DefaultMaxNumBatchedTokens = 2048
	// DefaultMaxModelLen caps the context length when the model's own is
	// larger: a KV cache for a 128k context does not fit most machines.
	DefaultMaxModelLen = 8192
	// DefaultMaxWaiting bounds the waiting queue, as in engine/sim.
	DefaultMaxWaiting = 4096
	// MaxN caps Sampling.N.
	MaxN = 16
	// MaxStopStrings caps the stop strings of one request.
	MaxStopStrings = 16
)

// Config configures the llama.cpp engine. Zero sizes take their defaults.
type Config struct {
	// ModelPath is the GGUF file (--model).
	ModelPath string
	// LibDir holds the llama.cpp libraries (--llama-lib); empty searches
	// DefaultLibDirs.
	LibDir string
	// MaxModelLen is the context length of one sequence (--max-model-len):
	// prompt plus output. Default: the model's training context, capped at
	// DefaultMaxModelLen.
	MaxModelLen int
	// MaxNumSeqs caps the sequences running at once (--max-num-seqs); each
	// choice of a request is one. Default DefaultMaxNumSeqs.
	MaxNumSeqs int
	// MaxNumBatchedTokens is one step's token budget
	// (--max-num-batched-tokens): every running sequence's decode token,
	// then prefill chunks. Default DefaultMaxNumBatchedTokens.
	MaxNumBatchedTokens int
	// KVCacheTokens is the KV cache size in tokens shared by every
	// sequence (--kv-cache-tokens). Default: 4 × MaxModelLen, at most
	// MaxModelLen × MaxNumSeqs.
	KVCacheTokens int
	// Threads is llama.cpp's compute threads (--threads). Default: half
	// the CPUs (llama.cpp's own default is the physical cores), at least
	// one. llama.cpp's threads spin at every barrier: more threads than
	// free cores (the front door and its clients need some) makes each
	// step wait for descheduled threads, 1,000 times slower on a loaded
	// 2-core machine (150 µs against 220 ms per token, measured).
	Threads int
	// GPULayers is the number of layers offloaded to a GPU (--n-gpu-layers;
	// -1 all); it matters only with a CUDA or Vulkan build in LibDir.
	GPULayers int
	// ChatTemplate overrides the model's Jinja chat template
	// (--chat-template: a file name or the template text).
	ChatTemplate string
	// PrefixCaching reuses the KV of the longest cached prefix across
	// requests (--enable-prefix-caching, on by default).
	PrefixCaching bool
	// ReasoningParser and ToolCallParser name engine/text's parsers
	// (--reasoning-parser, --tool-call-parser; vLLM's names); empty: none.
	ReasoningParser string
	ToolCallParser  string
	// Pooling is how POST /v1/embeddings pools a sequence's token
	// embeddings into one vector (--pooling): mean, cls or last; empty
	// takes the GGUF's own pooling type (<arch>.pooling_type), else last
	// (vLLM's default for a generative model; llama-server refuses one
	// without pooling). See embed.go.
	Pooling string
	// MaxWaiting bounds the waiting queue. Default DefaultMaxWaiting.
	MaxWaiting int
	// Seed is mixed into the seed of requests that sample without one.
	Seed int64
	// Logger gets start and stop lines only; nil means none.
	Logger *zap.Logger
}

// DefaultLibDirs are searched for the llama.cpp libraries when LibDir is
// empty: $VAJRA_LLAMA_LIB, then .llama/linux-x64 (where `make llama` puts
// them) in the working directory, beside the executable and above it.
func DefaultLibDirs() []string {
	var dirs []string
	if d := os.Getenv("VAJRA_LLAMA_LIB"); d != "" {
		dirs = append(dirs, d)
	}
	rel := filepath.Join(".llama", "linux-x64")
	dirs = append(dirs, rel)
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		dirs = append(dirs, filepath.Join(d, rel), filepath.Join(d, "..", rel))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := filepath.Dir(wd); d != filepath.Dir(d); d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, rel))
		}
	}
	return dirs
}

// FindLibDir returns the first of DefaultLibDirs that holds libllama.
func FindLibDir() (string, error) {
	for _, d := range DefaultLibDirs() {
		if m, _ := filepath.Glob(filepath.Join(d, "libllama*.so")); len(m) > 0 {
			return d, nil
		}
	}
	return "", errors.New("the llama.cpp libraries were not found: run `make llama` (installs them into .llama/), or pass --llama-lib DIR")
}

func (c *Config) normalize(trainCtx int) error {
	if c.MaxNumSeqs <= 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxNumBatchedTokens <= 0 {
		c.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if c.MaxModelLen <= 0 {
		c.MaxModelLen = min(trainCtx, DefaultMaxModelLen)
		if c.MaxModelLen <= 0 {
			c.MaxModelLen = DefaultMaxModelLen
		}
	}
	if c.KVCacheTokens <= 0 {
		c.KVCacheTokens = min(4*c.MaxModelLen, c.MaxModelLen*c.MaxNumSeqs)
	}
	if c.KVCacheTokens < c.MaxModelLen {
		return fmt.Errorf("--kv-cache-tokens %d is smaller than --max-model-len %d: one full context must fit", c.KVCacheTokens, c.MaxModelLen)
	}
	if _, err := poolingType(c.Pooling); err != nil {
		return err
	}
	if c.Threads <= 0 {
		c.Threads = max(1, runtime.NumCPU()/2)
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}
