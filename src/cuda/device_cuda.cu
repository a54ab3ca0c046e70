/*
 * device_cuda.cu — the CUDA row of the device table (src/device/device.h):
 * device memory (cudaMalloc, zeroed) on GPU 0 and one plain kernel per
 * operation, all on the default stream, so they run in the order called and
 * a host read (download, sumsq, dot) waits for everything before it.
 *
 * Bits against the CPU row (src/kernels/sweep.c), what tests/cuda/
 * test_device_cuda.c checks:
 * - copies, fill, swap, scale, axpy, lerp, AdamW, schedule-free AdamW and the
 *   outer steps (plain and schedule-free): the same bits. Each element is the
 *   CPU's expression written out again in the same order; nvcc builds with
 *   -fmad=false (no FMA contraction, as the C code's -ffp-contract=off) and
 *   IEEE-rounded division and sqrt (its defaults; never --use_fast_math),
 *   denormals kept. The step-only factors (bias corrections: powf, sqrtf) are
 *   computed on the host exactly as the CPU kernel computes them, by the same
 *   libm, and passed in.
 * - sumsq and dot: double sums of the float products (exact in double) in a
 *   fixed order of their own: RED_BLOCK threads x a grid fixed by n alone,
 *   each thread a strided sum, each block a tree in shared memory, the blocks'
 *   sums added on the host in block order. The same bits from call to call
 *   and run to run on one GPU model; not the CPU's 64-chunk bits (within
 *   about 1e-15 relative of an exact sum, as the CPU's are). No atomics.
 * A failed CUDA call is a programmer error here (cuda_check.h aborts with the
 * runtime's message); no device and out of memory are reported instead
 * (unavailable's reason, alloc's NULL).
 */
extern "C" {
#include "../device/device.h"
}
#include "kernels_cuda_internal.cuh"   /* kc_fail: a refusal said at the next sync */
#include "cuda_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- launches */

/* elementwise: any shape gives the same bits */
static constexpr size_t BLOCK = 256, GRID_MAX = 8192;

static unsigned grid_for(size_t n) {
    size_t g = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(g < GRID_MAX ? g : GRID_MAX);
}

/* every elementwise kernel walks i = its global thread index, step the grid */
#define FOR_EACH(i, n)                                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);             \
         i += (size_t)gridDim.x * blockDim.x)

/* n == 0 launches nothing (a zero grid is an error) */
#define LAUNCH(kernel, n, ...)                                                           \
    do {                                                                                 \
        if ((n) == 0) break;                                                             \
        kernel<<<grid_for(n), BLOCK>>>(__VA_ARGS__);                                     \
        HPT_CUDA_LAUNCHED(kernel);                                                       \
    } while (0)

/* ---------------------------------------------------------------- availability */

/* Asked once per process: the answer cannot change, and cudaGetDeviceCount
 * loads the driver (tens of ms). */
static const char *cuda_unavailable(void) {
    static int asked;
    static char why[256];
    if (asked) return why[0] ? why : NULL;
    asked = 1;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        snprintf(why, sizeof why, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    else if (count == 0)
        snprintf(why, sizeof why, "no CUDA device (cudaGetDeviceCount found none)");
    else if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess)
        /* cudaFree(0) makes the context now: a GPU in exclusive mode and
         * taken, or out of memory, says so here rather than at the first alloc */
        snprintf(why, sizeof why, "CUDA device 0 cannot be used (%s)", cudaGetErrorString(e));
    else if (kernels_cuda_init() != 0)   /* cuBLAS's handle, for the model's GEMMs */
        snprintf(why, sizeof why, "cuBLAS cannot be used on CUDA device 0 (%s)", kernels_cuda_error());
    cudaGetLastError();   /* none of these may stay as the last error a later check reads */
    return why[0] ? why : NULL;
}

/* ---------------------------------------------------------------- memory */

