/*
 * kernels_cuda.cu — the GPT-2 training kernels in CUDA, fp32 (the contract
 * is kernels_cuda.h's; each kernel's maths is its CPU twin's in
 * src/kernels/nn.c, attention.c and matmul.c).
 *
 * Built with -fmad=false (no a*b+c contracted into an FMA, as the C code's
 * -std=c11 gives -ffp-contract=off) and nvcc's IEEE division and sqrt (never
 * --use_fast_math): then a kernel that does the CPU's operations in the CPU's
 * order gets the CPU's bits, and the ones that do are said to below.
 *
 * Determinism: no float atomics. Block-wide sums go through block_reduce, a
 * fixed butterfly inside each warp and then the warps' partials in warp
 * order; column sums over rows go through per-chunk partials summed in chunk
 * order. The order depends on the shape and the launch configuration below,
 * both fixed, never on timing.
 */
#include "kernels_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------ errors */

static cublasHandle_t g_blas;
static int g_failed;
static char g_err[512];

/* The first failure sticks: later ones are usually its consequences. */
static void fail(const char *where, const char *what) {
    if (g_failed) return;
    g_failed = 1;
    snprintf(g_err, sizeof g_err, "%s: %s", where, what);
}

/* After a launch: a bad configuration is reported at once; a fault inside
 * the kernel surfaces at the next synchronisation (kernels_cuda_sync). */
static void check_launch(const char *where) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail(where, cudaGetErrorString(e));
}

static void check_blas(cublasStatus_t s, const char *where) {
    if (s != CUBLAS_STATUS_SUCCESS) fail(where, cublasGetStatusString(s));
}

extern "C" const char *kernels_cuda_error(void) { return g_err; }

extern "C" int kernels_cuda_init(void) {
    if (g_blas) return g_failed ? -1 : 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) { fail("kernels_cuda_init", cudaGetErrorString(e)); return -1; }
    if (n == 0) { fail("kernels_cuda_init", "no CUDA device found"); return -1; }
    cublasStatus_t s = cublasCreate(&g_blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        g_blas = NULL;
        check_blas(s, "kernels_cuda_init: cublasCreate");
        return -1;
    }
    /* CUBLAS_DEFAULT_MATH with fp32 data and compute: FFMA kernels, no TF32
     * (which cuBLAS uses for sgemm only under CUBLAS_TF32_TENSOR_OP_MATH or
     * NVIDIA_TF32_OVERRIDE... which can only turn it off). Pedantic mode
     * would also forbid cuBLAS's faster fp32 reduction schemes; default
     * keeps them, and the test's tolerances cover their rounding. */
    check_blas(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH), "kernels_cuda_init: cublasSetMathMode");
    /* alpha and beta are host floats; the default stream */
    check_blas(cublasSetPointerMode(g_blas, CUBLAS_POINTER_MODE_HOST), "kernels_cuda_init: cublasSetPointerMode");
    return g_failed ? -1 : 0;
}

extern "C" void kernels_cuda_shutdown(void) {
    if (g_blas) cublasDestroy(g_blas);
    g_blas = NULL;
}

/* The GEMMs' arithmetic (kernels_cuda.h's KC_*). fp32 and tf32 go through
 * cublasSgemm under a math mode; bf16 through cublasGemmEx with fp32 data
 * and the compute type CUBLAS_COMPUTE_32F_FAST_16BF (gemm below). */
static int g_gemm_math = KC_FP32;

/* TF32 and bf16 tensor cores are Ampere's (compute capability 8.0) and
 * newer: on an older GPU cuBLAS would quietly fall back to FFMA, so a run
 * asking for them is refused instead of measured as something it is not. */
static int tensor_cores_present(void) {
    int dev = 0, major = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) { fail("kernels_cuda_set_gemm_math", cudaGetErrorString(e)); return -1; }
    return major >= 8;
}

extern "C" int kernels_cuda_set_gemm_math(int mode) {
    if (!g_blas) { fail("kernels_cuda_set_gemm_math", "kernels_cuda_init was not called"); return -1; }
    if (mode != KC_FP32 && mode != KC_TF32 && mode != KC_BF16) {
        fail("kernels_cuda_set_gemm_math", "unknown mode");
        return -1;
    }
    if (mode != KC_FP32) {
        int tc = tensor_cores_present();
        if (tc < 0) return -1;
        if (!tc) {
            fail("kernels_cuda_set_gemm_math",
                 "this GPU's compute capability is below 8.0: it has no TF32 or bf16 tensor cores (fp32 runs)");
            return -1;
        }
    }
    check_blas(cublasSetMathMode(g_blas, mode == KC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "kernels_cuda_set_gemm_math: cublasSetMathMode");
    if (!g_failed) g_gemm_math = mode;
    return g_failed ? -1 : 0;
}

extern "C" int kernels_cuda_sync(void) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) fail("kernels_cuda_sync", cudaGetErrorString(e));
    return g_failed ? -1 : 0;
}

/* ------------------------------------------------------------ helpers */

enum { EW_THREADS = 256, LN_THREADS = 256, XENT_THREADS = 512, CHUNK_ROWS = 64, ATT_TILE = 64 };

/* Blocks for a grid-stride loop over n elements: enough to fill any GPU,
 * capped so that the count fits a grid's x dimension with room. */
static unsigned blocks_for(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return b > 65536u * 8u ? 65536u * 8u : (unsigned)b;
}

static int chunks_of(int N) { return (N + CHUNK_ROWS - 1) / CHUNK_ROWS; }

/* Warp sums and maxima by xor butterfly: lane i adds lane i^o's value to its
 * own and lane i^o the same two the other way round, which IEEE addition
 * gives the same bits, so every lane ends with the same total. fmaxf skips
 * NaN as the CPU's hpt_max_row does. */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The block's sum (is_max 0) or maximum (1) of v, returned to every thread;
 * blockDim.x a multiple of 32, every thread calls it. Each warp reduces the
 * warps' partials itself (the same operations on the same values), so no
 * broadcast is needed. The leading barrier lets callers use it back to back
 * with the same shm (32 floats). */
__device__ float block_reduce(float v, float *shm, int is_max) {
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
__device__ __forceinline__ float dev_expf(float x) {
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

__device__ __forceinline__ float dev_tanhf(float u) {
    const float e = dev_expf(-2.0f * fabsf(u));
    return copysignf((1.0f - e) / (1.0f + e), u);
}

/* ------------------------------------------------------------ embeddings */

__global__ void k_encoder_forward(float *__restrict__ out, const int *__restrict__ inp,
                                  const float *__restrict__ wte, const float *__restrict__ wpe,
                                  int T, int C, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / C;
        const int c = (int)(i % C), t = (int)(n % T);
        out[i] = wte[(size_t)inp[n] * C + c] + wpe[(size_t)t * C + c];
    }
}

extern "C" void encoder_forward_cuda(float *out, const int *inp, const float *wte, const float *wpe,
                                     int B, int T, int C) {
    const size_t total = (size_t)B * T * C;
    if (!total) return;
    k_encoder_forward<<<blocks_for(total, EW_THREADS), EW_THREADS>>>(out, inp, wte, wpe, T, C, total);
    check_launch("encoder_forward_cuda");
}

/* owner[tok] = the first position holding tok. Integer atomicMin: its
 * result is the minimum whatever order the threads arrive in. */
__global__ void k_encoder_owner(int *__restrict__ owner, const int *__restrict__ inp, int BT) {
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < BT; p += gridDim.x * blockDim.x)
        atomicMin(owner + inp[p], p);
}

