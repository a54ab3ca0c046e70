/*
 * vmath.h — exp and tanh that the compiler can vectorise.
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

#pragma omp declare simd
static inline float hpt_expf(float x) {
    float xc = x < -87.0f ? -87.0f : (x > 88.3f ? 88.3f : x);
    float n = floorf(xc * 1.44269504088896341f + 0.5f);
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;   /* 2^n, n in [-126, 127] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    y *= scale;
    return x != x ? x : y;
}

/* tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|): absolute error ~1e-7. */
#pragma omp declare simd
static inline float hpt_tanhf(float u) {
    float e = hpt_expf(-2.0f * fabsf(u));
    return copysignf((1.0f - e) / (1.0f + e), u);
}

#endif /* HPT_VMATH_H */
