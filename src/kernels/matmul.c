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
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_num_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
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

void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    /* Two loops so each thread owns its outputs: rows of dinp, then rows of dweight. */
    if (dinp) {
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

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    matmul_backward_ref(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

#else

/* Each thread runs a single-threaded sgemm on its own block of output rows
 * (OpenBLAS' OpenMP build goes single-threaded inside a parallel region).
 * At hpt's small shapes this beats OpenBLAS' own threading, whose workers
 * synchronise by spinning on sched_yield, and one fork/join per GEMM is the
 * only synchronisation. Output rows are owned, so the result is the same
 * whatever the timing. Measured on 2 busy cores at the nanoGPT config: OpenBLAS'
 * threading took 64-512 ms/step, this split 60-74 ms/step. */
/* C (M,N) = beta C + op(A) op(B), split by blocks of 16 rows. If bias is
 * given, every row of C is first set to it (and beta must be 1), inside the
 * same parallel region: one pass and one fork/join. */
static void sgemm_rows(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                       const float *A, int lda, const float *B, int ldb, float beta, float *Cm, int ldc,
                       const float *bias) {
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        /* blocks of 16 rows keep the microkernel on its full-width path */
        int blocks = (M + 15) / 16;
        int m0 = blocks * id / nt * 16, m1 = blocks * (id + 1) / nt * 16;
        if (m1 > M) m1 = M;
        if (m1 > m0) {
            if (bias)
                for (int m = m0; m < m1; m++) memcpy(Cm + (size_t)m * ldc, bias, (size_t)N * sizeof(float));
            /* row offset into A: row-major, so a step of lda per row, or of
             * one element per row when A is transposed (stored K x M) */
            const float *Ap = ta == CblasNoTrans ? A + (size_t)m0 * lda : A + m0;
            cblas_sgemm(CblasRowMajor, ta, tb, m1 - m0, N, K, 1.0f, Ap, lda, B, ldb, beta,
                        Cm + (size_t)m0 * ldc, ldc);
        }
    }
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    /* with a bias, rows are seeded with it and sgemm accumulates onto them */
    sgemm_rows(CblasNoTrans, CblasTrans, N, OC, C, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC, bias);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) sgemm_rows(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C, NULL);
    sgemm_rows(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C, NULL);
    if (dbias) bias_backward(dbias, dout, N, OC);
}

#endif
