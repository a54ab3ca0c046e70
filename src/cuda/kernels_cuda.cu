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
#include "kernels_cuda_internal.cuh"

/* ------------------------------------------------------------ contexts */

/* What --precision and the first-failure record are made of: a cuBLAS
 * handle at a math mode, the flash attention's tensor-core switch, and the
 * first failure. One per device instance (kernels_cuda_ctx_new), so two
 * models at two precisions keep theirs; the kernels read the one bound now
 * (kernels_cuda_use: the device binds its own at each of its calls), the
 * default one where nothing was bound (the kernel tests). */
struct kc_ctx {
    cublasHandle_t blas;
    int gemm_math;    /* KC_*: the GEMMs' arithmetic (gemm below) */
    bool flash_tc;    /* attention_flash_cuda_tensor_cores */
    int failed;
    char err[512];
};

static kc_ctx g_default = {NULL, KC_FP32, true, 0, ""};
static kc_ctx *g_cur = &g_default;

extern "C" kc_ctx *kernels_cuda_ctx_new(void) {
    kc_ctx *c = (kc_ctx *)calloc(1, sizeof *c);
    if (c) { c->gemm_math = KC_FP32; c->flash_tc = true; }
    return c;
}

extern "C" void kernels_cuda_ctx_free(kc_ctx *c) {
    if (!c || c == &g_default) return;
    if (c->blas) cublasDestroy(c->blas);
    if (g_cur == c) g_cur = &g_default;
    free(c);
}

extern "C" kc_ctx *kernels_cuda_use(kc_ctx *c) {
    kc_ctx *prev = g_cur;
    g_cur = c ? c : &g_default;
    return prev;
}

/* ------------------------------------------------------------ errors */

/* The first failure sticks: later ones are usually its consequences. */
void kc_fail(const char *where, const char *what) {
    if (g_cur->failed) return;
    g_cur->failed = 1;
    snprintf(g_cur->err, sizeof g_cur->err, "%s: %s", where, what);
}

/* After a launch: a bad configuration is reported at once; a fault inside
 * the kernel surfaces at the next synchronisation (kernels_cuda_sync). */
void kc_check_launch(const char *where) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) kc_fail(where, cudaGetErrorString(e));
}

void kc_check_blas(cublasStatus_t s, const char *where) {
    if (s != CUBLAS_STATUS_SUCCESS) kc_fail(where, cublasGetStatusString(s));
}

extern "C" const char *kernels_cuda_error(void) { return g_cur->err; }

extern "C" int kernels_cuda_init(void) {
    if (g_cur->blas) return g_cur->failed ? -1 : 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) { kc_fail("kernels_cuda_init", cudaGetErrorString(e)); return -1; }
    if (n == 0) { kc_fail("kernels_cuda_init", "no CUDA device found"); return -1; }
    cublasStatus_t s = cublasCreate(&g_cur->blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        g_cur->blas = NULL;
        kc_check_blas(s, "kernels_cuda_init: cublasCreate");
        return -1;
    }
    /* CUBLAS_DEFAULT_MATH with fp32 data and compute: FFMA kernels, no TF32
     * (which cuBLAS uses for sgemm only under CUBLAS_TF32_TENSOR_OP_MATH or
     * NVIDIA_TF32_OVERRIDE... which can only turn it off). Pedantic mode
     * would also forbid cuBLAS's faster fp32 reduction schemes; default
     * keeps them, and the test's tolerances cover their rounding. */
    kc_check_blas(cublasSetMathMode(g_cur->blas, CUBLAS_DEFAULT_MATH), "kernels_cuda_init: cublasSetMathMode");
    /* alpha and beta are host floats; the default stream */
    kc_check_blas(cublasSetPointerMode(g_cur->blas, CUBLAS_POINTER_MODE_HOST),
                  "kernels_cuda_init: cublasSetPointerMode");
    return g_cur->failed ? -1 : 0;
}

extern "C" void kernels_cuda_shutdown(void) {
    if (g_cur->blas) cublasDestroy(g_cur->blas);
    g_cur->blas = NULL;
}

