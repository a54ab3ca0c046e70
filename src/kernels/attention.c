/*
 * attention.c — causal multi-head self-attention over a packed qkv tensor.
 *
 * One (b, h) pair per task gives every thread exclusive ownership of its
 * outputs, including the dk/dv rows that many queries contribute to.
 *
 * Every float sum here has one fixed order, whatever the compiler vectorises:
 *   - a dot product over the head's channels (q.k, dout.v) adds 16 partial
 *     sums (dot16): lane l takes the products of channels l, l+16, ... below
 *     hs rounded down to 16, lane 0 then the remaining channels in order,
 *     and the lanes are added to 0 in lane order. That is the order gcc's
 *     `omp simd reduction` gave the plain loop with 512-bit vectors, which
 *     these kernels used before they were blocked (so their bits did not
 *     change on such machines);
 *   - a sum over positions (softmax-weighted values, dq, dk, dv) adds the
 *     positions in ascending order onto the output's previous value.
 * The *_ref kernels are the plain per-(query, key) loops in those orders, the
 * test oracle (equal bit for bit) and the fallback when a thread cannot get
 * its scratch memory. The fast kernels get the same sums with the loops
 * turned around so that nothing is summed across a vector: scores for 16
 * keys at a time from a transposed block of keys (each vector lane is one
 * key), and sums over positions accumulated in registers, a whole output row
 * at a time.
 */
#include "kernels.h"
#include "simd.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = HPT_F16_LANES };

/* accum_rows4's width: two 16-lane blocks per row where a block is one
 * register (AVX-512), one elsewhere, so that four rows' accumulators and the
 * shared row of x stay in registers (16 on AVX2). Any width adds each
 * element's terms in the same order: the bits do not depend on it. */
enum { ROW_BLOCKS = HPT_VN == 1 ? 2 : 1 };

/* a . b over n floats in dot16 order (see the top of the file). */
static float dot16(const float *a, const float *b, int n) {
    float lane[LANES] = {0};
    const int n16 = n / LANES * LANES;
    for (int i = 0; i < n16; i += LANES)
        for (int l = 0; l < LANES; l++) lane[l] += a[i + l] * b[i + l];
    for (int i = n16; i < n; i++) lane[0] += a[i] * b[i];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += lane[l];
    return s;
}

/* The 16 dot products x_q . key_j, each in dot16 order, for Q queries x_q =
 * x + q xs at once (independent chains the core overlaps) and a block of
 * keys stored transposed: kt holds hs rows of 16 (row i: channel i of each
 * key). s[q] receives query q's 16 sums. */
static inline void dot16_block(hpt_f16 *s, int Q, const float *x, size_t xs, const float *kt, int hs) {
    const int n16 = hs / LANES * LANES;
    for (int q = 0; q < Q; q++) s[q] = hpt_f16_zero();
    for (int l = 0; l < LANES; l++) {
        hpt_f16 acc[4];
        for (int q = 0; q < Q; q++) acc[q] = hpt_f16_zero();
        for (int i = l; i < n16; i += LANES) {
            const hpt_f16 k = hpt_f16_load(kt + (size_t)i * LANES);
            for (int q = 0; q < Q; q++) acc[q] = hpt_f16_madd(acc[q], x[q * xs + i], k);
        }
        if (l == 0)
            for (int i = n16; i < hs; i++) {
                const hpt_f16 k = hpt_f16_load(kt + (size_t)i * LANES);
                for (int q = 0; q < Q; q++) acc[q] = hpt_f16_madd(acc[q], x[q * xs + i], k);
            }
        for (int q = 0; q < Q; q++) s[q] = hpt_f16_add(s[q], acc[q]);
    }
}

/* kt (hs x 16) = the nk rows of k (row stride `stride`) transposed, zero
 * columns past nk. */
static void transpose_block(float *kt, const float *k, size_t stride, int nk, int hs) {
    for (int i = 0; i < hs; i++)
        for (int j = 0; j < LANES; j++) kt[(size_t)i * LANES + j] = j < nk ? k[(size_t)j * stride + i] : 0.0f;
}

/* Scores of queries [k0, T) (rows of q, xs apart) against the keys of the
 * block at k0 (nk of them, in kt), each times scale, into rows of out
 * (T apart) at column k0, only keys at or before the query (x 1 is exact). */
