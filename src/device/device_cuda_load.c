/*
 * device_cuda_load.c — the CUDA row of a build with CUDA, as the program and
 * libhpt see it: a row that finds the real one (src/cuda/device_cuda.cu's
 * hpt_device_cuda_impl) in a plugin, libhpt_cuda.so, opened the first time
 * the row is asked whether it can be used (`--device cuda`), and hands it
 * back (its `row`): an instance of "cuda" is the plugin's row opened.
 *
 * Why a plugin: the CUDA row calls cuBLAS, and a program linked against
 * cuBLAS/cuBLASLt loads them at start-up: 225 MB of resident memory
 * (`hpt --version`'s peak RSS; 8 MB without them: their relocations) for every hpt process, GPU or not, on any
 * machine where nvcc built hpt (CI's among them). Opened on demand, a CPU
 * run never pays it.
 *
 * Where the plugin is looked for (base's hpt_plugin_open, as for MPI's), in
 * order: $HPT_CUDA_PLUGIN (a file); the
 * directory of the binary or library holding this code (python/hpt/ and a
 * variant build's own directory keep a copy there); the build directory
 * this file was compiled for (HPT_CUDA_PLUGIN_DIR, the Makefile's $(BUILD):
 * ./hpt at the repository root). The plugin resolves hpt's own functions
 * (hpt_fail, ...) in the process: the program is linked -rdynamic, and a
 * libhpt.so opened locally (Python's ctypes) is promoted to global scope
 * first.
 */
#include "device.h"   /* dladdr, RTLD_NOLOAD: the build's -D_GNU_SOURCE */
#include "../base/plugin.h"

#include <dlfcn.h>
#include <stdio.h>

#ifndef HPT_CUDA_PLUGIN_DIR
#define HPT_CUDA_PLUGIN_DIR "build"
#endif

static const hpt_device *impl;   /* the plugin's row, once opened */
static char why[1024];
static int tried;

/* NULL once the plugin is open, else why it is not */
static const char *open_plugin(void) {
    if (tried) return impl ? NULL : why;
    tried = 1;
    /* our own symbols, for the plugin to resolve (a no-op for a program
     * linked -rdynamic; a ctypes-loaded libhpt.so is RTLD_LOCAL) */
    Dl_info self = {0};
    if (dladdr((void *)open_plugin, &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    char w[960];
    impl = hpt_plugin_open("libhpt_cuda.so", "HPT_CUDA_PLUGIN", HPT_CUDA_PLUGIN_DIR, "hpt_device_cuda_impl",
                           RTLD_NOW | RTLD_LOCAL, w, sizeof w);
    if (!impl) snprintf(why, sizeof why, "the CUDA backend: %s", w);
    return impl ? NULL : why;
}

static const char *load_unavailable(void) {
    const char *w = open_plugin();
    return w ? w : impl->unavailable();
}

/* The plugin's row itself: an instance of "cuda" is a copy of it, opened by
 * its own open (hpt_device_open asks only after load_unavailable said yes). */
static const hpt_device *plugin_row(void) { return impl; }

const hpt_device hpt_device_cuda = {
    .name = "cuda",
    .summary = "an NVIDIA GPU (CUDA, cuBLAS): device 0",
    .unavailable = load_unavailable,
    .row = plugin_row,
};