/* TF32 and bf16 tensor cores are Ampere's (compute capability 8.0) and
 * newer: on an older GPU cuBLAS would quietly fall back to FFMA, so a run
 * asking for them is refused instead of measured as something it is not. */
static int tensor_cores_present(void) {
    int dev = 0, major = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) { kc_fail("kernels_cuda_set_gemm_math", cudaGetErrorString(e)); return -1; }
    return major >= 8;
}

/* The GEMMs' arithmetic (kernels_cuda.h's KC_*). fp32 and tf32 go through
 * cublasSgemm under a math mode; bf16 through cublasGemmEx with fp32 data
 * and the compute type CUBLAS_COMPUTE_32F_FAST_16BF (gemm below). */
extern "C" int kernels_cuda_set_gemm_math(int mode) {
    if (!g_cur->blas) { kc_fail("kernels_cuda_set_gemm_math", "kernels_cuda_init was not called"); return -1; }
    if (mode != KC_FP32 && mode != KC_TF32 && mode != KC_BF16) {
        kc_fail("kernels_cuda_set_gemm_math", "unknown mode");
        return -1;
    }
    if (mode != KC_FP32) {
        int tc = tensor_cores_present();
        if (tc < 0) return -1;
        if (!tc) {
            kc_fail("kernels_cuda_set_gemm_math",
                 "this GPU's compute capability is below 8.0: it has no TF32 or bf16 tensor cores (fp32 runs)");
            return -1;
        }
    }
    kc_check_blas(cublasSetMathMode(g_cur->blas, mode == KC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "kernels_cuda_set_gemm_math: cublasSetMathMode");
    if (!g_cur->failed) g_cur->gemm_math = mode;
    return g_cur->failed ? -1 : 0;
}

int kc_gemm_math(void) { return g_cur->gemm_math; }

extern "C" void attention_flash_cuda_tensor_cores(int on) { g_cur->flash_tc = on != 0; }
bool kc_flash_tc(void) { return g_cur->flash_tc; }

extern "C" int kernels_cuda_sync(void) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) kc_fail("kernels_cuda_sync", cudaGetErrorString(e));
    return g_cur->failed ? -1 : 0;
}

/* ------------------------------------------------------------ helpers */

enum { EW_THREADS = 256, LN_THREADS = 256, XENT_THREADS = 512, CHUNK_ROWS = 64 };

static int chunks_of(int N) { return (N + CHUNK_ROWS - 1) / CHUNK_ROWS; }

/* ------------------------------------------------------------ embeddings */

template <typename A>
__global__ void k_encoder_forward(A *__restrict__ out, const int *__restrict__ inp, const float *__restrict__ wte,
                                  const float *__restrict__ wpe, int T, int C, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / C;
        const int c = (int)(i % C), t = (int)(n % T);
        out[i] = act_of<A>(wte[(size_t)inp[n] * C + c] + wpe[(size_t)t * C + c]);
    }
}

template <typename A>
static void encoder_fwd(A *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C,
                        const char *where) {
    const size_t total = (size_t)B * T * C;
    if (!total) return;
    k_encoder_forward<A><<<blocks_for(total, EW_THREADS), EW_THREADS>>>(out, inp, wte, wpe, T, C, total);
    kc_check_launch(where);
}

extern "C" void encoder_forward_cuda(float *out, const int *inp, const float *wte, const float *wpe,
                                     int B, int T, int C) {
    encoder_fwd(out, inp, wte, wpe, B, T, C, "encoder_forward_cuda");
}

extern "C" void encoder_forward_bf16_cuda(kc_bf16 *out, const int *inp, const float *wte, const float *wpe,
                                          int B, int T, int C) {
    encoder_fwd(as_bf16(out), inp, wte, wpe, B, T, C, "encoder_forward_bf16_cuda");
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
template <typename A>
__global__ void k_encoder_backward_wte(float *__restrict__ dwte, const A *__restrict__ dout,
                                       const int *__restrict__ inp, const int *__restrict__ owner, int BT, int C) {
    const int p = blockIdx.x, tok = inp[p];
    if (owner[tok] != p) return;
    float *row = dwte + (size_t)tok * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = row[c];
        for (int q = p; q < BT; q++)
            if (inp[q] == tok) acc += ldf(dout[(size_t)q * C + c]);
        row[c] = acc;
    }
}

