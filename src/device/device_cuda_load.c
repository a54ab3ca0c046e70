/*
 * device_cuda_load.c — the CUDA row of a build with CUDA, as the program and
 * libhpt see it: a row whose operations forward to the real one
 * (src/cuda/device_cuda.cu's hpt_device_cuda_impl) in a plugin,
 * libhpt_cuda.so, opened the first time the row is asked whether it can be
 * used (`--device cuda`).
 *
 * Why a plugin: the CUDA row calls cuBLAS, and a program linked against
 * cuBLAS/cuBLASLt loads them at start-up: 225 MB of resident memory
 * (`hpt --version`'s peak RSS; 8 MB without them: their relocations) for every hpt process, GPU or not, on any
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

/* Every operation: the plugin's (the lists of device.h, and the row's own
 * five). They are reached only after load_unavailable said yes
 * (hpt_device_get asks first). */
#define FWD_V(name, params, args) static void l_##name params { impl->name args; }
#define FWD_R(type, name, params, args) static type l_##name params { return impl->name args; }
#define FWD_NN_V(name, params, args) static void n_##name params { impl->nn->name args; }
#define FWD_NN_R(type, name, params, args) static type n_##name params { return impl->nn->name args; }
HPT_DEV_DATA_OPS(FWD_V, FWD_R)
HPT_DEV_NN_OPS(FWD_NN_V, FWD_NN_R)
FWD_R(float *, alloc, (size_t n), (n))
FWD_V(free, (float *p), (p))
FWD_V(mem_info, (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes))
FWD_R(hpt_status, set_precision, (const char *name), (name))
FWD_R(hpt_status, sync, (void), ())

#define NN_FIELD_V(name, params, args) .name = n_##name,
#define NN_FIELD_R(type, name, params, args) .name = n_##name,
static const hpt_dev_nn load_nn = {HPT_DEV_NN_OPS(NN_FIELD_V, NN_FIELD_R)};

#define FIELD_V(name, params, args) .name = l_##name,
#define FIELD_R(type, name, params, args) .name = l_##name,
const hpt_device hpt_device_cuda = {
    .name = "cuda",
    .summary = "an NVIDIA GPU (CUDA, cuBLAS): device 0",
    .unavailable = load_unavailable,
    .host_memory = 0,
    .alloc = l_alloc,
    .free = l_free,
    HPT_DEV_DATA_OPS(FIELD_V, FIELD_R)
    .nn = &load_nn,
    .mem_info = l_mem_info,
    .set_precision = l_set_precision,
    .sync = l_sync,
};
