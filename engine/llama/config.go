package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
)

// Defaults of Config.
const (
	// DefaultMaxNumSeqs is the default number of sequences decoded
	// together (llama-server's slots, -np). vLLM's 256 suits a GPU; on a
	// CPU a step's cost grows with the batch, and 64 still gains over 32
	// (llama-server on the 8x512 test model: 576 tokens/s at 8 streams,
	// 814 at 64). With a KV cache budget that cannot give each of 64
	// sequences a whole context, they get short streams (splitKV), or, on
	// a smaller budget, fewer whole contexts (see Config.KVCacheTokens).
	DefaultMaxNumSeqs = 64
	// DefaultKVBudget caps the KV cache's memory when --kv-cache-tokens is
	// not given, at most a quarter of the machine's memory. llama.cpp
	// writes the whole cache at start, so it is all resident: half of
	// vLLM's CPU default (VLLM_CPU_KVCACHE_SPACE, 4 GiB) still holds 64
	// whole 2,048-token contexts of the 8x512 test model, or 64 streams of 1,024
	// tokens of SmolLM2-135M (22.5 KiB per token) beside a long pool.
	DefaultKVBudget = 2 << 30
	// minStreamSlots is the fewest sequences that still get a KV stream of
	// their own by default; below it the cache is one unified pool. On a
	// CPU a step is compute-bound well before 8 sequences of a real model,
	// so fewer running sequences cost little throughput, while a unified
	// pool makes every sequence attend over every cell in use.
	minStreamSlots = 8
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
	// Config is what every engine shares (engine.Config). Here
	// MaxModelLen is the context length of one sequence, prompt plus
	// output; default: the model's training context, capped at
	// DefaultMaxModelLen. MaxNumSeqs defaults to DefaultMaxNumSeqs.
	// KVCacheTokens is the KV cache size in tokens.
	// When it holds MaxNumSeqs whole contexts (MaxNumSeqs × MaxModelLen)
	// every sequence gets a KV stream of its own, as llama-server's slots
	// (kv_unified = false): a step attends over each sequence's own cells
	// only, and finished sequences keep their stream as a prefix cache.
	// When it is smaller the sequences share one unified pool, a step
	// attends over every cell in use, and requests are preempted when it
	// fills. Default: MaxNumSeqs × MaxModelLen when that fits
	// DefaultKVBudget; else, with --max-num-seqs not given, short streams
	// and a long pool (see splitKV), or as many sequences as whole
	// contexts fit (at least minStreamSlots), else a unified pool of the
	// budget.
	// ChatTemplate overrides the model's own; ReasoningParser and
	// ToolCallParser parse its text; Seed is mixed into the seed of
	// requests that sample without one.
	engine.Config
	// MaxNumBatchedTokens is one step's token budget
	// (--max-num-batched-tokens): every running sequence's decode token,
	// then prefill chunks. Default DefaultMaxNumBatchedTokens.
	MaxNumBatchedTokens int
	// Threads is llama.cpp's compute threads (--threads). Default: the
	// physical cores, as llama.cpp's own default (hyper-threads share a
	// core's vector units and gain nothing). Fewer threads than cores
	// leaves compute idle (one thread of two cores gave 0.55x
	// llama-server's tokens/s); but llama.cpp's threads spin at every
	// barrier: with more threads than free cores every step waits for
	// descheduled threads. Without --threads the engine follows the cores
	// other processes leave free, once a second (see threadTuner); a
	// given --threads is kept.
	Threads int
	// ThreadsBatch is llama.cpp's threads for prompt batches
	// (--threads-batch, llama-server's -tb). Default: Threads, as
	// llama-server's ("same as --threads"), following the thread tuner
	// when Threads was not given.
	ThreadsBatch int
	// FlashAttn is when llama.cpp uses flash attention (--flash-attn,
	// llama-server's -fa): "auto" (the default, as llama-server's: on
	// where the backend supports it for the model), "on" or "off"; also
	// llama-server's other spellings (enabled/true/1, disabled/false/0,
	// -1).
	FlashAttn string
	// CacheTypeK and CacheTypeV are the KV cache's data types
	// (--cache-type-k, --cache-type-v; llama-server's -ctk, -ctv): f32,
	// f16 (the default, llama.cpp's), bf16, q8_0, q4_0, q4_1, iq4_nl,
	// q5_0 or q5_1. A quantized V cache needs flash attention (llama.cpp
	// stores V transposed without it): with --flash-attn off it is
	// refused at start, as llama-server refuses it.
	CacheTypeK, CacheTypeV string
	// MLock keeps the model's weights in RAM (--mlock: mlock(2), no
	// swapping); NoMMap reads them into memory instead of mapping the file
	// (--no-mmap). llama-server's older switches; this release's
	// llama-server spells them --load-mode (LoadMode).
	MLock, NoMMap bool
	// LoadMode is llama.cpp's model loading mode (--load-mode,
	// llama-server's -lm): auto (the default: mmap unless a device cannot),
	// none, mmap, mlock, mmap+mlock. MLock and NoMMap, when set, override
	// it.
	LoadMode string
	// Adapters are LoRA adapters served beside the base model (--lora,
	// --lora-scaled, --lora-modules), each under its own model name: a
	// request naming an adapter generates with it applied, one naming any
	// other served name with the base model alone. See Adapter.
	Adapters []Adapter
	// GPULayers is the number of layers offloaded to a GPU (--n-gpu-layers;
	// -1 all); it matters only with a CUDA or Vulkan build in LibDir.
	GPULayers int
	// PrefixCaching reuses the KV of the longest cached prefix across
	// requests (--enable-prefix-caching, on by default).
	PrefixCaching bool
	// Pooling is how POST /v1/embeddings pools a sequence's token
	// embeddings into one vector (--pooling): mean, cls or last; empty
	// takes the GGUF's own pooling type (<arch>.pooling_type), else last
	// (vLLM's default for a generative model; llama-server refuses one
	// without pooling). See embed.go.
	Pooling string
	// MaxWaiting bounds the waiting queue. Default DefaultMaxWaiting.
	MaxWaiting int
	// Logger gets start and stop lines only; nil means none.
	Logger *zap.Logger

	// shortLen > 0 splits the KV cache in two llama.cpp contexts:
	// MaxNumSeqs streams of shortLen tokens, for the sequences that fit
	// one, and a unified pool of the rest of KVCacheTokens (at least
	// MaxModelLen) for the longer ones. Set by normalize (see splitKV).
	shortLen int
	// budgetTokens, when not 0, is the default KV budget in tokens in
	// place of kvBudget()'s bytes (tests).
	budgetTokens int
	// autoThreads: Threads was not given, the engine follows the free
	// cores (see threadTuner).
	autoThreads bool
}