/* dwpe[t][c] += dout[b][t][c] for b ascending: one thread per (t, c). */
template <typename A>
__global__ void k_encoder_backward_wpe(float *__restrict__ dwpe, const A *__restrict__ dout, int B, int T, int C) {
    const size_t TC = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < TC; i += (size_t)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += ldf(dout[(size_t)b * TC + i]);
        dwpe[i] = acc;
    }
}

extern "C" size_t encoder_backward_cuda_scratch(int V) { return (size_t)V; }

template <typename A>
static void encoder_bwd(float *dwte, float *dwpe, const A *dout, const int *inp, int B, int T, int C, int V,
                        int *scratch) {
    const int BT = B * T;
    if (!BT || !C) return;
    /* 0x7f7f7f7f: above any position, so atomicMin takes the first */
    cudaError_t e = cudaMemsetAsync(scratch, 0x7f, (size_t)V * sizeof(int), 0);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* as attention_smem: reported through kernels_cuda_error, then cleared */
        kc_fail("encoder_backward_cuda: cudaMemsetAsync", cudaGetErrorString(e));
        return;
    }
    k_encoder_owner<<<blocks_for((size_t)BT, EW_THREADS), EW_THREADS>>>(scratch, inp, BT);
    kc_check_launch("encoder_backward_cuda (owner)");
    k_encoder_backward_wte<A><<<BT, C < 256 ? 32 * ((C + 31) / 32) : 256>>>(dwte, dout, inp, scratch, BT, C);
    kc_check_launch("encoder_backward_cuda (wte)");
    k_encoder_backward_wpe<A><<<blocks_for((size_t)T * C, EW_THREADS), EW_THREADS>>>(dwpe, dout, B, T, C);
    kc_check_launch("encoder_backward_cuda (wpe)");
}

extern "C" void encoder_backward_cuda(float *dwte, float *dwpe, const float *dout, const int *inp,
                                      int B, int T, int C, int V, int *scratch) {
    encoder_bwd(dwte, dwpe, dout, inp, B, T, C, V, scratch);
}

