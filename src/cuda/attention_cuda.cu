/*
 * attention_cuda.cu — causal multi-head self-attention on an NVIDIA GPU, the
 * kernels_cuda.h contract's "attention" sections: the kernels that store the
 * T x T probabilities as the CPU does, and the flash-style ones that keep a
 * log-sum-exp per softmax row. Built as kernels_cuda.cu is (-fmad=false,
 * IEEE division and sqrt, no float atomics).
 */
#include "kernels_cuda_internal.cuh"

#include <mma.h>

#include <type_traits>

enum { ATT_TILE = 64 };

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
    extern __shared__ __align__(128) float sm[];
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
    kc_fail(where, msg);
    return 0;
}

extern "C" void attention_forward_cuda(float *out, float *att, const float *inp, int B, int T, int C, int NH) {
    if (!B || !T || !C) return;
    const int hs = C / NH;
    const size_t smem = ((size_t)hs + (size_t)ATT_TILE * (hs + 1)) * sizeof(float);
    if (!attention_smem((const void *)k_attention_forward, smem, "attention_forward_cuda")) return;
    k_attention_forward<<<dim3(T, NH, B), ATT_TILE, smem>>>(out, att, inp, T, C, NH, 1.0f / sqrtf((float)hs));
    kc_check_launch("attention_forward_cuda");
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
    extern __shared__ __align__(128) float sm[];
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
    extern __shared__ __align__(128) float sm[];
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
    kc_check_launch(where);
    k_attention_backward_cols<<<grid, ATT_TILE, smem_cols>>>(dinp, scratch, dout, inp, att, T, C, NH, scale, first);
    kc_check_launch(where);
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
 * rows `stride` apart) into a tile with rows S apart, W channels of each
 * (the hs of the head, then zeros up to W); rows at or past T as zeros.
 * Consecutive threads read consecutive channels. */
template <typename A>
__device__ __forceinline__ void fl_load(float *tile, const A *src, size_t stride, int r0, int T, int hs, int S,
                                        int W) {
    for (int e = threadIdx.x; e < FL_TILE * W; e += blockDim.x) {
        const int j = e / W, i = e - j * W;
        tile[j * S + i] = r0 + j < T && i < hs ? ldf(src[(size_t)(r0 + j) * stride + i]) : 0.0f;
    }
}

/* s[i][jj] = a_row(4 ty + i) . b_row(tx + 16 jj) over hs channels, in
 * ascending channel order; a and b tiles with rows S apart. The same
 * operands give the same bits in every kernel below. */
