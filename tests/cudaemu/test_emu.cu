/*
 * test_emu.cu — the CUDA emulator's own test (make CUDA=emu test-cuda): each
 * thing README.md says it checks, shown to fire on a kernel written to trip
 * it, and the things it must get right (barriers, shuffles, shared memory,
 * the GEMM shim) on kernels whose answers are known. A CUDA file, but built
 * only for the emulator: on a GPU these faults are the hardware's.
 */
#include "../test.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <stdint.h>

/* ------------------------------------------------------------ kernels */

/* the block's sum of in[0 .. blockDim.x): warp butterflies, then warp 0 adds the warps' */
__global__ void k_block_sum(const float *in, float *out) {
    __shared__ float part[32];
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (unsigned w = 0; w < blockDim.x / 32; w++) s += part[w];
        out[blockIdx.x] = s;
    }
}

/* a race: thread 0 reads what thread blockDim-1 writes, with no barrier between */
__global__ void k_race(float *out) {
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x + 1.0f;
    if (threadIdx.x == 0) out[0] = s[blockDim.x - 1];
}

/* a race between warps: warp 0 reads warp 1's slot before the barrier that would order them */
__global__ void k_warp_race(float *out) {
    __shared__ float s[2];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = (float)(threadIdx.x >> 5) + 1.0f;
    if (threadIdx.x == 0) out[0] = s[1];
    __syncthreads();
}

/* the same with the barrier: always 2 */
__global__ void k_no_race(float *out) {
    __shared__ float s[2];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = (float)(threadIdx.x >> 5) + 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s[1];
}

/* a race between blocks: block 0 reads what block 1 writes, in the same launch */
__global__ void k_block_race(float *buf) {
    if (threadIdx.x) return;
    if (blockIdx.x == 1) buf[1] = 7.0f;
    else buf[0] = buf[1];
}

/* threads past n leave before a barrier the others reach */
__global__ void k_exit_then_barrier(float *out, int n) {
    if ((int)threadIdx.x >= n) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* a shuffle in a block of 48 threads: the second warp has 16 lanes */
__global__ void k_partial_warp_shuffle(float *out) {
    float v = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
    out[threadIdx.x] = v;
}

/* dynamic shared memory: written, then read back by another thread */
__global__ void k_dynamic_shared(float *out, int n) {
    extern __shared__ float sm[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) sm[i] = (float)(i & 1);
    __syncthreads();
    float s = 0.0f;
    if (threadIdx.x == 0)
        for (int i = 0; i < n; i++) s += sm[i];
    if (threadIdx.x == 0) out[0] = s;
}

/* reads shared memory nobody wrote: the emulator's is NaN */
__global__ void k_shared_unwritten(float *out) {
    extern __shared__ float sm[];
    out[0] = sm[threadIdx.x];
}

__global__ void k_write(float *out, float v) { out[blockIdx.x * blockDim.x + threadIdx.x] = v; }

/* ------------------------------------------------------------ helpers */

static float *dalloc(size_t n) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n * sizeof(float));
    CHECK(e == cudaSuccess, "cudaMalloc(%zu floats): %s", n, cudaGetErrorString(e));
    return (float *)p;
}

static float fetch(const float *d) {
    float h = 0.0f;
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    return h;
}

/* a kernel fault is sticky, as on a GPU: said, then cleared for the next check */
static void expect_fault(cudaError_t want, const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == want, "%s: got %s, want %s", what, cudaGetErrorName(e), cudaGetErrorName(want));
    CHECK(cudaMemcpy(NULL, NULL, 4, cudaMemcpyDeviceToHost) == want, "%s: later calls return the fault", what);
    cudaDeviceReset();
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* c (16 x 16, row-major) = a (16 x 8, row-major) b, b given transposed
 * (16 x 8 row-major: b's columns as rows, a col_major matrix_b), inputs
 * rounded to TF32; `skew` > 0 gives lane 0 another pointer (a fault), < 0 a
 * misaligned one (a fault) */
__global__ void k_wmma(float *c, const float *a, const float *bt, int skew) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    const float *ap = skew > 0 && threadIdx.x == 0 ? a + 8 : skew < 0 ? a + 1 : a;
    wmma::load_matrix_sync(fa, ap, 8);
    wmma::load_matrix_sync(fb, bt, 8);
    for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

/* ------------------------------------------------------------ checks */

static void test_reductions(void) {
    const int n = 256;
    float h[256], want = 0.0f;
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7) - 3.0f, want += h[i];
    float *in = dalloc(n), *out = dalloc(2);
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    k_block_sum<<<2, n>>>(in, out);
    CHECK(cudaGetLastError() == cudaSuccess, "the reduction launches");
    float got[2];
    cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost);
    CHECK(got[0] == want && got[1] == want, "block sums %g %g, want %g (integers: exact)", got[0], got[1], want);
    cudaFree(in);
    cudaFree(out);
}