extern "C" void encoder_backward_bf16_cuda(float *dwte, float *dwpe, const kc_bf16 *dout, const int *inp,
                                           int B, int T, int C, int V, int *scratch) {
    encoder_bwd(dwte, dwpe, as_bf16(dout), inp, B, T, C, V, scratch);
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
template <typename A>
__global__ void k_bias_partial(float *__restrict__ part, const A *__restrict__ dout, int N, int OC) {
    __shared__ float s[8][32];
    const int o = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y;
    const int r0 = k * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < N ? r0 + CHUNK_ROWS : N;
    float acc = 0.0f;
    if (o < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += ldf(dout[(size_t)r * OC + o]);
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

/* out's rows seeded with the bias (rounded to A: the bias a bf16 GEMM adds
 * is a bf16, as under PyTorch's autocast) */
template <typename A>
__global__ void k_bias_rows(A *__restrict__ out, const float *__restrict__ bias, int OC, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = act_of<A>(bias[i % OC]);
}

int kc_have_blas(const char *where) {
    if (g_cur->blas) return 1;
    kc_fail(where, "kernels_cuda_init was not called (no cuBLAS handle)");
    return 0;
}

/* C = A op B + beta C in cuBLAS's column-major terms, alpha 1; A and B of
 * type ab, C of type ct. fp32 data (ab and ct CUDA_R_32F): cublasSgemm under
 * the math mode (FFMA, or TF32 tensor cores), or under KC_BF16 cublasGemmEx
 * with CUBLAS_COMPUTE_32F_FAST_16BF (cuBLAS rounds A and B to bf16 inside
 * the GEMM: the GEMM half of mixed precision on fp32 storage). bf16 data
 * (ab CUDA_R_16BF, C bf16 or fp32): cublasGemmEx with CUBLAS_COMPUTE_32F,
 * bf16 tensor cores with fp32 sums, C rounded to its type at the end. */
static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
                           cudaDataType ab, int lda, const void *B, int ldb, float beta, void *Cm, cudaDataType ct,
                           int ldc) {
    const float one = 1.0f;
    if (ab == CUDA_R_32F && ct == CUDA_R_32F && g_cur->gemm_math != KC_BF16)
        return cublasSgemm(g_cur->blas, ta, tb, m, n, k, &one, (const float *)A, lda, (const float *)B, ldb, &beta,
                           (float *)Cm, ldc);
    const cublasComputeType_t compute = ab == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    return cublasGemmEx(g_cur->blas, ta, tb, m, n, k, &one, A, ab, lda, B, ab, ldb, &beta, Cm, ct, ldc, compute,
                        CUBLAS_GEMM_DEFAULT);
}

/* cuBLAS is column-major: a row-major (R, K) matrix is, to it, the (K, R)
 * matrix with leading dimension K. So out (N,OC) = inp (N,C) . weight^T is
 * out as OC x N = (weight as C x OC)^T . (inp as C x N): sgemm(T, N) with
 * m = OC, n = N, k = C. Bias: rows seeded with it and beta 1, as the CPU
 * seeds its rows before its sgemm. */
template <typename A>
static void matmul_fwd(A *out, const A *inp, const A *weight, const float *bias, int N, int C, int OC,
                       const char *where) {
    if (!N || !OC || !kc_have_blas(where)) return;
    const float beta = bias ? 1.0f : 0.0f;
    if (bias) {
        const size_t total = (size_t)N * OC;
        k_bias_rows<A><<<blocks_for(total, EW_THREADS), EW_THREADS>>>(out, bias, OC, total);
        kc_check_launch(where);
    }
    kc_check_blas(gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, act_dt<A>::value, C, inp, C, beta, out,
                       act_dt<A>::value, OC), where);
}

extern "C" void matmul_forward_cuda(float *out, const float *inp, const float *weight, const float *bias,
                                    int N, int C, int OC) {
    matmul_fwd(out, inp, weight, bias, N, C, OC, "matmul_forward_cuda: cuBLAS GEMM");
}

extern "C" void matmul_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *weight, const float *bias,
                                         int N, int C, int OC) {
    matmul_fwd(as_bf16(out), as_bf16(inp), as_bf16(weight), bias, N, C, OC, "matmul_forward_bf16_cuda: cuBLAS GEMM");
}

/* dinp (N,C) = dout (N,OC) . weight (OC,C): dinp^T (C,N) = (weight as
 * C x OC) . (dout as OC x N), sgemm(N, N) with m = C, n = N, k = OC.
 * beta 0 for _first: cuBLAS does not read C then. */
template <typename A>
static void dinp_gemm(A *dinp, const A *dout, const A *weight, int N, int C, int OC, float beta, const char *where) {
    if (!N || !C || !kc_have_blas(where)) return;
    kc_check_blas(gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, act_dt<A>::value, C, dout, OC, beta, dinp,
                       act_dt<A>::value, C), where);
}

extern "C" void matmul_backward_dinp_cuda(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 1.0f, "matmul_backward_dinp_cuda: cuBLAS GEMM");
}

extern "C" void matmul_backward_dinp_first_cuda(float *dinp, const float *dout, const float *weight,
                                                int N, int C, int OC) {
    dinp_gemm(dinp, dout, weight, N, C, OC, 0.0f, "matmul_backward_dinp_first_cuda: cuBLAS GEMM");
}

extern "C" void matmul_backward_dinp_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *dout, const kc_bf16 *weight,
                                                     int N, int C, int OC) {
    dinp_gemm(as_bf16(dinp), as_bf16(dout), as_bf16(weight), N, C, OC, 0.0f,
              "matmul_backward_dinp_first_bf16_cuda: cuBLAS GEMM");
}

