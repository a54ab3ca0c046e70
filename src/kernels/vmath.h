/*
 * vmath.h — exp, tanh and a row maximum that the compiler can vectorise.
 *
 * glibc's expf/tanhf are scalar calls unless -ffast-math is on (its vector
 * variants are declared only under __FAST_MATH__), and fast-math is banned
 * here. These are plain arithmetic, so `omp simd` loops turn them into AVX2
 * code. expf: Cephes' range reduction (x = n ln2 + r, ln2 split in two) and
 * degree-5 polynomial, about 1 ulp on [-87, 88]; NaN in gives NaN out, so
 * divergence checks still see it.
 */
#ifndef HPT_VMATH_H
#define HPT_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

static inline float hpt_expf(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 88.3f ? 88.3f : xc;
    /* n = round(x / ln2) with the 1.5 * 2^23 trick: adding it leaves the
     * rounded integer in the low mantissa bits. floorf or a float->int cast
     * would keep gcc 12 from vectorising the loop (trapping-math rules). */
    union { float f; int32_t i; } t = {.f = xc * 1.44269504088896341f + 12582912.0f};
    float n = t.f - 12582912.0f;
    uint32_t ni = (uint32_t)t.i - 0x4B400000u;   /* unsigned: a NaN's bits must not overflow an int */
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    /* 2^n built in the exponent field, n in [-126, 127]; a union rather than
     * memcpy, which gcc 12 treats as a memory access and will not vectorise */
    union { uint32_t i; float f; } scale = {.i = (ni + 127u) << 23};
    y *= scale.f;
    return x != x ? x : y;
}

/* tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|): absolute error ~1e-7. */
static inline float hpt_tanhf(float u) {
    float e = hpt_expf(-2.0f * fabsf(u));
    return copysignf((1.0f - e) / (1.0f + e), u);
}

/* The largest of a[0..n) that is not NaN (-inf if none: the plain loop
 * `if (a[i] > mx) mx = a[i]` from -inf), 16 lanes at a time (gcc does not
 * vectorise that loop without fast-math). Any order finds the same value
 * but for the sign of a zero maximum; the softmaxes subtract it, and
 * x - (+0), x - (-0) differ only for x = -0, whose hpt_expf is 1 either way. */
static inline float hpt_max_row(const float *a, int n) {
    float mx = -INFINITY;
    int i = 0;
    if (n >= HPT_F16_LANES) {
        hpt_f16 m = hpt_f16_splat(-INFINITY);
        for (; i + HPT_F16_LANES <= n; i += HPT_F16_LANES) m = hpt_f16_max_keep(m, hpt_f16_load(a + i));
        float ml[HPT_F16_LANES];
        hpt_f16_store(ml, m);
        for (int l = 0; l < HPT_F16_LANES; l++)
            if (ml[l] > mx) mx = ml[l];
    }
    for (; i < n; i++)
        if (a[i] > mx) mx = a[i];
    return mx;
}

#endif /* HPT_VMATH_H */