__device__ __forceinline__ void fl_dots(float s[4][4], const float *a, const float *b, int hs, int S, int tx,
                                        int ty) {
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

/* ---- the tensor-core products (the kernels' TC twins, under --precision
 * tf32 or bf16)
 *
 * The same tiles, with the two products of each step on TF32 tensor cores
 * (wmma m16n16k8: inputs rounded to TF32 by __float_to_tf32, fp32 sums)
 * instead of the threads' fp32 chains; the softmax, the masks, lse, D and
 * the accumulation into each thread's registers stay as above. Each product
 * goes through shared memory: the scores into the p or dpre tile, a tile's
 * contribution to out, dq, dk or dv into a product tile (64 rows, S apart)
 * that the owning threads then add. The head is padded to W = 16 NC
 * channels of zeros and rows are S = W + 4 floats apart: wmma wants rows of
 * 16 at 32-byte boundaries and a leading dimension a multiple of 4 floats
 * (FL_PS = 68 is one), so every tile's offset is a multiple of 32 bytes
 * and the kernels declare their shared memory 128-byte aligned (all of
 * this file's, alike: one extern array). The 8 warps split each 64-row product: warp w takes
 * rows 16 (w & 3) .. + 15, and of the 16-column blocks, those congruent to
 * w >> 2 mod 2. */

namespace wm = nvcuda::wmma;
typedef wm::fragment<wm::accumulator, 16, 16, 8, float> fl_acc;

template <class F>
__device__ __forceinline__ void fl_tf32(F &f) {
#pragma unroll
    for (int i = 0; i < f.num_elements; i++) f.x[i] = wm::__float_to_tf32(f.x[i]);
}

/* out (64 x 64, rows FL_PS apart) = a (64 x W) . b (64 x W)^T, a and b
 * tiles with rows S apart: the q . k or dout . v scores of a tile pair */
__device__ __forceinline__ void fl_tc_scores(float *out, const float *a, const float *b, int S, int W) {
    const int w = threadIdx.x >> 5, rb = w & 3, cb = 2 * (w >> 2);
    fl_acc c0, c1;
    wm::fill_fragment(c0, 0.0f);
    wm::fill_fragment(c1, 0.0f);
    for (int k = 0; k < W; k += 8) {
        wm::fragment<wm::matrix_a, 16, 16, 8, wm::precision::tf32, wm::row_major> fa;
        wm::fragment<wm::matrix_b, 16, 16, 8, wm::precision::tf32, wm::col_major> fb;
        wm::load_matrix_sync(fa, a + 16 * rb * S + k, S);
        fl_tf32(fa);
        wm::load_matrix_sync(fb, b + 16 * cb * S + k, S);
        fl_tf32(fb);
        wm::mma_sync(c0, fa, fb, c0);
        wm::load_matrix_sync(fb, b + 16 * (cb + 1) * S + k, S);
        fl_tf32(fb);
        wm::mma_sync(c1, fa, fb, c1);
    }
    wm::store_matrix_sync(out + 16 * rb * FL_PS + 16 * cb, c0, FL_PS, wm::mem_row_major);
    wm::store_matrix_sync(out + 16 * rb * FL_PS + 16 * (cb + 1), c1, FL_PS, wm::mem_row_major);
}

/* out (64 x 16 NC, rows S apart) = p . x (TRANS 0) or p^T . x (TRANS 1),
 * p a 64 x 64 probability or dpre tile (rows FL_PS apart), x a 64 x 16 NC
 * tile (rows S apart): p v, dpre k (rows: queries) or p^T dout, dpre^T q
 * (rows: keys) */
template <int NC, bool TRANS>
__device__ __forceinline__ void fl_tc_apply(float *out, const float *p, const float *x, int S) {
    constexpr int NJ = (NC + 1) / 2;
    const int w = threadIdx.x >> 5, rb = w & 3;
    fl_acc c[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++) wm::fill_fragment(c[j], 0.0f);
    for (int k = 0; k < FL_TILE; k += 8) {
        typedef typename std::conditional<TRANS, wm::col_major, wm::row_major>::type la;
        wm::fragment<wm::matrix_a, 16, 16, 8, wm::precision::tf32, la> fa;
        wm::load_matrix_sync(fa, TRANS ? p + k * FL_PS + 16 * rb : p + 16 * rb * FL_PS + k, FL_PS);
        fl_tf32(fa);
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const int cb = (w >> 2) + 2 * j;
            if (cb >= NC) continue;   /* the whole warp alike */
            wm::fragment<wm::matrix_b, 16, 16, 8, wm::precision::tf32, wm::row_major> fb;
            wm::load_matrix_sync(fb, x + k * S + 16 * cb, S);
            fl_tf32(fb);
            wm::mma_sync(c[j], fa, fb, c[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        const int cb = (w >> 2) + 2 * j;
        if (cb < NC) wm::store_matrix_sync(out + 16 * rb * S + 16 * cb, c[j], S, wm::mem_row_major);
    }
}

/* this thread's rows 4 ty + i and channels tx + 16 cc of a product tile,
 * added to its accumulators */
template <int NC>
__device__ __forceinline__ void fl_add_product(float acc[4][NC], const float *prod, int S, int tx, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int cc = 0; cc < NC; cc++) acc[i][cc] += prod[(4 * ty + i) * S + tx + 16 * cc];
}

/* acc (this thread's rows 4 ty + i, channels tx + 16 cc) += p . x over the
 * tile's first nk keys: p v in the forward, dpre k in the dq kernel. p a
 * score tile (rows FL_PS apart), x a head tile (rows S apart). fp32: keys
 * ascending, one multiply-add per key (the same bits as ever); TC: through
 * the tensor cores and the product tile (barriers inside: every thread
 * calls it, after p is written). */
template <int NC, bool TC>
__device__ __forceinline__ void fl_apply_rows(float acc[4][NC], const float *p, const float *x, float *prod, int nk,
                                              int hs, int S, int tx, int ty) {
    if constexpr (TC) {
        fl_tc_apply<NC, false>(prod, p, x, S);
        __syncthreads();
        fl_add_product<NC>(acc, prod, S, tx, ty);
    } else {
        for (int j = 0; j < nk; j++) {
            float xj[NC];
#pragma unroll
            for (int cc = 0; cc < NC; cc++) xj[cc] = tx + 16 * cc < hs ? x[j * S + tx + 16 * cc] : 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float pv = p[(4 * ty + i) * FL_PS + j];
#pragma unroll
                for (int cc = 0; cc < NC; cc++) acc[i][cc] += pv * xj[cc];
            }
        }
    }
}

/* this thread's 4 x 4 entries of a score tile (rows FL_PS apart) */
__device__ __forceinline__ void fl_read_scores(float s[4][4], const float *tile, int tx, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int jj = 0; jj < 4; jj++) s[i][jj] = tile[(4 * ty + i) * FL_PS + tx + 16 * jj];
}