static void test_races(void) {
    float *out = dalloc(1);
    float r[2], w[2], ok[2];
    for (int k = 0; k < 2; k++) {   /* two launches: one ascending, one descending */
        k_race<<<1, 64>>>(out);
        r[k] = fetch(out);
        k_warp_race<<<1, 64>>>(out);
        w[k] = fetch(out);
        k_no_race<<<1, 64>>>(out);
        ok[k] = fetch(out);
    }
    CHECK(bits(r[0]) != bits(r[1]), "a race between lanes gives two answers (%g, %g)", r[0], r[1]);
    CHECK(bits(w[0]) != bits(w[1]), "a race between warps gives two answers (%g, %g)", w[0], w[1]);
    CHECK(ok[0] == 2.0f && ok[1] == 2.0f, "with the barrier, one answer: %g %g", ok[0], ok[1]);
    cudaFree(out);

    float *buf = dalloc(2), b[2];
    for (int k = 0; k < 2; k++) {
        cudaMemset(buf, 0, 2 * sizeof(float));
        k_block_race<<<2, 32>>>(buf);
        b[k] = fetch(buf);
    }
    CHECK(b[0] != b[1], "a race between blocks gives two answers (%g, %g)", b[0], b[1]);
    cudaFree(buf);
}

static void test_faults(void) {
    float *out = dalloc(64);
    k_exit_then_barrier<<<1, 64>>>(out, 32);
    expect_fault(cudaErrorLaunchFailure, "__syncthreads after some threads exited");

    out = dalloc(64);
    k_partial_warp_shuffle<<<1, 48>>>(out);
    expect_fault(cudaErrorLaunchFailure, "a shuffle in a partial warp");

    float host[64];
    k_write<<<1, 64>>>(host, 1.0f);
    expect_fault(cudaErrorIllegalAddress, "a host pointer as a kernel argument");
}

