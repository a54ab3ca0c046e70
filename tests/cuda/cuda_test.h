/*
 * cuda_test.h — what the kernel tests in tests/cuda share: their includes,
 * the one rng that draws every input (seeded by each test's main), and the
 * host and device buffers, where a failed allocation or CUDA call ends the
 * program (every later comparison would be noise). Each test is its own
 * program: the definitions are static, one copy each.
 */
#ifndef HPT_TESTS_CUDA_TEST_H
#define HPT_TESTS_CUDA_TEST_H

#include "../../src/base/base.h"
#include "../../src/cuda/kernels_cuda.h"
#include "../../src/kernels/kernels.h"
#include "../test.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hpt_rng g_rng;

static inline void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "out of host memory (%zu bytes)\n", bytes); exit(2); }
    return p;
}

/* n floats, normal(0, std) */
static inline float *hrand(size_t n, float std) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = std * hpt_rng_normal(&g_rng);
    return p;
}

static inline float *hcopy(const float *src, size_t n) {
    float *p = xmalloc(n * sizeof(float));
    memcpy(p, src, n * sizeof(float));
    return p;
}

static inline void cuda_or_die(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static inline void *dmalloc(size_t bytes) {
    void *p = NULL;
    cuda_or_die(cudaMalloc(&p, bytes ? bytes : 4), "cudaMalloc");
    return p;
}

#endif