/* One block per position; the block of a token's first position owns that
 * token's dwte row and adds every position's dout row for the token in
 * ascending position order onto it: the CPU's order (nn.c walks (b,t) in
 * order), so the CPU's bits. The other blocks leave at once. A token that
 * fills the whole batch costs one block B*T rows: correct, serial. */
__global__ void k_encoder_backward_wte(float *__restrict__ dwte, const float *__restrict__ dout,
                                       const int *__restrict__ inp, const int *__restrict__ owner, int BT, int C) {
    const int p = blockIdx.x, tok = inp[p];
    if (owner[tok] != p) return;
    float *row = dwte + (size_t)tok * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = row[c];
        for (int q = p; q < BT; q++)
            if (inp[q] == tok) acc += dout[(size_t)q * C + c];
        row[c] = acc;
    }
}

/* dwpe[t][c] += dout[b][t][c] for b ascending: one thread per (t, c). */
__global__ void k_encoder_backward_wpe(float *__restrict__ dwpe, const float *__restrict__ dout, int B, int T, int C) {
    const size_t TC = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < TC; i += (size_t)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += dout[(size_t)b * TC + i];
        dwpe[i] = acc;
    }
}

extern "C" size_t encoder_backward_cuda_scratch(int V) { return (size_t)V; }

extern "C" void encoder_backward_cuda(float *dwte, float *dwpe, const float *dout, const int *inp,
                                      int B, int T, int C, int V, int *scratch) {
    const int BT = B * T;
    if (!BT || !C) return;
    /* 0x7f7f7f7f: above any position, so atomicMin takes the first */
    cudaError_t e = cudaMemsetAsync(scratch, 0x7f, (size_t)V * sizeof(int), 0);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* as attention_smem: reported through kernels_cuda_error, then cleared */
        fail("encoder_backward_cuda: cudaMemsetAsync", cudaGetErrorString(e));
        return;
    }
    k_encoder_owner<<<blocks_for((size_t)BT, EW_THREADS), EW_THREADS>>>(scratch, inp, BT);
    check_launch("encoder_backward_cuda (owner)");
    k_encoder_backward_wte<<<BT, C < 256 ? 32 * ((C + 31) / 32) : 256>>>(dwte, dout, inp, scratch, BT, C);
    check_launch("encoder_backward_cuda (wte)");
    k_encoder_backward_wpe<<<blocks_for((size_t)T * C, EW_THREADS), EW_THREADS>>>(dwpe, dout, B, T, C);
    check_launch("encoder_backward_cuda (wpe)");
}

/* ------------------------------------------------------------ column sums in two passes */

/* out[c] = (first ? 0 : out[c]) + the partials part[k * stride + c] added for
 * k ascending from 0: the second pass of every rows-to-columns sum here. The
 * CPU writes (first ? 0.0f : old) + sum too: the same -0 handling. */
__global__ void k_chunks_finish(float *__restrict__ out, const float *__restrict__ part, size_t stride,
                                int nchunk, int n, int first) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < nchunk; k++) acc += part[(size_t)k * stride + c];
    out[c] = (first ? 0.0f : out[c]) + acc;
}

/* First pass of the bias gradient: part[k][o] = sum of dout[n][o] over the
 * 64 rows of chunk k (blockIdx.y). Block (32, 8): 32 consecutive columns
 * (coalesced rows), 8 row lanes each taking every 8th row, then the 8 lane
 * sums added in lane order. */
__global__ void k_bias_partial(float *__restrict__ part, const float *__restrict__ dout, int N, int OC) {
    __shared__ float s[8][32];
    const int o = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y;
    const int r0 = k * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < N ? r0 + CHUNK_ROWS : N;
    float acc = 0.0f;
    if (o < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += dout[(size_t)r * OC + o];
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < OC) {
        float sum = 0.0f;
        for (int j = 0; j < 8; j++) sum += s[j][threadIdx.x];
        part[(size_t)k * OC + o] = sum;
    }
}

/* ------------------------------------------------------------ matmul */

extern "C" size_t matmul_backward_cuda_scratch(int N, int OC) { return (size_t)chunks_of(N) * OC; }

__global__ void k_bias_rows(float *__restrict__ out, const float *__restrict__ bias, int OC, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

static int have_blas(const char *where) {
    if (g_blas) return 1;
    fail(where, "kernels_cuda_init was not called (no cuBLAS handle)");
    return 0;
}

/* C = A op B + beta C in cuBLAS's column-major terms, alpha 1, fp32 data.
 * Under KC_BF16 cuBLAS rounds A and B to bf16 inside the GEMM and multiplies
 * them on tensor cores, summing in fp32 (CUBLAS_COMPUTE_32F_FAST_16BF): the
 * GEMM half of bf16 mixed precision; activations, weights and optimizer
 * state stay fp32 in memory. */
static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A, int lda,
                           const float *B, int ldb, float beta, float *Cm, int ldc) {
    const float one = 1.0f;
    if (g_gemm_math == KC_BF16)
        return cublasGemmEx(g_blas, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, Cm,
                            CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
    return cublasSgemm(g_blas, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, Cm, ldc);
}

/* cuBLAS is column-major: a row-major (R, K) matrix is, to it, the (K, R)
 * matrix with leading dimension K. So out (N,OC) = inp (N,C) . weight^T is
 * out as OC x N = (weight as C x OC)^T . (inp as C x N): sgemm(T, N) with
 * m = OC, n = N, k = C. Bias: rows seeded with it and beta 1, as the CPU
 * seeds its rows before its sgemm. */
extern "C" void matmul_forward_cuda(float *out, const float *inp, const float *weight, const float *bias,
                                    int N, int C, int OC) {
    if (!N || !OC || !have_blas("matmul_forward_cuda")) return;
    const float beta = bias ? 1.0f : 0.0f;
    if (bias) {
        const size_t total = (size_t)N * OC;
        k_bias_rows<<<blocks_for(total, EW_THREADS), EW_THREADS>>>(out, bias, OC, total);
        check_launch("matmul_forward_cuda (bias)");
    }
    check_blas(gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, beta, out, OC),
               "matmul_forward_cuda: cuBLAS GEMM");
}

/* dinp (N,C) = dout (N,OC) . weight (OC,C): dinp^T (C,N) = (weight as
 * C x OC) . (dout as OC x N), sgemm(N, N) with m = C, n = N, k = OC.
 * beta 0 for _first: cuBLAS does not read C then. */
static void dinp_gemm(float *dinp, const float *dout, const float *weight, int N, int C, int OC, float beta,
                      const char *where) {
    if (!N || !C || !have_blas(where)) return;
    check_blas(gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, beta, dinp, C), where);
}

extern "C" void matmul_backward_dinp_cuda(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 1.0f, "matmul_backward_dinp_cuda: cuBLAS GEMM");
}

