/*
 * conv.c — 2-D convolution (stride 1, zero padding, NCHW) and 2x2 max
 * pooling, for the image classifiers.
 *
 * Convolution goes through im2col + sgemm, per image:
 *   cols_b (C*K*K, OH*OW): row (c*K + ki)*K + kj, column oh*OW + ow holds
 *                          inp[b, c, oh - P + ki, ow - P + kj] (0 outside);
 *   out_b (OC, OH*OW)    = weight (OC, C*K*K) . cols_b + bias.
 * cols is kept for the whole batch (B, C*K*K, OH*OW), so backward needs
 * neither the input nor a second im2col:
 *   dweight += sum_b dout_b . cols_b^T,  dbias += sum_{b,hw} dout_b,
 *   dcols_b  = weight^T . dout_b,        dinp_b += col2im(dcols_b).
 *
 * Threading, and why the result does not depend on the thread count:
 *   - forward and dinp: threads own whole images; each image is one
 *     single-threaded sgemm call (OpenBLAS' OpenMP build runs single-threaded
 *     inside a parallel region, as in matmul.c) with the same arguments
 *     whichever thread runs it;
 *   - dweight: threads own blocks of 16 output channels; each block is the
 *     same sequence of sgemm calls (images in order, accumulating) whatever
 *     the thread count;
 *   - dbias: threads own output channels and sum images in order.
 * No atomics, no cross-thread reductions. A batch smaller than the thread
 * count leaves threads idle in the per-image loops (inference-sized batches
 * are not what this is tuned for).
 *
 * The *_ref twins are direct loops: the test oracle, and the path for builds
 * without BLAS (make BLAS=0).
 */
#include "kernels.h"

#include <math.h>
#include <string.h>
#ifndef HPT_NO_BLAS
#include <cblas.h>
#endif

/* ---------------------------------------------------------------- im2col */

/* cols (C*K*K, OH*OW) from one image inp (C, H, W). */
static void im2col(float *cols, const float *inp, int C, int H, int W, int K, int P, int OH, int OW) {
    const size_t OHW = (size_t)OH * OW;
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < K; ki++)
            for (int kj = 0; kj < K; kj++) {
                float *row = cols + ((size_t)(c * K + ki) * K + kj) * OHW;
                /* valid output columns: 0 <= ow - P + kj < W */
                int ow0 = P - kj > 0 ? P - kj : 0;
                int ow1 = W + P - kj < OW ? W + P - kj : OW;
                if (ow1 < ow0) ow1 = ow0;
                for (int oh = 0; oh < OH; oh++) {
                    float *r = row + (size_t)oh * OW;
                    int ih = oh - P + ki;
                    if (ih < 0 || ih >= H) { memset(r, 0, (size_t)OW * sizeof(float)); continue; }
                    const float *x = inp + ((size_t)c * H + ih) * W;
                    for (int ow = 0; ow < ow0; ow++) r[ow] = 0.0f;
                    for (int ow = ow0; ow < ow1; ow++) r[ow] = x[ow - P + kj];
                    for (int ow = ow1; ow < OW; ow++) r[ow] = 0.0f;
                }
            }
}

/* dinp (C, H, W) += col2im(dcols (C*K*K, OH*OW)); the same walk as im2col. */
static void col2im(float *dinp, const float *dcols, int C, int H, int W, int K, int P, int OH, int OW) {
    const size_t OHW = (size_t)OH * OW;
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < K; ki++)
            for (int kj = 0; kj < K; kj++) {
                const float *row = dcols + ((size_t)(c * K + ki) * K + kj) * OHW;
                int ow0 = P - kj > 0 ? P - kj : 0;
                int ow1 = W + P - kj < OW ? W + P - kj : OW;
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh - P + ki;
                    if (ih < 0 || ih >= H) continue;
                    const float *r = row + (size_t)oh * OW;
                    float *dx = dinp + ((size_t)c * H + ih) * W;
                    for (int ow = ow0; ow < ow1; ow++) dx[ow - P + kj] += r[ow];
                }
            }
}

/* ---------------------------------------------------------------- reference */

/* The kernel taps of output pixel (oh, ow) that land inside the unpadded
 * H x W input: rows [ki0, ki1), columns [kj0, kj1) (input row oh - P + ki). */
typedef struct conv_window { int ki0, ki1, kj0, kj1; } conv_window;

