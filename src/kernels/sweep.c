/*
 * sweep.c — kernels that sweep whole arenas (parameters, gradients,
 * optimizer state): the optimizer updates, the weight average, the outer
 * step, norms and dot products. The device table's CPU row
 * (src/device/device_cpu.c) is these functions; each is one parallel loop
 * with the same expression for every element, so its bits do not depend on
 * the thread count or the vector width.
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

/* The per-step factors of AdamW, in torch.optim.AdamW's (non-fused)
 * arithmetic order: decay first, then step = lr / bc1, denom = sqrt(v) /
 * sqrt(bc2) + eps. */
typedef struct adamw_factors { float step, bc2_sqrt, decay; } adamw_factors;

static adamw_factors adamw_at(float lr, float beta1, float beta2, float weight_decay, int t) {
    const float bc1 = 1.0f - powf(beta1, (float)t);
    return (adamw_factors){.step = lr / bc1, .bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t)),
                           .decay = 1.0f - lr * weight_decay};
}

/* One element of AdamW, g the gradient: the same expressions in every loop
 * below, so that the fused and the plain update give the same bits. */
#define ADAMW_ELEMENT(i, g)                                                     \
    do {                                                                        \
        float mi = beta1 * m[i] + (1.0f - beta1) * (g);                         \
        float vi = beta2 * v[i] + (1.0f - beta2) * (g) * (g);                   \
        m[i] = mi;                                                              \
        v[i] = vi;                                                              \
        float p = params[i] * f.decay;                                          \
        params[i] = p - f.step * mi / (sqrtf(vi) / f.bc2_sqrt + eps);           \
    } while (0)

void adamw_update(float *params, const float *grads, float *m, float *v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
    const adamw_factors f = adamw_at(lr, beta1, beta2, weight_decay, t);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];   /* vec-check */
        ADAMW_ELEMENT(i, g);
    }
}

void adamw_update_scaled(float *params, const float *grads, float *m, float *v, size_t n, float gscale,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
    if (gscale == 1.0f) {
        adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
        return;
    }
    const adamw_factors f = adamw_at(lr, beta1, beta2, weight_decay, t);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * gscale;   /* vec-check; = scale_inplace's product, bit for bit; not stored back */
        ADAMW_ELEMENT(i, g);
    }
}

#undef ADAMW_ELEMENT

/* sum over i of a[i] b[i] in double: 64 fixed chunks, each summed in index
 * order, the chunks' sums added in order: the same bits for any thread
 * count. A chunk's sum is one chain of dependent adds, so a thread walks G
 * chunks in lockstep (G independent chains the core overlaps) instead of one
 * after another; every chunk still adds its own elements in the same order.
 * sumsq is dot_product(x, x): the same products, the same bits. */
static inline double chunked_dot(const float *a, const float *b, size_t n) {
    enum { K = 64, G = 8 };
    double part[K];
    #pragma omp parallel for
    for (int g = 0; g < K / G; g++) {
        size_t i0[G], len[G], common = (size_t)-1;
        double s[G];
        for (int c = 0; c < G; c++) {
            const int k = g * G + c;
            i0[c] = n * k / K;
            len[c] = n * (k + 1) / K - i0[c];
            if (len[c] < common) common = len[c];
            s[c] = 0.0;
        }
        for (size_t j = 0; j < common; j++)
            for (int c = 0; c < G; c++) s[c] += (double)a[i0[c] + j] * b[i0[c] + j];
        for (int c = 0; c < G; c++) {
            for (size_t j = common; j < len[c]; j++) s[c] += (double)a[i0[c] + j] * b[i0[c] + j];
            part[g * G + c] = s[c];
        }
    }
    double s = 0.0;
    for (int k = 0; k < K; k++) s += part[k];
    return s;
}

double sumsq(const float *x, size_t n) { return chunked_dot(x, x, n); }

double dot_product(const float *a, const float *b, size_t n) { return chunked_dot(a, b, n); }

void scale_inplace(float *x, float s, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void axpy_inplace(float *y, float a, const float *x, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

void lerp_inplace(float *e, float a, float b, const float *x, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) e[i] = a * e[i] + b * x[i];
}

void swap_inplace(float *p, float *q, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) { float t = p[i]; p[i] = q[i]; q[i] = t; }
}

void fill_value(float *x, float v, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void sf_adamw_update_scaled(float *y, const float *g, float *z, float *x, float *v, size_t n, float gscale, float lr,
                            float beta1, float beta2, float eps, float weight_decay, float c, int t) {
    const float bc2 = 1.0f - powf(beta2, (float)t);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;   /* x 1 is exact: the unclipped step's bits */
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        v[i] = vi;
        float u = gi / (sqrtf(vi / bc2) + eps) + weight_decay * y[i];
        float zi = z[i] - lr * u;
        float xi = (1.0f - c) * x[i] + c * zi;
        z[i] = zi;
        x[i] = xi;
        y[i] = (1.0f - beta1) * zi + beta1 * xi;
    }
}

void outer_step(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b) {
    float *th = theta, *an = anchor;
    if (d) {
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) {
            u[i] = mu * u[i] + d[i];
            th[i] = (an[i] + d[i]) + (a * d[i] + b * u[i]);
            an[i] = th[i];
        }
        return;
    }
    if (a == 0.0f && b == 0.0f) {
        /* no departure: theta stays, bit for bit (even a -0.0f) */
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) {
            u[i] = mu * u[i] + (th[i] - an[i]);
            an[i] = th[i];
        }
        return;
    }
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float di = th[i] - an[i];
        u[i] = mu * u[i] + di;
        th[i] += a * di + b * u[i];
        an[i] = th[i];
    }
}

void sf_outer_step(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b) {
    float *an = anchor;
    if (a == 0.0f && b == 0.0f) {   /* no departure: x, z and y stay, bit for bit; u and the anchor as outer_step's */
        outer_step(x, anchor, u, NULL, n, mu, 0.0f, 0.0f);
        return;
    }
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float di = x[i] - an[i];
        u[i] = mu * u[i] + di;
        float delta = a * di + b * u[i];
        x[i] += delta;
        z[i] += delta;
        y[i] += delta;
        an[i] = x[i];
    }
}