// Adapter is a LoRA adapter (a GGUF of general.type "adapter") served
// under its own model name.
type Adapter struct {
	// Name is the model name requests use for it (and /v1/models lists).
	Name string
	// Path is the adapter's GGUF file.
	Path string
	// Scale multiplies the adapter's delta (llama-server's --lora-scaled;
	// 0 is taken as 1, llama-server's --lora).
	Scale float32
}

// MaxAdapters caps Config.Adapters: a step's adapter is found among the
// running requests' with a 64-bit set (the base model is bit 0).
const MaxAdapters = 63

// DefaultLibDirs are searched for the llama.cpp libraries when LibDir is
// empty: $VAJRA_LLAMA_LIB, then .llama/server/bin in the working directory,
// beside the executable and above them.
//
// .llama/server/bin is the pinned release built on this machine (`make
// llama`: GGML_NATIVE, the kernels compiled for this CPU), which is also
// llama-server's build. node-llama-cpp's prebuilt libraries (`make
// llama-prebuilt`, .llama/linux-x64) are not searched: they are loaded only
// when named (LibDir, --llama-lib, $VAJRA_LLAMA_LIB), because on Q4_1
// models every one of their CPU variants computes the matrix products far
// enough from this build to change greedy answers from the first token
// (SmolLM2-135M-Instruct answers "What is the capital of France?" with
// "L'Étoile, la Marseillaise, ..." where the native build, llama-server
// and an F32 copy of the weights say "The capital of France is Paris.";
// engine/llama/install.sh). The native build is also the faster one
// (bench/RESULTS.md, "The llama engine against llama-server").
func DefaultLibDirs() []string {
	var dirs []string
	if d := os.Getenv("VAJRA_LLAMA_LIB"); d != "" {
		dirs = append(dirs, d)
	}
	rels := []string{filepath.Join(".llama", "server", "bin")}
	add := func(base string) {
		for _, r := range rels {
			dirs = append(dirs, filepath.Join(base, r))
		}
	}
	add("")
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		add(d)
		add(filepath.Join(d, ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := filepath.Dir(wd); d != filepath.Dir(d); d = filepath.Dir(d) {
			add(d)
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
	return "", errors.New("the llama.cpp libraries were not found: run `make llama` (builds llama.cpp into .llama/server/bin), or pass --llama-lib DIR")
}

// normalize fills the defaults: trainCtx is the model's training context,
// kvBytes its KV bytes per token.
func (c *Config) normalize(trainCtx, kvBytes int) error {
	if err := c.Config.Check(); err != nil {
		return err
	}
	seqsGiven := c.MaxNumSeqs > 0
	if !seqsGiven {
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
		budget := c.budgetTokens
		if budget <= 0 {
			budget = kvBudget() / max(kvBytes, 1)
		}
		switch slots := budget / c.MaxModelLen; {
		case c.MaxNumSeqs <= slots:
			c.KVCacheTokens = c.MaxNumSeqs * c.MaxModelLen
		case !seqsGiven && c.splitKV(budget):
		case !seqsGiven && slots >= minStreamSlots:
			c.MaxNumSeqs = slots
			c.KVCacheTokens = slots * c.MaxModelLen
		default:
			c.KVCacheTokens = max(budget, c.MaxModelLen)
		}
	}
	if c.KVCacheTokens < c.MaxModelLen {
		return fmt.Errorf("--kv-cache-tokens %d is smaller than --max-model-len %d: one full context must fit", c.KVCacheTokens, c.MaxModelLen)
	}
	if _, err := poolingType(c.Pooling); err != nil {
		return err
	}
	if c.Threads <= 0 {
		c.Threads, c.autoThreads = physicalCores(), true
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if err := c.normalizeKV(); err != nil {
		return err
	}
	if len(c.Adapters) > MaxAdapters {
		return fmt.Errorf("%d LoRA adapters: at most %d", len(c.Adapters), MaxAdapters)
	}
	seen := map[string]bool{}
	for i := range c.Adapters {
		a := &c.Adapters[i]
		if a.Name == "" || a.Path == "" {
			return fmt.Errorf("LoRA adapter %d: a name and a file are needed (name=path)", i+1)
		}
		if seen[a.Name] {
			return fmt.Errorf("LoRA adapter name %q given twice", a.Name)
		}
		seen[a.Name] = true
		if a.Scale == 0 {
			a.Scale = 1
		}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// normalizeKV checks the flash attention, KV cache type and load-mode
// settings, filling their defaults.
func (c *Config) normalizeKV() error {
	if _, err := c.flashAttn(); err != nil {
		return err
	}
	if c.FlashAttn == "" {
		c.FlashAttn = "auto"
	}
	if c.CacheTypeK == "" {
		c.CacheTypeK = "f16"
	}
	if c.CacheTypeV == "" {
		c.CacheTypeV = "f16"
	}
	if _, err := cacheType("--cache-type-k", c.CacheTypeK); err != nil {
		return err
	}
	if _, err := cacheType("--cache-type-v", c.CacheTypeV); err != nil {
		return err
	}
	if fa, _ := c.flashAttn(); fa == 0 && quantizedCache(c.CacheTypeV) {
		return fmt.Errorf("--cache-type-v %s needs flash attention, which --flash-attn %s turns off (llama.cpp quantizes the V cache only with flash attention): use --flash-attn on or auto, or --cache-type-v f16",
			c.CacheTypeV, c.FlashAttn)
	}
	if _, err := c.loadMode(); err != nil {
		return err
	}
	return nil
}

// flashAttn maps FlashAttn to llama.cpp's enum llama_flash_attn_type: -1
// auto, 0 off, 1 on. The spellings are llama-server's (is_truthy,
// is_falsey, is_autoy in common/arg.cpp).
func (c *Config) flashAttn() (int, error) {
	switch strings.ToLower(c.FlashAttn) {
	case "", "auto", "-1":
		return -1, nil
	case "on", "enabled", "true", "1":
		return 1, nil
	case "off", "disabled", "false", "0":
		return 0, nil
	}
	return 0, fmt.Errorf("--flash-attn %q: want on, off or auto", c.FlashAttn)
}

// cacheTypes are the KV cache types llama-server accepts (its
// kv_cache_types), by name, as enum ggml_type values.
var cacheTypes = []struct {
	name string
	typ  int
}{
	{"f32", 0}, {"f16", 1}, {"bf16", 30}, {"q8_0", 8}, {"q4_0", 2}, {"q4_1", 3}, {"iq4_nl", 20}, {"q5_0", 6}, {"q5_1", 7},
}

// cacheType returns the ggml type of a KV cache type name.
func cacheType(flag, name string) (int, error) {
	for _, t := range cacheTypes {
		if strings.EqualFold(t.name, name) {
			return t.typ, nil
		}
	}
	names := make([]string, len(cacheTypes))
	for i, t := range cacheTypes {
		names[i] = t.name
	}
	return 0, fmt.Errorf("%s %q: want one of %s", flag, name, strings.Join(names, ", "))
}

// quantizedCache reports whether a (valid) cache type is quantized.
func quantizedCache(name string) bool {
	switch strings.ToLower(name) {
	case "f32", "f16", "bf16":
		return false
	}
	return true
}

// loadMode maps LoadMode, MLock and NoMMap to enum llama_load_mode.
func (c *Config) loadMode() (int, error) {
	mode := capi.LoadModeAuto
	switch strings.ToLower(c.LoadMode) {
	case "", "auto":
	case "none":
		mode = capi.LoadModeNone
	case "mmap":
		mode = capi.LoadModeMMap
	case "mlock":
		mode = capi.LoadModeMLock
	case "mmap+mlock":
		mode = capi.LoadModeMMapMLock
	default:
		return 0, fmt.Errorf("--load-mode %q: want auto, none, mmap, mlock or mmap+mlock", c.LoadMode)
	}
	switch {
	case c.MLock && c.NoMMap:
		mode = capi.LoadModeMLock
	case c.MLock:
		mode = capi.LoadModeMMapMLock
	case c.NoMMap:
		mode = capi.LoadModeNone
	}
	return mode, nil
}

// threadsBatch is the prompt-batch thread count when generation runs n.
func (c *Config) threadsBatch(n int) int {
	if c.ThreadsBatch > 0 {
		return c.ThreadsBatch
	}
	return n
}

// unified reports whether the KV cache is one pool shared by the
// sequences, rather than a stream per sequence (with short streams: the
// long pool is unified, this reports on the whole).
func (c *Config) unified() bool {
	return c.shortLen == 0 && c.KVCacheTokens < c.MaxNumSeqs*c.MaxModelLen
}

// Short streams bounds (splitKV).
const (
	// minShortLen is the shortest stream worth a layout of short streams:
	// a chat's template and a short question with its answer.
	minShortLen = 512
	// shortShare is the part of the budget the short streams may take:
	// the rest, at least one whole context, is the long pool's.
	shortShare = 0.75
)

// splitKV lays the default KV budget (in tokens) out as short streams
// and a long pool when it cannot give each of MaxNumSeqs sequences a
// whole context: MaxNumSeqs streams of the longest length, a multiple of
// 256 of at most half the context, within shortShare of the budget, and
// a unified pool of the rest for the sequences longer than that. So the
// default runs as many short sequences together as it would with whole
// contexts (64 streams of 1,024 tokens of SmolLM2-135M in 2 GiB, as
// llama-server's -np 64 -c 65536, where whole contexts of 8,192 tokens
// give 11) and still serves whole-context prompts. It reports false, the
// layout unchanged, when the streams would be shorter than minShortLen or
// the long pool smaller than a context.
func (c *Config) splitKV(budget int) bool {
	l := int(float64(budget)*shortShare) / c.MaxNumSeqs / 256 * 256
	l = min(l, c.MaxModelLen/2/256*256)
	long := budget - c.MaxNumSeqs*l
	if l < minShortLen || long < c.MaxModelLen {
		return false
	}
	c.shortLen = l
	c.KVCacheTokens = c.MaxNumSeqs*l + long
	return true
}

// kvBudget is the default KV cache memory: DefaultKVBudget, at most a
// quarter of the machine's memory.
func kvBudget() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return DefaultKVBudget
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.Atoi(f[1]); err == nil && kb > 0 {
				return min(DefaultKVBudget, kb*1024/4)
			}
		}
	}
	return DefaultKVBudget
}

// physicalCores counts the distinct cores among the CPUs this process may
// run on (hyper-thread siblings once), at least one; runtime.NumCPU where
// the topology is not readable.
func physicalCores() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return max(1, runtime.NumCPU())
	}
	cores := map[string]bool{}
	for cpu := 0; cpu < 1024; cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		b, err := os.ReadFile("/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu) + "/topology/thread_siblings_list")
		if err != nil {
			return max(1, runtime.NumCPU())
		}
		cores[strings.TrimSpace(string(b))] = true
	}
	return max(1, len(cores))
}