extern "C" void matmul_backward_dinp_first_cuda(float *dinp, const float *dout, const float *weight,
                                                int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 0.0f, "matmul_backward_dinp_first_cuda: cuBLAS GEMM");
}

/* dweight (OC,C) = dout^T . inp: dweight^T (C,OC) = (inp as C x N) .
 * (dout as OC x N)^T, sgemm(N, T) with m = C, n = OC, k = N. */
static void dweight_gemm(float *dweight, float *dbias, const float *dout, const float *inp, int N, int C, int OC,
                         float *scratch, int first, const char *where) {
    if (!C || !OC || !have_blas(where)) return;
    check_blas(gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, first ? 0.0f : 1.0f, dweight, C), where);
    if (!dbias) return;
    const int nchunk = chunks_of(N);
    if (nchunk) {
        k_bias_partial<<<dim3((OC + 31) / 32, nchunk), dim3(32, 8)>>>(scratch, dout, N, OC);
        check_launch(where);
    }
    k_chunks_finish<<<(OC + 255) / 256, 256>>>(dbias, scratch, (size_t)OC, nchunk, OC, first);
    check_launch(where);
}

extern "C" void matmul_backward_dweight_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                             int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, dout, inp, N, C, OC, scratch, 0, "matmul_backward_dweight_cuda");
}

extern "C" void matmul_backward_dweight_first_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                                   int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, dout, inp, N, C, OC, scratch, 1, "matmul_backward_dweight_first_cuda");
}

extern "C" void matmul_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, int N, int C, int OC, float *scratch) {
    if (dinp) matmul_backward_dinp_cuda(dinp, dout, weight, N, C, OC);
    matmul_backward_dweight_cuda(dweight, dbias, dout, inp, N, C, OC, scratch);
}

/* ------------------------------------------------------------ layernorm */

/* One block per row: mean, then the variance about it (two passes, as the
 * CPU: stable for large means), each a block_reduce. */
__global__ void k_layernorm_forward(float *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                                    const float *__restrict__ inp, const float *__restrict__ weight,
                                    const float *__restrict__ bias, int C) {
    __shared__ float shm[32];
    const float eps = 1e-5f;
    const size_t n = blockIdx.x;
    const float *x = inp + n * C;
    float *o = out + n * C;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
    const float m = block_reduce(s, shm, 0) / C;
    float v = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) { const float d = x[c] - m; v += d * d; }
    const float var = block_reduce(v, shm, 0) / C;
    const float r = 1.0f / sqrtf(var + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (threadIdx.x == 0) { mean[n] = m; rstd[n] = r; }
}

extern "C" void layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                       const float *weight, const float *bias, int N, int C) {
    if (!N) return;
    k_layernorm_forward<<<N, LN_THREADS>>>(out, mean, rstd, inp, weight, bias, C);
    check_launch("layernorm_forward_cuda");
}

/* dinp, one block per row: the two row sums, then each element, in the
 * CPU's expression order. */
__global__ void k_layernorm_backward_dinp(float *__restrict__ dinp, const float *__restrict__ dout,
                                          const float *__restrict__ inp, const float *__restrict__ weight,
                                          const float *__restrict__ mean, const float *__restrict__ rstd, int C) {
    __shared__ float shm[32];
    const size_t n = blockIdx.x;
    const float *x = inp + n * C, *d = dout + n * C;
    float *dx = dinp + n * C;
    const float m = mean[n], s = rstd[n];
    float a = 0.0f, b = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float dn = d[c] * weight[c];
        a += dn;
        b += dn * (x[c] - m) * s;
    }
    const float dmean = block_reduce(a, shm, 0) / C;
    const float dnm = block_reduce(b, shm, 0) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float norm = (x[c] - m) * s;
        dx[c] += (d[c] * weight[c] - dmean - norm * dnm) * s;
    }
}

/* First pass of dweight/dbias: part[k][c] and part[k][C + c], the sums over
 * the 64 rows of chunk k, laid out as k_bias_partial's. */
__global__ void k_layernorm_backward_partial(float *__restrict__ part, const float *__restrict__ dout,
                                             const float *__restrict__ inp, const float *__restrict__ mean,
                                             const float *__restrict__ rstd, int N, int C) {
    __shared__ float sw[8][32], sb[8][32];
    const int c = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y;
    const int r0 = k * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < N ? r0 + CHUNK_ROWS : N;
    float dw = 0.0f, db = 0.0f;
    if (c < C)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            const float d = dout[(size_t)r * C + c];
            dw += d * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
            db += d;
        }
    sw[threadIdx.y][threadIdx.x] = dw;
    sb[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float w = 0.0f, b = 0.0f;
        for (int j = 0; j < 8; j++) { w += sw[j][threadIdx.x]; b += sb[j][threadIdx.x]; }
        part[(size_t)k * 2 * C + c] = w;
        part[(size_t)k * 2 * C + C + c] = b;
    }
}

extern "C" size_t layernorm_backward_cuda_scratch(int N, int C) { return (size_t)chunks_of(N) * 2 * C; }

static void layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, const float *mean, const float *rstd, int N, int C, float *scratch,
                          int first, const char *where) {
    if (!C) return;
    const int nchunk = chunks_of(N);
    if (N) {
        k_layernorm_backward_dinp<<<N, LN_THREADS>>>(dinp, dout, inp, weight, mean, rstd, C);
        check_launch(where);
        k_layernorm_backward_partial<<<dim3((C + 31) / 32, nchunk), dim3(32, 8)>>>(scratch, dout, inp, mean, rstd, N, C);
        check_launch(where);
    }
    k_chunks_finish<<<(C + 255) / 256, 256>>>(dweight, scratch, (size_t)2 * C, nchunk, C, first);
    check_launch(where);
    k_chunks_finish<<<(C + 255) / 256, 256>>>(dbias, scratch + C, (size_t)2 * C, nchunk, C, first);
    check_launch(where);
}

extern "C" void layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                        const float *inp, const float *weight, const float *mean,
                                        const float *rstd, int N, int C, float *scratch) {
    layernorm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, 0, "layernorm_backward_cuda");
}

extern "C" void layernorm_backward_first_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                              const float *inp, const float *weight, const float *mean,
                                              const float *rstd, int N, int C, float *scratch) {
    layernorm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, 1,
                  "layernorm_backward_first_cuda");
}

/* ------------------------------------------------------------ GELU, residual */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* nn.c's expressions verbatim (their evaluation order is their bits) */
__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float th = dev_tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void k_gelu_forward(float *__restrict__ out, const float *__restrict__ inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + dev_tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

/* first: 0 + the product, the bits of accumulating onto a zeroed dinp */
__global__ void k_gelu_backward(float *__restrict__ dinp, const float *__restrict__ inp,
                                const float *__restrict__ dout, size_t n, int first) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dinp[i] = (first ? 0.0f : dinp[i]) + gelu_grad(inp[i]) * dout[i];
}

extern "C" void gelu_forward_cuda(float *out, const float *inp, size_t n) {
    if (!n) return;
    k_gelu_forward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(out, inp, n);
    check_launch("gelu_forward_cuda");
}