static void test_launch_limits(void) {
    float *out = dalloc(1 << 16);
    k_write<<<1, 1025>>>(out, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads in a block are refused");
    CHECK(cudaGetLastError() == cudaSuccess, "and the error is not sticky");
    k_write<<<dim3(1, 65536), 1>>>(out, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "a grid of 65536 in y is refused");
    k_write<<<0, 32>>>(out, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid is refused");

    const int n = 16384;   /* 64 KiB: past the default 48 KiB */
    k_dynamic_shared<<<1, 256, n * sizeof(float)>>>(out, n);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB of dynamic shared memory without opting in");
    CHECK(cudaFuncSetAttribute(k_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10) ==
              cudaErrorInvalidValue, "an opt-in past 227 KiB is refused");
    cudaGetLastError();
    CHECK(cudaFuncSetAttribute(k_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4) == cudaSuccess,
          "an opt-in to 64 KiB");
    k_dynamic_shared<<<1, 256, n * sizeof(float)>>>(out, n);
    CHECK(cudaGetLastError() == cudaSuccess, "then the launch runs");
    CHECK(fetch(out) == (float)(n / 2), "and sums its shared memory: %g", fetch(out));

    k_shared_unwritten<<<1, 32, 32 * sizeof(float)>>>(out);
    CHECK(isnan(fetch(out)), "unwritten shared memory reads as NaN");
    cudaFree(out);
}

static void test_memory(void) {
    size_t free0, total;
    CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess && free0 <= total, "cudaMemGetInfo");
    void *p = NULL;
    CHECK(cudaMalloc(&p, total + 1) == cudaErrorMemoryAllocation && p == NULL, "more than the device holds");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "out of memory is the last error");
    float *d = dalloc(1000);
    size_t free1;
    cudaMemGetInfo(&free1, &total);
    CHECK(free0 - free1 >= 4000, "an allocation is counted: %zu bytes", free0 - free1);
    CHECK(isnan(fetch(d)), "fresh device memory reads as NaN");
    float h[1000] = {0};
    CHECK(cudaMemcpy(h, h, 4000, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "a host destination refused");
    CHECK(cudaMemcpy(d, h, 4004, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "a copy past the block's end");
    CHECK(cudaMemcpy(d, h, 4000, cudaMemcpyHostToDevice) == cudaSuccess, "a copy that fits");
    CHECK(cudaFree(h) == cudaErrorInvalidDevicePointer, "cudaFree of a host pointer");
    cudaGetLastError();
    cudaFree(d);
    cudaMemGetInfo(&free1, &total);
    CHECK(free1 == free0, "freed: %zu of %zu bytes free again", free1, free0);
}

/* C = A B (2 x 2, column-major) with inputs that bf16 and tf32 round */
static void test_gemm(void) {
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    const float x = 1.0f + 1.0f / 1024 + 1.0f / 8192;   /* 11 and 13 mantissa bits */
    float ha[4] = {x, 0, 0, x}, hb[4] = {1, 0, 0, 1}, hc[4];
    float *a = dalloc(4), *b = dalloc(4), *c = dalloc(4);
    cudaMemcpy(a, ha, 16, cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb, 16, cudaMemcpyHostToDevice);
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, 2, b, 2, &zero, c, 2);
    cudaMemcpy(hc, c, 16, cudaMemcpyDeviceToHost);
    CHECK(hc[0] == x && hc[3] == x && hc[1] == 0, "fp32 GEMM: %.9g", hc[0]);
    cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, 2, b, 2, &zero, c, 2);
    cudaMemcpy(hc, c, 16, cudaMemcpyDeviceToHost);
    CHECK(hc[0] == 1.0f + 1.0f / 1024, "tf32 keeps 10 bits: %.9g", hc[0]);
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2, b, CUDA_R_32F, 2, &zero, c,
                 CUDA_R_32F, 2, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
    cudaMemcpy(hc, c, 16, cudaMemcpyDeviceToHost);
    CHECK(hc[0] == 1.0f, "bf16 keeps 7 bits: %.9g", hc[0]);
    float hosts[4];
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, 2, hosts, 2, &zero, c, 2) ==
              CUBLAS_STATUS_EXECUTION_FAILED, "a host matrix is a fault");
    cudaDeviceReset();
    cublasDestroy(h);
}

static float tf32_nearest(float f) {
    uint32_t u = bits(f);
    u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

static void test_wmma(void) {
    float ha[16 * 8], hbt[16 * 8], hc[256];
    for (int i = 0; i < 128; i++) {
        ha[i] = 1.0f + (float)(i % 13) / 4096.0f + (float)(i % 5) / 65536.0f;   /* bits past TF32's 10 */
        hbt[i] = (float)((i * 7) % 11) - 5.0f;
    }
    float *a = dalloc(256), *bt = dalloc(128), *c = dalloc(256);
    cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice);
    cudaMemcpy(bt, hbt, sizeof hbt, cudaMemcpyHostToDevice);
    int bad = 0;
    for (int k = 0; k < 2; k++) {   /* both lane orders */
        k_wmma<<<1, 32>>>(c, a, bt, 0);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "a wmma product runs");
        cudaMemcpy(hc, c, sizeof hc, cudaMemcpyDeviceToHost);
        for (int r = 0; r < 16; r++)
            for (int j = 0; j < 16; j++) {
                float want = 0.0f;
                for (int q = 0; q < 8; q++) want += tf32_nearest(ha[r * 8 + q]) * hbt[j * 8 + q];
                bad += hc[r * 16 + j] != want;
            }
    }
    CHECK(bad == 0, "wmma m16n16k8: a b with TF32 inputs, fp32 sums (%d of 512 entries differ)", bad);
    k_wmma<<<1, 32>>>(c, a, bt, 1);
    expect_fault(cudaErrorLaunchFailure, "wmma: lanes with different pointers");
    a = dalloc(256), bt = dalloc(128), c = dalloc(256);
    k_wmma<<<1, 32>>>(c, a, bt, -1);
    expect_fault(cudaErrorLaunchFailure, "wmma: a pointer not 32-byte aligned");
    a = dalloc(256), bt = dalloc(128), c = dalloc(256);
    k_wmma<<<1, 16>>>(c, a, bt, 0);
    expect_fault(cudaErrorLaunchFailure, "wmma in a partial warp");
}

int main(void) {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 1, "the emulator is one device");
    test_reductions();
    test_races();
    test_launch_limits();
    test_memory();
    test_gemm();
    test_wmma();
    test_faults();
    return TEST_REPORT("test_emu");
}