static void block_scores(float *out, size_t T, const float *q, size_t xs, const float *kt, int k0, int nk, int hs,
                         float scale) {
    for (int t = k0; t < (int)T;) {
        const int Q = (int)T - t >= 4 ? 4 : 1;
        hpt_f16 s[4];
        if (Q == 4) dot16_block(s, 4, q + (size_t)t * xs, xs, kt, hs);   /* constant Q: unrolled */
        else dot16_block(s, 1, q + (size_t)t * xs, xs, kt, hs);
        for (int qi = 0; qi < Q; qi++, t++) {
            float sc[LANES];
            hpt_f16_store(sc, s[qi]);
            const int n = t - k0 + 1 < nk ? t - k0 + 1 : nk;   /* keys k0 .. min(t, k0 + 15) */
            float *row = out + (size_t)t * T + k0;
            for (int j = 0; j < n; j++) row[j] = sc[j] * scale;
        }
    }
}

/* dst[0..w) += sum over r in [lo, hi), ascending, of c[r cs] * x[r xs + 0..w):
 * axpys, each element's adds in the same order, with the accumulators in
 * registers instead of memory. */
static void accum_rows(float *dst, const float *c, size_t cs, const float *x, size_t xs, int lo, int hi, int w) {
    int i = 0;
    for (; i + 4 * LANES <= w; i += 4 * LANES) {
        hpt_f16 a[4];
        for (int j = 0; j < 4; j++) a[j] = hpt_f16_load(dst + i + j * LANES);
        for (int r = lo; r < hi; r++) {
            const float cr = c[(size_t)r * cs];
            const float *xr = x + (size_t)r * xs + i;
            for (int j = 0; j < 4; j++) a[j] = hpt_f16_madd(a[j], cr, hpt_f16_load(xr + j * LANES));
        }
        for (int j = 0; j < 4; j++) hpt_f16_store(dst + i + j * LANES, a[j]);
    }
    for (; i + LANES <= w; i += LANES) {
        hpt_f16 a = hpt_f16_load(dst + i);
        for (int r = lo; r < hi; r++) a = hpt_f16_madd(a, c[(size_t)r * cs], hpt_f16_load(x + (size_t)r * xs + i));
        hpt_f16_store(dst + i, a);
    }
    for (; i < w; i++) {
        float a = dst[i];
        for (int r = lo; r < hi; r++) a += c[(size_t)r * cs] * x[(size_t)r * xs + i];
        dst[i] = a;
    }
}

/* accum_rows for 4 rows over the same [lo, hi): row q is dst + q ds with
 * coefficients c + q cq (indexed by r as above); 4 rows' chains at once,
 * ROW_BLOCKS 16-lane blocks of each row at a time. */
static void accum_rows4(float *dst, size_t ds, const float *c, size_t cq, size_t cs, const float *x, size_t xs,
                        int lo, int hi, int w) {
    enum { W = ROW_BLOCKS * LANES };
    int i = 0;
    for (; i + W <= w; i += W) {
        hpt_f16 a[4][ROW_BLOCKS];
        for (int q = 0; q < 4; q++)
            for (int j = 0; j < ROW_BLOCKS; j++) a[q][j] = hpt_f16_load(dst + q * ds + i + j * LANES);
        for (int r = lo; r < hi; r++) {
            const float *xr = x + (size_t)r * xs + i;
            hpt_f16 xv[ROW_BLOCKS];
            for (int j = 0; j < ROW_BLOCKS; j++) xv[j] = hpt_f16_load(xr + j * LANES);
            for (int q = 0; q < 4; q++) {
                const float cr = c[q * cq + (size_t)r * cs];
                for (int j = 0; j < ROW_BLOCKS; j++) a[q][j] = hpt_f16_madd(a[q][j], cr, xv[j]);
            }
        }
        for (int q = 0; q < 4; q++)
            for (int j = 0; j < ROW_BLOCKS; j++) hpt_f16_store(dst + q * ds + i + j * LANES, a[q][j]);
    }
    if (i < w)
        for (int q = 0; q < 4; q++) accum_rows(dst + q * ds + i, c + q * cq, cs, x + i, xs, lo, hi, w - i);
}

/* arow[0..t] = softmax of the scaled scores in place, zeros after (to T). */
static void softmax_row(float *arow, int t, int T) {
    const float mx = hpt_max_row(arow, t + 1);
    float sum = 0.0f;
    #pragma omp simd reduction(+:sum)
    for (int t2 = 0; t2 <= t; t2++) { arow[t2] = hpt_expf(arow[t2] - mx); sum += arow[t2]; }   /* vec-check */
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; t2++) arow[t2] *= inv;
    for (int t2 = t + 1; t2 < T; t2++) arow[t2] = 0.0f;
}

/* One (b, h) head. base: its q at base, k at base + C, v at base + 2C, rows
 * 3C apart; o: its output rows (C apart); att: its T x T probabilities. */
typedef struct head {
    const float *base;
    float *o;
    float *att;
    int T, C, hs;
    float scale;
} head;

