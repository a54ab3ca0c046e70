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

extern "C" int kernels_cuda_set_tf32(int on) {
    if (!g_blas) { fail("kernels_cuda_set_tf32", "kernels_cuda_init was not called"); return -1; }
    check_blas(cublasSetMathMode(g_blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "kernels_cuda_set_tf32: cublasSetMathMode");
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

/* cuBLAS is column-major: a row-major (R, K) matrix is, to it, the (K, R)
 * matrix with leading dimension K. So out (N,OC) = inp (N,C) . weight^T is
 * out as OC x N = (weight as C x OC)^T . (inp as C x N): sgemm(T, N) with
 * m = OC, n = N, k = C. Bias: rows seeded with it and beta 1, as the CPU
 * seeds its rows before its sgemm. */
extern "C" void matmul_forward_cuda(float *out, const float *inp, const float *weight, const float *bias,
                                    int N, int C, int OC) {
    if (!N || !OC || !have_blas("matmul_forward_cuda")) return;
    const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
    if (bias) {
        const size_t total = (size_t)N * OC;
        k_bias_rows<<<blocks_for(total, EW_THREADS), EW_THREADS>>>(out, bias, OC, total);
        check_launch("matmul_forward_cuda (bias)");
    }
    check_blas(cublasSgemm(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, weight, C, inp, C, &beta, out, OC),
               "matmul_forward_cuda: cublasSgemm");
}

/* dinp (N,C) = dout (N,OC) . weight (OC,C): dinp^T (C,N) = (weight as
 * C x OC) . (dout as OC x N), sgemm(N, N) with m = C, n = N, k = OC.
 * beta 0 for _first: cuBLAS does not read C then. */
static void dinp_gemm(float *dinp, const float *dout, const float *weight, int N, int C, int OC, float beta,
                      const char *where) {
    if (!N || !C || !have_blas(where)) return;
    const float one = 1.0f;
    check_blas(cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, weight, C, dout, OC, &beta, dinp, C),
               where);
}

extern "C" void matmul_backward_dinp_cuda(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 1.0f, "matmul_backward_dinp_cuda: cublasSgemm");
}

extern "C" void matmul_backward_dinp_first_cuda(float *dinp, const float *dout, const float *weight,
                                                int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 0.0f, "matmul_backward_dinp_first_cuda: cublasSgemm");
}

/* dweight (OC,C) = dout^T . inp: dweight^T (C,OC) = (inp as C x N) .
 * (dout as OC x N)^T, sgemm(N, T) with m = C, n = OC, k = N. */
static void dweight_gemm(float *dweight, float *dbias, const float *dout, const float *inp, int N, int C, int OC,
                         float *scratch, int first, const char *where) {
    if (!C || !OC || !have_blas(where)) return;
    const float one = 1.0f, beta = first ? 0.0f : 1.0f;
    check_blas(cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC, &beta, dweight, C),
               where);
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
