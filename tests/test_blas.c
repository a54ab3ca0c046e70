/*
 * test_blas.c — the OpenBLAS kernels a C program linking libhpt runs
 * (hpt_blas_core, hpt_blas_origin): never OpenBLAS's generic "Prescott"
 * fallback on a CPU that runs better ones unless the user asked for it, and
 * GEMMs through them that agree with a double-precision product.
 * tests/cli_blas.sh runs it beside the CLI and Python, on this CPU and on a
 * simulated one OpenBLAS does not know, and compares the kernels and the bits
 * (its line "blas core=... origin=... crc=...").
 */
/* tier: fast */
#include "hpt.h"
#include "test.h"
#include "../src/kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* sizes past OpenBLAS's small-matrix path, odd to catch edge kernels */
enum { N = 67, C = 300, OC = 131 };

static int cpu_runs_better_kernels(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int main(void) {
    const char *core = hpt_blas_core(), *origin = hpt_blas_origin();
    int users = strncmp(origin, "user", 4) == 0;
    CHECK(users || !cpu_runs_better_kernels() || strcmp(core, "Prescott") != 0,
          "OpenBLAS runs its generic kernels (origin %s) on a CPU with AVX2 and FMA", origin);

    float *inp = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C);
    float *b = malloc(sizeof(float) * OC), *out = malloc(sizeof(float) * N * OC);
    uint32_t s = 12345;
    for (int i = 0; i < N * C; i++) inp[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < OC * C; i++) w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < OC; i++) b[i] = (float)i / OC;
    matmul_forward(out, inp, w, b, N, C, OC);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double ref = b[o];
            for (int c = 0; c < C; c++) ref += (double)inp[n * C + c] * w[o * C + c];
            double d = fabs(ref - out[n * OC + o]);
            if (d > worst) worst = d;
        }
    CHECK(worst < 1e-4, "matmul through %s kernels: worst |diff| %g from the double product", core, worst);
    printf("blas core=%s origin=%s crc=%08x\n", core, origin, hpt_crc32(0, out, sizeof(float) * N * OC));
    free(inp); free(w); free(b); free(out);
    return TEST_REPORT("test_blas");
}