static head head_at(float *out, float *att, const float *inp, int b, int h, int T, int C, int NH) {
    const int hs = C / NH;
    return (head){.base = inp + (size_t)b * T * 3 * C + (size_t)h * hs,
                  .o = out + (size_t)b * T * C + (size_t)h * hs,
                  .att = att + ((size_t)b * NH + h) * T * T,
                  .T = T, .C = C, .hs = hs, .scale = 1.0f / sqrtf((float)hs)};
}

static void head_forward_ref(const head *hd) {
    const size_t C3 = 3 * (size_t)hd->C;
    const int T = hd->T, hs = hd->hs;
    for (int t = 0; t < T; t++) {
        const float *q = hd->base + (size_t)t * C3;
        float *arow = hd->att + (size_t)t * T;
        for (int t2 = 0; t2 <= t; t2++) arow[t2] = dot16(q, hd->base + (size_t)t2 * C3 + hd->C, hs) * hd->scale;
        softmax_row(arow, t, T);
        float *o = hd->o + (size_t)t * hd->C;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = hd->base + (size_t)t2 * C3 + 2 * hd->C;
            for (int i = 0; i < hs; i++) o[i] += arow[t2] * v[i];
        }
    }
}

/* kt: hs x 16 floats of scratch */
static void head_forward(const head *hd, float *kt) {
    const size_t C3 = 3 * (size_t)hd->C, C = (size_t)hd->C;
    const int T = hd->T, hs = hd->hs;
    for (int k0 = 0; k0 < T; k0 += LANES) {
        const int nk = T - k0 < LANES ? T - k0 : LANES;
        transpose_block(kt, hd->base + (size_t)k0 * C3 + C, C3, nk, hs);
        block_scores(hd->att, (size_t)T, hd->base, C3, kt, k0, nk, hs, hd->scale);
    }
    for (int t = 0; t < T; t++) {
        softmax_row(hd->att + (size_t)t * T, t, T);
        for (int i = 0; i < hs; i++) hd->o[t * C + i] = 0.0f;
    }
    /* out_t = sum over t2 <= t of att[t][t2] v_t2, four rows at a time:
     * the keys they share, then each row's last ones */
    const float *v = hd->base + 2 * C;
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        accum_rows4(hd->o + t * C, C, hd->att + (size_t)t * T, (size_t)T, 1, v, C3, 0, t + 1, hs);
        for (int q = 1; q < 4; q++)
            accum_rows(hd->o + (t + q) * C, hd->att + (size_t)(t + q) * T, 1, v, C3, t + 1, t + q + 1, hs);
    }
    for (; t < T; t++) accum_rows(hd->o + t * C, hd->att + (size_t)t * T, 1, v, C3, 0, t + 1, hs);
}

void attention_forward_ref(float *out, float *att, const float *inp, int B, int T, int C, int NH) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            head hd = head_at(out, att, inp, b, h, T, C, NH);
            head_forward_ref(&hd);
        }
}

void attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH) {
    const int hs = C / NH;
    #pragma omp parallel
    {
        float *kt = malloc((size_t)hs * LANES * sizeof(float));
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                head hd = head_at(out, att, inp, b, h, T, C, NH);
                if (kt) head_forward(&hd, kt);
                else head_forward_ref(&hd);   /* no scratch: the same bits, slower */
            }
        free(kt);
    }
}

/* The backward of one head: hd->o is its dout rows (C apart), d its dq at
 * d, dk at d + C, dv at d + 2C (rows 3C apart). */
static void head_backward_ref(const head *hd, float *d) {
    const size_t C3 = 3 * (size_t)hd->C;
    const int T = hd->T, hs = hd->hs, C = hd->C;
    float datt[T];  /* one row of d(att); T <= block_size, on the stack */
    for (int t = 0; t < T; t++) {
        const float *arow = hd->att + (size_t)t * T, *dO = hd->o + (size_t)t * C;
        const float *q = hd->base + (size_t)t * C3;
        float *dq = d + (size_t)t * C3;
        /* out = sum att * v  ->  datt, dv */
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = hd->base + (size_t)t2 * C3 + 2 * C;
            float *dv = d + (size_t)t2 * C3 + 2 * C;
            float s = dot16(dO, v, hs), a = arow[t2];
            for (int i = 0; i < hs; i++) dv[i] += a * dO[i];
            datt[t2] = s;
            dot += s * a;
        }
        /* softmax backward, then the scaled q.k product */
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = hd->base + (size_t)t2 * C3 + C;
            float *dk = d + (size_t)t2 * C3 + C;
            float dpre = arow[t2] * (datt[t2] - dot) * hd->scale;
            for (int i = 0; i < hs; i++) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
        }
    }
}

/* first: the head's dq, dk, dv are zeroed here (in cache, by the thread that
 * accumulates onto them) instead of by the caller */
static void zero_head(float *d, const head *hd) {
    for (int t = 0; t < hd->T; t++)
        for (int p = 0; p < 3; p++) memset(d + (size_t)t * 3 * hd->C + (size_t)p * hd->C, 0, (size_t)hd->hs * sizeof(float));
}