/* dweight (OC,C) = dout^T . inp: dweight^T (C,OC) = (inp as C x N) .
 * (dout as OC x N)^T, sgemm(N, T) with m = C, n = OC, k = N. dweight and
 * dbias are fp32 whatever A is (the parameters' gradients). */
template <typename A>
static void dweight_gemm(float *dweight, float *dbias, const A *dout, const A *inp, int N, int C, int OC,
                         float *scratch, int first, const char *where) {
    if (!C || !OC || !kc_have_blas(where)) return;
    kc_check_blas(gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, act_dt<A>::value, C, dout, OC, first ? 0.0f : 1.0f,
                       dweight, CUDA_R_32F, C), where);
    if (!dbias) return;
    const int nchunk = chunks_of(N);
    if (nchunk) {
        k_bias_partial<A><<<dim3((OC + 31) / 32, nchunk), dim3(32, 8)>>>(scratch, dout, N, OC);
        kc_check_launch(where);
    }
    k_chunks_finish<<<(OC + 255) / 256, 256>>>(dbias, scratch, (size_t)OC, nchunk, OC, first);
    kc_check_launch(where);
}

extern "C" void matmul_backward_dweight_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                             int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, dout, inp, N, C, OC, scratch, 0, "matmul_backward_dweight_cuda");
}

extern "C" void matmul_backward_dweight_first_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                                   int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, dout, inp, N, C, OC, scratch, 1, "matmul_backward_dweight_first_cuda");
}

extern "C" void matmul_backward_dweight_bf16_cuda(float *dweight, float *dbias, const kc_bf16 *dout,
                                                  const kc_bf16 *inp, int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, as_bf16(dout), as_bf16(inp), N, C, OC, scratch, 0, "matmul_backward_dweight_bf16_cuda");
}

extern "C" void matmul_backward_dweight_first_bf16_cuda(float *dweight, float *dbias, const kc_bf16 *dout,
                                                        const kc_bf16 *inp, int N, int C, int OC, float *scratch) {
    dweight_gemm(dweight, dbias, as_bf16(dout), as_bf16(inp), N, C, OC, scratch, 1,
                 "matmul_backward_dweight_first_bf16_cuda");
}

extern "C" void matmul_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, int N, int C, int OC, float *scratch) {
    if (dinp) matmul_backward_dinp_cuda(dinp, dout, weight, N, C, OC);
    matmul_backward_dweight_cuda(dweight, dbias, dout, inp, N, C, OC, scratch);
}

/* ------------------------------------------------------------ layernorm */

/* One block per row: mean, then the variance about it (two passes, as the
 * CPU: stable for large means), each a block_reduce. */
template <typename A>
__global__ void k_layernorm_forward(A *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                                    const A *__restrict__ inp, const float *__restrict__ weight,
                                    const float *__restrict__ bias, int C) {
    __shared__ float shm[32];
    const float eps = 1e-5f;
    const size_t n = blockIdx.x;
    const A *x = inp + n * C;
    A *o = out + n * C;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += ldf(x[c]);
    const float m = block_reduce(s, shm, 0) / C;
    float v = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) { const float d = ldf(x[c]) - m; v += d * d; }
    const float var = block_reduce(v, shm, 0) / C;
    const float r = 1.0f / sqrtf(var + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = act_of<A>((ldf(x[c]) - m) * r * weight[c] + bias[c]);
    if (threadIdx.x == 0) { mean[n] = m; rstd[n] = r; }
}

template <typename A>
static void layernorm_fwd(A *out, float *mean, float *rstd, const A *inp, const float *weight, const float *bias,
                          int N, int C, const char *where) {
    if (!N) return;
    k_layernorm_forward<A><<<N, LN_THREADS>>>(out, mean, rstd, inp, weight, bias, C);
    kc_check_launch(where);
}

extern "C" void layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                       const float *weight, const float *bias, int N, int C) {
    layernorm_fwd(out, mean, rstd, inp, weight, bias, N, C, "layernorm_forward_cuda");
}

