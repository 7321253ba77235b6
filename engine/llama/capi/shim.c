#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
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

struct vj_decoder {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int efd;
	int pending, quit;
	struct llama_context *ctx;
	struct llama_batch batch;
	int32_t rc;
	int64_t cpu_ns;
};

static int64_t vj_thread_cpu(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *vj_decoder_main(void *arg) {
	vj_decoder *d = arg;
	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!d->pending && !d->quit) pthread_cond_wait(&d->cv, &d->mu);
		if (d->quit) break;
		struct llama_context *ctx = d->ctx;
		struct llama_batch batch = d->batch;
		pthread_mutex_unlock(&d->mu);
		int64_t t0 = vj_thread_cpu();
		int32_t rc = vj_llama_decode(ctx, batch);
		int64_t dt = vj_thread_cpu() - t0;
		pthread_mutex_lock(&d->mu);
		d->rc = rc;
		d->cpu_ns = dt;
		d->pending = 0;
		pthread_cond_broadcast(&d->cv);
		uint64_t one = 1;
		ssize_t w = write(d->efd, &one, sizeof one);
		(void)w;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

vj_decoder *vj_decoder_new(void) {
	vj_decoder *d = calloc(1, sizeof *d);
	if (!d) return NULL;
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0) { free(d); return NULL; }
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if (pthread_create(&d->th, NULL, vj_decoder_main, d) != 0) {
		close(d->efd);
		free(d);
		return NULL;
	}
	return d;
}

int vj_decoder_fd(vj_decoder *d) { return d->efd; }

void vj_decoder_submit(vj_decoder *d, struct llama_context *ctx, struct llama_batch batch) {
	pthread_mutex_lock(&d->mu);
	d->ctx = ctx;
	d->batch = batch;
	d->pending = 1;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

int32_t vj_decoder_wait(vj_decoder *d, int64_t *cpu_ns) {
	pthread_mutex_lock(&d->mu);
	while (d->pending) pthread_cond_wait(&d->cv, &d->mu);
	int32_t rc = d->rc;
	*cpu_ns = d->cpu_ns;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void vj_decoder_free(vj_decoder *d) {
	pthread_mutex_lock(&d->mu);
	d->quit = 1;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->th, NULL);
	close(d->efd);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}
