/*
 * matmul.c — linear layers. The fast path is three cblas_sgemm calls (NT for
 * forward, NN for dinp, TN for dweight); the *_ref twins are naive loops kept
 * as the test oracle and for builds without BLAS (make BLAS=0).
 */
#include "kernels.h"

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

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    float beta = 0.0f;
    if (bias) {
        /* Seed every row with the bias and let sgemm accumulate onto it:
         * one pass over out instead of two. */
        #pragma omp parallel for
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C,
                1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC,
                    1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N,
                1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) bias_backward(dbias, dout, N, OC);
}

#endif