extern "C" void layernorm_forward_bf16_cuda(kc_bf16 *out, float *mean, float *rstd, const kc_bf16 *inp,
                                            const float *weight, const float *bias, int N, int C) {
    layernorm_fwd(as_bf16(out), mean, rstd, as_bf16(inp), weight, bias, N, C, "layernorm_forward_bf16_cuda");
}

/* dinp, one block per row: the two row sums, then each element, in the
 * CPU's expression order. */
template <typename A>
__global__ void k_layernorm_backward_dinp(A *__restrict__ dinp, const A *__restrict__ dout,
                                          const A *__restrict__ inp, const float *__restrict__ weight,
                                          const float *__restrict__ mean, const float *__restrict__ rstd, int C) {
    __shared__ float shm[32];
    const size_t n = blockIdx.x;
    const A *x = inp + n * C, *d = dout + n * C;
    A *dx = dinp + n * C;
    const float m = mean[n], s = rstd[n];
    float a = 0.0f, b = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float dn = ldf(d[c]) * weight[c];
        a += dn;
        b += dn * (ldf(x[c]) - m) * s;
    }
    const float dmean = block_reduce(a, shm, 0) / C;
    const float dnm = block_reduce(b, shm, 0) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float norm = (ldf(x[c]) - m) * s;
        dx[c] = act_of<A>(ldf(dx[c]) + (ldf(d[c]) * weight[c] - dmean - norm * dnm) * s);
    }
}

/* First pass of dweight/dbias: part[k][c] and part[k][C + c], the sums over
 * the 64 rows of chunk k, laid out as k_bias_partial's. */
template <typename A>
__global__ void k_layernorm_backward_partial(float *__restrict__ part, const A *__restrict__ dout,
                                             const A *__restrict__ inp, const float *__restrict__ mean,
                                             const float *__restrict__ rstd, int N, int C) {
    __shared__ float sw[8][32], sb[8][32];
    const int c = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y;
    const int r0 = k * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < N ? r0 + CHUNK_ROWS : N;
    float dw = 0.0f, db = 0.0f;
    if (c < C)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            const float d = ldf(dout[(size_t)r * C + c]);
            dw += d * (ldf(inp[(size_t)r * C + c]) - mean[r]) * rstd[r];
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

template <typename A>
static void layernorm_bwd(A *dinp, float *dweight, float *dbias, const A *dout, const A *inp, const float *weight,
                          const float *mean, const float *rstd, int N, int C, float *scratch, int first,
                          const char *where) {
    if (!C) return;
    const int nchunk = chunks_of(N);
    if (N) {
        k_layernorm_backward_dinp<A><<<N, LN_THREADS>>>(dinp, dout, inp, weight, mean, rstd, C);
        kc_check_launch(where);
        k_layernorm_backward_partial<A><<<dim3((C + 31) / 32, nchunk), dim3(32, 8)>>>(scratch, dout, inp, mean, rstd,
                                                                                      N, C);
        kc_check_launch(where);
    }
    k_chunks_finish<<<(C + 255) / 256, 256>>>(dweight, scratch, (size_t)2 * C, nchunk, C, first);
    kc_check_launch(where);
    k_chunks_finish<<<(C + 255) / 256, 256>>>(dbias, scratch + C, (size_t)2 * C, nchunk, C, first);
    kc_check_launch(where);
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

extern "C" void layernorm_backward_bf16_cuda(kc_bf16 *dinp, float *dweight, float *dbias, const kc_bf16 *dout,
                                             const kc_bf16 *inp, const float *weight, const float *mean,
                                             const float *rstd, int N, int C, float *scratch) {
    layernorm_bwd(as_bf16(dinp), dweight, dbias, as_bf16(dout), as_bf16(inp), weight, mean, rstd, N, C, scratch, 0,
                  "layernorm_backward_bf16_cuda");
}

extern "C" void layernorm_backward_first_bf16_cuda(kc_bf16 *dinp, float *dweight, float *dbias, const kc_bf16 *dout,
                                                   const kc_bf16 *inp, const float *weight, const float *mean,
                                                   const float *rstd, int N, int C, float *scratch) {
    layernorm_bwd(as_bf16(dinp), dweight, dbias, as_bf16(dout), as_bf16(inp), weight, mean, rstd, N, C, scratch, 1,
                  "layernorm_backward_first_bf16_cuda");
}

/* ------------------------------------------------------------ GELU, residual */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* nn.c's expressions verbatim (their evaluation order is their bits) */
__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float th = dev_tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename A>
__global__ void k_gelu_forward(A *__restrict__ out, const A *__restrict__ inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = ldf(inp[i]);
        out[i] = act_of<A>(0.5f * x * (1.0f + dev_tanhf(GELU_K * (x + 0.044715f * x * x * x))));
    }
}

/* first: 0 + the product, the bits of accumulating onto a zeroed dinp */
template <typename A>
__global__ void k_gelu_backward(A *__restrict__ dinp, const A *__restrict__ inp, const A *__restrict__ dout,
                                size_t n, int first) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dinp[i] = act_of<A>((first ? 0.0f : ldf(dinp[i])) + gelu_grad(ldf(inp[i])) * ldf(dout[i]));
}

