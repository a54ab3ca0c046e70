/*
 * simd.h — sixteen floats as one value, in the machine's own registers.
 *
 * The kernels define their sums lane by lane over 16 lanes (attention.c's
 * dot16 order, hpt_max_row): lane l is one key, one channel block, one
 * partial sum. gcc's generic 64-byte vectors are the natural type for that,
 * but only AVX-512 has 64-byte registers: on AVX2 gcc lowers them piecewise
 * through the stack (every broadcast and accumulator spilled), which made
 * attention 10x slower per FLOP there. hpt_f16 is instead as many native
 * vectors as make 16 lanes (one zmm, two ymm, or four xmm), chosen at compile
 * time; every operation is the same IEEE single operation per lane as the
 * scalar expression (no fused multiply-add: a + c * x rounds twice), so the
 * bits are the same whatever the width.
 *
 * tests/check_vec.sh (in make test) fails if any kernel's vector code is lowered
 * piecewise (-Werror=vector-operation-performance) or a loop marked
 * `vec-check` is not vectorised.
 */
#ifndef HPT_SIMD_H
#define HPT_SIMD_H

#include <stdint.h>
#include <string.h>

enum { HPT_F16_LANES = 16 };

#if defined(__AVX512F__)
#define HPT_VBYTES 64
#elif defined(__AVX__)
#define HPT_VBYTES 32
#else
#define HPT_VBYTES 16
#endif
#define HPT_VF (HPT_VBYTES / (int)sizeof(float))   /* floats in one native vector */
#define HPT_VN (HPT_F16_LANES / HPT_VF)            /* native vectors in 16 lanes */

typedef float hpt_vf __attribute__((vector_size(HPT_VBYTES)));
typedef int32_t hpt_vi __attribute__((vector_size(HPT_VBYTES)));
typedef struct { hpt_vf v[HPT_VN]; } hpt_f16;

static inline hpt_f16 hpt_f16_load(const float *p) {
    hpt_f16 r;
    for (int k = 0; k < HPT_VN; k++) memcpy(&r.v[k], p + k * HPT_VF, sizeof r.v[k]);
    return r;
}

static inline void hpt_f16_store(float *p, hpt_f16 x) {
    for (int k = 0; k < HPT_VN; k++) memcpy(p + k * HPT_VF, &x.v[k], sizeof x.v[k]);
}

/* c in every lane: one broadcast instruction. Not 0 + c, which turns -0
 * into +0 and costs an add per call; not a loop over the lanes, which gcc
 * builds lane by lane. */
static inline hpt_vf hpt_vf_splat(float c) {
#if HPT_VBYTES == 64
    return (hpt_vf){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c};
#elif HPT_VBYTES == 32
    return (hpt_vf){c, c, c, c, c, c, c, c};
#else
    return (hpt_vf){c, c, c, c};
#endif
}

static inline hpt_f16 hpt_f16_splat(float c) {
    hpt_f16 r;
    for (int k = 0; k < HPT_VN; k++) r.v[k] = hpt_vf_splat(c);
    return r;
}

static inline hpt_f16 hpt_f16_zero(void) { return hpt_f16_splat(0.0f); }

static inline hpt_f16 hpt_f16_add(hpt_f16 a, hpt_f16 b) {
    for (int k = 0; k < HPT_VN; k++) a.v[k] += b.v[k];
    return a;
}

/* a + c * x, lane by lane: two roundings, as the scalar expression */
static inline hpt_f16 hpt_f16_madd(hpt_f16 a, float c, hpt_f16 x) {
    const hpt_vf cv = hpt_vf_splat(c);
    for (int k = 0; k < HPT_VN; k++) a.v[k] += cv * x.v[k];
    return a;
}

/* x * c, lane by lane */
static inline hpt_f16 hpt_f16_scale(hpt_f16 x, float c) {
    const hpt_vf cv = hpt_vf_splat(c);
    for (int k = 0; k < HPT_VN; k++) x.v[k] *= cv;
    return x;
}

/* Lane by lane, x where x > m, else m: a NaN in x never replaces m (the
 * comparison is false), the step of a running maximum that skips NaNs. */
static inline hpt_f16 hpt_f16_max_keep(hpt_f16 m, hpt_f16 x) {
    for (int k = 0; k < HPT_VN; k++) {
        const hpt_vi gt = x.v[k] > m.v[k];
        m.v[k] = (hpt_vf)(((hpt_vi)x.v[k] & gt) | ((hpt_vi)m.v[k] & ~gt));
    }
    return m;
}

#endif /* HPT_SIMD_H */
