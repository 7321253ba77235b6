// The dlopen shim: every llama.cpp / ggml function the binding calls is
// resolved at run time from the libraries of one release, so that Vajra
// builds and runs without them and loads them only for --model.
#ifndef VAJRA_LLAMA_SHIM_H
#define VAJRA_LLAMA_SHIM_H

#include <stdlib.h>
#include "llama.h"

// vj_softmax is ggml-cpu's ggml_vec_soft_max_f32 (y[i] = expf(x[i] - max),
// vectorized for the build's CPU; returns the sum), resolved from a
// directly linked libggml-cpu when it exports it, else NULL.
typedef double (*vj_softmax_fn)(int n, float *y, const float *x, float max);
extern vj_softmax_fn vj_softmax;

// VJ_FUNCS lists the resolved functions: X(library, name).
#define VJ_FUNCS(X) \
	X(ggml, ggml_backend_load_all_from_path) \
	X(ggml, ggml_backend_load) \
	X(ggml, ggml_backend_dev_count) \
	X(ggml, ggml_backend_dev_get) \
	X(ggml, ggml_backend_dev_name) \
	X(ggml, ggml_backend_dev_type) \
	X(llama, llama_version) \
	X(llama, llama_print_system_info) \
	X(llama, llama_backend_init) \
	X(llama, llama_log_set) \
	X(llama, llama_max_parallel_sequences) \
	X(llama, llama_model_default_params) \
	X(llama, llama_context_default_params) \
	X(llama, llama_sampler_chain_default_params) \
	X(llama, llama_model_load_from_file) \
	X(llama, llama_model_free) \
	X(llama, llama_model_get_vocab) \
	X(llama, llama_model_n_ctx_train) \
	X(llama, llama_model_n_params) \
	X(llama, llama_model_n_layer) \
	X(llama, llama_model_n_embd) \
	X(llama, llama_model_n_head) \
	X(llama, llama_model_n_head_kv) \
	X(llama, llama_model_desc) \
	X(llama, llama_model_chat_template) \
	X(llama, llama_model_meta_val_str) \
	X(llama, llama_init_from_model) \
	X(llama, llama_free) \
	X(llama, llama_n_ctx) \
	X(llama, llama_n_batch) \
	X(llama, llama_n_seq_max) \
	X(llama, llama_get_memory) \
	X(llama, llama_memory_clear) \
	X(llama, llama_memory_seq_rm) \
	X(llama, llama_memory_seq_cp) \
	X(llama, llama_memory_seq_pos_max) \
	X(llama, llama_state_seq_get_size) \
	X(llama, llama_state_seq_get_data) \
	X(llama, llama_state_seq_set_data) \
	X(llama, llama_batch_init) \
	X(llama, llama_batch_free) \
	X(llama, llama_decode) \
	X(llama, llama_get_logits_ith) \
	X(llama, llama_set_n_threads) \
	X(llama, llama_vocab_n_tokens) \
	X(llama, llama_vocab_bos) \
	X(llama, llama_vocab_eos) \
	X(llama, llama_vocab_eot) \
	X(llama, llama_vocab_is_eog) \
	X(llama, llama_vocab_is_control) \
	X(llama, llama_vocab_get_add_bos) \
	X(llama, llama_vocab_get_text) \
	X(llama, llama_tokenize) \
	X(llama, llama_token_to_piece) \
	X(llama, llama_sampler_init) \
	X(llama, llama_sampler_free) \
	X(llama, llama_sampler_apply) \
	X(llama, llama_sampler_reset) \
	X(llama, llama_sampler_accept) \
	X(llama, llama_sampler_init_greedy) \
	X(llama, llama_sampler_init_dist) \
	X(llama, llama_sampler_init_top_k) \
	X(llama, llama_sampler_init_top_p) \
	X(llama, llama_sampler_init_min_p) \
	X(llama, llama_sampler_init_temp) \
	X(llama, llama_sampler_init_penalties) \
	X(llama, llama_sampler_init_logit_bias) \
	X(llama, llama_sampler_init_grammar) \
	X(llama, llama_pooling_type) \
	X(llama, llama_get_embeddings_seq) \
	X(llama, llama_get_embeddings_ith) \
	X(llama, llama_model_size) \
	X(llama, llama_vocab_type) \
	X(llama, llama_adapter_lora_init) \
	X(llama, llama_adapter_lora_free) \
	X(llama, llama_adapter_meta_val_str) \
	X(llama, llama_set_adapters_lora)

#define VJ_DECL(lib, f) extern __typeof__(f) *vj_##f;
VJ_FUNCS(VJ_DECL)
#undef VJ_DECL

// vj_load opens the libraries in dir (libggml-base, libggml-cpu when the
// build links it directly (NULL when ggml loads its CPU variants itself),
// libggml, libllama, by their file names) and resolves every function. It
// returns NULL on success, else a message the caller frees.
char *vj_load(const char *ggml_base, const char *ggml_cpu, const char *ggml, const char *llama);

// vj_backend_score is the score a dynamically loaded ggml backend file
// gives this machine (its ggml_backend_score: 0 when the CPU lacks a feature
// it was built for, higher for a better fit), or -1 when it cannot be opened
// or has no score. The file is closed again.
int vj_backend_score(const char *path);

// vj_log_quiet routes llama.cpp's log through vj_log_level: messages below
// it are dropped.
void vj_log_quiet(int min_level);

// vj_decoder runs llama_decode on a thread of its own, so that the Go
// thread that asks for it waits on the netpoller (its eventfd) rather
// than in a long cgo call: see capi.Decoder.
typedef struct vj_decoder vj_decoder;
vj_decoder *vj_decoder_new(void);
int vj_decoder_fd(vj_decoder *d);
void vj_decoder_submit(vj_decoder *d, struct llama_context *ctx, struct llama_batch batch);
int32_t vj_decoder_wait(vj_decoder *d, int64_t *cpu_ns);
void vj_decoder_free(vj_decoder *d);

#endif