extern "C" void gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n) {
    if (!n) return;
    k_gelu_backward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(dinp, inp, dout, n, 0);
    check_launch("gelu_backward_cuda");
}

extern "C" void gelu_backward_first_cuda(float *dinp, const float *inp, const float *dout, size_t n) {
    if (!n) return;
    k_gelu_backward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(dinp, inp, dout, n, 1);
    check_launch("gelu_backward_first_cuda");
}

__global__ void k_residual_forward(float *__restrict__ out, const float *__restrict__ a,
                                   const float *__restrict__ b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void k_residual_backward(float *__restrict__ da, float *__restrict__ db,
                                    const float *__restrict__ dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

extern "C" void residual_forward_cuda(float *out, const float *a, const float *b, size_t n) {
    if (!n) return;
    k_residual_forward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(out, a, b, n);
    check_launch("residual_forward_cuda");
}

extern "C" void residual_backward_cuda(float *da, float *db, const float *dout, size_t n) {
    if (!n) return;
    k_residual_backward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(da, db, dout, n);
    check_launch("residual_backward_cuda");
}

/* ------------------------------------------------------------ attention */

/* a . b over n floats in attention.c's dot16 order: lane l sums channels
 * l, l+16, ... below n rounded down to 16, lane 0 then the rest in order,
 * and the lanes are added onto 0 in lane order. With -fmad=false these are
 * the CPU's roundings, so a score is the CPU's score bit for bit. */
__device__ __forceinline__ float dot16(const float *a, const float *b, int n) {
    float lane[16];
#pragma unroll
    for (int l = 0; l < 16; l++) lane[l] = 0.0f;
    const int n16 = n / 16 * 16;
    for (int i = 0; i < n16; i += 16) {
#pragma unroll
        for (int l = 0; l < 16; l++) lane[l] += a[i + l] * b[i + l];
    }
    for (int i = n16; i < n; i++) lane[0] += a[i] * b[i];
    float s = 0.0f;
#pragma unroll
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* Rows [k0, k0 + nk) of one head's q, k or v (src: its row 0, rows C3
 * apart) into a shared tile, row j at tile + j (hs + 1): consecutive
 * threads read consecutive channels (coalesced), and the +1 keeps thread
 * j's row in another bank than thread j+1's when each walks its own row. */
__device__ __forceinline__ void load_tile(float *tile, const float *src, size_t stride, int k0, int nk, int hs) {
    for (int e = threadIdx.x; e < nk * hs; e += blockDim.x) {
        const int j = e / hs, i = e % hs;
        tile[j * (hs + 1) + i] = src[(size_t)(k0 + j) * stride + i];
    }
}

/* One block (ATT_TILE threads) per (query t, head h, batch b): the scores
 * against keys 0..t, 64 keys per shared tile, each thread one key (dot16);
 * the softmax (block max, dev_expf, block sum: a fixed order, not the
 * CPU's vector-lane order, so att is within rounding of the CPU's); then
 * out_t = sum over t2 <= t ascending of att[t2] v_t2, each thread a channel
 * (the CPU's order). att is written and read back by this block: not
 * __restrict__/const (no read-only cache on it). */
__global__ void k_attention_forward(float *__restrict__ out, float *att, const float *__restrict__ inp,
                                    int T, int C, int NH, float scale) {
    extern __shared__ float sm[];
    __shared__ float shm[32];
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    float *sq = sm, *tile = sm + hs;
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;   /* q; k at + C, v at + 2C */
    float *arow = att + (((size_t)b * NH + h) * T + t) * T;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) sq[i] = base[(size_t)t * C3 + i];
    for (int k0 = 0; k0 <= t; k0 += ATT_TILE) {
        const int nk = t + 1 - k0 < ATT_TILE ? t + 1 - k0 : ATT_TILE;
        __syncthreads();
        load_tile(tile, base + C, C3, k0, nk, hs);
        __syncthreads();
        if ((int)threadIdx.x < nk) arow[k0 + threadIdx.x] = dot16(sq, tile + threadIdx.x * (hs + 1), hs) * scale;
    }
    /* each thread reads back the scores it wrote (t2 = tid mod ATT_TILE) */
    float mx = -INFINITY;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) mx = fmaxf(mx, arow[t2]);
    mx = block_reduce(mx, shm, 1);
    float s = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const float e = dev_expf(arow[t2] - mx);
        arow[t2] = e;
        s += e;
    }
    const float inv = 1.0f / block_reduce(s, shm, 0);
    for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) arow[t2] = t2 <= t ? arow[t2] * inv : 0.0f;
    __syncthreads();   /* the row's global writes, visible to the whole block */
    const float *v = base + 2 * (size_t)C;
    float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float acc = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) acc += arow[t2] * v[(size_t)t2 * C3 + i];
        o[i] = acc;
    }
}

static int attention_smem(const void *kernel, size_t bytes, const char *where) {
    /* The default 48 KiB is for static and dynamic shared memory together,
     * and these kernels have up to 128 bytes of static (block_reduce's
     * shm): past 47 KiB of dynamic, opt in (Hopper: up to 227 KiB), or a
     * launch just under 48 KiB would fail */
    if (bytes <= 47 * 1024) return 1;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess) return 1;
    cudaGetLastError();   /* reported here; not left for device_cuda.cu's next launch check to abort on */
    char msg[160];
    snprintf(msg, sizeof msg, "needs %zu bytes of shared memory per block (T or the head size too large): %s",
             bytes, cudaGetErrorString(e));
    fail(where, msg);
    return 0;
}

extern "C" void attention_forward_cuda(float *out, float *att, const float *inp, int B, int T, int C, int NH) {
    if (!B || !T || !C) return;
    const int hs = C / NH;
    const size_t smem = ((size_t)hs + (size_t)ATT_TILE * (hs + 1)) * sizeof(float);
    if (!attention_smem((const void *)k_attention_forward, smem, "attention_forward_cuda")) return;
    k_attention_forward<<<dim3(T, NH, B), ATT_TILE, smem>>>(out, att, inp, T, C, NH, 1.0f / sqrtf((float)hs));
    check_launch("attention_forward_cuda");
}

/* Backward, pass 1: one block per (query t, h, b). datt[t2] = dout_t . v_t2
 * (dot16, keys in shared tiles); dot = sum over t2 <= t ascending of
 * datt * att (one thread: the CPU's serial order), saved in rowdot for pass
 * 2; dpre[t2] = att (datt - dot) scale; dq_t (+)= sum over t2 ascending of
 * dpre[t2] k_t2. All in the CPU's order and expressions. */