static inline conv_window conv_window_at(int oh, int ow, int P, int K, int H, int W) {
    conv_window w = {P - oh > 0 ? P - oh : 0, H + P - oh < K ? H + P - oh : K,
                     P - ow > 0 ? P - ow : 0, W + P - ow < K ? W + P - ow : K};
    return w;
}

void conv2d_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int o = 0; o < OC; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    const conv_window w = conv_window_at(oh, ow, P, K, H, W);
                    float s = bias ? bias[o] : 0.0f;
                    for (int c = 0; c < C; c++)
                        for (int ki = w.ki0; ki < w.ki1; ki++)
                            for (int kj = w.kj0; kj < w.kj1; kj++)
                                s += weight[((size_t)(o * C + c) * K + ki) * K + kj] *
                                     inp[(((size_t)b * C + c) * H + oh - P + ki) * W + ow - P + kj];
                    out[(((size_t)b * OC + o) * OH + oh) * OW + ow] = s;
                }
}

void conv2d_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight,
                         int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    /* dinp: each (b, c) plane is owned by one thread */
    if (dinp) {
        #pragma omp parallel for collapse(2)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++)
                for (int o = 0; o < OC; o++)
                    for (int oh = 0; oh < OH; oh++)
                        for (int ow = 0; ow < OW; ow++) {
                            const conv_window w = conv_window_at(oh, ow, P, K, H, W);
                            float d = dout[(((size_t)b * OC + o) * OH + oh) * OW + ow];
                            for (int ki = w.ki0; ki < w.ki1; ki++)
                                for (int kj = w.kj0; kj < w.kj1; kj++)
                                    dinp[(((size_t)b * C + c) * H + oh - P + ki) * W + ow - P + kj] +=
                                        d * weight[((size_t)(o * C + c) * K + ki) * K + kj];
                        }
    }
    /* dweight, dbias: each output channel is owned by one thread */
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        for (int b = 0; b < B; b++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    const conv_window w = conv_window_at(oh, ow, P, K, H, W);
                    float d = dout[(((size_t)b * OC + o) * OH + oh) * OW + ow];
                    if (dbias) dbias[o] += d;
                    for (int c = 0; c < C; c++)
                        for (int ki = w.ki0; ki < w.ki1; ki++)
                            for (int kj = w.kj0; kj < w.kj1; kj++)
                                dweight[((size_t)(o * C + c) * K + ki) * K + kj] +=
                                    d * inp[(((size_t)b * C + c) * H + oh - P + ki) * W + ow - P + kj];
                }
    }
}

/* ---------------------------------------------------------------- fast path */

/* dbias (OC) += sum over images and pixels of dout (B, OC, OHW). */
static void conv_bias_backward(float *dbias, const float *dout, int B, int OC, size_t OHW) {
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * OC + o) * OHW;
            float sb = 0.0f;
            #pragma omp simd reduction(+:sb)
            for (size_t i = 0; i < OHW; i++) sb += d[i];
            s += sb;
        }
        dbias[o] += s;
    }
}

#ifdef HPT_NO_BLAS

void conv2d_forward(float *out, float *cols, const float *inp, const float *weight, const float *bias,
                    int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t CKK = (size_t)C * K * K, OHW = (size_t)OH * OW;
    #pragma omp parallel for
    for (int b = 0; b < B; b++)
        im2col(cols + (size_t)b * CKK * OHW, inp + (size_t)b * C * H * W, C, H, W, K, P, OH, OW);
    conv2d_forward_ref(out, inp, weight, bias, B, C, H, W, OC, K, P);
}

void conv2d_backward(float *dinp, float *dweight, float *dbias, float *dcols, const float *dout,
                     const float *cols, const float *weight,
                     int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t CKK = (size_t)C * K * K, OHW = (size_t)OH * OW;
    /* dweight (OC, CKK) += dout_b . cols_b^T, images in order */
    #pragma omp parallel for
    for (int o = 0; o < OC; o++)
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * OC + o) * OHW;
            const float *cb = cols + (size_t)b * CKK * OHW;
            for (size_t r = 0; r < CKK; r++) {
                float s = 0.0f;
                for (size_t i = 0; i < OHW; i++) s += d[i] * cb[r * OHW + i];
                dweight[(size_t)o * CKK + r] += s;
            }
        }
    if (dbias) conv_bias_backward(dbias, dout, B, OC, OHW);
    if (!dinp) return;
    #pragma omp parallel for
    for (int b = 0; b < B; b++) {
        float *dc = dcols + (size_t)b * CKK * OHW;
        const float *d = dout + (size_t)b * OC * OHW;
        for (size_t r = 0; r < CKK; r++)
            for (size_t i = 0; i < OHW; i++) {
                float s = 0.0f;
                for (int o = 0; o < OC; o++) s += weight[(size_t)o * CKK + r] * d[(size_t)o * OHW + i];
                dc[r * OHW + i] = s;
            }
        col2im(dinp + (size_t)b * C * H * W, dc, C, H, W, K, P, OH, OW);
    }
}

