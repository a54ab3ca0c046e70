/*
 * device_cuda_load.c — the CUDA row of a build with CUDA, as the program and
 * libhpt see it: a row whose operations forward to the real one
 * (src/cuda/device_cuda.cu's hpt_device_cuda_impl) in a plugin,
 * libhpt_cuda.so, opened the first time the row is asked whether it can be
 * used (`--device cuda`).
 *
 * Why a plugin: the CUDA row calls cuBLAS, and a program linked against
 * cuBLAS/cuBLASLt loads them at start-up: 0.2 s and 225 MB of resident
 * memory (their relocations) for every hpt process, GPU or not, on any
 * machine where nvcc built hpt (CI's among them). Opened on demand, a CPU
 * run never pays it.
 *
 * Where the plugin is looked for, in order: $HPT_CUDA_PLUGIN (a file); the
 * directory of the binary or library holding this code (python/hpt/ and a
 * variant build's own directory keep a copy there); the build directory
 * this file was compiled for (HPT_CUDA_PLUGIN_DIR, the Makefile's $(BUILD):
 * ./hpt at the repository root). The plugin resolves hpt's own functions
 * (hpt_fail, ...) in the process: the program is linked -rdynamic, and a
 * libhpt.so opened locally (Python's ctypes) is promoted to global scope
 * first.
 */
#include "device.h"   /* dladdr, RTLD_NOLOAD: the build's -D_GNU_SOURCE */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HPT_CUDA_PLUGIN_DIR
#define HPT_CUDA_PLUGIN_DIR "build"
#endif

static const hpt_device *impl;   /* the plugin's row, once opened */
static char why[1024];
static int tried;

static int try_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "the CUDA backend's plugin cannot be loaded (%s)", dlerror());
        return 0;
    }
    impl = dlsym(h, "hpt_device_cuda_impl");
    if (!impl) snprintf(why, sizeof why, "'%.900s' has no CUDA row (hpt_device_cuda_impl)", path);
    return impl != NULL;
}

/* NULL once the plugin is open, else why it is not */
static const char *open_plugin(void) {
    if (tried) return impl ? NULL : why;
    tried = 1;
    Dl_info self = {0};
    char path[4096];
    if (dladdr((void *)open_plugin, &self) && self.dli_fname) {
        /* our own symbols, for the plugin to resolve (a no-op for a program
         * linked -rdynamic; a ctypes-loaded libhpt.so is RTLD_LOCAL) */
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    }
    const char *env = getenv("HPT_CUDA_PLUGIN");
    if (env && *env) return try_open(env) ? NULL : why;
    if (self.dli_fname) {
        snprintf(path, sizeof path, "%s", self.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash) {
            snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libhpt_cuda.so");
            FILE *f = fopen(path, "rb");
            if (f) { fclose(f); return try_open(path) ? NULL : why; }
        }
    }
    snprintf(path, sizeof path, "%s/libhpt_cuda.so", HPT_CUDA_PLUGIN_DIR);
    return try_open(path) ? NULL : why;
}

static const char *load_unavailable(void) {
    const char *w = open_plugin();
    return w ? w : impl->unavailable();
}

/* Every operation: the plugin's. They are reached only after
 * load_unavailable said yes (hpt_device_get asks first). */
#define FWD(name, params, args) static void l_##name params { impl->name args; }
#define FWD_RET(type, name, params, args) static type l_##name params { return impl->name args; }
#define FWD_NN(name, params, args) static void n_##name params { impl->nn->name args; }

FWD_RET(float *, alloc, (size_t n), (n))
FWD(free, (float *p), (p))
FWD(upload, (float *dst, const float *host, size_t n), (dst, host, n))
FWD(download, (float *host, const float *src, size_t n), (host, src, n))
FWD(copy, (float *dst, const float *src, size_t n), (dst, src, n))
FWD(fill, (float *x, float v, size_t n), (x, v, n))
FWD(swap, (float *a, float *b, size_t n), (a, b, n))
FWD(scale, (float *x, float s, size_t n), (x, s, n))
FWD(axpy, (float *y, float a, const float *x, size_t n), (y, a, x, n))
FWD(lerp, (float *e, float a, float b, const float *x, size_t n), (e, a, b, x, n))
FWD_RET(double, sumsq, (const float *x, size_t n), (x, n))
FWD_RET(double, dot, (const float *a, const float *b, size_t n), (a, b, n))
FWD(adamw, (float *p, const float *g, float *m, float *v, size_t n, const hpt_dev_adamw *a), (p, g, m, v, n, a))
FWD(sf_adamw, (float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a),
    (y, g, z, x, v, n, a))