__global__ void k_attention_backward_rows(float *__restrict__ dinp, float *__restrict__ rowdot,
                                          const float *__restrict__ dout, const float *__restrict__ inp,
                                          const float *__restrict__ att, int T, int C, int NH, float scale,
                                          int first) {
    extern __shared__ float sm[];
    __shared__ float sdot;
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    float *sdo = sm, *tile = sm + hs, *sd = tile + ATT_TILE * (hs + 1);   /* hs, tile, T */
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const float *arow = att + (((size_t)b * NH + h) * T + t) * T;
    const float *dO = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) sdo[i] = dO[i];
    for (int k0 = 0; k0 <= t; k0 += ATT_TILE) {
        const int nk = t + 1 - k0 < ATT_TILE ? t + 1 - k0 : ATT_TILE;
        __syncthreads();
        load_tile(tile, base + 2 * (size_t)C, C3, k0, nk, hs);
        __syncthreads();
        if ((int)threadIdx.x < nk) sd[k0 + threadIdx.x] = dot16(sdo, tile + threadIdx.x * (hs + 1), hs);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) dot += sd[t2] * arow[t2];
        rowdot[((size_t)b * NH + h) * T + t] = dot;
        sdot = dot;
    }
    __syncthreads();
    const float dot = sdot;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) sd[t2] = arow[t2] * (sd[t2] - dot) * scale;
    __syncthreads();
    const float *k = base + C;
    float *dq = dinp + ((size_t)b * T + t) * C3 + (size_t)h * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float acc = first ? 0.0f : dq[i];
        for (int t2 = 0; t2 <= t; t2++) acc += sd[t2] * k[(size_t)t2 * C3 + i];
        dq[i] = acc;
    }
}

/* Backward, pass 2: one block per (key t2, h, b), owning dk_t2 and dv_t2.
 * For every query t >= t2 it recomputes dpre[t][t2] exactly as pass 1 did
 * (the same dot16 on the same operands, pass 1's rowdot), so the column
 * needs no T x T scratch; then dk (+)= sum over t ascending of dpre q_t and
 * dv (+)= sum of att[t][t2] dout_t (the CPU's orders). */
__global__ void k_attention_backward_cols(float *__restrict__ dinp, const float *__restrict__ rowdot,
                                          const float *__restrict__ dout, const float *__restrict__ inp,
                                          const float *__restrict__ att, int T, int C, int NH, float scale,
                                          int first) {
    extern __shared__ float sm[];
    const int t2 = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    float *sv = sm, *tile = sm + hs, *cp = tile + ATT_TILE * (hs + 1), *ca = cp + T;   /* hs, tile, T, T */
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;   /* row t at t C */
    const float *ahead = att + ((size_t)b * NH + h) * T * T;
    const float *rd = rowdot + ((size_t)b * NH + h) * T;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) sv[i] = base[(size_t)t2 * C3 + 2 * (size_t)C + i];
    for (int q0 = t2; q0 < T; q0 += ATT_TILE) {
        const int nq = T - q0 < ATT_TILE ? T - q0 : ATT_TILE;
        __syncthreads();
        load_tile(tile, dO, (size_t)C, q0, nq, hs);
        __syncthreads();
        if ((int)threadIdx.x < nq) {
            const int t = q0 + threadIdx.x;
            const float a = ahead[(size_t)t * T + t2];
            const float datt = dot16(tile + threadIdx.x * (hs + 1), sv, hs);
            cp[t] = a * (datt - rd[t]) * scale;
            ca[t] = a;
        }
    }
    __syncthreads();
    const float *q = base;
    float *dk = dinp + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs, *dv = dk + C;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float ak = first ? 0.0f : dk[i], av = first ? 0.0f : dv[i];
        for (int t = t2; t < T; t++) {
            ak += cp[t] * q[(size_t)t * C3 + i];
            av += ca[t] * dO[(size_t)t * C + i];
        }
        dk[i] = ak;
        dv[i] = av;
    }
}

extern "C" size_t attention_backward_cuda_scratch(int B, int T, int NH) { return (size_t)B * NH * T; }

static void attention_bwd(float *dinp, const float *dout, const float *inp, const float *att, int B, int T, int C,
                          int NH, float *scratch, int first, const char *where) {
    if (!B || !T || !C) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t tile = (size_t)hs + (size_t)ATT_TILE * (hs + 1);
    const size_t smem_rows = (tile + (size_t)T) * sizeof(float), smem_cols = (tile + 2 * (size_t)T) * sizeof(float);
    if (!attention_smem((const void *)k_attention_backward_rows, smem_rows, where) ||
        !attention_smem((const void *)k_attention_backward_cols, smem_cols, where))
        return;
    const dim3 grid(T, NH, B);
    k_attention_backward_rows<<<grid, ATT_TILE, smem_rows>>>(dinp, scratch, dout, inp, att, T, C, NH, scale, first);
    check_launch(where);
    k_attention_backward_cols<<<grid, ATT_TILE, smem_cols>>>(dinp, scratch, dout, inp, att, T, C, NH, scale, first);
    check_launch(where);
}

extern "C" void attention_backward_cuda(float *dinp, const float *dout, const float *inp, const float *att,
                                        int B, int T, int C, int NH, float *scratch) {
    attention_bwd(dinp, dout, inp, att, B, T, C, NH, scratch, 0, "attention_backward_cuda");
}

extern "C" void attention_backward_first_cuda(float *dinp, const float *dout, const float *inp, const float *att,
                                              int B, int T, int C, int NH, float *scratch) {
    attention_bwd(dinp, dout, inp, att, B, T, C, NH, scratch, 1, "attention_backward_first_cuda");
}

/* ------------------------------------------------------------ attention, flash-style
 *
 * The same causal attention without the T x T probabilities in memory: the
 * forward keeps one float per softmax row, its log-sum-exp, and the backward
 * recomputes each probability from q, k and it. fp32 throughout; no tensor
 * cores, no atomics.
 *
 * Tiles: FL_TILE (64) query rows by FL_TILE keys. A block of FL_THREADS
 * (256) threads is a 16 x 16 grid: thread (ty, tx), tid = 16 ty + tx, owns
 * tile rows 4 ty .. 4 ty + 3 and tile columns (keys) tx, tx + 16, tx + 32,
 * tx + 48 of a score tile, and channels tx, tx + 16, ... (NC of them, NC =
 * ceil(hs / 16), a template parameter: hs up to 128) of an output row. The
 * 16 threads of one ty are 16 consecutive lanes of a warp, so a row's max
 * and sum are an xor butterfly over those lanes (offsets 8, 4, 2, 1), which
 * gives every lane the same bits.
 *
 * Tiles of q, k, v and dout live in shared memory with rows hs + 1 apart
 * (the +1: the 16 threads reading 16 different rows at one channel hit 16
 * banks when hs is even), tiles of probabilities FL_PS = 68 apart (the two
 * row groups of a warp, 4 rows apart, land 16 banks apart). Rows past T are
 * loaded as zeros, so nothing uninitialised is ever multiplied.
 *
 * Orders (all fixed by the shape): a score q . k (and dout . v) sums the
 * channels in ascending order, one chain; a row's max and sum: each thread
 * its 4 keys in order, then the butterfly; out, dq: keys ascending, tile
 * after tile; dk, dv: queries ascending, tile after tile. So every output
 * element has one owner and one order: two runs give the same bits. Against
 * the CPU (dot16, a whole-row softmax, att stored) the results are within
 * rounding, not bit-equal.
 *
 * Grids: x = B * NH (one (b, h) head per x), y = the tile index (T / 64
 * rounded up: 128 at T 8192), so gridDim.y stays far below 65535 and
 * gridDim.z is 1. The forward and dq kernels take their longest tiles (the
 * last query tiles, with the most keys) first, and the dk/dv kernel its
 * (the first key tiles, with the most queries), so the long blocks start
 * early. */