#else

void conv2d_forward(float *out, float *cols, const float *inp, const float *weight, const float *bias,
                    int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t CKK = (size_t)C * K * K, OHW = (size_t)OH * OW;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        float *cb = cols + (size_t)b * CKK * OHW;
        float *ob = out + (size_t)b * OC * OHW;
        im2col(cb, inp + (size_t)b * C * H * W, C, H, W, K, P, OH, OW);
        if (bias)
            for (int o = 0; o < OC; o++) {
                float v = bias[o], *r = ob + (size_t)o * OHW;
                for (size_t i = 0; i < OHW; i++) r[i] = v;
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, (int)OHW, (int)CKK, 1.0f,
                    weight, (int)CKK, cb, (int)OHW, bias ? 1.0f : 0.0f, ob, (int)OHW);
    }
}

void conv2d_backward(float *dinp, float *dweight, float *dbias, float *dcols, const float *dout,
                     const float *cols, const float *weight,
                     int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t CKK = (size_t)C * K * K, OHW = (size_t)OH * OW;
    /* dweight: blocks of 16 output channels (the sgemm microkernel's full
     * width), each accumulated image by image with identical calls. */
    const int nblk = (OC + 15) / 16;
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < nblk; k++) {
        int o0 = k * 16, o1 = o0 + 16 < OC ? o0 + 16 : OC;
        for (int b = 0; b < B; b++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, o1 - o0, (int)CKK, (int)OHW, 1.0f,
                        dout + ((size_t)b * OC + o0) * OHW, (int)OHW, cols + (size_t)b * CKK * OHW,
                        (int)OHW, 1.0f, dweight + (size_t)o0 * CKK, (int)CKK);
    }
    if (dbias) conv_bias_backward(dbias, dout, B, OC, OHW);
    if (!dinp) return;
    /* dcols_b = weight^T . dout_b, then scatter into dinp_b. dcols may be
     * cols: every read of cols (above) is finished before this loop. */
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        float *dc = dcols + (size_t)b * CKK * OHW;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)CKK, (int)OHW, OC, 1.0f,
                    weight, (int)CKK, dout + (size_t)b * OC * OHW, (int)OHW, 0.0f, dc, (int)OHW);
        col2im(dinp + (size_t)b * C * H * W, dc, C, H, W, K, P, OH, OW);
    }
}

#endif

/* ---------------------------------------------------------------- pooling */

void maxpool2_forward(float *out, int *idx, const float *inp, int B, int C, int H, int W) {
    const int OH = H / 2, OW = W / 2;
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float *x = inp + ((size_t)b * C + c) * H * W;
            float *o = out + ((size_t)b * C + c) * OH * OW;
            int *ix = idx + ((size_t)b * C + c) * OH * OW;
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    int i0 = 2 * oh * W + 2 * ow;
                    int cand[4] = {i0, i0 + 1, i0 + W, i0 + W + 1};
                    int best = i0;
                    float v = x[i0];
                    /* first maximum wins ties; a NaN wins and stays (like
                     * torch), so divergence is not hidden by the pooling */
                    for (int k = 1; k < 4 && v == v; k++) {
                        float u = x[cand[k]];
                        if (u > v || u != u) { v = u; best = cand[k]; }
                    }
                    o[oh * OW + ow] = v;
                    ix[oh * OW + ow] = best;
                }
        }
}

void maxpool2_backward(float *dinp, const float *dout, const int *idx, int B, int C, int H, int W) {
    const int OH = H / 2, OW = W / 2;
    /* windows do not overlap: every input element gets at most one term */
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float *dx = dinp + ((size_t)b * C + c) * H * W;
            const float *d = dout + ((size_t)b * C + c) * OH * OW;
            const int *ix = idx + ((size_t)b * C + c) * OH * OW;
            for (int i = 0; i < OH * OW; i++) dx[ix[i]] += d[i];
        }
}
