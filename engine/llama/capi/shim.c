#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "shim.h"

#define VJ_DEF(lib, f) __typeof__(f) *vj_##f;
VJ_FUNCS(VJ_DEF)
#undef VJ_DEF

static char *vj_err(const char *what, const char *detail) {
	size_t n = strlen(what) + strlen(detail) + 3;
	char *s = malloc(n);
	snprintf(s, n, "%s: %s", what, detail);
	return s;
}

vj_softmax_fn vj_softmax;

char *vj_load(const char *ggml_base, const char *ggml_cpu, const char *ggml, const char *llama) {
	// RTLD_GLOBAL: the CPU backend variants that ggml loads later resolve
	// ggml-base's symbols from the global scope.
	void *hbase = dlopen(ggml_base, RTLD_NOW | RTLD_GLOBAL);
	if (!hbase) return vj_err("dlopen", dlerror());
	// A build without GGML_BACKEND_DL links libggml against libggml-cpu.so.0
	// (NEEDED): opened first by its path, it satisfies that dependency by
	// its soname, so the directory needs no rpath or LD_LIBRARY_PATH.
	void *hcpu = NULL;
	if (ggml_cpu && !(hcpu = dlopen(ggml_cpu, RTLD_NOW | RTLD_GLOBAL))) return vj_err("dlopen", dlerror());
	// Optional: ggml-cpu's vectorized exp-and-sum (vj_draw's softmax); a
	// build that does not export it gets vj_draw's scalar loop.
	if (hcpu) vj_softmax = (vj_softmax_fn)dlsym(hcpu, "ggml_vec_soft_max_f32");
	void *hggml = dlopen(ggml, RTLD_NOW | RTLD_GLOBAL);
	if (!hggml) return vj_err("dlopen", dlerror());
	void *hllama = dlopen(llama, RTLD_NOW | RTLD_GLOBAL);
	if (!hllama) return vj_err("dlopen", dlerror());
#define VJ_RESOLVE(lib, f) \
	vj_##f = (__typeof__(f) *)dlsym(h##lib, #f); \
	if (!vj_##f) return vj_err("missing symbol", #f);
	VJ_FUNCS(VJ_RESOLVE)
#undef VJ_RESOLVE
	return NULL;
}

int vj_backend_score(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return -1;
	int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
	int s = score ? score() : -1;
	dlclose(h);
	return s;
}

static int vj_min_level = GGML_LOG_LEVEL_ERROR;

static void vj_log(enum ggml_log_level level, const char *text, void *user) {
	(void)user;
	if (level == GGML_LOG_LEVEL_CONT || level < vj_min_level) return;
	fputs(text, stderr);
}

void vj_log_quiet(int min_level) {
	vj_min_level = min_level;
	vj_llama_log_set(vj_log, NULL);
}