static float *cuda_alloc(const hpt_device *d, size_t n) {
    (void)d;   /* device 0's memory, whatever the instance */
    if (n > ((size_t)-1) / sizeof(float)) {
        hpt_fail(HPT_ERR_NOMEM, "cannot allocate %zu floats on the GPU", n);
        return NULL;
    }
    size_t bytes = (n ? n : 1) * sizeof(float);   /* never NULL for a valid request, as the CPU row */
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* out of memory is the caller's to report, not a later launch's */
        hpt_fail(HPT_ERR_NOMEM, "cannot allocate %zu bytes on the GPU (cudaMalloc: %s)", bytes,
                 cudaGetErrorString(e));
        return NULL;
    }
    HPT_CUDA_CHECK(cudaMemset(p, 0, bytes));   /* zeroed, as the CPU row: AdamW's moments start at 0 */
    return (float *)p;
}

static void cuda_free(const hpt_device *d, float *p) { (void)d; HPT_CUDA_CHECK(cudaFree(p)); }   /* NULL: a no-op */

static void cuda_upload(float *dst, const float *host, size_t n) {
    if (n) HPT_CUDA_CHECK(cudaMemcpy(dst, host, n * sizeof(float), cudaMemcpyHostToDevice));
}

static void cuda_download(float *host, const float *src, size_t n) {
    if (n) HPT_CUDA_CHECK(cudaMemcpy(host, src, n * sizeof(float), cudaMemcpyDeviceToHost));
}

static void cuda_copy(float *dst, const float *src, size_t n) {
    if (n) HPT_CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
}

/* ---------------------------------------------------------------- elementwise */

static __global__ void fill_kernel(float *x, float v, size_t n) {
    FOR_EACH(i, n) x[i] = v;
}

static __global__ void swap_kernel(float *p, float *q, size_t n) {
    FOR_EACH(i, n) { float t = p[i]; p[i] = q[i]; q[i] = t; }
}

static __global__ void scale_kernel(float *x, float s, size_t n) {
    FOR_EACH(i, n) x[i] *= s;
}

static __global__ void axpy_kernel(float *y, float a, const float *x, size_t n) {
    FOR_EACH(i, n) y[i] += a * x[i];
}

static __global__ void lerp_kernel(float *e, float a, float b, const float *x, size_t n) {
    FOR_EACH(i, n) e[i] = a * e[i] + b * x[i];
}

static void cuda_fill(float *x, float v, size_t n) { LAUNCH(fill_kernel, n, x, v, n); }
static void cuda_swap(float *a, float *b, size_t n) { LAUNCH(swap_kernel, n, a, b, n); }
static void cuda_scale(float *x, float s, size_t n) { LAUNCH(scale_kernel, n, x, s, n); }
static void cuda_axpy(float *y, float a, const float *x, size_t n) { LAUNCH(axpy_kernel, n, y, a, x, n); }
static void cuda_lerp(float *e, float a, float b, const float *x, size_t n) { LAUNCH(lerp_kernel, n, e, a, b, x, n); }

/* ---------------------------------------------------------------- reductions */

/* RED_GRID_MAX blocks at most: enough to fill an H100/H200 (132 SMs) several
 * times over, few enough that the host adds their sums in microseconds. */
static constexpr size_t RED_BLOCK = 256, RED_GRID_MAX = 1024;

static unsigned red_grid_for(size_t n) {
    size_t g = (n + RED_BLOCK - 1) / RED_BLOCK;
    return (unsigned)(g < RED_GRID_MAX ? g : RED_GRID_MAX);
}

/* part[k] = block k's sum of a[i] b[i]: its thread t sums the elements
 * i = k RED_BLOCK + t + j g RED_BLOCK (g blocks) for j = 0, 1, ... in turn,
 * then the block's RED_BLOCK sums are added pairwise in a fixed tree. */
