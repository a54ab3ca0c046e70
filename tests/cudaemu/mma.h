/*
 * mma.h — the warp matrix functions (nvcuda::wmma) hpt's kernels use, on the
 * CPU (make CUDA=emu): m16n16k8 with TF32 inputs and fp32 accumulators, the
 * one shape the tensor-core attention takes.
 *
 * As on a GPU, a fragment is spread over the warp's 32 lanes, each holding
 * num_elements of it (4 of a 16 x 8 or 8 x 16 input, 8 of the 16 x 16
 * accumulator), in an order CUDA leaves unspecified: here element i of lane
 * l is the matrix's entry l + 32 i in row-major order, so a kernel that
 * assumed the GPU's order would go wrong here. mma_sync is a warp
 * collective: each lane computes its own 8 outputs from the others'
 * fragments (a gather, as a shuffle is), fp32 sums in ascending k. Inputs
 * are truncated to TF32 (10 mantissa bits), as the tensor cores read them;
 * wmma::__float_to_tf32 rounds to nearest first, as cvt.rna.tf32.f32 does.
 *
 * Checked, each a fault: every lane of the warp passes the same pointer and
 * leading dimension to a load or store, the pointer is 32-byte aligned and
 * the leading dimension a multiple of 4 floats (CUDA's rules), and the whole
 * warp arrives (the gather is a shuffle: a partial warp faults there).
 */
#ifndef HPT_CUDAEMU_MMA_H
#define HPT_CUDAEMU_MMA_H

#include "cuda_runtime.h"

#include <stdint.h>
#include <string.h>

extern "C" const uint64_t *hpt_emu_warp_gather(uint64_t v);
extern "C" unsigned hpt_emu_lane(void);
extern "C" void hpt_emu_kernel_fault(const char *what);

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment;

template <class Layout>
struct fragment<matrix_a, 16, 16, 8, precision::tf32, Layout> {
    enum { num_elements = 4 };
    float x[4];
};

template <class Layout>
struct fragment<matrix_b, 16, 16, 8, precision::tf32, Layout> {
    enum { num_elements = 4 };
    float x[4];
};

template <>
struct fragment<accumulator, 16, 16, 8, float, void> {
    enum { num_elements = 8 };
    float x[8];
};

static inline float __float_to_tf32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;   /* nearest, ties away from zero */
    memcpy(&f, &u, 4);
    return f;
}

namespace emu {

static inline float tf32_truncated(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u &= ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

/* the warp's lanes all pass (p, ldm), p 32-byte aligned, ldm a multiple of 4 */
static inline void check_operand(const void *p, unsigned ldm, const char *what) {
    const uint64_t key = (uint64_t)(uintptr_t)p ^ ((uint64_t)ldm << 52);
    const uint64_t *all = hpt_emu_warp_gather(key);
    for (int l = 0; l < 32; l++)
        if (all[l] != key) {
            hpt_emu_kernel_fault(what);
            return;
        }
    if ((uintptr_t)p % 32 || ldm % 4) hpt_emu_kernel_fault("wmma: a pointer not 32-byte aligned or ldm not a multiple of 4");
}

/* lane's element i of a rows x cols fragment: (row, col) */
static inline void place(int i, int cols, int *r, int *c) {
    const int g = (int)hpt_emu_lane() + 32 * i;
    *r = g / cols;
    *c = g % cols;
}

template <int ROWS, int COLS, int N>
static inline void load(float (&x)[N], const float *p, unsigned ldm, bool row_major) {
    check_operand(p, ldm, "wmma::load_matrix_sync: the lanes disagree on the pointer or ldm");
    for (int i = 0; i < N; i++) {
        int r, c;
        place(i, COLS, &r, &c);
        x[i] = row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
    }
}

}  // namespace emu

template <class L>
static inline void load_matrix_sync(fragment<matrix_a, 16, 16, 8, precision::tf32, L> &a, const float *p,
                                    unsigned ldm) {
    emu::load<16, 8>(a.x, p, ldm, std::is_same<L, row_major>::value);
}

template <class L>
static inline void load_matrix_sync(fragment<matrix_b, 16, 16, 8, precision::tf32, L> &b, const float *p,
                                    unsigned ldm) {
    emu::load<8, 16>(b.x, p, ldm, std::is_same<L, row_major>::value);
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 8, float> &c, const float *p, unsigned ldm,
                                    layout_t layout) {
    emu::load<16, 16>(c.x, p, ldm, layout == mem_row_major);
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 8, float> &c, unsigned ldm,
                                     layout_t layout) {
    emu::check_operand(p, ldm, "wmma::store_matrix_sync: the lanes disagree on the pointer or ldm");
    for (int i = 0; i < 8; i++) {
        int r, col;
        emu::place(i, 16, &r, &col);
        p[layout == mem_row_major ? (size_t)r * ldm + col : (size_t)col * ldm + r] = c.x[i];
    }
}

template <class F>
static inline void fill_fragment(F &f, float v) {
    for (int i = 0; i < F::num_elements; i++) f.x[i] = v;
}

/* d = a b + c over the warp: lane l's outputs need rows of a and columns of
 * b that other lanes hold, so the lanes first publish where their fragments
 * are (a gather), compute, and gather again before returning (no lane may
 * change its a or b while another still reads them). d may be c. */
template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 8, float> &d,
                            const fragment<matrix_a, 16, 16, 8, precision::tf32, LA> &a,
                            const fragment<matrix_b, 16, 16, 8, precision::tf32, LB> &b,
                            const fragment<accumulator, 16, 16, 8, float> &c) {
    struct operands { const float *a, *b; } mine = {a.x, b.x};
    const uint64_t *g = hpt_emu_warp_gather((uint64_t)(uintptr_t)&mine);
    const operands *lane[32];
    for (int l = 0; l < 32; l++) lane[l] = (const operands *)(uintptr_t)g[l];
    float out[8];
    for (int i = 0; i < 8; i++) {
        int r, col;
        emu::place(i, 16, &r, &col);
        float acc = c.x[i];
        for (int k = 0; k < 8; k++) {
            const int ga = r * 8 + k, gb = k * 16 + col;   /* the entries' row-major indices in a and b */
            acc += emu::tf32_truncated(lane[ga % 32]->a[ga / 32]) * emu::tf32_truncated(lane[gb % 32]->b[gb / 32]);
        }
        out[i] = acc;
    }
    hpt_emu_warp_gather(0);
    for (int i = 0; i < 8; i++) d.x[i] = out[i];
}

}  // namespace wmma
}  // namespace nvcuda

#endif /* HPT_CUDAEMU_MMA_H */
