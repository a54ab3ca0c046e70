/*
 * matmul.c — linear layers. The fast path is three cblas_sgemm calls (NT for
 * forward, NN for dinp, TN for dweight); the *_ref twins are naive loops kept
 * as the test oracle and for builds without BLAS (make BLAS=0).
 */
#include "kernels.h"

#include <stdlib.h>
#include <string.h>
#ifndef HPT_NO_BLAS
#include <cblas.h>
#endif

void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const float *w = weight + (size_t)o * C;
            float s = bias ? bias[o] : 0.0f;
            for (int c = 0; c < C; c++) s += x[c] * w[c];
            out[(size_t)n * OC + o] = s;
        }
    }
}

/* Two loops so each thread owns its outputs: rows of dinp, then rows of dweight. */
static void matmul_backward_dinp_ref(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * OC;
        float *dx = dinp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const float *w = weight + (size_t)o * C;
            for (int c = 0; c < C; c++) dx[c] += d[o] * w[c];
        }
    }
}

static void matmul_backward_dweight_ref(float *dweight, float *dbias, const float *dout, const float *inp,
                                        int N, int C, int OC) {
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        float *dw = dweight + (size_t)o * C;
        float db = 0.0f;
        for (int n = 0; n < N; n++) {
            float d = dout[(size_t)n * OC + o];
            const float *x = inp + (size_t)n * C;
            db += d;
            for (int c = 0; c < C; c++) dw[c] += d * x[c];
        }
        if (dbias) dbias[o] += db;
    }
}

void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) matmul_backward_dinp_ref(dinp, dout, weight, N, C, OC);
    matmul_backward_dweight_ref(dweight, dbias, dout, inp, N, C, OC);
}

/* dbias (OC) += column sums of dout (N,OC). Threads own column blocks and
 * walk rows inside, so the inner loop stays contiguous. */
static void bias_backward(float *dbias, const float *dout, int N, int OC) {
    enum { BLK = 64 };
    int nblk = (OC + BLK - 1) / BLK;
    #pragma omp parallel for
    for (int b = 0; b < nblk; b++) {
        int o0 = b * BLK, o1 = o0 + BLK < OC ? o0 + BLK : OC;
        float acc[BLK];
        for (int o = o0; o < o1; o++) acc[o - o0] = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            #pragma omp simd
            for (int o = o0; o < o1; o++) acc[o - o0] += d[o];
        }
        for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
}

#ifdef HPT_NO_BLAS

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    matmul_forward_ref(out, inp, weight, bias, N, C, OC);
}

void matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    matmul_backward_dinp_ref(dinp, dout, weight, N, C, OC);
}

void matmul_backward_dweight(float *dweight, float *dbias, const float *dout, const float *inp,
                             int N, int C, int OC) {
    matmul_backward_dweight_ref(dweight, dbias, dout, inp, N, C, OC);
}

#else

/* Each thread runs a single-threaded sgemm on its own block of output rows
 * (OpenBLAS' OpenMP build goes single-threaded inside a parallel region).
 * At hpt's small shapes this beats OpenBLAS' own threading, whose workers
 * synchronise by spinning on sched_yield, and one fork/join per GEMM is the
 * only synchronisation. Output rows are owned, so the result is the same
 * whatever the timing. Measured on 2 busy cores at the nanoGPT config: OpenBLAS'
 * threading took 64-512 ms/step, this split 60-74 ms/step. */
/* C (M,N) = beta C + op(A) op(B), split into blocks of rows. If bias is
 * given, every row of C is first set to it (and beta must be 1), inside the
 * same parallel region: one pass and one fork/join. */
static void sgemm_rows(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                       const float *A, int lda, const float *B, int ldb, float beta, float *Cm, int ldc,
                       const float *bias) {
    /* Row blocks depend on M alone, never on the thread count: OpenBLAS may
     * return different bits for a row when rows are split into calls
     * differently (tests/test_kernels.c caught it with the Haswell and
     * SkylakeX kernels). About 4 blocks, each a multiple of 16 rows so the
     * microkernel stays on its full-width path. */
    const int rows = ((M + 3) / 4 + 15) / 16 * 16, nblk = (M + rows - 1) / rows;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < nblk; b++) {
        int m0 = b * rows, m1 = m0 + rows < M ? m0 + rows : M;
        if (bias)
            for (int m = m0; m < m1; m++) memcpy(Cm + (size_t)m * ldc, bias, (size_t)N * sizeof(float));
        /* row offset into A: row-major, so a step of lda per row, or of one
         * element per row when A is transposed (stored K x M) */
        const float *Ap = ta == CblasNoTrans ? A + (size_t)m0 * lda : A + m0;
        cblas_sgemm(CblasRowMajor, ta, tb, m1 - m0, N, K, 1.0f, Ap, lda, B, ldb, beta,
                    Cm + (size_t)m0 * ldc, ldc);
    }
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    /* with a bias, rows are seeded with it and sgemm accumulates onto them */
    sgemm_rows(CblasNoTrans, CblasTrans, N, OC, C, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC, bias);
}

void matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    sgemm_rows(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C, NULL);
}

void matmul_backward_dweight(float *dweight, float *dbias, const float *dout, const float *inp,
                             int N, int C, int OC) {
    sgemm_rows(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C, NULL);
    if (dbias) bias_backward(dbias, dout, N, OC);
}

#endif

/* Both builds: the dinp half, then the dweight half (the order the BLAS
 * build always had). */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) matmul_backward_dinp(dinp, dout, weight, N, C, OC);
    matmul_backward_dweight(dweight, dbias, dout, inp, N, C, OC);
}
