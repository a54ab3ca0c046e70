/*
 * nn.c — elementwise and per-row kernels: embeddings, layernorm, GELU, ReLU,
 * residual adds, softmax cross-entropy, AdamW and reductions.
 *
 * Float reductions inside one row use `omp simd reduction`, which lets the
 * compiler vectorise them without -ffast-math (forbidden here: it folds
 * isnan away and blinds divergence detection). The order is fixed at compile
 * time, so results stay deterministic.
 */
#include "kernels.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- embeddings */

void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
                     int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C;
            const float *wp = wpe + (size_t)t * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) o[c] = we[c] + wp[c];
        }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                      int B, int T, int C) {
    /* Several positions may share a token, so rows of dwte are not owned by
     * one (b,t): split by channel blocks instead, walking every position. */
    enum { BLK = 32 };
    int nblk = (C + BLK - 1) / BLK;
    #pragma omp parallel for
    for (int k = 0; k < nblk; k++) {
        int c0 = k * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *we = dwte + (size_t)inp[b * T + t] * C;
                float *wp = dwpe + (size_t)t * C;
                for (int c = c0; c < c1; c++) { we[c] += d[c]; wp[c] += d[c]; }
            }
    }
}

/* ---------------------------------------------------------------- layernorm */

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    const float eps = 1e-5f;
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float m = 0.0f;
        #pragma omp simd reduction(+:m)   /* vec-check */
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float var = 0.0f;  /* two passes: stable for large means */
        #pragma omp simd reduction(+:var)   /* vec-check */
        for (int c = 0; c < C; c++) { float d = x[c] - m; var += d * d; }
        var /= C;
        float s = 1.0f / sqrtf(var + eps);
        #pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

static void layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, const float *mean, const float *rstd, int N, int C, int first) {
    /* Rows own dinp ... */
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dmean = 0.0f, dnm = 0.0f;
        #pragma omp simd reduction(+:dmean, dnm)   /* vec-check */
        for (int c = 0; c < C; c++) {
            float dn = d[c] * weight[c];
            dmean += dn;
            dnm += dn * (x[c] - m) * s;
        }
        dmean /= C;
        dnm /= C;
        #pragma omp simd
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            dx[c] += (d[c] * weight[c] - dmean - norm * dnm) * s;
        }
    }
    /* ... and channel blocks own dweight/dbias (a second pass, llm.c's split). */
    enum { BLK = 32 };
    int nblk = (C + BLK - 1) / BLK;
    #pragma omp parallel for
    for (int k = 0; k < nblk; k++) {
        int c0 = k * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        float dw[BLK] = {0}, db[BLK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = c0; c < c1; c++) {
                dw[c - c0] += d[c] * (x[c] - m) * s;
                db[c - c0] += d[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dweight[c] = (first ? 0.0f : dweight[c]) + dw[c - c0];
            dbias[c] = (first ? 0.0f : dbias[c]) + db[c - c0];
        }
    }
}

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    layernorm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, 0);
}

void layernorm_backward_first(float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C) {
    layernorm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, 1);
}

/* ---------------------------------------------------------------- activations */

#define GELU_K 0.7978845608028654f  /* sqrt(2/pi) */

/* Elementwise loops run as parallel blocks with a simd inner loop: gcc 12
 * does not vectorise the body of a `parallel for simd` over size_t that
 * calls inlined math, but does vectorise this form. */
#define ELEMENTWISE_BLOCK 4096

static inline float gelu_grad(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float th = hpt_tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

void gelu_forward(float *out, const float *inp, size_t n) {
    long nb = (long)((n + ELEMENTWISE_BLOCK - 1) / ELEMENTWISE_BLOCK);
    #pragma omp parallel for
    for (long b = 0; b < nb; b++) {
        const float *x = inp + (size_t)b * ELEMENTWISE_BLOCK;
        float *o = out + (size_t)b * ELEMENTWISE_BLOCK;
        int m = (int)(n - (size_t)b * ELEMENTWISE_BLOCK < ELEMENTWISE_BLOCK ? n - (size_t)b * ELEMENTWISE_BLOCK : ELEMENTWISE_BLOCK);
        #pragma omp simd
        for (int i = 0; i < m; i++)
            o[i] = 0.5f * x[i] * (1.0f + hpt_tanhf(GELU_K * (x[i] + 0.044715f * x[i] * x[i] * x[i])));   /* vec-check */
    }
}

/* dinp (+)= gelu'(inp) * dout; first: dinp = 0 + ..., the bits of a zeroed dinp */
static void gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n, int first) {
    long nb = (long)((n + ELEMENTWISE_BLOCK - 1) / ELEMENTWISE_BLOCK);
    #pragma omp parallel for
    for (long b = 0; b < nb; b++) {
        size_t off = (size_t)b * ELEMENTWISE_BLOCK;
        const float *x = inp + off, *d = dout + off;
        float *dx = dinp + off;
        int m = (int)(n - off < ELEMENTWISE_BLOCK ? n - off : ELEMENTWISE_BLOCK);
        if (first) {
            #pragma omp simd
            for (int i = 0; i < m; i++) dx[i] = 0.0f + gelu_grad(x[i]) * d[i];   /* vec-check */
        } else {
            #pragma omp simd
            for (int i = 0; i < m; i++) dx[i] += gelu_grad(x[i]) * d[i];   /* vec-check */
        }
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) { gelu_bwd(dinp, inp, dout, n, 0); }

void gelu_backward_first(float *dinp, const float *inp, const float *dout, size_t n) {
    gelu_bwd(dinp, inp, dout, n, 1);
}

void relu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

void relu_backward_inplace(float *d, const float *out, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}

void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];   /* vec-check */
}

void residual_backward(float *da, float *db, const float *dout, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }   /* vec-check */
}

/* ---------------------------------------------------------------- loss */

void softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * Vp;
        const float mx = hpt_max_row(z, V);
        /* loss = logsumexp - z[target] on max-shifted logits, taken before
         * the exp so a tiny probability never becomes log(0). */
        float zt = z[targets[n]] - mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int i = 0; i < V; i++) { z[i] = hpt_expf(z[i] - mx); sum += z[i]; }   /* vec-check */
        losses[n] = logf(sum) - zt;
        float inv = 1.0f / sum;
        #pragma omp simd
        for (int i = 0; i < V; i++) z[i] *= inv;
        for (int i = V; i < Vp; i++) z[i] = 0.0f;
    }
}

void softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        float *p = probs + (size_t)n * Vp;
        #pragma omp simd
        for (int i = 0; i < V; i++) p[i] *= dloss;
        p[targets[n]] -= dloss;
        for (int i = V; i < Vp; i++) p[i] = 0.0f;
    }
}