FWD(outer_step, (float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b),
    (theta, anchor, u, d, n, mu, a, b))
FWD(sf_outer_step, (float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b),
    (x, z, y, anchor, u, n, mu, a, b))
FWD(mem_info, (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes))
FWD_RET(hpt_status, set_precision, (const char *name), (name))
FWD_RET(hpt_status, sync, (void), ())

static size_t n_scratch_floats(int B, int T, int C, int NH, int V, int Vp) {
    return impl->nn->scratch_floats(B, T, C, NH, V, Vp);
}
FWD_NN(upload_ints, (int *dst, const int *host, size_t n), (dst, host, n))
FWD_NN(encoder_forward, (float *out, const int *tok, const float *wte, const float *wpe, int B, int T, int C),
       (out, tok, wte, wpe, B, T, C))
FWD_NN(encoder_backward, (float *dwte, float *dwpe, const float *dout, const int *tok, int B, int T, int C, int V,
                          float *scratch),
       (dwte, dwpe, dout, tok, B, T, C, V, scratch))
FWD_NN(layernorm_forward, (float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                           int N, int C),
       (out, mean, rstd, inp, w, b, N, C))
FWD_NN(layernorm_backward, (float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C, int first, float *scratch),
       (dinp, dw, db, dout, inp, w, mean, rstd, N, C, first, scratch))
FWD_NN(matmul_forward, (float *out, const float *inp, const float *w, const float *b, int N, int C, int OC),
       (out, inp, w, b, N, C, OC))
FWD_NN(matmul_backward_dinp, (float *dinp, const float *dout, const float *w, int N, int C, int OC, float *wide),
       (dinp, dout, w, N, C, OC, wide))
FWD_NN(matmul_backward_dweight, (float *dw, float *db, const float *dout, const float *inp, int N, int C, int OC,
                                 int first, float *scratch),
       (dw, db, dout, inp, N, C, OC, first, scratch))
FWD_NN(attention_forward, (float *out, float *att, const float *qkv, int B, int T, int C, int NH),
       (out, att, qkv, B, T, C, NH))
FWD_NN(attention_backward, (float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                            int NH, float *scratch),
       (dqkv, dout, qkv, att, B, T, C, NH, scratch))
FWD_NN(gelu_forward, (float *out, const float *inp, size_t n), (out, inp, n))
FWD_NN(gelu_backward, (float *dinp, const float *inp, const float *dout, size_t n), (dinp, inp, dout, n))
FWD_NN(residual_forward, (float *out, const float *a, const float *b, size_t n), (out, a, b, n))
FWD_NN(xent_forward, (float *losses, float *logits, const int *targets, int N, int V, int Vp),
       (losses, logits, targets, N, V, Vp))
FWD_NN(xent_backward, (float *probs, const int *targets, float dloss, int N, int V, int Vp),
       (probs, targets, dloss, N, V, Vp))

static const hpt_dev_nn load_nn = {
    .scratch_floats = n_scratch_floats,
    .upload_ints = n_upload_ints,
    .encoder_forward = n_encoder_forward,
    .encoder_backward = n_encoder_backward,
    .layernorm_forward = n_layernorm_forward,
    .layernorm_backward = n_layernorm_backward,
    .matmul_forward = n_matmul_forward,
    .matmul_backward_dinp = n_matmul_backward_dinp,
    .matmul_backward_dweight = n_matmul_backward_dweight,
    .attention_forward = n_attention_forward,
    .attention_backward = n_attention_backward,
    .gelu_forward = n_gelu_forward,
    .gelu_backward = n_gelu_backward,
    .residual_forward = n_residual_forward,
    .xent_forward = n_xent_forward,
    .xent_backward = n_xent_backward,
};

const hpt_device hpt_device_cuda = {
    .name = "cuda",
    .summary = "an NVIDIA GPU (CUDA, cuBLAS): device 0",
    .unavailable = load_unavailable,
    .host_memory = 0,
    .alloc = l_alloc,
    .free = l_free,
    .upload = l_upload,
    .download = l_download,
    .copy = l_copy,
    .fill = l_fill,
    .swap = l_swap,
    .scale = l_scale,
    .axpy = l_axpy,
    .lerp = l_lerp,
    .sumsq = l_sumsq,
    .dot = l_dot,
    .adamw = l_adamw,
    .sf_adamw = l_sf_adamw,
    .outer_step = l_outer_step,
    .sf_outer_step = l_sf_outer_step,
    .nn = &load_nn,
    .mem_info = l_mem_info,
    .set_precision = l_set_precision,
    .sync = l_sync,
};
