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

/* dbias (OC) += column sums of dout (N,OC); first: dbias = 0 + the sums
 * (the same bits as zeroing it first). Threads own column blocks and walk
 * rows inside, so the inner loop stays contiguous. */
static void bias_backward(float *dbias, const float *dout, int N, int OC, int first) {
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
        for (int o = o0; o < o1; o++) dbias[o] = (first ? 0.0f : dbias[o]) + acc[o - o0];
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

void matmul_backward_dinp_first(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    memset(dinp, 0, (size_t)N * C * sizeof(float));
    matmul_backward_dinp_ref(dinp, dout, weight, N, C, OC);
}

void matmul_backward_dinp_first_kblocks(float *dinp, const float *dout, const float *weight, int N, int C, int OC,
                                        float *scratch) {
    (void)scratch;
    matmul_backward_dinp_first(dinp, dout, weight, N, C, OC);
}

void matmul_backward_dweight_first(float *dweight, float *dbias, const float *dout, const float *inp,
                                   int N, int C, int OC) {
    memset(dweight, 0, (size_t)OC * C * sizeof(float));
    if (dbias) memset(dbias, 0, (size_t)OC * sizeof(float));
    matmul_backward_dweight_ref(dweight, dbias, dout, inp, N, C, OC);
}

#else

/* Each thread runs a single-threaded sgemm on its own block of output rows
 * or columns (OpenBLAS' OpenMP build goes single-threaded inside a parallel region).
 * At hpt's small shapes this beats OpenBLAS' own threading, whose workers
 * synchronise by spinning on sched_yield, and one fork/join per GEMM is the
 * only synchronisation. Output rows are owned, so the result is the same
 * whatever the timing (rows or columns: an output element is owned either way). Measured on 2 busy cores at the nanoGPT config: OpenBLAS'
 * threading took 64-512 ms/step, this split 60-74 ms/step. */
/* About 4 blocks of a dimension of n, each a multiple of 16 so the
 * microkernel stays on its full-width path. */
static int block_of(int n) { return ((n + 3) / 4 + 15) / 16 * 16; }

/* C (M,N) = beta C + op(A) op(B), split into blocks of rows or of columns.
 * If bias is given, every row of C is first set to it (and beta must be 1),
 * inside the same parallel region: one pass and one fork/join.
 *
 * Blocks depend on the shape alone, never on the thread count: OpenBLAS may
 * return different bits for an element when the matrix is split into calls
 * differently (tests/test_kernels.c caught it with the Haswell and SkylakeX
 * kernels for rows). Each call packs all of the operand it does not split:
 * row blocks pack all of B once per block, column blocks all of A. The split
 * that packs less is taken where B is large (below): at GPT-2 124M shapes
 * the LM head's forward and dx GEMMs (256 rows against the 50304 x 768 tied
 * embedding, 154 MB) split columns, so that each thread packs its slice of
 * the weight once instead of every row block packing all of it. */
static void sgemm_split(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                        const float *A, int lda, const float *B, int ldb, float beta, float *Cm, int ldc,
                        const float *bias) {
    const int rows = block_of(M), nrow = (M + rows - 1) / rows;
    const int cols = block_of(N), ncol = (N + cols - 1) / cols;
    /* floats packed beyond one pass over A and B; columns only where B is
     * 2 MiB or more, past a core's L2, where repacking it goes to L3 or
     * memory: smaller models keep the row split and its bits. At 124M the
     * attention projection (a 768 x 768 weight, forward and dinp) and the
     * MLP projection's dweight (a 256 x 3072 input) split columns since
     * this threshold went from 4 to 2 MiB */
    const double extra_rows = (double)(nrow - 1) * N * K, extra_cols = (double)(ncol - 1) * M * K;
    if (extra_cols < extra_rows && (double)N * K >= (double)(1 << 19)) {
        #pragma omp parallel for schedule(static)
        for (int b = 0; b < ncol; b++) {
            int n0 = b * cols, n1 = n0 + cols < N ? n0 + cols : N;
            if (bias)
                for (int m = 0; m < M; m++)
                    memcpy(Cm + (size_t)m * ldc + n0, bias + n0, (size_t)(n1 - n0) * sizeof(float));
            /* column offset into B: B is K x N row-major (a step of one
             * element per column), or N x K when transposed (ldb per column) */
            const float *Bp = tb == CblasNoTrans ? B + n0 : B + (size_t)n0 * ldb;
            cblas_sgemm(CblasRowMajor, ta, tb, M, n1 - n0, K, 1.0f, A, lda, Bp, ldb, beta, Cm + n0, ldc);
        }
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < nrow; b++) {
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
    sgemm_split(CblasNoTrans, CblasTrans, N, OC, C, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC, bias);
}

/* The _first twins pass beta = 0: OpenBLAS then zeroes its block of C
 * itself and accumulates onto it, the same sums as onto a zeroed C, without
 * a separate sweep over the whole gradient. */
void matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    sgemm_split(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C, NULL);
}

void matmul_backward_dinp_first(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    sgemm_split(CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, weight, C, 0.0f, dinp, C, NULL);
}

void matmul_backward_dweight(float *dweight, float *dbias, const float *dout, const float *inp,
                             int N, int C, int OC) {
    sgemm_split(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C, NULL);
    if (dbias) bias_backward(dbias, dout, N, OC, 0);
}

/* Where the inner dimension OC is so long that row and column blocks would
 * both repack a large operand many times over (16x the partial sums' size):
 * the LM head's dinp at 124M, 256 x 768 from 50257-long rows, whose column
 * blocks each packed all 51 MB of dlogits. */
static int kblocks_pay(int N, int C, int OC) {
    const int rows = block_of(N), nrow = (N + rows - 1) / rows, cols = block_of(C), ncol = (C + cols - 1) / cols;
    const int kb = block_of(OC), nk = (OC + kb - 1) / kb;
    const double extra_rows = (double)(nrow - 1) * C * OC, extra_cols = (double)(ncol - 1) * N * OC;
    const double partial = (double)(nk - 1) * N * C;
    return nk > 1 && extra_rows >= 16.0 * partial && extra_cols >= 16.0 * partial;
}

void matmul_backward_dinp_first_kblocks(float *dinp, const float *dout, const float *weight, int N, int C, int OC,
                                        float *scratch) {
    if (!kblocks_pay(N, C, OC)) {
        matmul_backward_dinp_first(dinp, dout, weight, N, C, OC);
        return;
    }
    const int kb = block_of(OC), nk = (OC + kb - 1) / kb;
    const size_t NC = (size_t)N * C;
    /* block b's product into dinp (b = 0) or scratch; each packs its own
     * slices of dout and weight once */
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < nk; b++) {
        const int k0 = b * kb, k1 = k0 + kb < OC ? k0 + kb : OC;
        float *Cb = b == 0 ? dinp : scratch + (size_t)(b - 1) * NC;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, k1 - k0, 1.0f, dout + k0, OC,
                    weight + (size_t)k0 * C, C, 0.0f, Cb, C);
    }
    /* the blocks added in order, (P0 + P1) + P2 ...: the same bits for any thread count */
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < NC; i++) {
        float acc = dinp[i];
        for (int b = 1; b < nk; b++) acc += scratch[(size_t)(b - 1) * NC + i];
        dinp[i] = acc;
    }
}

void matmul_backward_dweight_first(float *dweight, float *dbias, const float *dout, const float *inp,
                                   int N, int C, int OC) {
    sgemm_split(CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, 0.0f, dweight, C, NULL);
    if (dbias) bias_backward(dbias, dout, N, OC, 1);
}

#endif

/* Both builds: the dinp half, then the dweight half (the order the BLAS
 * build always had). */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) matmul_backward_dinp(dinp, dout, weight, N, C, OC);
    matmul_backward_dweight(dweight, dbias, dout, inp, N, C, OC);
}