static __global__ void dot_kernel(const float *a, const float *b, size_t n, double *part) {
    __shared__ double s[RED_BLOCK];
    double acc = 0.0;
    FOR_EACH(i, n) acc += (double)a[i] * (double)b[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned h = RED_BLOCK / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

/* The blocks' sums: one buffer for the process (the table's operations run
 * one at a time, from the host thread that drives training), made at the
 * first reduction and kept. */
static double *partials;

static double cuda_dot(const float *a, const float *b, size_t n) {
    if (n == 0) return 0.0;
    if (!partials) HPT_CUDA_CHECK(cudaMalloc(&partials, RED_GRID_MAX * sizeof(double)));
    unsigned g = red_grid_for(n);
    dot_kernel<<<g, RED_BLOCK>>>(a, b, n, partials);
    HPT_CUDA_LAUNCHED(dot_kernel);
    double host[RED_GRID_MAX];
    HPT_CUDA_CHECK(cudaMemcpy(host, partials, g * sizeof(double), cudaMemcpyDeviceToHost));   /* waits */
    double s = 0.0;
    for (unsigned k = 0; k < g; k++) s += host[k];
    return s;
}

/* the same products in the same order: sumsq(x) = dot(x, x) bit for bit, as on the CPU */
static double cuda_sumsq(const float *x, size_t n) { return cuda_dot(x, x, n); }

/* ---------------------------------------------------------------- optimizers */

/* sweep.c's ADAMW_ELEMENT; scaled: the gradient times gscale (the CPU skips
 * the product when gscale is 1, and so does this) */
static __global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n, int scaled,
                                    float gscale, float beta1, float beta2, float eps, float step, float decay,
                                    float bc2_sqrt) {
    FOR_EACH(i, n) {
        float g = scaled ? grads[i] * gscale : grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = params[i] * decay;
        params[i] = p - step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

static void cuda_adamw(float *params, const float *grads, float *m, float *v, size_t n, const hpt_dev_adamw *a) {
    /* adamw_update's per-step factors, on the host, in its words */
    float bc1 = 1.0f - powf(a->beta1, (float)a->t);
    float bc2_sqrt = sqrtf(1.0f - powf(a->beta2, (float)a->t));
    float step = a->lr / bc1;
    float decay = 1.0f - a->lr * a->weight_decay;
    LAUNCH(adamw_kernel, n, params, grads, m, v, n, a->gscale != 1.0f, a->gscale, a->beta1, a->beta2, a->eps, step,
           decay, bc2_sqrt);
}

/* sweep.c's sf_adamw_update_scaled, element for element */
static __global__ void sf_adamw_kernel(float *y, const float *g, float *z, float *x, float *v, size_t n, float gscale,
                                       float lr, float beta1, float beta2, float eps, float weight_decay, float c,
                                       float bc2) {
    FOR_EACH(i, n) {
        float gi = g[i] * gscale;
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

static void cuda_sf_adamw(float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a) {
    const float bc2 = 1.0f - powf(a->beta2, (float)a->t);
    LAUNCH(sf_adamw_kernel, n, y, g, z, x, v, n, a->gscale, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->c,
           bc2);
}

/* sweep.c's outer_step, its three loops: a given displacement d; none and no
 * departure (theta untouched, even a -0); none, theta - anchor */
enum { OUTER_GIVEN, OUTER_STAY, OUTER_OWN };

static __global__ void outer_kernel(float *th, float *an, float *u, const float *d, size_t n, int form, float mu,
                                    float a, float b) {
    FOR_EACH(i, n) {
        if (form == OUTER_GIVEN) {
            u[i] = mu * u[i] + d[i];
            th[i] = (an[i] + d[i]) + (a * d[i] + b * u[i]);
            an[i] = th[i];
        } else if (form == OUTER_STAY) {
            u[i] = mu * u[i] + (th[i] - an[i]);
            an[i] = th[i];
        } else {
            float di = th[i] - an[i];
            u[i] = mu * u[i] + di;
            th[i] += a * di + b * u[i];
            an[i] = th[i];
        }
    }
}

static void cuda_outer_step(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a,
                            float b) {
    int form = d ? OUTER_GIVEN : a == 0.0f && b == 0.0f ? OUTER_STAY : OUTER_OWN;
    LAUNCH(outer_kernel, n, theta, anchor, u, d, n, form, mu, a, b);
}

/* ---------------------------------------------------------------- the GPT-2 kernels
 * kernels_cuda.h's, behind hpt_dev_nn's signatures: the `first` flags pick
 * the _first twin, and one scratch buffer (the largest any kernel asks for
 * at the model's shapes) serves them all, in turn, on the one stream. */

static size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

static size_t cuda_scratch_floats(const hpt_device *d, int B, int T, int C, int NH, int V, int Vp) {
    (void)d;
    (void)Vp;   /* the LM head's GEMM has no bias: no column sums over Vp */
    const int N = B * T;
    size_t s = matmul_backward_cuda_scratch(N, 4 * C);   /* the widest biased layer: fc */
    s = max_of(s, layernorm_backward_cuda_scratch(N, C));
    s = max_of(s, attention_backward_cuda_scratch(B, T, NH));
    s = max_of(s, attention_flash_cuda_scratch(B, T, NH));
    return max_of(s, encoder_backward_cuda_scratch(V));   /* ints, as many as floats */
}

/* An instance's own (device.h): its kernels' context (the cuBLAS handle at
 * its precision, its first failure) and whether its activations are bf16
 * (fp32 and tf32: floats). Each wrapper below binds the context, names the
 * hpt_act pointers as the kernels' floats or kc_bf16s and calls that twin. */
struct cuda_state {
    kc_ctx *kc;
    int bf16;
};

/* binds d's context for the kernels called next; its activations' type */
static int use(const hpt_device *d) {
    const cuda_state *s = (const cuda_state *)d->state;
    kernels_cuda_use(s->kc);
    return s->bf16;
}

#define F(p) ((float *)(p))
#define CF(p) ((const float *)(p))
#define H(p) ((kc_bf16 *)(p))
#define CH(p) ((const kc_bf16 *)(p))

static size_t cuda_act_bytes(const hpt_device *d) {
    return ((const cuda_state *)d->state)->bf16 ? sizeof(kc_bf16) : sizeof(float);
}

static void cuda_upload_ints(const hpt_device *d, int *dst, const int *host, size_t n) {
    (void)d;
    if (n) HPT_CUDA_CHECK(cudaMemcpy(dst, host, n * sizeof(int), cudaMemcpyHostToDevice));
}

static void cuda_act_from_floats(const hpt_device *d, hpt_act *dst, const float *src, size_t n) {
    const int bf16 = use(d);
    if (bf16) floats_to_bf16_cuda(H(dst), src, n);
    else cuda_copy(F(dst), src, n);
}

/* bf16 to the host as it is, then widened there (exact): half the bytes
 * across PCIe, no device buffer */
static void cuda_download_acts(const hpt_device *d, float *host, const hpt_act *src, size_t n) {
    const int bf16 = use(d);
    if (!bf16) { cuda_download(host, CF(src), n); return; }
    if (!n) return;
    kc_bf16 *tmp = (kc_bf16 *)malloc(n * sizeof *tmp);
    HPT_ASSERT(tmp);
    HPT_CUDA_CHECK(cudaMemcpy(tmp, src, n * sizeof *tmp, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) host[i] = kc_bf16_float(tmp[i]);
    free(tmp);
}

static void cuda_encoder_forward(const hpt_device *d, hpt_act *out, const int *tok, const float *wte,
                                 const float *wpe, int B, int T,
                                 int C) {
    const int bf16 = use(d);
    if (bf16) encoder_forward_bf16_cuda(H(out), tok, wte, wpe, B, T, C);
    else encoder_forward_cuda(F(out), tok, wte, wpe, B, T, C);
}

static void cuda_encoder_backward(const hpt_device *d, float *dwte, float *dwpe, const hpt_act *dout, const int *tok,
                                  int B, int T,
                                  int C, int V, float *scratch) {
    const int bf16 = use(d);
    if (bf16) encoder_backward_bf16_cuda(dwte, dwpe, CH(dout), tok, B, T, C, V, (int *)scratch);
    else encoder_backward_cuda(dwte, dwpe, CF(dout), tok, B, T, C, V, (int *)scratch);
}

static void cuda_layernorm_forward(const hpt_device *d, hpt_act *out, float *mean, float *rstd, const hpt_act *inp,
                                   const float *w,
                                   const float *b, int N, int C) {
    const int bf16 = use(d);
    if (bf16) layernorm_forward_bf16_cuda(H(out), mean, rstd, CH(inp), w, b, N, C);
    else layernorm_forward_cuda(F(out), mean, rstd, CF(inp), w, b, N, C);
}

static void cuda_layernorm_backward(const hpt_device *d, hpt_act *dinp, float *dw, float *db, const hpt_act *dout,
                                    const hpt_act *inp,
                                    const float *w, const float *mean, const float *rstd, int N, int C, int first,
                                    float *scratch) {
    const int bf16 = use(d);
    if (bf16 && first)
        layernorm_backward_first_bf16_cuda(H(dinp), dw, db, CH(dout), CH(inp), w, mean, rstd, N, C, scratch);
    else if (bf16) layernorm_backward_bf16_cuda(H(dinp), dw, db, CH(dout), CH(inp), w, mean, rstd, N, C, scratch);
    else if (first) layernorm_backward_first_cuda(F(dinp), dw, db, CF(dout), CF(inp), w, mean, rstd, N, C, scratch);
    else layernorm_backward_cuda(F(dinp), dw, db, CF(dout), CF(inp), w, mean, rstd, N, C, scratch);
}

static void cuda_matmul_forward(const hpt_device *d, hpt_act *out, const hpt_act *inp, const hpt_act *w,
                                const float *b, int N, int C,
                                int OC) {
    const int bf16 = use(d);
    if (bf16) matmul_forward_bf16_cuda(H(out), CH(inp), CH(w), b, N, C, OC);
    else matmul_forward_cuda(F(out), CF(inp), CF(w), b, N, C, OC);
}

static void cuda_matmul_backward_dinp(const hpt_device *d, hpt_act *dinp, const hpt_act *dout, const hpt_act *w,
                                      int N, int C, int OC,
                                      hpt_act *wide) {
    const int bf16 = use(d);
    (void)wide;   /* cuBLAS needs no split of a long inner dimension */
    if (bf16) matmul_backward_dinp_first_bf16_cuda(H(dinp), CH(dout), CH(w), N, C, OC);
    else matmul_backward_dinp_first_cuda(F(dinp), CF(dout), CF(w), N, C, OC);
}

static void cuda_matmul_backward_dweight(const hpt_device *d, float *dw, float *db, const hpt_act *dout,
                                         const hpt_act *inp, int N,
                                         int C, int OC, int first, float *scratch) {
    const int bf16 = use(d);
    if (bf16 && first) matmul_backward_dweight_first_bf16_cuda(dw, db, CH(dout), CH(inp), N, C, OC, scratch);
    else if (bf16) matmul_backward_dweight_bf16_cuda(dw, db, CH(dout), CH(inp), N, C, OC, scratch);
    else if (first) matmul_backward_dweight_first_cuda(dw, db, CF(dout), CF(inp), N, C, OC, scratch);
    else matmul_backward_dweight_cuda(dw, db, CF(dout), CF(inp), N, C, OC, scratch);
}

/* The attention: the flash-style kernels (att is then each softmax row's
 * log-sum-exp, B*NH*T floats a layer), or the kernels that store the T x T
 * probabilities as the CPU does (B*NH*T*T) under HPT_CUDA_ATTENTION=
 * materialise, and for head sizes past the flash kernels' limit.
 * HPT_CUDA_ATTENTION=flash-fp32 keeps the flash kernels on the CUDA cores
 * under --precision tf32 and bf16 too (to measure what their tensor-core
 * twins gain). Read once per process: the model's size table and its calls
 * see the same answer. */
enum { ATT_FLASH, ATT_FLASH_FP32, ATT_MATERIALISE };
static int attention_env(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("HPT_CUDA_ATTENTION");
        env = !e ? ATT_FLASH
              : !strcmp(e, "materialise") || !strcmp(e, "materialize") ? ATT_MATERIALISE
              : !strcmp(e, "flash-fp32") ? ATT_FLASH_FP32 : ATT_FLASH;
    }
    return env;
}

static int attention_materialise(int C, int NH) {
    return attention_env() == ATT_MATERIALISE || C / NH > ATTENTION_FLASH_CUDA_MAX_HS;
}

static size_t cuda_attention_state_floats(const hpt_device *d, int B, int T, int C, int NH) {
    (void)d;
    return attention_materialise(C, NH) ? (size_t)B * NH * T * T : attention_flash_cuda_state(B, T, NH);
}

/* the T x T kernels have no bf16 twin: under bf16 storage they are refused
 * with the reason (at the model's next sync) instead of run on bf16 bits */
static int materialise_refused(int bf16, int C, int NH, const char *where) {
    if (!bf16 || !attention_materialise(C, NH)) return 0;
    char why[200];
    snprintf(why, sizeof why, "--precision bf16 needs the flash attention (head size %d, at most %d; "
             "HPT_CUDA_ATTENTION=materialise keeps fp32 activations: --precision tf32)", C / NH,
             ATTENTION_FLASH_CUDA_MAX_HS);
    kc_fail(where, why);
    return 1;
}

static void cuda_attention_forward(const hpt_device *d, hpt_act *out, float *att, const hpt_act *qkv, int B, int T,
                                   int C, int NH) {
    const int bf16 = use(d);
    if (materialise_refused(bf16, C, NH, "attention forward")) return;
    if (attention_materialise(C, NH)) attention_forward_cuda(F(out), att, CF(qkv), B, T, C, NH);
    else if (bf16) attention_forward_flash_bf16_cuda(H(out), att, CH(qkv), B, T, C, NH);
    else attention_forward_flash_cuda(F(out), att, CF(qkv), B, T, C, NH);
}

static void cuda_attention_backward(const hpt_device *d, hpt_act *dqkv, const hpt_act *dout, const hpt_act *qkv,
                                    const hpt_act *out,
                                    const float *att, int B, int T, int C, int NH, float *scratch) {
    const int bf16 = use(d);
    if (materialise_refused(bf16, C, NH, "attention backward")) return;
    if (attention_materialise(C, NH))
        attention_backward_first_cuda(F(dqkv), CF(dout), CF(qkv), att, B, T, C, NH, scratch);
    else if (bf16)
        attention_backward_flash_first_bf16_cuda(H(dqkv), CH(dout), CH(qkv), CH(out), att, B, T, C, NH, scratch);
    else attention_backward_flash_first_cuda(F(dqkv), CF(dout), CF(qkv), CF(out), att, B, T, C, NH, scratch);
}

static void cuda_gelu_forward(const hpt_device *d, hpt_act *out, const hpt_act *inp, size_t n) {
    const int bf16 = use(d);
    if (bf16) gelu_forward_bf16_cuda(H(out), CH(inp), n);
    else gelu_forward_cuda(F(out), CF(inp), n);
}

static void cuda_gelu_backward(const hpt_device *d, hpt_act *dinp, const hpt_act *inp, const hpt_act *dout, size_t n) {
    const int bf16 = use(d);
    if (bf16) gelu_backward_first_bf16_cuda(H(dinp), CH(inp), CH(dout), n);
    else gelu_backward_first_cuda(F(dinp), CF(inp), CF(dout), n);
}

static void cuda_residual_forward(const hpt_device *d, hpt_act *out, const hpt_act *a, const hpt_act *b, size_t n) {
    const int bf16 = use(d);
    if (bf16) residual_forward_bf16_cuda(H(out), CH(a), CH(b), n);
    else residual_forward_cuda(F(out), CF(a), CF(b), n);
}

static void cuda_xent_forward(const hpt_device *d, float *losses, hpt_act *logits, const int *targets, int N, int V,
                              int Vp) {
    const int bf16 = use(d);
    if (bf16) softmax_xent_forward_bf16_cuda(losses, H(logits), targets, N, V, Vp);
    else softmax_xent_forward_cuda(losses, F(logits), targets, N, V, Vp);
}

static void cuda_xent_backward(const hpt_device *d, hpt_act *probs, const int *targets, float dloss, int N, int V,
                               int Vp) {
    const int bf16 = use(d);
    if (bf16) softmax_xent_backward_bf16_cuda(H(probs), targets, dloss, N, V, Vp);
    else softmax_xent_backward_cuda(F(probs), targets, dloss, N, V, Vp);
}

static const hpt_dev_nn cuda_nn = {
    cuda_scratch_floats,
    cuda_attention_state_floats,
    cuda_act_bytes,
    cuda_upload_ints,
    cuda_act_from_floats,
    cuda_download_acts,
    cuda_encoder_forward,
    cuda_encoder_backward,
    cuda_layernorm_forward,
    cuda_layernorm_backward,
    cuda_matmul_forward,
    cuda_matmul_backward_dinp,
    cuda_matmul_backward_dweight,
    cuda_attention_forward,
    cuda_attention_backward,
    cuda_gelu_forward,
    cuda_gelu_backward,
    cuda_residual_forward,
    cuda_xent_forward,
    cuda_xent_backward,
};

static void cuda_mem_info(const hpt_device *d, size_t *free_bytes, size_t *total_bytes) {
    (void)d;   /* device 0's, which every instance shares */
    HPT_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

/* fp32: cuBLAS's FFMA GEMMs (TF32 off, the CPU's arithmetic within
 * rounding); tf32: its TF32 tensor cores (products of inputs rounded to
 * TF32, fp32 sums) and the flash attention's products on them too; both keep
 * every buffer fp32. bf16: mixed precision as llm.c and PyTorch's autocast
 * do it: activations (and the GEMMs' copy of the weights) bf16 in memory,
 * the GEMMs on bf16 tensor cores with fp32 sums, the flash attention's
 * products on TF32 tensor cores (its tiles are fp32 in shared memory);
 * parameters, gradients, optimizer state, layernorm statistics and losses
 * fp32. The precision is an instance's for its life: a model's arena is
 * carved for its element size (act_bytes). */
static const struct { const char *name; int mode; } modes[] = {
    {"fp32", KC_FP32}, {"tf32", KC_TF32}, {"bf16", KC_BF16}};

/* the instance's context (its own cuBLAS handle) at its mode, bound */
static hpt_status open_context(cuda_state *s, int i) {
    if (modes[i].mode == KC_BF16 && attention_env() == ATT_MATERIALISE)   /* before anything is written */
        return hpt_fail(HPT_ERR_ARG, "--precision bf16: HPT_CUDA_ATTENTION=materialise selects the T x T "
                        "attention, which has no bf16 kernels (unset it for the flash attention, or use "
                        "--precision tf32)");
    if (!(s->kc = kernels_cuda_ctx_new())) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    kernels_cuda_use(s->kc);
    if (kernels_cuda_init() != 0 || kernels_cuda_set_gemm_math(modes[i].mode) != 0)
        return hpt_fail(HPT_ERR_ARG, "--precision %s: %s", modes[i].name, kernels_cuda_error());
    attention_flash_cuda_tensor_cores(attention_env() != ATT_FLASH_FP32);
    s->bf16 = modes[i].mode == KC_BF16;
    return HPT_OK;
}

static void cuda_close(hpt_device *d) {
    cuda_state *s = (cuda_state *)d->state;
    if (!s) return;
    kernels_cuda_ctx_free(s->kc);   /* unbinds it where bound */
    free(s);
    d->state = NULL;
}

static hpt_status cuda_open(hpt_device *d) {
    size_t i = 0;
    while (i < sizeof modes / sizeof modes[0] && strcmp(d->precision, modes[i].name)) i++;
    if (i == sizeof modes / sizeof modes[0])
        return hpt_fail(HPT_ERR_ARG, "--precision %s: the CUDA backend has fp32, tf32 and bf16", d->precision);
    cuda_state *s = (cuda_state *)calloc(1, sizeof *s);
    if (!s) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    d->state = s;
    d->precision = modes[i].name;
    hpt_status st = open_context(s, (int)i);
    if (st != HPT_OK) cuda_close(d);
    return st;
}

/* A kernel's failure (a launch, cuBLAS, a fault) is kept in the instance's
 * context and said here, at the model's sync points (the end of its forward
 * and backward). A fault inside a kernel is the GPU's (it ends the CUDA
 * context of the process): the instance that syncs first reports it. */
static hpt_status cuda_sync(const hpt_device *d) {
    use(d);
    if (kernels_cuda_sync() == 0) return HPT_OK;
    return hpt_fail(HPT_ERR_IO, "--device cuda: %s", kernels_cuda_error());
}

/* sweep.c's sf_outer_step with a departure (without one it is the outer
 * step's OUTER_STAY on x): the same expressions, u's new value kept in a
 * register */
static __global__ void sf_outer_kernel(float *x, float *z, float *y, float *an, float *u, size_t n, float mu, float a,
                                       float b) {
    FOR_EACH(i, n) {
        float di = x[i] - an[i], ui = mu * u[i] + di, delta = a * di + b * ui;
        u[i] = ui;
        x[i] += delta; z[i] += delta; y[i] += delta;
        an[i] = x[i];
    }
}

static void cuda_sf_outer_step(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a,
                               float b) {
    if (a == 0.0f && b == 0.0f) LAUNCH(outer_kernel, n, x, anchor, u, (const float *)NULL, n, OUTER_STAY, mu, a, b);
    else LAUNCH(sf_outer_kernel, n, x, z, y, anchor, u, n, mu, a, b);
}

/* ---------------------------------------------------------------- the row */

/* hpt_device_cuda_impl: the row libhpt_cuda.so exports; the program's
 * hpt_device_cuda (src/device/device_cuda_load.c) opens this plugin on demand
 * and hands this row back, so that a CPU run never loads cuBLAS. */
extern "C" __attribute__((visibility("default"))) const hpt_device hpt_device_cuda_impl;
extern "C" const hpt_device hpt_device_cuda_impl = {
    /* C++17 has no designated initializers: the fields in device.h's order */
    "cuda",
    "an NVIDIA GPU (CUDA, cuBLAS): device 0",
    cuda_unavailable,
    0,   /* host_memory: device memory, the host reads it through download */
    cuda_alloc,
    cuda_free,
    cuda_upload,
    cuda_download,
    cuda_copy,
    cuda_fill,
    cuda_swap,
    cuda_scale,
    cuda_axpy,
    cuda_lerp,
    cuda_sumsq,
    cuda_dot,
    cuda_adamw,
    cuda_sf_adamw,
    cuda_outer_step,
    cuda_sf_outer_step,
    &cuda_nn,
    cuda_mem_info,
    cuda_sync,
    cuda_open,
    cuda_close,
    NULL,   /* row: this one */
    NULL,   /* precision, mem_limit, state: an instance's */
    0,
    NULL,
};
