// Package capi is Vajra's thin binding of llama.cpp's C API (llama.h of the
// release vendored in engine/llama/include). The libraries are not linked:
// Load opens them with dlopen from a directory at run time (the CPU build
// that `make llama` installs, or a CUDA or Vulkan build of the same
// release), so a Vajra binary builds and runs everywhere and needs
// llama.cpp only when it serves a GGUF model.
//
// The binding is deliberately small: it exposes what engine/llama's
// scheduler needs (model, context, batch, memory, vocabulary, samplers)
// and nothing of ggml. None of its functions is safe for concurrent use on
// the same Context; engine/llama calls them from its one scheduler
// goroutine.
package capi

//go:generate go run ./internal/genwrap

/*
#cgo CFLAGS: -I${SRCDIR}/../include -O2
#cgo LDFLAGS: -ldl -lm
#include <math.h>
#include <string.h>
#include "wrappers.h"

// vj_fill writes the logits into the candidate array, token t at index t.
static void vj_fill(const float *logits, llama_token_data *cur, int32_t n_vocab) {
	for (llama_token t = 0; t < n_vocab; t++) {
		cur[t].id = t; cur[t].logit = logits[t]; cur[t].p = 0.0f;
	}
}

// vj_run applies samplers list[from:n] to cur; the selected token or -1.
static llama_token vj_run(struct llama_sampler **list, int from, int n, llama_token_data *cur, int32_t n_vocab) {
	llama_token_data_array arr = { cur, (size_t)n_vocab, -1, false };
	for (int k = from; k < n; k++) vjw_llama_sampler_apply(list[k], &arr);
	if (arr.selected < 0 || arr.selected >= (int64_t)arr.size) return -1;
	return arr.data[arr.selected].id;
}

// vj_draw is temperature then a seeded draw over the whole vocabulary,
// straight from the logits (max, scale, vectorized softmax, a walk in
// blocks), instead of llama.cpp's temp and dist samplers over the
// candidate array (which is first written, 12 bytes a token): the
// sampling vLLM's defaults ask for (no top-k, top-p or min-p), which cost
// a few hundred microseconds a draw that way on a vocabulary of 50,000,
// serial in the step. p is scratch of n floats. The draw is llama.cpp's:
// softmax of logits/T, a uniform u in [0,1), the first token whose
// cumulative probability passes u; the generator is splitmix64.
static llama_token vj_draw(const float *logits, float *p, int32_t n, float inv_t, uint64_t *state) {
	// Eight lanes in the max and in the walk's block sums: independent
	// chains the compiler can vectorize and the CPU can overlap.
	float m8[8];
	for (int j = 0; j < 8; j++) m8[j] = logits[0];
	int32_t t = 0;
	for (; t + 8 <= n; t += 8) {
		for (int j = 0; j < 8; j++) m8[j] = logits[t + j] > m8[j] ? logits[t + j] : m8[j];
	}
	float mx = m8[0];
	for (int j = 1; j < 8; j++) mx = m8[j] > mx ? m8[j] : mx;
	for (; t < n; t++) mx = logits[t] > mx ? logits[t] : mx;
	for (t = 0; t < n; t++) p[t] = logits[t] * inv_t;
	const float m = mx * inv_t;
	double sum = 0;
	if (vj_softmax) {
		sum = vj_softmax(n, p, p, m);
	} else {
		for (int32_t t = 0; t < n; t++) { p[t] = expf(p[t] - m); sum += p[t]; }
	}
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	const double target = (double)(z >> 11) * 0x1.0p-53 * sum;
	double run = 0;
	for (t = 0; t + 64 <= n; t += 64) {
		float a[8] = {0};
		for (int k = 0; k < 64; k += 8) {
			for (int j = 0; j < 8; j++) a[j] += p[t + k + j];
		}
		const double bs = (double)(((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])));
		if (run + bs > target) break;
		run += bs;
	}
	for (; t < n; t++) {
		run += p[t];
		if (run > target) return t;
	}
	for (t = n - 1; t > 0; t--) {
		if (p[t] > 0) return t; // rounding: the last token that can be drawn
	}
	return 0;
}

// vj_draw_ith is vj_draw over the logits of batch output i; -1 without them.
static llama_token vj_draw_ith(struct llama_context *ctx, int32_t i, float *p, int32_t n, float inv_t, uint64_t *state) {
	const float *logits = vjw_llama_get_logits_ith(ctx, i);
	if (!logits) return -1;
	return vj_draw(logits, p, n, inv_t, state);
}

// vj_sample draws a token from the logits of batch output i, as
// llama_sampler_sample does for a chain, then feeds it to each sampler
// (grammar and penalties advance). The last sampler (greedy or dist)
// selects. mode 1: the chain is greedy alone, an argmax over the logits
// (no candidate array is written). mode 2: list[0] is a grammar, applied
// as llama.cpp's common sampler does: the rest of the chain draws, the
// grammar checks that one token, and only when it rejects it is the whole
// chain run again with the grammar first.
static llama_token vj_sample(struct llama_context *ctx, int32_t i, struct llama_sampler **list, int n, llama_token_data *cur, int32_t n_vocab, int mode) {
	const float *logits = vjw_llama_get_logits_ith(ctx, i);
	if (!logits) return -1;
	if (mode == 1) {
		llama_token best = 0;
		float bv = logits[0];
		for (llama_token t = 1; t < n_vocab; t++) {
			if (logits[t] > bv) { bv = logits[t]; best = t; }
		}
		return best;
	}
	llama_token tok;
	if (mode == 2 && n > 1) {
		vj_fill(logits, cur, n_vocab);
		tok = vj_run(list, 1, n, cur, n_vocab);
		if (tok >= 0) {
			llama_token_data one = { tok, 1.0f, 0.0f };
			llama_token_data_array a1 = { &one, 1, -1, false };
			vjw_llama_sampler_apply(list[0], &a1);
			if (!(one.logit > -INFINITY)) tok = -1;
		}
		if (tok < 0) {
			vj_fill(logits, cur, n_vocab);
			tok = vj_run(list, 0, n, cur, n_vocab);
		}
	} else {
		vj_fill(logits, cur, n_vocab);
		tok = vj_run(list, 0, n, cur, n_vocab);
	}
	if (tok < 0) return -1;
	for (int k = 0; k < n; k++) vjw_llama_sampler_accept(list[k], tok);
	return tok;
}

// vj_pen is Vajra's penalty sampler: llama.cpp's repetition, frequency
// and presence penalties over the last last_n accepted tokens, with the
// same arithmetic, but applied to the distinct tokens of the window only
// (llama.cpp's looks every vocabulary entry up in a hash map, per token).
// count and at (a token's index in distinct) are allocated at the first
// accept.
typedef struct {
	int32_t n_vocab, last_n;
	float rep, freq, pres;
	int32_t *count, *at;   // per vocabulary entry
	llama_token *ring;     // the window, oldest at head once full
	llama_token *distinct; // the tokens with count > 0
	int32_t n_ring, head, n_distinct;
} vj_pen;

static const char *vj_pen_name(const struct llama_sampler *s) { (void)s; return "vajra-penalties"; }

static void vj_pen_accept(struct llama_sampler *s, llama_token t) {
	vj_pen *p = (vj_pen *)s->ctx;
	if (t < 0 || t >= p->n_vocab) return;
	if (!p->count) {
		p->count = calloc((size_t)p->n_vocab, sizeof(int32_t));
		p->at = calloc((size_t)p->n_vocab, sizeof(int32_t));
		if (!p->count || !p->at) { free(p->count); free(p->at); p->count = p->at = NULL; return; }
	}
	if (p->n_ring == p->last_n) {
		llama_token old = p->ring[p->head];
		if (--p->count[old] == 0) {
			int32_t i = p->at[old];
			llama_token moved = p->distinct[--p->n_distinct];
			p->distinct[i] = moved;
			p->at[moved] = i;
		}
		p->ring[p->head] = t;
		p->head = (p->head + 1) % p->last_n;
	} else {
		p->ring[p->n_ring++] = t;
	}
	if (p->count[t]++ == 0) {
		p->at[t] = p->n_distinct;
		p->distinct[p->n_distinct++] = t;
	}
}

static void vj_pen_apply(struct llama_sampler *s, llama_token_data_array *cur) {
	vj_pen *p = (vj_pen *)s->ctx;
	if (!p->count) return;
	for (int32_t k = 0; k < p->n_distinct; k++) {
		llama_token t = p->distinct[k];
		llama_token_data *d = NULL;
		if ((size_t)t < cur->size && cur->data[t].id == t) {
			d = &cur->data[t];
		} else {
			for (size_t i = 0; i < cur->size; i++) {
				if (cur->data[i].id == t) { d = &cur->data[i]; break; }
			}
			if (!d) continue;
		}
		int32_t c = p->count[t];
		if (d->logit <= 0) d->logit *= p->rep; else d->logit /= p->rep;
		d->logit -= (float)c * p->freq + (float)(c > 0) * p->pres;
	}
	cur->sorted = false;
}

static void vj_pen_reset(struct llama_sampler *s) {
	vj_pen *p = (vj_pen *)s->ctx;
	if (p->count) {
		memset(p->count, 0, (size_t)p->n_vocab * sizeof(int32_t));
	}
	p->n_ring = p->head = p->n_distinct = 0;
}

static void vj_pen_free(struct llama_sampler *s) {
	vj_pen *p = (vj_pen *)s->ctx;
	free(p->count); free(p->at); free(p->ring); free(p->distinct); free(p);
}

static struct llama_sampler_i vj_pen_iface = {
	.name = vj_pen_name, .accept = vj_pen_accept, .apply = vj_pen_apply,
	.reset = vj_pen_reset, .clone = NULL, .free = vj_pen_free,
};

static struct llama_sampler *vj_penalties(int32_t n_vocab, int32_t last_n, float rep, float freq, float pres) {
	vj_pen *p = calloc(1, sizeof(vj_pen));
	if (!p) return NULL;
	p->n_vocab = n_vocab; p->last_n = last_n > 0 ? last_n : 1;
	p->rep = rep; p->freq = freq; p->pres = pres;
	p->ring = malloc((size_t)p->last_n * sizeof(llama_token));
	p->distinct = malloc((size_t)p->last_n * sizeof(llama_token));
	if (!p->ring || !p->distinct) { free(p->ring); free(p->distinct); free(p); return NULL; }
	return vjw_llama_sampler_init(&vj_pen_iface, p);
}

// vj_pen_check applies llama.cpp's penalty sampler and vj_penalties, both
// fed toks, to logits (n_vocab entries, in ours and theirs): for the
// parity test.
static int vj_pen_check(int32_t n_vocab, int32_t last_n, float rep, float freq, float pres, const llama_token *toks, int n, float *ours, float *theirs, llama_token_data *cur) {
	struct llama_sampler *a = vj_penalties(n_vocab, last_n, rep, freq, pres);
	struct llama_sampler *b = vjw_llama_sampler_init_penalties(n_vocab, last_n, rep, freq, pres);
	if (!a || !b) return -1;
	for (int i = 0; i < n; i++) { vjw_llama_sampler_accept(a, toks[i]); vjw_llama_sampler_accept(b, toks[i]); }
	struct llama_sampler *ab[2] = { a, b };
	float *out[2] = { ours, theirs };
	for (int k = 0; k < 2; k++) {
		for (llama_token t = 0; t < n_vocab; t++) { cur[t].id = t; cur[t].logit = out[k][t]; cur[t].p = 0; }
		llama_token_data_array arr = { cur, (size_t)n_vocab, -1, false };
		vjw_llama_sampler_apply(ab[k], &arr);
		for (size_t i = 0; i < arr.size; i++) out[k][arr.data[i].id] = arr.data[i].logit;
	}
	vjw_llama_sampler_free(a);
	vjw_llama_sampler_free(b);
	return 0;
}

static int vj_batch_push(struct llama_batch *b, llama_token t, llama_pos p, llama_seq_id s, int8_t logits) {
	int i = b->n_tokens++;
	b->token[i] = t; b->pos[i] = p; b->n_seq_id[i] = 1; b->seq_id[i][0] = s; b->logits[i] = logits;
	return i;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Release is what llama_version reports for the release (v0.5.0) whose
// headers are vendored and whose libraries Load accepts.
const Release = "0.5.0-dev"

var (
	loadOnce sync.Once
	loadErr  error
	loadDir  string
)

// Load opens the llama.cpp libraries in dir once per process: libggml-base,
// libggml and libllama, then the ggml backends found there (the CPU
// variants, and CUDA or Vulkan in such a build). It refuses a library of
// another release than Release. Later calls return the first call's result
// (a process loads one build).
func Load(dir string) error {
	loadOnce.Do(func() { loadErr = load(dir) })
	if loadErr == nil && filepath.Clean(dir) != loadDir {
		return fmt.Errorf("llama.cpp libraries already loaded from %s, not %s", loadDir, dir)
	}
	return loadErr
}

func load(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	base := filepath.Join(abs, "libggml-base.so")
	ggml, err1 := findLib(abs, "libggml.")
	llama, err2 := findLib(abs, "libllama.")
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("no llama.cpp libraries in %s (run `make llama`, or point --llama-lib at a directory holding libllama, libggml and libggml-base): %w", abs, err)
	}
	if _, err := os.Stat(base); err != nil {
		return fmt.Errorf("no libggml-base.so in %s (run `make llama`): %w", abs, err)
	}
	cb, cg, cl := C.CString(base), C.CString(ggml), C.CString(llama)
	defer C.free(unsafe.Pointer(cb))
	defer C.free(unsafe.Pointer(cg))
	defer C.free(unsafe.Pointer(cl))
	// A native build (make llama: no GGML_BACKEND_DL) has one
	// libggml-cpu.so that libggml links; the npm builds have CPU variants
	// (libggml-cpu-haswell.so, ...) that ggml picks and loads itself.
	var cc *C.char
	if cpu := filepath.Join(abs, "libggml-cpu.so"); fileExists(cpu) {
		cc = C.CString(cpu)
		defer C.free(unsafe.Pointer(cc))
	}
	if msg := C.vj_load(cb, cc, cg, cl); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return fmt.Errorf("loading llama.cpp from %s: %s", abs, C.GoString(msg))
	}
	if v := Version(); strings.TrimPrefix(v, "v") != Release {
		return fmt.Errorf("llama.cpp in %s is release %q, but this Vajra was built against %q: install the matching libraries with `make llama`", abs, v, Release)
	}
	C.vj_log_quiet(C.GGML_LOG_LEVEL_ERROR)
	if cpuBackend = cpuVariant(abs); cpuBackend != "" {
		cv := C.CString(cpuBackend)
		defer C.free(unsafe.Pointer(cv))
		if C.vjw_ggml_backend_load(cv) == nil {
			return fmt.Errorf("loading llama.cpp's CPU backend %s failed", cpuBackend)
		}
		// The GPU backends of a -cuda or -vulkan build (libggml-vulkan.so,
		// ...), which load_all_from_path would have loaded too.
		for _, p := range gpuBackends(abs) {
			cp := C.CString(p)
			C.vjw_ggml_backend_load(cp) // one that does not load leaves the CPU
			C.free(unsafe.Pointer(cp))
		}
	} else {
		cd := C.CString(abs)
		defer C.free(unsafe.Pointer(cd))
		C.vjw_ggml_backend_load_all_from_path(cd)
	}
	C.vjw_llama_backend_init()
	loadDir = filepath.Clean(dir)
	return nil
}

// cpuVariant picks, from the CPU backend variants of an npm build
// (libggml-cpu-haswell.so, libggml-cpu-zen4.so, ...), the one that scores
// highest on this machine, as ggml_backend_load_all_from_path would, except
// that the Sapphire Rapids variant is passed over unless VAJRA_LLAMA_AMX=1:
// its AMX kernels (tinygemm_kernel_amx) segfault on Sapphire Rapids machines
// (seen in this project's CI; upstream llama.cpp#20824, and the per-thread
// tile-permission bug of llama.cpp PR #26954), and the next variant down
// (AVX-512 with VNNI and BF16) runs there. It returns "" when dir has no
// variants (a native build, whose libggml links its one libggml-cpu).
func cpuVariant(dir string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	best, bestScore := "", 0
	for _, p := range m {
		if strings.Contains(filepath.Base(p), "sapphirerapids") && os.Getenv("VAJRA_LLAMA_AMX") != "1" {
			continue
		}
		cp := C.CString(p)
		s := int(C.vj_backend_score(cp))
		C.free(unsafe.Pointer(cp))
		if s > bestScore {
			best, bestScore = p, s
		}
	}
	return best
}

// gpuBackends lists the backend files in dir other than ggml-base and the
// CPU variants.
func gpuBackends(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "libggml-*.so"))
	var out []string
	for _, p := range m {
		b := filepath.Base(p)
		if b != "libggml-base.so" && !strings.HasPrefix(b, "libggml-cpu") {
			out = append(out, p)
		}
	}
	return out
}

// cpuBackend is the CPU variant load chose ("" for a native build).
var cpuBackend string

// CPUBackend is the file of the CPU backend variant loaded from an npm
// build's directory, or "" when the libraries are a native build.
func CPUBackend() string { return cpuBackend }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// findLib returns the one file in dir whose name starts with prefix and
// ends in .so (libllama.v0.5.0.so, libllama.so).
func findLib(dir, prefix string) (string, error) {
	m, _ := filepath.Glob(filepath.Join(dir, prefix+"*so"))
	if len(m) == 0 {
		return "", fmt.Errorf("no %s*so", prefix)
	}
	return m[0], nil
}

// Version is the loaded library's release (llama_version).
func Version() string { return C.GoString(C.vjw_llama_version()) }

// SystemInfo is llama.cpp's description of the CPU features in use.
func SystemInfo() string { return C.GoString(C.vjw_llama_print_system_info()) }

// Devices lists the ggml backend devices (CPU, CUDA0, Vulkan0, ...).
func Devices() []string {
	n := int(C.vjw_ggml_backend_dev_count())
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, C.GoString(C.vjw_ggml_backend_dev_name(C.vjw_ggml_backend_dev_get(C.size_t(i)))))
	}
	return out
}

// HasGPU reports whether a GPU device was loaded (a CUDA or Vulkan build).
func HasGPU() bool {
	n := int(C.vjw_ggml_backend_dev_count())
	for i := 0; i < n; i++ {
		if C.vjw_ggml_backend_dev_type(C.vjw_ggml_backend_dev_get(C.size_t(i))) == C.GGML_BACKEND_DEVICE_TYPE_GPU {
			return true
		}
	}
	return false
}

// MaxParallelSequences is the most sequence ids a context can have.
func MaxParallelSequences() int { return int(C.vjw_llama_max_parallel_sequences()) }

// Token is a token id.
type Token = int32

// Model is a loaded GGUF model.
type Model struct {
	p     *C.struct_llama_model
	vocab *C.struct_llama_vocab
}

// ModelParams are the model-loading options Vajra sets.
type ModelParams struct {
	GPULayers int // layers to offload; -1 means all
	// LoadMode is llama.cpp's enum llama_load_mode: LoadModeAuto (mmap
	// unless a device cannot), LoadModeNone (read into memory),
	// LoadModeMMap, LoadModeMLock, LoadModeMMapMLock.
	LoadMode int
}

// The load modes of ModelParams.LoadMode (enum llama_load_mode).
const (
	LoadModeAuto      = C.LLAMA_LOAD_MODE_AUTO
	LoadModeNone      = C.LLAMA_LOAD_MODE_NONE
	LoadModeMMap      = C.LLAMA_LOAD_MODE_MMAP
	LoadModeMLock     = C.LLAMA_LOAD_MODE_MLOCK
	LoadModeMMapMLock = C.LLAMA_LOAD_MODE_MMAP_MLOCK
)

// LoadModel loads a GGUF file.
func LoadModel(path string, mp ModelParams) (*Model, error) {
	p := C.vjw_llama_model_default_params()
	p.n_gpu_layers = C.int32_t(mp.GPULayers)
	p.load_mode = C.enum_llama_load_mode(mp.LoadMode)
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	m := C.vjw_llama_model_load_from_file(cp, p)
	if m == nil {
		return nil, fmt.Errorf("llama.cpp could not load the model %s (see the log above for why)", path)
	}
	return &Model{p: m, vocab: C.vjw_llama_model_get_vocab(m)}, nil
}

// Free releases the model.
func (m *Model) Free() {
	if m.p != nil {
		C.vjw_llama_model_free(m.p)
		m.p = nil
	}
}

// TrainContext is the context length the model was trained with.
func (m *Model) TrainContext() int { return int(C.vjw_llama_model_n_ctx_train(m.p)) }

// KVBytesPerToken is the KV cache's size per token with llama.cpp's
// default F16 K and V: every layer's keys and values of the KV heads.
func (m *Model) KVBytesPerToken() int {
	layers := int(C.vjw_llama_model_n_layer(m.p))
	embd, heads := int(C.vjw_llama_model_n_embd(m.p)), int(C.vjw_llama_model_n_head(m.p))
	kv := int(C.vjw_llama_model_n_head_kv(m.p))
	if heads <= 0 || kv <= 0 {
		kv, heads = 1, 1
	}
	return layers * 2 * 2 * kv * (embd / heads)
}

// Params is the model's parameter count.
func (m *Model) Params() uint64 { return uint64(C.vjw_llama_model_n_params(m.p)) }

// Desc is llama.cpp's one-line description of the model.
func (m *Model) Desc() string {
	var buf [256]C.char
	n := C.vjw_llama_model_desc(m.p, &buf[0], C.size_t(len(buf)))
	if n < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// Meta returns a metadata value as a string, and whether the key exists.
func (m *Model) Meta(key string) (string, bool) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	buf := make([]byte, 256)
	for {
		n := int(C.vjw_llama_model_meta_val_str(m.p, ck, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < 0 {
			return "", false
		}
		if n < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, n+1)
	}
}

// ChatTemplate returns the model's default chat template, or "".
func (m *Model) ChatTemplate() string {
	s := C.vjw_llama_model_chat_template(m.p, nil)
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// VocabSize is the number of tokens.
func (m *Model) VocabSize() int { return int(C.vjw_llama_vocab_n_tokens(m.vocab)) }

// BOS, EOS and EOT are the special token ids (-1 when the model has none).
func (m *Model) BOS() Token { return Token(C.vjw_llama_vocab_bos(m.vocab)) }
func (m *Model) EOS() Token { return Token(C.vjw_llama_vocab_eos(m.vocab)) }
func (m *Model) EOT() Token { return Token(C.vjw_llama_vocab_eot(m.vocab)) }

// AddBOS reports whether the model wants a BOS token before a prompt.
func (m *Model) AddBOS() bool { return bool(C.vjw_llama_vocab_get_add_bos(m.vocab)) }

// IsEOG reports whether t ends generation (EOS, EOT, ...).
func (m *Model) IsEOG(t Token) bool { return bool(C.vjw_llama_vocab_is_eog(m.vocab, C.llama_token(t))) }

// IsControl reports whether t is a control token (not rendered as text).
func (m *Model) IsControl(t Token) bool {
	return bool(C.vjw_llama_vocab_is_control(m.vocab, C.llama_token(t)))
}

// TokenText is the token's vocabulary text (its raw form, before byte
// decoding).
func (m *Model) TokenText(t Token) string {
	return C.GoString(C.vjw_llama_vocab_get_text(m.vocab, C.llama_token(t)))
}

// Tokenize appends the tokens of text to dst. addSpecial adds BOS/EOS as
// the model is configured to; parseSpecial turns special-token text
// (<|im_start|>) into its token.
func (m *Model) Tokenize(dst []Token, text string, addSpecial, parseSpecial bool) ([]Token, error) {
	n := len(text) + 2
	if cap(dst)-len(dst) < n {
		dst = append(dst[:len(dst):len(dst)], make([]Token, n)...)[:len(dst)]
	}
	out := dst[len(dst):cap(dst)]
	var cs *C.char
	if len(text) > 0 {
		cs = (*C.char)(unsafe.Pointer(unsafe.StringData(text)))
	}
	got := C.vjw_llama_tokenize(m.vocab, cs, C.int32_t(len(text)), (*C.llama_token)(unsafe.Pointer(unsafe.SliceData(out))), C.int32_t(len(out)), C.bool(addSpecial), C.bool(parseSpecial))
	if got < 0 {
		if got == C.INT32_MIN {
			return dst, errors.New("tokenization overflow")
		}
		dst = append(dst[:len(dst):len(dst)], make([]Token, -int(got))...)[:len(dst)]
		return m.Tokenize(dst, text, addSpecial, parseSpecial)
	}
	return dst[:len(dst)+int(got)], nil
}

// Piece appends the bytes of token t to dst. special renders control
// tokens (<|im_end|>) as their text.
func (m *Model) Piece(dst []byte, t Token, special bool) []byte {
	var buf [256]byte
	n := C.vjw_llama_token_to_piece(m.vocab, C.llama_token(t), (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), 0, C.bool(special))
	if n < 0 {
		big := make([]byte, -n)
		n = C.vjw_llama_token_to_piece(m.vocab, C.llama_token(t), (*C.char)(unsafe.Pointer(&big[0])), C.int32_t(len(big)), 0, C.bool(special))
		return append(dst, big[:max(n, 0)]...)
	}
	return append(dst, buf[:n]...)
}

// Adapter is a LoRA adapter loaded for a model (llama_adapter_lora_init):
// valid while its model is.
type Adapter struct {
	p *C.struct_llama_adapter_lora
}

// LoadAdapter loads the LoRA adapter GGUF at path for m. llama.cpp checks
// that the adapter's architecture and tensor shapes match the model.
func LoadAdapter(m *Model, path string) (*Adapter, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	a := C.vjw_llama_adapter_lora_init(m.p, cp)
	if a == nil {
		return nil, fmt.Errorf("llama.cpp could not load the LoRA adapter %s for this model (see the log above for why)", path)
	}
	return &Adapter{p: a}, nil
}

// Meta returns the adapter's GGUF metadata value of key as a string, ""
// when it has none.
func (a *Adapter) Meta(key string) string {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var buf [256]C.char
	if C.vjw_llama_adapter_meta_val_str(a.p, ck, &buf[0], C.size_t(len(buf))) < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// Free releases the adapter (a context must not apply it any more).
func (a *Adapter) Free() {
	if a.p != nil {
		C.vjw_llama_adapter_lora_free(a.p)
		a.p = nil
	}
}

// Context is an inference context: the KV cache and the compute buffers.
type Context struct {
	p       *C.struct_llama_context
	mem     C.llama_memory_t
	m       *Model
	unified bool
	// scratch holds a sequence's state during CopyPrefix.
	scratch []byte
	// The adapter the next Decode calls apply (SetAdapter), and the
	// one-element arrays llama_set_adapters_lora reads, kept here so that
	// a switch allocates nothing.
	adapter *Adapter
	scale   float32
	loraP   [1]*C.struct_llama_adapter_lora
	loraS   [1]C.float
}

// SetAdapter makes the next Decode calls apply adapter a at scale (nil:
// the base model alone). A call that changes nothing costs nothing; a
// switch costs llama.cpp a rebuild of its graph at the next Decode.
// Loop-only: the caller owns the context.
func (c *Context) SetAdapter(a *Adapter, scale float32) error {
	if a == c.adapter && (a == nil || scale == c.scale) {
		return nil
	}
	var rc C.int32_t
	if a == nil {
		rc = C.vjw_llama_set_adapters_lora(c.p, nil, 0, nil)
	} else {
		c.loraP[0], c.loraS[0] = a.p, C.float(scale)
		rc = C.vjw_llama_set_adapters_lora(c.p, &c.loraP[0], 1, &c.loraS[0])
	}
	if rc != 0 {
		return fmt.Errorf("llama_set_adapters_lora failed (code %d)", int(rc))
	}
	c.adapter, c.scale = a, scale
	return nil
}

// ContextParams are the context options Vajra sets.
type ContextParams struct {
	Ctx     int // KV cells in all
	Batch   int // most tokens in one Decode
	UBatch  int // physical batch
	SeqMax  int // sequence ids
	Threads int
	// ThreadsBatch are the threads of prompt batches (0: Threads).
	ThreadsBatch int
	FlashAttn    int // -1 auto, 0 off, 1 on
	// TypeK and TypeV are the KV cache's ggml types (enum ggml_type; 0
	// is f32, so the zero value is not a default: pass GGMLTypeF16).
	TypeK, TypeV int
	KVUnified    bool
	OffloadKQV   bool
}

// GGMLTypeF16 is ggml's f16, llama.cpp's default KV cache type.
const GGMLTypeF16 = C.GGML_TYPE_F16

// NewContext makes a context for m.
func NewContext(m *Model, cp ContextParams) (*Context, error) {
	p := C.vjw_llama_context_default_params()
	p.n_ctx = C.uint32_t(cp.Ctx)
	p.n_batch = C.uint32_t(cp.Batch)
	p.n_ubatch = C.uint32_t(cp.UBatch)
	p.n_seq_max = C.uint32_t(cp.SeqMax)
	p.n_threads = C.int32_t(cp.Threads)
	p.n_threads_batch = C.int32_t(cp.Threads)
	if cp.ThreadsBatch > 0 {
		p.n_threads_batch = C.int32_t(cp.ThreadsBatch)
	}
	p.flash_attn_type = C.enum_llama_flash_attn_type(cp.FlashAttn)
	p.type_k = C.enum_ggml_type(cp.TypeK)
	p.type_v = C.enum_ggml_type(cp.TypeV)
	p.kv_unified = C.bool(cp.KVUnified)
	p.offload_kqv = C.bool(cp.OffloadKQV)
	p.no_perf = true
	c := C.vjw_llama_init_from_model(m.p, p)
	if c == nil {
		return nil, errors.New("llama.cpp could not create a context (too large a KV cache for memory, or a quantized V cache without flash attention? see the log above)")
	}
	return &Context{p: c, mem: C.vjw_llama_get_memory(c), m: m, unified: cp.KVUnified}, nil
}

// Free releases the context.
func (c *Context) Free() {
	if c.p != nil {
		C.vjw_llama_free(c.p)
		c.p = nil
	}
}

// SetThreads sets the compute threads of the next Decode calls: n for
// generation, batch for prompt batches.
func (c *Context) SetThreads(n, batch int) {
	C.vjw_llama_set_n_threads(c.p, C.int32_t(n), C.int32_t(batch))
}

// Size is the context's KV cells, BatchSize its n_batch, SeqMax its
// sequence ids.
func (c *Context) Size() int      { return int(C.vjw_llama_n_ctx(c.p)) }
func (c *Context) BatchSize() int { return int(C.vjw_llama_n_batch(c.p)) }
func (c *Context) SeqMax() int    { return int(C.vjw_llama_n_seq_max(c.p)) }

// SeqRemove drops sequence seq's cells in [p0, p1) (p1 < 0: to the end).
// A negative seq does nothing (llama.cpp would take it for every sequence).
func (c *Context) SeqRemove(seq int, p0, p1 int) bool {
	if seq < 0 {
		return false
	}
	return bool(C.vjw_llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)))
}

// SeqCopy makes dst share src's cells in [p0, p1): no KV is copied in a
// unified cache, the cells gain a sequence id. With a stream per sequence
// only a whole copy (p0 <= 0, p1 < 0) is possible: see CopyPrefix. Ids out
// of range and a partial copy across streams do nothing (llama.cpp asserts
// on them, which ends the process).
func (c *Context) SeqCopy(src, dst int, p0, p1 int) {
	if n := c.SeqMax(); src < 0 || dst < 0 || src >= n || dst >= n {
		return
	}
	if !c.unified && (p0 > 0 || p1 >= 0) {
		return
	}
	C.vjw_llama_memory_seq_cp(c.mem, C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
}

// Unified reports whether the sequences share one KV buffer (cells are
// shared by copies) or each has a stream of its own (copies move data).
func (c *Context) Unified() bool { return c.unified }

// CopyPrefix makes dst (whose cells must be empty) hold src's first n
// positions. In a unified cache the cells are shared, nothing is copied.
// With a stream per sequence the cells src holds are copied into dst's
// stream through llama.cpp's sequence state (llama_state_seq_get_data,
// then llama_state_seq_set_data into dst: the same stream count, so
// llama.cpp places them in dst's stream), and dst then drops the
// positions from n on: a copy of what src holds, where llama.cpp's own
// cross-stream copy moves the whole stream, however little of it is used
// (a 32-token prompt of SmolLM2 is 0.7 MB of a 23 MB stream). Should
// llama.cpp refuse the state, the whole stream is copied as before (at
// the next Decode, before its compute), and CopyPrefix reports false.
func (c *Context) CopyPrefix(src, dst, n int) bool {
	if c.unified {
		c.SeqCopy(src, dst, 0, n)
		return true
	}
	if m := c.SeqMax(); src < 0 || dst < 0 || src >= m || dst >= m || src == dst {
		return true
	}
	c.scratch = c.SeqState(c.scratch[:0], src)
	cells := c.SetSeqState(c.scratch, dst)
	if !cells {
		c.SeqCopy(src, dst, -1, -1)
	}
	c.SeqRemove(dst, n, -1)
	if cap(c.scratch) > maxScratch {
		c.scratch = nil // a long sequence's copy: not kept for the next
	}
	return cells
}

// maxScratch is the largest state buffer a Context keeps between copies.
const maxScratch = 4 << 20

// SeqState appends the KV state of seq (llama_state_seq_get_data: its
// cells' positions and keys and values, in llama.cpp's own layout, which
// begins with the cache's stream count) to dst.
func (c *Context) SeqState(dst []byte, seq int) []byte {
	n := int(C.vjw_llama_state_seq_get_size(c.p, C.llama_seq_id(seq)))
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	if n == 0 {
		return dst
	}
	got := int(C.vjw_llama_state_seq_get_data(c.p, (*C.uint8_t)(unsafe.Pointer(&dst[at])), C.size_t(n), C.llama_seq_id(seq)))
	return dst[:at+got]
}

// SetSeqState replaces seq's KV with a state from SeqState of a cache
// with as many streams (llama_state_seq_set_data). It reports false when
// llama.cpp could not place it (no room, another layout); seq is then
// empty.
func (c *Context) SetSeqState(src []byte, seq int) bool {
	if len(src) == 0 {
		return false
	}
	return C.vjw_llama_state_seq_set_data(c.p, (*C.uint8_t)(unsafe.Pointer(&src[0])), C.size_t(len(src)), C.llama_seq_id(seq)) > 0
}

// SeqPosMax is the largest position of seq, or -1.
func (c *Context) SeqPosMax(seq int) int {
	return int(C.vjw_llama_memory_seq_pos_max(c.mem, C.llama_seq_id(seq)))
}

// Clear empties the KV cache.
func (c *Context) Clear() { C.vjw_llama_memory_clear(c.mem, true) }

// Decode runs the model over b. It returns 0 on success, 1 when the KV
// cache has no room for the batch (nothing was changed), another code on
// failure (see llama_decode).
func (c *Context) Decode(b *Batch) int { return int(C.vjw_llama_decode(c.p, b.b)) }

// Decoder runs llama_decode on a thread of its own: the goroutine that
// calls Decode waits for it on the netpoller (an eventfd), holding no P
// in a long cgo call, so the Go runtime's sysmon does not retake a P from
// it at every step longer than 10 ms (and then tick at 20 µs, taking a
// core from llama.cpp's threads each time). One Decode at a time.
type Decoder struct {
	d   *C.vj_decoder
	f   *os.File
	buf [8]byte
	ns  C.int64_t // the last decode's CPU time (a field: a local passed to C escapes)
}

// NewDecoder starts a decoder's thread.
func NewDecoder() (*Decoder, error) {
	d := C.vj_decoder_new()
	if d == nil {
		return nil, errors.New("llama: cannot start the decoder thread")
	}
	fd, err := unix.FcntlInt(uintptr(C.vj_decoder_fd(d)), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		C.vj_decoder_free(d)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		C.vj_decoder_free(d)
		return nil, err
	}
	return &Decoder{d: d, f: os.NewFile(uintptr(fd), "llama-decoder")}, nil
}

// Decode runs llama_decode(c, b) on the decoder's thread and waits for
// it; cpu is the CPU time that thread spent in it.
func (d *Decoder) Decode(c *Context, b *Batch) (rc int, cpu time.Duration) {
	C.vj_decoder_submit(d.d, c.p, b.b)
	// Parked on the netpoller until the eventfd says the decode ended;
	// should the read fail (it cannot but closed), the wait below blocks
	// in C instead. The wait returns at once when the decode is done.
	_, _ = d.f.Read(d.buf[:])
	r := C.vj_decoder_wait(d.d, &d.ns)
	return int(r), time.Duration(d.ns)
}

// Close stops the decoder's thread.
func (d *Decoder) Close() {
	d.f.Close()
	C.vj_decoder_free(d.d)
}

// Logits returns the logits of the batch's i-th token (which must have
// asked for them), valid until the next Decode.
func (c *Context) Logits(i int) []float32 {
	p := C.vjw_llama_get_logits_ith(c.p, C.int32_t(i))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.m.VocabSize())
}

// Batch is a reusable llama_batch.
type Batch struct {
	b   C.struct_llama_batch
	cap int
}

// NewBatch allocates a batch of up to n tokens, one sequence id each.
func NewBatch(n int) *Batch {
	return &Batch{b: C.vjw_llama_batch_init(C.int32_t(n), 0, 1), cap: n}
}

// Free releases the batch.
func (b *Batch) Free() { C.vjw_llama_batch_free(b.b) }

// Reset empties the batch.
func (b *Batch) Reset() { b.b.n_tokens = 0 }

// Len is the number of tokens in the batch; Cap the most it holds.
func (b *Batch) Len() int { return int(b.b.n_tokens) }
func (b *Batch) Cap() int { return b.cap }

// Add appends token t at position pos of sequence seq and returns its
// index in the batch; logits asks for its output. A full batch takes
// nothing and returns -1.
func (b *Batch) Add(t Token, pos, seq int, logits bool) int {
	if int(b.b.n_tokens) >= b.cap {
		return -1
	}
	var l C.int8_t
	if logits {
		l = 1
	}
	return int(C.vj_batch_push(&b.b, C.llama_token(t), C.llama_pos(pos), C.llama_seq_id(seq), l))
}

// Sampler draws one sequence's tokens: an ordered list of llama.cpp
// samplers applied to the logits by vj_sample (below), the way llama.cpp's
// common sampling does, except that the prompt's tokens reach only the
// repetition penalty (vLLM counts the prompt for repetition_penalty, and
// only generated tokens for the frequency and presence penalties).
type Sampler struct {
	list []*C.struct_llama_sampler
	rep  *C.struct_llama_sampler // the repetition penalty, or nil
	ban  *C.struct_llama_sampler // SamplerParams.Ban's until Unban, or nil
	mode C.int                   // vj_sample's: 1 greedy alone, 2 grammar first
	// draw: temperature and a seeded draw alone (no other sampler): vj_draw
	// over the logits, with invT and the generator's state rng.
	draw bool
	invT C.float
	rng  C.uint64_t
}

// SamplerParams are the per-request sampling settings, in vLLM's terms.
type SamplerParams struct {
	Temperature float32 // <= 0: greedy
	TopK        int     // <= 0: off
	TopP        float32 // <= 0 or >= 1: off
	MinP        float32 // <= 0: off
	Seed        uint32
	// RepeatPenalty (1 or 0: off) covers the prompt and the output;
	// FrequencyPenalty and PresencePenalty (0: off) the output only, both
	// over the last PenaltyLastN tokens.
	RepeatPenalty, FrequencyPenalty, PresencePenalty float32
	PenaltyLastN                                     int
	LogitBias                                        []LogitBias
	// Ban lists tokens drawn never until Unban (vLLM's min_tokens: the
	// end-of-generation and stop tokens of the first tokens); nil: none.
	Ban []Token
	// Grammar is a GBNF grammar with a root rule, or "".
	Grammar string
}

// LogitBias is one token's bias.
type LogitBias struct {
	Token Token
	Bias  float32
}

// NewSampler builds the sampler list, in vLLM's order: the grammar mask,
// logit bias, repetition penalty, frequency and presence penalties, then
// greedy (temperature 0) or temperature, top-k, top-p, min-p and the
// seeded draw. It fails when the grammar does not parse.
func NewSampler(m *Model, sp SamplerParams) (*Sampler, error) {
	s := &Sampler{}
	add := func(x *C.struct_llama_sampler) { s.list = append(s.list, x) }
	nv := C.int32_t(m.VocabSize())
	if sp.Grammar != "" {
		cg, cr := C.CString(sp.Grammar), C.CString("root")
		g := C.vjw_llama_sampler_init_grammar(m.vocab, cg, cr)
		C.free(unsafe.Pointer(cg))
		C.free(unsafe.Pointer(cr))
		if g == nil {
			return nil, errors.New("llama.cpp refused the grammar")
		}
		add(g)
	}
	if len(sp.Ban) > 0 {
		lb := make([]C.llama_logit_bias, len(sp.Ban))
		for i, t := range sp.Ban {
			lb[i] = C.llama_logit_bias{token: C.llama_token(t), bias: C.float(math.Inf(-1))}
		}
		s.ban = C.vjw_llama_sampler_init_logit_bias(nv, C.int32_t(len(lb)), &lb[0])
		add(s.ban)
	}
	if len(sp.LogitBias) > 0 {
		lb := make([]C.llama_logit_bias, len(sp.LogitBias))
		for i, b := range sp.LogitBias {
			lb[i] = C.llama_logit_bias{token: C.llama_token(b.Token), bias: C.float(b.Bias)}
		}
		add(C.vjw_llama_sampler_init_logit_bias(nv, C.int32_t(len(lb)), &lb[0]))
	}
	lastN := C.int32_t(max(sp.PenaltyLastN, 1))
	if sp.RepeatPenalty > 0 && sp.RepeatPenalty != 1 {
		if s.rep = C.vj_penalties(nv, lastN, C.float(sp.RepeatPenalty), 0, 0); s.rep == nil {
			s.Free()
			return nil, errors.New("out of memory for the penalty sampler")
		}
		add(s.rep)
	}
	if sp.FrequencyPenalty != 0 || sp.PresencePenalty != 0 {
		p := C.vj_penalties(nv, lastN, 1, C.float(sp.FrequencyPenalty), C.float(sp.PresencePenalty))
		if p == nil {
			s.Free()
			return nil, errors.New("out of memory for the penalty sampler")
		}
		add(p)
	}
	if sp.Grammar != "" {
		s.mode = 2
	}
	if sp.Temperature <= 0 {
		if len(s.list) == 0 {
			s.mode = 1
		}
		add(C.vjw_llama_sampler_init_greedy())
		return s, nil
	}
	if len(s.list) == 0 && sp.TopK <= 0 && !(sp.TopP > 0 && sp.TopP < 1) && sp.MinP <= 0 {
		s.draw, s.invT, s.rng = true, C.float(1/sp.Temperature), C.uint64_t(sp.Seed)
		return s, nil
	}
	add(C.vjw_llama_sampler_init_temp(C.float(sp.Temperature)))
	if sp.TopK > 0 {
		add(C.vjw_llama_sampler_init_top_k(C.int32_t(sp.TopK)))
	}
	if sp.TopP > 0 && sp.TopP < 1 {
		add(C.vjw_llama_sampler_init_top_p(C.float(sp.TopP), 1))
	}
	if sp.MinP > 0 {
		add(C.vjw_llama_sampler_init_min_p(C.float(sp.MinP), 1))
	}
	add(C.vjw_llama_sampler_init_dist(C.uint32_t(sp.Seed)))
	return s, nil
}

// Unban drops the sampler of SamplerParams.Ban: from the next draw on,
// those tokens may be drawn. It does nothing when there is none.
func (s *Sampler) Unban() {
	if s.ban == nil {
		return
	}
	for i, x := range s.list {
		if x == s.ban {
			s.list = append(s.list[:i], s.list[i+1:]...)
			break
		}
	}
	C.vjw_llama_sampler_free(s.ban)
	s.ban = nil
}

// AcceptPrompt feeds the prompt's tokens to the repetition penalty.
func (s *Sampler) AcceptPrompt(toks []Token) {
	if s.rep == nil {
		return
	}
	for _, t := range toks {
		C.vjw_llama_sampler_accept(s.rep, C.llama_token(t))
	}
}

// Candidates is the scratch array sampling works in: one entry per
// vocabulary token, in C memory, reused for every draw (one per engine:
// sampling is single-threaded).
type Candidates struct {
	p *C.llama_token_data
	n int
}

// NewCandidates allocates the scratch for m's vocabulary.
func NewCandidates(m *Model) *Candidates {
	n := m.VocabSize()
	return &Candidates{p: (*C.llama_token_data)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.llama_token_data{})))), n: n}
}

// Free releases the scratch.
func (c *Candidates) Free() {
	C.free(unsafe.Pointer(c.p))
	c.p = nil
}

// Sample draws a token from the logits of the last Decode's i-th batch
// token and feeds it to every sampler (grammar and penalties advance).
func (s *Sampler) Sample(c *Context, i int, cand *Candidates) Token {
	if s.draw {
		return Token(C.vj_draw_ith(c.p, C.int32_t(i), (*C.float)(unsafe.Pointer(cand.p)), C.int32_t(cand.n), s.invT, &s.rng))
	}
	if len(s.list) == 0 {
		return -1
	}
	return Token(C.vj_sample(c.p, C.int32_t(i), &s.list[0], C.int(len(s.list)), cand.p, C.int32_t(cand.n), s.mode))
}

// DrawCounts runs the sampler of temperature t alone (vj_draw, the fused
// path of Sample) draws times over logits from seed, and returns how often
// each token was drawn; for tests (the counts must follow softmax(logits/t)).
func DrawCounts(logits []float32, t float32, seed uint64, draws int) []int {
	counts := make([]int, len(logits))
	p := make([]float32, len(logits))
	st := C.uint64_t(seed)
	for range draws {
		tok := C.vj_draw((*C.float)(unsafe.Pointer(&logits[0])), (*C.float)(unsafe.Pointer(&p[0])),
			C.int32_t(len(logits)), C.float(1/t), &st)
		counts[tok]++
	}
	return counts
}

// VectorSoftmax reports whether the draw uses ggml-cpu's vectorized
// softmax (a directly linked libggml-cpu that exports it).
func VectorSoftmax() bool { return C.vj_softmax != nil }

// PenaltyParity applies llama.cpp's own penalty sampler and Vajra's (see
// vj_pen), both fed toks, to copies of logits, and returns both results;
// for tests (the two must agree).
func PenaltyParity(m *Model, lastN int, rep, freq, pres float32, toks []Token, logits []float32) (ours, theirs []float32, err error) {
	n := m.VocabSize()
	if len(logits) != n || len(toks) == 0 {
		return nil, nil, errors.New("PenaltyParity: logits must have one entry per vocabulary token, toks at least one")
	}
	ours, theirs = slices.Clone(logits), slices.Clone(logits)
	cand := NewCandidates(m)
	defer cand.Free()
	if C.vj_pen_check(C.int32_t(n), C.int32_t(lastN), C.float(rep), C.float(freq), C.float(pres),
		(*C.llama_token)(unsafe.Pointer(&toks[0])), C.int(len(toks)),
		(*C.float)(unsafe.Pointer(&ours[0])), (*C.float)(unsafe.Pointer(&theirs[0])), cand.p) != 0 {
		return nil, nil, errors.New("PenaltyParity: out of memory")
	}
	return ours, theirs, nil
}

// Free releases the samplers.
func (s *Sampler) Free() {
	for _, x := range s.list {
		C.vjw_llama_sampler_free(x)
	}
	s.list, s.rep, s.ban = nil, nil, nil
}
