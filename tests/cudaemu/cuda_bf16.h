/*
 * cuda_bf16.h — the bf16 type and the two conversions hpt's kernels use, on
 * the CPU (make CUDA=emu). A bf16 is fp32's top 16 bits: widening shifts
 * them back (exact); narrowing rounds to nearest, ties to even, as the
 * GPU's __float2bfloat16 does, and turns any NaN into the canonical 0x7fff.
 * The type is two bytes with no arithmetic of its own, so a kernel that
 * tries to add bf16s instead of widening them first does not compile.
 */
#ifndef HPT_CUDAEMU_BF16_H
#define HPT_CUDAEMU_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    uint16_t bits;
};

static inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t u = (uint32_t)h.bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) h.bits = 0x7fff;
    else h.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return h;
}

#endif /* HPT_CUDAEMU_BF16_H */