/* the tiles' row stride and loaded width: hs + 1 and hs for the fp32
 * kernels (the +1 spreads a column's rows over the banks), 16 NC + 4 and
 * 16 NC for the tensor-core ones */
__host__ __device__ __forceinline__ int fl_stride(bool tc, int nc, int hs) { return tc ? 16 * nc + 4 : hs + 1; }
__host__ __device__ __forceinline__ int fl_width(bool tc, int nc, int hs) { return tc ? 16 * nc : hs; }

/* Forward: one block per (query tile, head). For each key tile up to the
 * diagonal: scores (q . k) scale, the causal mask, the running max m and sum
 * l of each row (online softmax: the old sum and output rescaled by
 * exp(m_old - m_new)), the tile's probabilities p = exp(s - m_new) through
 * shared memory, out += p v. Then out /= l and lse = m + log l. Shared:
 * q, k, v tiles (64 (hs + 1) each) and p (64 x 68): 66 KiB at hs 64, 114 KiB
 * at hs 128. exp is dev_expf (the CPU's hpt_expf). */
template <int NC, bool TC, typename A>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_forward(A *__restrict__ out, float *__restrict__ lse, const A *__restrict__ inp, int T, int C, int NH,
                float scale) {
    extern __shared__ __align__(128) float sm[];
    const int hs = C / NH, S = fl_stride(TC, NC, hs), W = fl_width(TC, NC, hs);
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * FL_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C;
    const A *base = inp + (size_t)b * T * C3 + (size_t)h * hs;   /* q; k at + C, v at + 2C */
    float *sq = sm, *sk = sq + FL_TILE * S, *sv = sk + FL_TILE * S, *sp = sv + FL_TILE * S;
    float *sprod = sp + FL_TILE * FL_PS;   /* TC: p v of the tile */
    fl_load(sq, base, C3, q0, T, hs, S, W);
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
        fl_load(sk, base + C, C3, k0, T, hs, S, W);
        fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs, S, W);
        __syncthreads();
        float s[4][4];
        if constexpr (TC) {
            fl_tc_scores(sp, sq, sk, S, W);
            __syncthreads();
            fl_read_scores(s, sp, tx, ty);   /* each thread rewrites its own entries with p below */
        } else {
            fl_dots(s, sq, sk, hs, S, tx, ty);
        }
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
        fl_apply_rows<NC, TC>(o, sp, sv, sprod, nk, hs, S, tx, ty);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        if (t >= T) continue;
        A *orow = out + ((size_t)b * T + t) * C + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) orow[tx + 16 * cc] = act_of<A>(o[i][cc] / l[i]);
        if (tx == 0) lse[((size_t)b * NH + h) * T + t] = m[i] + logf(l[i]);
    }
}

/* Backward, first: D[b][h][t] = dout_t . out_t over the head's channels
 * (= sum over keys of att datt, the softmax backward's row dot, without
 * att). One warp per (position, head): lanes stride the channels, then the
 * warp's butterfly. */
template <typename A>
__global__ void k_flash_rowdot(float *__restrict__ D, const A *__restrict__ dout, const A *__restrict__ out, int T,
                               int C, int NH, size_t total) {
    const int lane = threadIdx.x & 31, hs = C / NH;
    const size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t w = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < total; w += warps) {
        const size_t n = w / NH;   /* position b T + t */
        const int h = (int)(w - n * NH);
        const A *a = dout + n * C + (size_t)h * hs, *o = out + n * C + (size_t)h * hs;
        float s = 0.0f;
        for (int c = lane; c < hs; c += 32) s += ldf(a[c]) * ldf(o[c]);
        s = warp_sum(s);
        const size_t b = n / T, t = n - b * T;
        if (lane == 0) D[(b * NH + h) * T + t] = s;
    }
}

/* The recomputed tile, shared by both backward kernels (the same operands
 * in the same order: the same bits in both): for the 4 x 4 (query, key)
 * pairs of this thread, p = exp(s scale - lse) (0 where masked or past T)
 * and dpre = p (dout . v - D) scale, the CPU's expression. TC: the scores
 * from the tensor cores, through sp and sds (a barrier inside: every
 * thread calls it). */