enum { FL_TILE = 64, FL_THREADS = 256, FL_PS = FL_TILE + 4, FL_MAX_NC = ATTENTION_FLASH_CUDA_MAX_HS / 16 };

/* Rows [r0, r0 + FL_TILE) of one head's q, k, v or dout (src: its row 0,
 * rows `stride` apart) into a tile with rows hs + 1 apart; rows at or past T
 * as zeros. Consecutive threads read consecutive channels. */
__device__ __forceinline__ void fl_load(float *tile, const float *src, size_t stride, int r0, int T, int hs) {
    for (int e = threadIdx.x; e < FL_TILE * hs; e += blockDim.x) {
        const int j = e / hs, i = e - j * hs;
        tile[j * (hs + 1) + i] = r0 + j < T ? src[(size_t)(r0 + j) * stride + i] : 0.0f;
    }
}

/* s[i][jj] = a_row(4 ty + i) . b_row(tx + 16 jj) over hs channels, in
 * ascending channel order; a and b tiles with rows hs + 1 apart. The same
 * operands give the same bits in every kernel below. */
__device__ __forceinline__ void fl_dots(float s[4][4], const float *a, const float *b, int hs, int tx, int ty) {
    const int S = hs + 1;
    const float *ar = a + 4 * ty * S, *br = b + tx * S;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int jj = 0; jj < 4; jj++) s[i][jj] = 0.0f;
    for (int d = 0; d < hs; d++) {
        float av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; i++) av[i] = ar[i * S + d];
#pragma unroll
        for (int jj = 0; jj < 4; jj++) bv[jj] = br[16 * jj * S + d];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) s[i][jj] += av[i] * bv[jj];
    }
}

/* the 16 lanes of one row group (the same ty): xor butterfly, every lane
 * the same bits */
__device__ __forceinline__ float fl_group_sum(float v) {
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float fl_group_max(float v) {
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Forward: one block per (query tile, head). For each key tile up to the
 * diagonal: scores (q . k) scale, the causal mask, the running max m and sum
 * l of each row (online softmax: the old sum and output rescaled by
 * exp(m_old - m_new)), the tile's probabilities p = exp(s - m_new) through
 * shared memory, out += p v. Then out /= l and lse = m + log l. Shared:
 * q, k, v tiles (64 (hs + 1) each) and p (64 x 68): 66 KiB at hs 64, 114 KiB
 * at hs 128. exp is dev_expf (the CPU's hpt_expf). */
template <int NC>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_forward(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ inp, int T, int C,
                int NH, float scale) {
    extern __shared__ float sm[];
    const int hs = C / NH, S = hs + 1;
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * FL_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C;
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;   /* q; k at + C, v at + 2C */
    float *sq = sm, *sk = sq + FL_TILE * S, *sv = sk + FL_TILE * S, *sp = sv + FL_TILE * S;
    fl_load(sq, base, C3, q0, T, hs);
    float m[4], l[4], o[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < NC; cc++) o[i][cc] = 0.0f;
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FL_TILE, nk = T - k0 < FL_TILE ? T - k0 : FL_TILE;
        __syncthreads();   /* the previous tile's k, v and p are read */
        fl_load(sk, base + C, C3, k0, T, hs);
        fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs);
        __syncthreads();
        float s[4][4];
        fl_dots(s, sq, sk, hs, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = 4 * ty + i, t = q0 + r;
            float mx = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                s[i][jj] = k0 + tx + 16 * jj <= t ? s[i][jj] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][jj]);
            }
            /* key k0 <= t for every row here (k0 <= q0 <= t): mn is finite */
            const float mn = fmaxf(m[i], fl_group_max(mx));
            const float corr = m[i] == -INFINITY ? 0.0f : dev_expf(m[i] - mn);
            float rs = 0.0f;
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                const float p = k0 + tx + 16 * jj <= t ? dev_expf(s[i][jj] - mn) : 0.0f;
                sp[r * FL_PS + tx + 16 * jj] = p;
                rs += p;
            }
            l[i] = l[i] * corr + fl_group_sum(rs);
            m[i] = mn;
#pragma unroll
            for (int cc = 0; cc < NC; cc++) o[i][cc] *= corr;
        }
        __syncthreads();
        for (int j = 0; j < nk; j++) {
            float vj[NC];
#pragma unroll
            for (int cc = 0; cc < NC; cc++) vj[cc] = tx + 16 * cc < hs ? sv[j * S + tx + 16 * cc] : 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float p = sp[(4 * ty + i) * FL_PS + j];
#pragma unroll
                for (int cc = 0; cc < NC; cc++) o[i][cc] += p * vj[cc];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        if (t >= T) continue;
        float *orow = out + ((size_t)b * T + t) * C + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) orow[tx + 16 * cc] = o[i][cc] / l[i];
        if (tx == 0) lse[((size_t)b * NH + h) * T + t] = m[i] + logf(l[i]);
    }
}

/* Backward, first: D[b][h][t] = dout_t . out_t over the head's channels
 * (= sum over keys of att datt, the softmax backward's row dot, without
 * att). One warp per (position, head): lanes stride the channels, then the
 * warp's butterfly. */
__global__ void k_flash_rowdot(float *__restrict__ D, const float *__restrict__ dout, const float *__restrict__ out,
                               int T, int C, int NH, size_t total) {
    const int lane = threadIdx.x & 31, hs = C / NH;
    const size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t w = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < total; w += warps) {
        const size_t n = w / NH;   /* position b T + t */
        const int h = (int)(w - n * NH);
        const float *a = dout + n * C + (size_t)h * hs, *o = out + n * C + (size_t)h * hs;
        float s = 0.0f;
        for (int c = lane; c < hs; c += 32) s += a[c] * o[c];
        s = warp_sum(s);
        const size_t b = n / T, t = n - b * T;
        if (lane == 0) D[(b * NH + h) * T + t] = s;
    }
}

/* The recomputed tile, shared by both backward kernels (the same operands
 * in the same order: the same bits in both): for the 4 x 4 (query, key)
 * pairs of this thread, p = exp(s scale - lse) (0 where masked or past T)
 * and dpre = p (dout . v - D) scale, the CPU's expression. */
__device__ __forceinline__ void fl_recompute(float p[4][4], float ds[4][4], const float *sq, const float *sdo,
                                             const float *sk, const float *sv, const float lse_r[4],
                                             const float d_r[4], int q0, int k0, int T, int hs, float scale, int tx,
                                             int ty) {
    float dp[4][4];
    fl_dots(p, sq, sk, hs, tx, ty);
    fl_dots(dp, sdo, sv, hs, tx, ty);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int on = k0 + tx + 16 * jj <= t && t < T;
            const float pv = on ? dev_expf(p[i][jj] * scale - lse_r[i]) : 0.0f;
            p[i][jj] = pv;
            ds[i][jj] = on ? pv * (dp[i][jj] - d_r[i]) * scale : 0.0f;
        }
    }
}

/* this thread's 4 rows' lse and D (0 past T) */
__device__ __forceinline__ void fl_row_stats(float lse_r[4], float d_r[4], const float *lse, const float *D, int q0,
                                             int T, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        lse_r[i] = t < T ? lse[t] : 0.0f;
        d_r[i] = t < T ? D[t] : 0.0f;
    }
}