/* work: T x T + hs x 16 floats of scratch */
static void head_backward(const head *hd, float *d, float *work) {
    const size_t C3 = 3 * (size_t)hd->C, C = (size_t)hd->C;
    const int T = hd->T, hs = hd->hs;
    const size_t TT = (size_t)T;
    float *dpre = work, *vt = work + TT * TT;
    /* datt[t][t2] = dout_t . v_t2, 16 keys at a time (into dpre) */
    for (int k0 = 0; k0 < T; k0 += LANES) {
        const int nk = T - k0 < LANES ? T - k0 : LANES;
        transpose_block(vt, hd->base + (size_t)k0 * C3 + 2 * C, C3, nk, hs);
        block_scores(dpre, TT, hd->o, C, vt, k0, nk, hs, 1.0f);
    }
    /* softmax backward: dpre = att * (datt - sum(datt * att)) * scale, in place */
    for (size_t t = 0; t < TT; t++) {
        const float *arow = hd->att + t * TT;
        float *row = dpre + t * TT;
        float dot = 0.0f;
        for (size_t t2 = 0; t2 <= t; t2++) dot += row[t2] * arow[t2];
        for (size_t t2 = 0; t2 <= t; t2++) row[t2] = arow[t2] * (row[t2] - dot) * hd->scale;
    }
    const float *q = hd->base, *k = hd->base + C;
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        /* dq_t += sum over keys t2 <= t of dpre[t][t2] k_t2: the shared keys, then each row's last ones */
        accum_rows4(d + t * C3, C3, dpre + (size_t)t * TT, TT, 1, k, C3, 0, t + 1, hs);
        for (int j = 1; j < 4; j++) accum_rows(d + (t + j) * C3, dpre + (size_t)(t + j) * TT, 1, k, C3, t + 1, t + j + 1, hs);
        /* dk_t += sum over queries t' >= t of dpre[t'][t] q_t' (column t of dpre), dv_t likewise with att
         * and dout: each row's first queries, then the shared ones */
        for (int j = 0; j < 3; j++) {
            accum_rows(d + (t + j) * C3 + C, dpre + t + j, TT, q, C3, t + j, t + 3, hs);
            accum_rows(d + (t + j) * C3 + 2 * C, hd->att + t + j, TT, hd->o, C, t + j, t + 3, hs);
        }
        accum_rows4(d + t * C3 + C, C3, dpre + t, 1, TT, q, C3, t + 3, T, hs);
        accum_rows4(d + t * C3 + 2 * C, C3, hd->att + t, 1, TT, hd->o, C, t + 3, T, hs);
    }
    for (; t < T; t++) {
        accum_rows(d + t * C3, dpre + (size_t)t * TT, 1, k, C3, 0, t + 1, hs);
        accum_rows(d + t * C3 + C, dpre + t, TT, q, C3, t, T, hs);
        accum_rows(d + t * C3 + 2 * C, hd->att + t, TT, hd->o, C, t, T, hs);
    }
}

static head head_bwd_at(float *dinp, const float *dout, const float *inp, const float *att, int b, int h,
                        int T, int C, int NH, float **d) {
    /* the head's dout rows ride in .o (read only) */
    head hd = head_at((float *)dout, (float *)att, inp, b, h, T, C, NH);
    *d = dinp + (size_t)b * T * 3 * C + (size_t)h * hd.hs;
    return hd;
}

void attention_backward_ref(float *dinp, const float *dout, const float *inp, const float *att,
                            int B, int T, int C, int NH) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float *d;
            head hd = head_bwd_at(dinp, dout, inp, att, b, h, T, C, NH, &d);
            head_backward_ref(&hd, d);
        }
}

static void attention_bwd(float *dinp, const float *dout, const float *inp, const float *att, int B, int T, int C,
                          int NH, int first) {
    const int hs = C / NH;
    #pragma omp parallel
    {
        float *work = malloc(((size_t)T * T + (size_t)hs * LANES) * sizeof(float));
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                float *d;
                head hd = head_bwd_at(dinp, dout, inp, att, b, h, T, C, NH, &d);
                if (first) zero_head(d, &hd);
                if (work) head_backward(&hd, d, work);
                else head_backward_ref(&hd, d);   /* no scratch: the same bits, slower */
            }
        free(work);
    }
}

void attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                        int B, int T, int C, int NH) {
    attention_bwd(dinp, dout, inp, att, B, T, C, NH, 0);
}

void attention_backward_first(float *dinp, const float *dout, const float *inp, const float *att,
                              int B, int T, int C, int NH) {
    attention_bwd(dinp, dout, inp, att, B, T, C, NH, 1);
}
