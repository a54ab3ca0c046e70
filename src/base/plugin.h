/*
 * plugin.h — opening one of hpt's plugins: a shared library built beside
 * libhpt that carries a dependency the core must not (MPI's libmpi,
 * src/base/comm.c; the CUDA row's cuBLAS, src/device/device_cuda_load.c),
 * opened only when a run asks for it, so a program linking libhpt never
 * loads it.
 */
#ifndef HPT_PLUGIN_H
#define HPT_PLUGIN_H

#include <stddef.h>

/* The address of the symbol `sym` in the plugin `file` (a bare name such as
 * "libhpt_mpi.so"), opened with dlopen's `dl_flags`, or NULL with the reason
 * in why[why_size]. Looked for, in order: the file the environment variable
 * `env` names (when set and not empty, it alone); `file` in the directory of
 * the binary or library holding this code (python/hpt/ and a variant
 * build's own directory keep their copies there); `file` in `build_dir`
 * (the Makefile's build directory: ./hpt at the repository root). */
void *hpt_plugin_open(const char *file, const char *env, const char *build_dir, const char *sym, int dl_flags,
                      char *why, size_t why_size);

#endif /* HPT_PLUGIN_H */