template <bool TC>
__device__ __forceinline__ void fl_recompute(float p[4][4], float ds[4][4], const float *sq, const float *sdo,
                                             const float *sk, const float *sv, float *sp, float *sds,
                                             const float lse_r[4], const float d_r[4], int q0, int k0, int T,
                                             int hs, int S, int W, float scale, int tx, int ty) {
    float dp[4][4];
    if constexpr (TC) {   /* the scores through the p and dpre tiles, which the caller then overwrites */
        fl_tc_scores(sp, sq, sk, S, W);
        fl_tc_scores(sds, sdo, sv, S, W);
        __syncthreads();
        fl_read_scores(p, sp, tx, ty);
        fl_read_scores(dp, sds, tx, ty);
    } else {
        fl_dots(p, sq, sk, hs, S, tx, ty);
        fl_dots(dp, sdo, sv, hs, S, tx, ty);
    }
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
template <int NC, bool TC, typename A>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_backward_dq(A *__restrict__ dinp, const A *__restrict__ dout, const A *__restrict__ inp,
                    const float *__restrict__ lse, const float *__restrict__ D, int T, int C, int NH, float scale,
                    int first) {
    extern __shared__ __align__(128) float sm[];
    const int hs = C / NH, S = fl_stride(TC, NC, hs), W = fl_width(TC, NC, hs);
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * FL_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C, head = (size_t)b * NH + h;
    const A *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const A *dO = dout + (size_t)b * T * C + (size_t)h * hs;
    float *sq = sm, *sdo = sq + FL_TILE * S, *sk = sdo + FL_TILE * S, *sv = sk + FL_TILE * S;
    float *sds = sv + FL_TILE * S;
    float *sp = sds + FL_TILE * FL_PS, *sprod = sp + FL_TILE * FL_PS;   /* TC: the scores, dpre k */
    fl_load(sq, base, C3, q0, T, hs, S, W);
    fl_load(sdo, dO, (size_t)C, q0, T, hs, S, W);
    float lse_r[4], d_r[4];
    fl_row_stats(lse_r, d_r, lse + head * T, D + head * T, q0, T, ty);
    float acc[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        const A *dq = dinp + ((size_t)b * T + t) * C3 + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            acc[i][cc] = first || t >= T || tx + 16 * cc >= hs ? 0.0f : ldf(dq[tx + 16 * cc]);
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FL_TILE, nk = T - k0 < FL_TILE ? T - k0 : FL_TILE;
        __syncthreads();   /* the previous tile's k and dpre are read */
        fl_load(sk, base + C, C3, k0, T, hs, S, W);
        fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs, S, W);
        __syncthreads();
        float p[4][4], ds[4][4];
        fl_recompute<TC>(p, ds, sq, sdo, sk, sv, sp, sds, lse_r, d_r, q0, k0, T, hs, S, W, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) sds[(4 * ty + i) * FL_PS + tx + 16 * jj] = ds[i][jj];
        __syncthreads();
        fl_apply_rows<NC, TC>(acc, sds, sk, sprod, nk, hs, S, tx, ty);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + 4 * ty + i;
        if (t >= T) continue;
        A *dq = dinp + ((size_t)b * T + t) * C3 + (size_t)h * hs;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) dq[tx + 16 * cc] = act_of<A>(acc[i][cc]);
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
template <int NC, bool TC, typename A>
__global__ void __launch_bounds__(FL_THREADS)
k_flash_backward_dkv(A *__restrict__ dinp, const A *__restrict__ dout, const A *__restrict__ inp,
                     const float *__restrict__ lse, const float *__restrict__ D, int T, int C, int NH, float scale,
                     int first) {
    extern __shared__ __align__(128) float sm[];
    const int hs = C / NH, S = fl_stride(TC, NC, hs), W = fl_width(TC, NC, hs);
    const int b = blockIdx.x / NH, h = blockIdx.x - b * NH;
    const int kt = blockIdx.y, k0 = kt * FL_TILE, ntile = gridDim.y;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t C3 = 3 * (size_t)C, head = (size_t)b * NH + h;
    const A *base = inp + (size_t)b * T * C3 + (size_t)h * hs;
    const A *dO = dout + (size_t)b * T * C + (size_t)h * hs;
    float *sk = sm, *sv = sk + FL_TILE * S, *sq = sv + FL_TILE * S, *sdo = sq + FL_TILE * S;
    float *sp = sdo + FL_TILE * S, *sds = sp + FL_TILE * FL_PS;
    float *sprod = sds + FL_TILE * FL_PS;   /* TC: p^T dout, then dpre^T q */
    fl_load(sk, base + C, C3, k0, T, hs, S, W);
    fl_load(sv, base + 2 * (size_t)C, C3, k0, T, hs, S, W);
    float ak[4][NC], av[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t2 = k0 + 4 * ty + i;
        const A *dk = dinp + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs, *dv = dk + C;
#pragma unroll
        for (int cc = 0; cc < NC; cc++) {
            const int skip = first || t2 >= T || tx + 16 * cc >= hs;
            ak[i][cc] = skip ? 0.0f : ldf(dk[tx + 16 * cc]);
            av[i][cc] = skip ? 0.0f : ldf(dv[tx + 16 * cc]);
        }
    }
    for (int qt = kt; qt < ntile; qt++) {
        const int q0 = qt * FL_TILE, nq = T - q0 < FL_TILE ? T - q0 : FL_TILE;
        __syncthreads();   /* the previous tile's q, dout, p and dpre are read */
        fl_load(sq, base, C3, q0, T, hs, S, W);
        fl_load(sdo, dO, (size_t)C, q0, T, hs, S, W);
        float lse_r[4], d_r[4];
        fl_row_stats(lse_r, d_r, lse + head * T, D + head * T, q0, T, ty);
        __syncthreads();
        float p[4][4], ds[4][4];
        fl_recompute<TC>(p, ds, sq, sdo, sk, sv, sp, sds, lse_r, d_r, q0, k0, T, hs, S, W, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                sp[(4 * ty + i) * FL_PS + tx + 16 * jj] = p[i][jj];
                sds[(4 * ty + i) * FL_PS + tx + 16 * jj] = ds[i][jj];
            }
        __syncthreads();
        if constexpr (TC) {
            fl_tc_apply<NC, true>(sprod, sp, sdo, S);
            __syncthreads();
            fl_add_product<NC>(av, sprod, S, tx, ty);
            __syncthreads();   /* sprod read before it is rewritten */
            fl_tc_apply<NC, true>(sprod, sds, sq, S);
            __syncthreads();
            fl_add_product<NC>(ak, sprod, S, tx, ty);
        } else {
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
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t2 = k0 + 4 * ty + i;
        if (t2 >= T) continue;
        A *dk = dinp + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs, *dv = dk + C;
#pragma unroll
        for (int cc = 0; cc < NC; cc++)
            if (tx + 16 * cc < hs) {
                dk[tx + 16 * cc] = act_of<A>(ak[i][cc]);
                dv[tx + 16 * cc] = act_of<A>(av[i][cc]);
            }
    }
}

extern "C" size_t attention_flash_cuda_state(int B, int T, int NH) { return (size_t)B * NH * T; }
extern "C" size_t attention_flash_cuda_scratch(int B, int T, int NH) { return (size_t)B * NH * T; }

/* shared memory of each kernel, in bytes: its 64-row tiles of the head (rows
 * S apart) and of scores (FL_PS apart); the tensor-core twins add a product
 * tile, and the dq kernel a second score tile */
static size_t fl_smem(int head_tiles, int score_tiles, bool tc, int nc, int hs) {
    const size_t S = (size_t)fl_stride(tc, nc, hs);
    return ((head_tiles + (tc ? 1 : 0)) * S + (size_t)score_tiles * FL_PS) * FL_TILE * sizeof(float);
}
static size_t fl_smem_forward(bool tc, int nc, int hs) { return fl_smem(3, 1, tc, nc, hs); }
static size_t fl_smem_dq(bool tc, int nc, int hs) { return fl_smem(4, tc ? 2 : 1, tc, nc, hs); }
static size_t fl_smem_dkv(bool tc, int nc, int hs) { return fl_smem(4, 2, tc, nc, hs); }

static int fl_tiles(int T) { return (T + FL_TILE - 1) / FL_TILE; }

/* 1 when the head size is one the flash kernels take, else the failure */
static int fl_head_ok(int C, int NH, const char *where) {
    const int hs = C / NH;
    if (hs >= 1 && hs <= ATTENTION_FLASH_CUDA_MAX_HS && NH * hs == C) return 1;
    char msg[200];
    snprintf(msg, sizeof msg, "head size C/NH = %d/%d is not one the flash attention takes (1 to %d, C a multiple "
             "of NH); HPT_CUDA_ATTENTION=materialise selects the T x T kernels", C, NH, ATTENTION_FLASH_CUDA_MAX_HS);
    kc_fail(where, msg);
    return 0;
}

template <int NC, bool TC, typename A>
static void fl_forward_launch(A *out, float *lse, const A *inp, int B, int T, int C, int NH, float scale,
                              const char *where) {
    const size_t smem = fl_smem_forward(TC, NC, C / NH);
    if (!attention_smem((const void *)k_flash_forward<NC, TC, A>, smem, where)) return;
    k_flash_forward<NC, TC, A><<<dim3((unsigned)(B * NH), (unsigned)fl_tiles(T)), FL_THREADS, smem>>>(out, lse, inp,
                                                                                                    T, C, NH, scale);
    kc_check_launch(where);
}

template <int NC, bool TC, typename A>
static void fl_backward_launch(A *dinp, const A *dout, const A *inp, const float *lse, const float *D, int B, int T,
                               int C, int NH, float scale, int first, const char *where) {
    const int hs = C / NH;
    const size_t smem_dq = fl_smem_dq(TC, NC, hs), smem_dkv = fl_smem_dkv(TC, NC, hs);
    if (!attention_smem((const void *)k_flash_backward_dq<NC, TC, A>, smem_dq, where) ||
        !attention_smem((const void *)k_flash_backward_dkv<NC, TC, A>, smem_dkv, where))
        return;
    const dim3 grid((unsigned)(B * NH), (unsigned)fl_tiles(T));
    /* dq, and dk with dv: disjoint thirds of dinp, both read only inp, dout, lse, D */
    k_flash_backward_dq<NC, TC, A><<<grid, FL_THREADS, smem_dq>>>(dinp, dout, inp, lse, D, T, C, NH, scale, first);
    kc_check_launch(where);
    k_flash_backward_dkv<NC, TC, A><<<grid, FL_THREADS, smem_dkv>>>(dinp, dout, inp, lse, D, T, C, NH, scale, first);
    kc_check_launch(where);
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

template <typename A>
static void flash_fwd(A *out, float *lse, const A *inp, int B, int T, int C, int NH, const char *where) {
    if (!B || !T || !C || !fl_head_ok(C, NH, where)) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const bool tc = kc_flash_tc() && kc_gemm_math() != KC_FP32;
#define FL_FWD(n) (tc ? fl_forward_launch<n, true, A>(out, lse, inp, B, T, C, NH, scale, where) \
                      : fl_forward_launch<n, false, A>(out, lse, inp, B, T, C, NH, scale, where))
    FL_DISPATCH((hs + 15) / 16, FL_FWD)
#undef FL_FWD
}

extern "C" void attention_forward_flash_cuda(float *out, float *lse, const float *inp, int B, int T, int C, int NH) {
    flash_fwd(out, lse, inp, B, T, C, NH, "attention_forward_flash_cuda");
}

extern "C" void attention_forward_flash_bf16_cuda(kc_bf16 *out, float *lse, const kc_bf16 *inp, int B, int T, int C,
                                                  int NH) {
    flash_fwd(as_bf16(out), lse, as_bf16(inp), B, T, C, NH, "attention_forward_flash_bf16_cuda");
}

template <typename A>
static void flash_bwd(A *dinp, const A *dout, const A *inp, const A *out, const float *lse, int B, int T, int C,
                      int NH, float *scratch, int first, const char *where) {
    if (!B || !T || !C || !fl_head_ok(C, NH, where)) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t rows = (size_t)B * T * NH;   /* one warp each, 8 to a block */
    k_flash_rowdot<A><<<blocks_for(rows, 8), 256>>>(scratch, dout, out, T, C, NH, rows);
    kc_check_launch(where);
    const bool tc = kc_flash_tc() && kc_gemm_math() != KC_FP32;
#define FL_BWD(n) (tc ? fl_backward_launch<n, true, A>(dinp, dout, inp, lse, scratch, B, T, C, NH, scale, first, where) \
                      : fl_backward_launch<n, false, A>(dinp, dout, inp, lse, scratch, B, T, C, NH, scale, first, where))
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

extern "C" void attention_backward_flash_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *dout, const kc_bf16 *inp,
                                                         const kc_bf16 *out, const float *lse, int B, int T, int C,
                                                         int NH, float *scratch) {
    flash_bwd(as_bf16(dinp), as_bf16(dout), as_bf16(inp), as_bf16(out), lse, B, T, C, NH, scratch, 1,
              "attention_backward_flash_first_bf16_cuda");
}
