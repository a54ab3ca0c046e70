/*
 * kernels_cuda_internal.cuh — what src/cuda's kernel files share, and
 * nothing outside src/cuda includes: the first-failure record (kc_fail and
 * the checks after a launch or a cuBLAS call, kept in kernels_cuda.cu), the
 * math mode --precision set, a grid size for grid-stride loops, and the
 * device helpers every reduction uses (warp and block sums in a fixed
 * order, the CPU's exp; dev_expf mirrors src/kernels/vmath.h's hpt_expf
 * operation for operation, since device code cannot call the host's). Device functions are static here: nvcc
 * compiles each .cu file whole (no -rdc), so each file gets its own copy.
 */
#ifndef HPT_KERNELS_CUDA_INTERNAL_CUH
#define HPT_KERNELS_CUDA_INTERNAL_CUH

#include "kernels_cuda.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

/* ---- the first failure (kernels_cuda.h: "Errors") */

/* Records where/what unless an earlier failure is already recorded. */
void kc_fail(const char *where, const char *what);
/* After a launch: a bad configuration is reported at once; a fault inside
 * the kernel surfaces at the next synchronisation (kernels_cuda_sync). */
void kc_check_launch(const char *where);
void kc_check_blas(cublasStatus_t s, const char *where);
/* 1 when kernels_cuda_init made the cuBLAS handle, else 0 and a failure */
int kc_have_blas(const char *where);

/* the math mode kernels_cuda_set_gemm_math set (KC_FP32, KC_TF32, KC_BF16):
 * the flash attention's products follow it as the GEMMs do */
int kc_gemm_math(void);
/* attention_flash_cuda_tensor_cores's switch, in the bound context */
bool kc_flash_tc(void);

/* Blocks for a grid-stride loop over n elements: enough to fill any GPU,
 * capped so that the count fits a grid's x dimension with room. */
static inline unsigned blocks_for(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return b > 65536u * 8u ? 65536u * 8u : (unsigned)b;
}

/* ---- activation types
 *
 * The kernels that read or write activations are templates over their
 * element type A: float, or bf16 under --precision bf16 (kernels_cuda.h's
 * kc_bf16, the same two bytes). Arithmetic is fp32 either way: an element
 * is widened on load (ldf: exact) and rounded to nearest even on store
 * (act_of), so the float instantiation is the fp32 kernel, operation for
 * operation. act_dt is the element's cuBLAS data type. */
typedef __nv_bfloat16 bf16;
static_assert(sizeof(bf16) == sizeof(kc_bf16), "kc_bf16 names a bf16's two bytes");

static __device__ __forceinline__ float ldf(float x) { return x; }
static __device__ __forceinline__ float ldf(bf16 x) { return __bfloat162float(x); }

template <typename A> static __device__ __forceinline__ A act_of(float x);
template <> __device__ __forceinline__ float act_of<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 act_of<bf16>(float x) { return __float2bfloat16(x); }

template <typename A> struct act_dt;
template <> struct act_dt<float> { static constexpr cudaDataType value = CUDA_R_32F; };
template <> struct act_dt<bf16> { static constexpr cudaDataType value = CUDA_R_16BF; };

/* a kc_bf16 pointer of the C interface as the device type */
static inline bf16 *as_bf16(kc_bf16 *p) { return reinterpret_cast<bf16 *>(p); }
static inline const bf16 *as_bf16(const kc_bf16 *p) { return reinterpret_cast<const bf16 *>(p); }

/* ---- device helpers */

/* Warp sums and maxima by xor butterfly: lane i adds lane i^o's value to its
 * own and lane i^o the same two the other way round, which IEEE addition
 * gives the same bits, so every lane ends with the same total. fmaxf skips
 * NaN as the CPU's hpt_max_row does. */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The block's sum (is_max 0) or maximum (1) of v, returned to every thread;
 * blockDim.x a multiple of 32, every thread calls it. Each warp reduces the
 * warps' partials itself (the same operations on the same values), so no
 * broadcast is needed. The leading barrier lets callers use it back to back
 * with the same shm (32 floats). */
static __device__ inline float block_reduce(float v, float *shm, int is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    float w = lane < nw ? shm[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(w) : warp_sum(w);
}

/* hpt_expf and hpt_tanhf (src/kernels/vmath.h), operation for operation:
 * the same roundings in the same order give the same bits. */
static __device__ __forceinline__ float dev_expf(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 88.3f ? 88.3f : xc;
    const float t = xc * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    const uint32_t ni = __float_as_uint(t) - 0x4B400000u;
    const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    y *= __uint_as_float((ni + 127u) << 23);
    return x != x ? x : y;
}

static __device__ __forceinline__ float dev_tanhf(float u) {
    const float e = dev_expf(-2.0f * fabsf(u));
    return copysignf((1.0f - e) / (1.0f + e), u);
}

#endif /* HPT_KERNELS_CUDA_INTERNAL_CUH */