template <typename A>
static void gelu_fwd(A *out, const A *inp, size_t n, const char *where) {
    if (!n) return;
    k_gelu_forward<A><<<blocks_for(n, EW_THREADS), EW_THREADS>>>(out, inp, n);
    kc_check_launch(where);
}

template <typename A>
static void gelu_bwd(A *dinp, const A *inp, const A *dout, size_t n, int first, const char *where) {
    if (!n) return;
    k_gelu_backward<A><<<blocks_for(n, EW_THREADS), EW_THREADS>>>(dinp, inp, dout, n, first);
    kc_check_launch(where);
}

extern "C" void gelu_forward_cuda(float *out, const float *inp, size_t n) { gelu_fwd(out, inp, n, "gelu_forward_cuda"); }

extern "C" void gelu_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *inp, size_t n) {
    gelu_fwd(as_bf16(out), as_bf16(inp), n, "gelu_forward_bf16_cuda");
}

extern "C" void gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n) {
    gelu_bwd(dinp, inp, dout, n, 0, "gelu_backward_cuda");
}

extern "C" void gelu_backward_first_cuda(float *dinp, const float *inp, const float *dout, size_t n) {
    gelu_bwd(dinp, inp, dout, n, 1, "gelu_backward_first_cuda");
}

extern "C" void gelu_backward_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *inp, const kc_bf16 *dout, size_t n) {
    gelu_bwd(as_bf16(dinp), as_bf16(inp), as_bf16(dout), n, 1, "gelu_backward_first_bf16_cuda");
}

template <typename A>
__global__ void k_residual_forward(A *__restrict__ out, const A *__restrict__ a, const A *__restrict__ b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = act_of<A>(ldf(a[i]) + ldf(b[i]));
}

__global__ void k_residual_backward(float *__restrict__ da, float *__restrict__ db,
                                    const float *__restrict__ dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

template <typename A>
static void residual_fwd(A *out, const A *a, const A *b, size_t n, const char *where) {
    if (!n) return;
    k_residual_forward<A><<<blocks_for(n, EW_THREADS), EW_THREADS>>>(out, a, b, n);
    kc_check_launch(where);
}

extern "C" void residual_forward_cuda(float *out, const float *a, const float *b, size_t n) {
    residual_fwd(out, a, b, n, "residual_forward_cuda");
}

extern "C" void residual_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *a, const kc_bf16 *b, size_t n) {
    residual_fwd(as_bf16(out), as_bf16(a), as_bf16(b), n, "residual_forward_bf16_cuda");
}

extern "C" void residual_backward_cuda(float *da, float *db, const float *dout, size_t n) {
    if (!n) return;
    k_residual_backward<<<blocks_for(n, EW_THREADS), EW_THREADS>>>(da, db, dout, n);
    kc_check_launch("residual_backward_cuda");
}

/* ------------------------------------------------------------ softmax cross-entropy */