/* Backward, dq: one block per (query tile, head), owning dq of its rows.
 * For each key tile up to the diagonal: p and dpre recomputed, dpre through
 * shared memory, dq (+)= sum over keys ascending of dpre k. Shared: q, dout,
 * k, v tiles and dpre (64 x 68): 82 KiB at hs 64, 146 KiB at hs 128. */
template <int NC>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_backward_dq(float *__restrict__ dinp, const float *__restrict__ dout, const float *__restrict__ inp,
                    const float *__restrict__ lse, const float *__restrict__ D, int T, int C, int NH, float scale,
                    int first) {
    extern __shared__ float sm[];
    const int hs = C / NH, S = hs + 1;
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * FL_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C, head = (size_t)b * NH + h;
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;
    float *sq = sm, *sdo = sq + FL_TILE * S, *sk = sdo + FL_TILE * S, *sv = sk + FL_TILE * S;
    float *sds = sv + FL_TILE * S;
    fl_load(sq, base, C3, q0, T, hs);
    fl_load(sdo, dO, (size_t)C, q0, T, hs);
    float lse_r[4], d_r[4];
    fl_row_stats(lse_r, d_r, lse + head * T, D + head * T, q0, T, ty);
    float acc[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        const float *dq = dinp + ((size_t)b * T + t) * C3 + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            acc[i][cc] = first || t >= T || tx + 16 * cc >= hs ? 0.0f : dq[tx + 16 * cc];
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FL_TILE, nk = T - k0 < FL_TILE ? T - k0 : FL_TILE;
        __syncthreads();   /* the previous tile's k and dpre are read */
        fl_load(sk, base + C, C3, k0, T, hs);
        fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs);
        __syncthreads();
        float p[4][4], ds[4][4];
        fl_recompute(p, ds, sq, sdo, sk, sv, lse_r, d_r, q0, k0, T, hs, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) sds[(4 * ty + i) * FL_PS + tx + 16 * jj] = ds[i][jj];
        __syncthreads();
        for (int j = 0; j < nk; j++) {
            float kj[NC];
#pragma unroll
            for (int cc = 0; cc < NC; cc++) kj[cc] = tx + 16 * cc < hs ? sk[j * S + tx + 16 * cc] : 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float d = sds[(4 * ty + i) * FL_PS + j];
#pragma unroll
                for (int cc = 0; cc < NC; cc++) acc[i][cc] += d * kj[cc];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        if (t >= T) continue;
        float *dq = dinp + ((size_t)b * T + t) * C3 + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) dq[tx + 16 * cc] = acc[i][cc];
    }
}

/* Backward, dk and dv: one block per (key tile, head), owning dk and dv of
 * its keys. For each query tile from the diagonal on: p and dpre
 * recomputed (the dq kernel's bits), both through shared memory, then
 * dv (+)= sum over queries ascending of p dout and dk (+)= of dpre q; this
 * thread's keys are tile rows 4 ty .. 4 ty + 3. lse and D of the query rows
 * ride in registers. Shared: k, v, q, dout tiles and p, dpre (64 x 68
 * each): 99 KiB at hs 64, 163 KiB at hs 128 (Hopper's limit is 227 KiB,
 * the A100's 163 KiB). */