/* One block per row: the max of the V real logits, the loss from the
 * max-shifted target logit (read before the exps overwrite it: the barrier
 * below), exps and their block sum, then the scaling and zero padding.
 * Each thread rewrites only the entries it read. Under bf16, z keeps each
 * exp rounded to bf16 between the passes (the sum adds the unrounded ones),
 * so a probability is rounded twice: within 2^-8 relative. */
template <typename A>
__global__ void k_softmax_xent_forward(float *__restrict__ losses, A *__restrict__ logits,
                                       const int *__restrict__ targets, int V, int Vp) {
    __shared__ float shm[32];
    const size_t n = blockIdx.x;
    A *z = logits + n * Vp;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, ldf(z[i]));
    mx = block_reduce(mx, shm, 1);
    const float zt = ldf(z[targets[n]]) - mx;
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const float e = dev_expf(ldf(z[i]) - mx);
        z[i] = act_of<A>(e);
        s += e;
    }
    const float sum = block_reduce(s, shm, 0);
    if (threadIdx.x == 0) losses[n] = logf(sum) - zt;
    const float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < Vp; i += blockDim.x) z[i] = act_of<A>(i < V ? ldf(z[i]) * inv : 0.0f);
}

template <typename A>
static void xent_fwd(float *losses, A *logits, const int *targets, int N, int V, int Vp, const char *where) {
    if (!N) return;
    k_softmax_xent_forward<A><<<N, XENT_THREADS>>>(losses, logits, targets, V, Vp);
    kc_check_launch(where);
}

extern "C" void softmax_xent_forward_cuda(float *losses, float *logits, const int *targets, int N, int V, int Vp) {
    xent_fwd(losses, logits, targets, N, V, Vp, "softmax_xent_forward_cuda");
}

extern "C" void softmax_xent_forward_bf16_cuda(float *losses, kc_bf16 *logits, const int *targets, int N, int V,
                                               int Vp) {
    xent_fwd(losses, as_bf16(logits), targets, N, V, Vp, "softmax_xent_forward_bf16_cuda");
}

/* p * dloss, then at the target that minus dloss: the CPU's two roundings. */
template <typename A>
__global__ void k_softmax_xent_backward(A *__restrict__ probs, const int *__restrict__ targets, float dloss, int V,
                                        int Vp, size_t total) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x) {
        const size_t n = j / Vp;
        const int i = (int)(j % Vp);
        float p = 0.0f;
        if (i < V) {
            p = ldf(probs[j]) * dloss;
            if (i == targets[n]) p -= dloss;
        }
        probs[j] = act_of<A>(p);
    }
}

template <typename A>
static void xent_bwd(A *probs, const int *targets, float dloss, int N, int V, int Vp, const char *where) {
    const size_t total = (size_t)N * Vp;
    if (!total) return;
    k_softmax_xent_backward<A><<<blocks_for(total, EW_THREADS), EW_THREADS>>>(probs, targets, dloss, V, Vp, total);
    kc_check_launch(where);
}

extern "C" void softmax_xent_backward_cuda(float *probs, const int *targets, float dloss, int N, int V, int Vp) {
    xent_bwd(probs, targets, dloss, N, V, Vp, "softmax_xent_backward_cuda");
}

extern "C" void softmax_xent_backward_bf16_cuda(kc_bf16 *probs, const int *targets, float dloss, int N, int V,
                                                int Vp) {
    xent_bwd(as_bf16(probs), targets, dloss, N, V, Vp, "softmax_xent_backward_bf16_cuda");
}

/* ------------------------------------------------------------ conversions */

template <typename A>
__global__ void k_acts_of_floats(A *__restrict__ dst, const float *__restrict__ src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = act_of<A>(src[i]);
}

extern "C" void floats_to_bf16_cuda(kc_bf16 *dst, const float *src, size_t n) {
    if (!n) return;
    k_acts_of_floats<bf16><<<blocks_for(n, EW_THREADS), EW_THREADS>>>(as_bf16(dst), src, n);
    kc_check_launch("floats_to_bf16_cuda");
}