template <int NC>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_backward_dkv(float *__restrict__ dinp, const float *__restrict__ dout, const float *__restrict__ inp,
                     const float *__restrict__ lse, const float *__restrict__ D, int T, int C, int NH, float scale,
                     int first) {
    extern __shared__ float sm[];
    const int hs = C / NH, S = hs + 1;
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int kt = blockIdx.y, k0 = kt * FL_TILE, ntile = gridDim.y;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C, head = (size_t)b * NH + h;
    const float *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;
    float *sk = sm, *sv = sk + FL_TILE * S, *sq = sv + FL_TILE * S, *sdo = sq + FL_TILE * S;
    float *sp = sdo + FL_TILE * S, *sds = sp + FL_TILE * FL_PS;
    fl_load(sk, base + C, C3, k0, T, hs);
    fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs);
    float ak[4][NC], av[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t2 = k0 + 4 * ty + i;
        const float *dk = dinp + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs, *dv = dk + C;
#pragma unroll
        for (int cc = 0; cc < NC; cc++) {
            const int skip = first || t2 >= T || tx + 16 * cc >= hs;
            ak[i][cc] = skip ? 0.0f : dk[tx + 16 * cc];
            av[i][cc] = skip ? 0.0f : dv[tx + 16 * cc];
        }
    }
    for (int qt = kt; qt < ntile; qt++) {
        const int q0 = qt * FL_TILE, nq = T - q0 < FL_TILE ? T - q0 : FL_TILE;
        __syncthreads();   /* the previous tile's q, dout, p and dpre are read */
        fl_load(sq, base, C3, q0, T, hs);
        fl_load(sdo, dO, (size_t)C, q0, T, hs);
        float lse_r[4], d_r[4];
        fl_row_stats(lse_r, d_r, lse + head * T, D + head * T, q0, T, ty);
        __syncthreads();
        float p[4][4], ds[4][4];
        fl_recompute(p, ds, sq, sdo, sk, sv, lse_r, d_r, q0, k0, T, hs, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                sp[(4 * ty + i) * FL_PS + tx + 16 * jj] = p[i][jj];
                sds[(4 * ty + i) * FL_PS + tx + 16 * jj] = ds[i][jj];
            }
        __syncthreads();
        for (int r = 0; r < nq; r++) {
            float qr[NC], dr[NC];
#pragma unroll
            for (int cc = 0; cc < NC; cc++) {
                const int c = tx + 16 * cc;
                qr[cc] = c < hs ? sq[r * S + c] : 0.0f;
                dr[cc] = c < hs ? sdo[r * S + c] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float pv = sp[r * FL_PS + 4 * ty + i], dsv = sds[r * FL_PS + 4 * ty + i];
#pragma unroll
                for (int cc = 0; cc < NC; cc++) {
                    av[i][cc] += pv * dr[cc];
                    ak[i][cc] += dsv * qr[cc];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t2 = k0 + 4 * ty + i;
        if (t2 >= T) continue;
        float *dk = dinp + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs, *dv = dk + C;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) {
                dk[tx + 16 * cc] = ak[i][cc];
                dv[tx + 16 * cc] = av[i][cc];
            }
    }
}

extern "C" size_t attention_flash_cuda_state(int B, int T, int NH) { return (size_t)B * NH * T; }
extern "C" size_t attention_flash_cuda_scratch(int B, int T, int NH) { return (size_t)B * NH * T; }

/* shared memory of each kernel, in bytes */
static size_t fl_smem_forward(int hs) { return (3 * (size_t)FL_TILE * (hs + 1) + (size_t)FL_TILE * FL_PS) * sizeof(float); }
static size_t fl_smem_dq(int hs) { return (4 * (size_t)FL_TILE * (hs + 1) + (size_t)FL_TILE * FL_PS) * sizeof(float); }
static size_t fl_smem_dkv(int hs) { return (4 * (size_t)FL_TILE * (hs + 1) + 2 * (size_t)FL_TILE * FL_PS) * sizeof(float); }

static int fl_tiles(int T) { return (T + FL_TILE - 1) / FL_TILE; }

/* 1 when the head size is one the flash kernels take, else the failure */
static int fl_head_ok(int C, int NH, const char *where) {
    const int hs = C / NH;
    if (hs >= 1 && hs <= ATTENTION_FLASH_CUDA_MAX_HS && NH * hs == C) return 1;
    char msg[200];
    snprintf(msg, sizeof msg, "head size C/NH = %d/%d is not one the flash attention takes (1 to %d, C a multiple "
             "of NH); HPT_CUDA_ATTENTION=materialise selects the T x T kernels", C, NH, ATTENTION_FLASH_CUDA_MAX_HS);
    fail(where, msg);
    return 0;
}

template <int NC>
static void fl_forward_launch(float *out, float *lse, const float *inp, int B, int T, int C, int NH, float scale) {
    const size_t smem = fl_smem_forward(C / NH);
    if (!attention_smem((const void *)k_flash_forward<NC>, smem, "attention_forward_flash_cuda")) return;
    k_flash_forward<NC><<<dim3((unsigned)(B * NH), (unsigned)fl_tiles(T)), FL_THREADS, smem>>>(out, lse, inp, T, C,
                                                                                             NH, scale);
    check_launch("attention_forward_flash_cuda");
}

template <int NC>
static void fl_backward_launch(float *dinp, const float *dout, const float *inp, const float *lse, const float *D,
                               int B, int T, int C, int NH, float scale, int first, const char *where) {
    const int hs = C / NH;
    const size_t smem_dq = fl_smem_dq(hs), smem_dkv = fl_smem_dkv(hs);
    if (!attention_smem((const void *)k_flash_backward_dq<NC>, smem_dq, where) ||
        !attention_smem((const void *)k_flash_backward_dkv<NC>, smem_dkv, where))
        return;
    const dim3 grid((unsigned)(B * NH), (unsigned)fl_tiles(T));
    /* dq, and dk with dv: disjoint thirds of dinp, both read only inp, dout, lse, D */
    k_flash_backward_dq<NC><<<grid, FL_THREADS, smem_dq>>>(dinp, dout, inp, lse, D, T, C, NH, scale, first);
    check_launch(where);
    k_flash_backward_dkv<NC><<<grid, FL_THREADS, smem_dkv>>>(dinp, dout, inp, lse, D, T, C, NH, scale, first);
    check_launch(where);
}

/* NC = ceil(hs / 16): the channels each thread owns, 1 to FL_MAX_NC */
#define FL_DISPATCH(nc, CALL)           \
    switch (nc) {                       \
    case 1: CALL(1); break;             \
    case 2: CALL(2); break;             \
    case 3: CALL(3); break;             \
    case 4: CALL(4); break;             \
    case 5: CALL(5); break;             \
    case 6: CALL(6); break;             \
    case 7: CALL(7); break;             \
    default: CALL(8); break;            \
    }
static_assert(FL_MAX_NC == 8, "FL_DISPATCH's cases are 1 to 8");

extern "C" void attention_forward_flash_cuda(float *out, float *lse, const float *inp, int B, int T, int C, int NH) {
    if (!B || !T || !C || !fl_head_ok(C, NH, "attention_forward_flash_cuda")) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
#define FL_FWD(n) fl_forward_launch<n>(out, lse, inp, B, T, C, NH, scale)
    FL_DISPATCH((hs + 15) / 16, FL_FWD)
#undef FL_FWD
}

static void flash_bwd(float *dinp, const float *dout, const float *inp, const float *out, const float *lse, int B,
                      int T, int C, int NH, float *scratch, int first, const char *where) {
    if (!B || !T || !C || !fl_head_ok(C, NH, where)) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t rows = (size_t)B * T * NH;   /* one warp each, 8 to a block */
    k_flash_rowdot<<<blocks_for(rows, 8), 256>>>(scratch, dout, out, T, C, NH, rows);
    check_launch(where);
#define FL_BWD(n) fl_backward_launch<n>(dinp, dout, inp, lse, scratch, B, T, C, NH, scale, first, where)
    FL_DISPATCH((hs + 15) / 16, FL_BWD)
#undef FL_BWD
}

extern "C" void attention_backward_flash_cuda(float *dinp, const float *dout, const float *inp, const float *out,
                                              const float *lse, int B, int T, int C, int NH, float *scratch) {
    flash_bwd(dinp, dout, inp, out, lse, B, T, C, NH, scratch, 0, "attention_backward_flash_cuda");
}

extern "C" void attention_backward_flash_first_cuda(float *dinp, const float *dout, const float *inp,
                                                    const float *out, const float *lse, int B, int T, int C, int NH,
                                                    float *scratch) {
    flash_bwd(dinp, dout, inp, out, lse, B, T, C, NH, scratch, 1, "attention_backward_flash_first_cuda");
}

/* ------------------------------------------------------------ softmax cross-entropy */

/* One block per row: the max of the V real logits, the loss from the
 * max-shifted target logit (read before the exps overwrite it: the barrier
 * below), exps and their block sum, then the scaling and zero padding.
 * Each thread rewrites only the entries it read. */
__global__ void k_softmax_xent_forward(float *__restrict__ losses, float *__restrict__ logits,
                                       const int *__restrict__ targets, int V, int Vp) {
    __shared__ float shm[32];
    const size_t n = blockIdx.x;
    float *z = logits + n * Vp;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, z[i]);
    mx = block_reduce(mx, shm, 1);
    const float zt = z[targets[n]] - mx;
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const float e = dev_expf(z[i] - mx);
        z[i] = e;
        s += e;
    }
    const float sum = block_reduce(s, shm, 0);
    if (threadIdx.x == 0) losses[n] = logf(sum) - zt;
    const float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < Vp; i += blockDim.x) z[i] = i < V ? z[i] * inv : 0.0f;
}

extern "C" void softmax_xent_forward_cuda(float *losses, float *logits, const int *targets, int N, int V, int Vp) {
    if (!N) return;
    k_softmax_xent_forward<<<N, XENT_THREADS>>>(losses, logits, targets, V, Vp);
    check_launch("softmax_xent_forward_cuda");
}

/* p * dloss, then at the target that minus dloss: the CPU's two roundings. */
__global__ void k_softmax_xent_backward(float *__restrict__ probs, const int *__restrict__ targets, float dloss,
                                        int V, int Vp, size_t total) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x) {
        const size_t n = j / Vp;
        const int i = (int)(j % Vp);
        float p = 0.0f;
        if (i < V) {
            p = probs[j] * dloss;
            if (i == targets[n]) p -= dloss;
        }
        probs[j] = p;
    }
}

extern "C" void softmax_xent_backward_cuda(float *probs, const int *targets, float dloss, int N, int V, int Vp) {
    const size_t total = (size_t)N * Vp;
    if (!total) return;
    k_softmax_xent_backward<<<blocks_for(total, EW_THREADS), EW_THREADS>>>(probs, targets, dloss, V, Vp, total);
    check_launch("softmax_xent_backward_cuda");
}
