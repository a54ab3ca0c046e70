/*
 * test_bf16_kernels.c — the bf16 twins of src/cuda/kernels_cuda.h (what the
 * CUDA row runs under --precision bf16) against the CPU kernels they mirror.
 *
 * Each twin reads bf16 activations and writes bf16 ones, computing in fp32
 * between. So the reference is the CPU's fp32 kernel on the same inputs
 * rounded to bf16 (every bf16 value is a float exactly), and the difference
 * is the twin's own roundings:
 *   exact: a result rounded once from the CPU's operations in the CPU's
 *     order (encoder forward and backward, residual, softmax_xent_backward,
 *     the fp32 sums dweight/dbias where the fp32 kernel is exact), compared
 *     with the CPU's result rounded to bf16 (kc_bf16_of) or unrounded (fp32
 *     outputs);
 *   normwise 1e-2 (max |gpu - cpu| <= 1e-2 max |cpu|): outputs rounded to
 *     bf16 after a reduction in another order (layernorm out and dinp, the
 *     GEMMs' bf16 outputs, GELU, the probabilities, the flash attention's
 *     out and dq/dk/dv). One bf16 rounding is 2^-9 = 2e-3 relative to its
 *     element, two 4e-3: the tolerance has room for the fp32 differences
 *     under it and none for an indexing or type mistake (order 1);
 *   normwise 1e-5 (3e-5 past an inner dimension of 4096): fp32 outputs of
 *     reductions in another order (layernorm's mean, rstd, dweight, dbias;
 *     the GEMMs' dweight; the losses).
 * Every twin runs twice from the same inputs (bit-identical results), the
 * *_first twins on outputs pre-filled with NaN, the accumulating ones on
 * random values. floats_to_bf16_cuda must round as kc_bf16_of does, bit for
 * bit, ties and NaN included.
 *
 * Without a usable GPU it prints "skip: ..." and exits 0.
 */
#include "cuda_test.h"

#define TOL_EXACT (-1.0)
#define TOL_BF16 1e-2

/* ---------------------------------------------------------------- buffers */

static void synced(const char *what) {
    int rc = kernels_cuda_sync();
    CHECK(rc == 0, "%s: %s", what, kernels_cuda_error());
    if (rc) exit(TEST_REPORT("test_bf16_kernels"));
}

/* n floats, normal(0, std), each already a bf16 value (the twins' inputs) */
static float *hrand_bf16(size_t n, float std) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = kc_bf16_float(kc_bf16_of(std * hpt_rng_normal(&g_rng)));
    return p;
}

/* device bf16 of host floats (rounded) / host floats of device bf16 */
static kc_bf16 *dbf16(const float *h, size_t n) {
    kc_bf16 *t = xmalloc(n * sizeof *t), *d = dmalloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = kc_bf16_of(h[i]);
    cuda_or_die(cudaMemcpy(d, t, n * sizeof *t, cudaMemcpyHostToDevice), "upload bf16");
    free(t);
    return d;
}

static void bf16_up(kc_bf16 *d, const float *h, size_t n) {
    kc_bf16 *t = xmalloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = kc_bf16_of(h[i]);
    cuda_or_die(cudaMemcpy(d, t, n * sizeof *t, cudaMemcpyHostToDevice), "upload bf16");
    free(t);
}

static float *bf16_down(const kc_bf16 *d, size_t n) {
    kc_bf16 *t = xmalloc(n * sizeof *t);
    float *h = xmalloc(n * sizeof(float));
    cuda_or_die(cudaMemcpy(t, d, n * sizeof *t, cudaMemcpyDeviceToHost), "download bf16");
    for (size_t i = 0; i < n; i++) h[i] = kc_bf16_float(t[i]);
    free(t);
    return h;
}

static float *dfloats(const float *h, size_t n) {
    float *d = dmalloc(n * sizeof(float));
    cuda_or_die(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), "upload");
    return d;
}

static float *floats_down(const float *d, size_t n) {
    float *h = xmalloc(n * sizeof(float));
    cuda_or_die(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return h;
}

/* NaN in every element: 0xffff is a bf16 NaN, 0xffffffff a float one */
static void dnan(void *d, size_t bytes) { cuda_or_die(cudaMemset(d, 0xff, bytes), "cudaMemset"); }

/* the CPU's result as the twin stores it: each element rounded to bf16 */
static void round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = kc_bf16_float(kc_bf16_of(x[i]));
}

/* ---------------------------------------------------------------- comparisons */

/* TOL_EXACT: equal values; else normwise (max |gpu - cpu| <= tol max |cpu|).
 * NaN fails. Prints the worst difference. */
static void cmp(const char *shape, const char *what, const float *gpu, const float *cpu, size_t n, double tol) {
    double maxdiff = 0.0, maxref = 0.0;
    size_t nan = 0, worst = 0, equal = 0;
    for (size_t i = 0; i < n; i++) {
        if (gpu[i] != gpu[i] || cpu[i] != cpu[i]) { nan++; worst = i; continue; }
        equal += gpu[i] == cpu[i];
        const double d = fabs((double)gpu[i] - cpu[i]);
        if (d > maxdiff) { maxdiff = d; worst = i; }
        if (fabs((double)cpu[i]) > maxref) maxref = fabs((double)cpu[i]);
    }
    const int ok = !nan && (tol == TOL_EXACT ? equal == n : maxdiff <= tol * (maxref > 0 ? maxref : 1.0));
    printf("  %-4s %-40s n=%-9zu equal %6.2f%%  rel %.3g  tol %s\n", ok ? "ok" : "FAIL", what, n,
           n ? 100.0 * equal / n : 100.0, maxref > 0 ? maxdiff / maxref : maxdiff,
           tol == TOL_EXACT ? "exact" : tol == TOL_BF16 ? "1e-2 normwise" : "fp32 normwise");
    CHECK(ok, "%s %s: element %zu: gpu %.9g cpu %.9g (%zu NaN)", shape, what, worst, n ? gpu[worst] : 0.0f,
          n ? cpu[worst] : 0.0f, nan);
}

static void same(const char *shape, const char *what, const float *a, const float *b, size_t n) {
    CHECK(!memcmp(a, b, n * sizeof(float)), "%s %s: two GPU runs differ", shape, what);
}

typedef struct shape {
    const char *name;
    int B, T, C, NH, V, Vp;
} shape;

/* ---------------------------------------------------------------- conversion */

static void test_convert(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f /* a tie: rounds to 1 */,
                             1.01171875f /* a tie: rounds up to even */, 3.4e38f, -3.4e38f, 1e-40f, INFINITY,
                             -INFINITY, NAN, 65504.0f, 1.0f / 3.0f};
    const size_t ns = sizeof special / sizeof special[0], n = 4096 + ns;
    float *x = hrand(n, 3.0f);
    memcpy(x, special, sizeof special);
    float *d = dfloats(x, n);
    kc_bf16 *b = dmalloc(n * sizeof(kc_bf16)), *got = xmalloc(n * sizeof(kc_bf16));
    floats_to_bf16_cuda(b, d, n);
    synced("floats_to_bf16_cuda");
    cuda_or_die(cudaMemcpy(got, b, n * sizeof(kc_bf16), cudaMemcpyDeviceToHost), "download");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i].bits != kc_bf16_of(x[i]).bits;
    CHECK(bad == 0, "floats_to_bf16_cuda: %zu of %zu roundings differ from kc_bf16_of", bad, n);
    CHECK(kc_bf16_of(1.00390625f).bits == 0x3f80 && kc_bf16_of(1.01171875f).bits == 0x3f82 &&
          kc_bf16_of(NAN).bits == 0x7fff && kc_bf16_float(kc_bf16_of(-2.5f)) == -2.5f,
          "kc_bf16_of: ties to even, NaN canonical, exact values kept");
    printf("  %-4s floats_to_bf16_cuda: %zu roundings as kc_bf16_of\n", bad ? "FAIL" : "ok", n);
    cudaFree(d); cudaFree(b); free(got); free(x);
}

/* ---------------------------------------------------------------- encoder */

static void test_encoder(const shape *s) {
    const int B = s->B, T = s->T, C = s->C, V = s->V, BT = B * T;
    const size_t VC = (size_t)V * C, TC = (size_t)T * C, BTC = (size_t)BT * C;
    int *tok = xmalloc((size_t)BT * sizeof(int));
    for (int i = 0; i < BT; i++) tok[i] = (int)hpt_rng_below(&g_rng, (uint64_t)(i % 2 ? V : 5));
    float *wte = hrand(VC, 0.02f), *wpe = hrand(TC, 0.01f), *out = xmalloc(BTC * sizeof(float));
    encoder_forward(out, tok, wte, wpe, B, T, C);
    round_bf16(out, BTC);
    int *dtok = dmalloc((size_t)BT * sizeof(int));
    cuda_or_die(cudaMemcpy(dtok, tok, (size_t)BT * sizeof(int), cudaMemcpyHostToDevice), "upload");
    float *dwte = dfloats(wte, VC), *dwpe = dfloats(wpe, TC), *g[2];
    kc_bf16 *dout = dmalloc(BTC * sizeof(kc_bf16));
    for (int r = 0; r < 2; r++) {
        encoder_forward_bf16_cuda(dout, dtok, dwte, dwpe, B, T, C);
        synced("encoder_forward_bf16_cuda");
        g[r] = bf16_down(dout, BTC);
    }
    cmp(s->name, "encoder_forward_bf16 out", g[0], out, BTC, TOL_EXACT);
    same(s->name, "encoder_forward_bf16 out", g[0], g[1], BTC);

    /* backward: fp32 gradients from bf16-exact dout, onto random values */
    float *d = hrand_bf16(BTC, 1.0f), *gte0 = hrand(VC, 1.0f), *gpe0 = hrand(TC, 1.0f);
    float *gte = hcopy(gte0, VC), *gpe = hcopy(gpe0, TC);
    encoder_backward(gte, gpe, d, tok, B, T, C);
    kc_bf16 *dd = dbf16(d, BTC);
    int *scratch = dmalloc(encoder_backward_cuda_scratch(V) * sizeof(int));
    float *rte[2], *rpe[2];
    for (int r = 0; r < 2; r++) {
        cuda_or_die(cudaMemcpy(dwte, gte0, VC * sizeof(float), cudaMemcpyHostToDevice), "upload");
        cuda_or_die(cudaMemcpy(dwpe, gpe0, TC * sizeof(float), cudaMemcpyHostToDevice), "upload");
        encoder_backward_bf16_cuda(dwte, dwpe, dd, dtok, B, T, C, V, scratch);
        synced("encoder_backward_bf16_cuda");
        rte[r] = floats_down(dwte, VC);
        rpe[r] = floats_down(dwpe, TC);
    }
    cmp(s->name, "encoder_backward_bf16 dwte", rte[0], gte, VC, TOL_EXACT);
    cmp(s->name, "encoder_backward_bf16 dwpe", rpe[0], gpe, TC, TOL_EXACT);
    same(s->name, "encoder_backward_bf16 dwte", rte[0], rte[1], VC);
    same(s->name, "encoder_backward_bf16 dwpe", rpe[0], rpe[1], TC);
    cudaFree(dtok); cudaFree(dwte); cudaFree(dwpe); cudaFree(dout); cudaFree(dd); cudaFree(scratch);
    free(tok); free(wte); free(wpe); free(out); free(d); free(gte0); free(gpe0); free(gte); free(gpe);
    for (int r = 0; r < 2; r++) { free(g[r]); free(rte[r]); free(rpe[r]); }
}

/* ---------------------------------------------------------------- layernorm */

static void test_layernorm(const shape *s) {
    const int N = s->B * s->T, C = s->C;
    const size_t NC = (size_t)N * C;
    float *x = hrand_bf16(NC, 1.0f), *w = hrand((size_t)C, 0.5f), *b = hrand((size_t)C, 0.1f);
    for (size_t i = 0; i < NC; i++) x[i] = kc_bf16_float(kc_bf16_of(x[i] + 0.25f));   /* an offset mean */
    float *out = xmalloc(NC * sizeof(float)), *mean = xmalloc((size_t)N * sizeof(float));
    float *rstd = xmalloc((size_t)N * sizeof(float));
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    kc_bf16 *dx = dbf16(x, NC), *dout = dmalloc(NC * sizeof(kc_bf16));
    float *dw = dfloats(w, (size_t)C), *db = dfloats(b, (size_t)C);
    float *dmean = dmalloc((size_t)N * sizeof(float)), *drstd = dmalloc((size_t)N * sizeof(float));
    float *go[2], *gm[2], *gr[2];
    for (int r = 0; r < 2; r++) {
        layernorm_forward_bf16_cuda(dout, dmean, drstd, dx, dw, db, N, C);
        synced("layernorm_forward_bf16_cuda");
        go[r] = bf16_down(dout, NC);
        gm[r] = floats_down(dmean, (size_t)N);
        gr[r] = floats_down(drstd, (size_t)N);
    }
    cmp(s->name, "layernorm_forward_bf16 out", go[0], out, NC, TOL_BF16);
    cmp(s->name, "layernorm_forward_bf16 mean", gm[0], mean, (size_t)N, 1e-5);
    cmp(s->name, "layernorm_forward_bf16 rstd", gr[0], rstd, (size_t)N, 1e-5);
    same(s->name, "layernorm_forward_bf16 out", go[0], go[1], NC);
    same(s->name, "layernorm_forward_bf16 rstd", gr[0], gr[1], (size_t)N);

    /* backward from the CPU's mean and rstd: dinp (bf16) accumulates in both
     * twins, dweight and dbias (fp32) accumulate or are written (first) */
    cuda_or_die(cudaMemcpy(dmean, mean, (size_t)N * sizeof(float), cudaMemcpyHostToDevice), "upload");
    cuda_or_die(cudaMemcpy(drstd, rstd, (size_t)N * sizeof(float), cudaMemcpyHostToDevice), "upload");
    float *d = hrand_bf16(NC, 1.0f), *gx0 = hrand_bf16(NC, 1.0f), *gw0 = hrand((size_t)C, 1.0f);
    float *gb0 = hrand((size_t)C, 1.0f);
    kc_bf16 *ddo = dbf16(d, NC), *ddx = dmalloc(NC * sizeof(kc_bf16));
    float *ddw = dmalloc((size_t)C * sizeof(float)), *ddb = dmalloc((size_t)C * sizeof(float));
    float *scratch = dmalloc(layernorm_backward_cuda_scratch(N, C) * sizeof(float));
    for (int first = 0; first < 2; first++) {
        float *gx = hcopy(gx0, NC), *gw = hcopy(gw0, (size_t)C), *gb = hcopy(gb0, (size_t)C);
        if (first) layernorm_backward_first(gx, gw, gb, d, x, w, mean, rstd, N, C);
        else layernorm_backward(gx, gw, gb, d, x, w, mean, rstd, N, C);
        float *rx[2], *rw[2], *rb[2];
        for (int r = 0; r < 2; r++) {
            bf16_up(ddx, gx0, NC);
            if (first) { dnan(ddw, (size_t)C * sizeof(float)); dnan(ddb, (size_t)C * sizeof(float)); }
            else {
                cuda_or_die(cudaMemcpy(ddw, gw0, (size_t)C * sizeof(float), cudaMemcpyHostToDevice), "upload");
                cuda_or_die(cudaMemcpy(ddb, gb0, (size_t)C * sizeof(float), cudaMemcpyHostToDevice), "upload");
            }
            if (first) layernorm_backward_first_bf16_cuda(ddx, ddw, ddb, ddo, dx, dw, dmean, drstd, N, C, scratch);
            else layernorm_backward_bf16_cuda(ddx, ddw, ddb, ddo, dx, dw, dmean, drstd, N, C, scratch);
            synced("layernorm_backward_bf16_cuda");
            rx[r] = bf16_down(ddx, NC);
            rw[r] = floats_down(ddw, (size_t)C);
            rb[r] = floats_down(ddb, (size_t)C);
        }
        cmp(s->name, first ? "layernorm_backward_first_bf16 dinp" : "layernorm_backward_bf16 dinp", rx[0], gx, NC,
            TOL_BF16);
        cmp(s->name, first ? "layernorm_backward_first_bf16 dweight" : "layernorm_backward_bf16 dweight", rw[0], gw,
            (size_t)C, 1e-5);
        cmp(s->name, first ? "layernorm_backward_first_bf16 dbias" : "layernorm_backward_bf16 dbias", rb[0], gb,
            (size_t)C, 1e-5);
        same(s->name, "layernorm_backward_bf16 dinp", rx[0], rx[1], NC);
        same(s->name, "layernorm_backward_bf16 dweight", rw[0], rw[1], (size_t)C);
        free(gx); free(gw); free(gb);
        for (int r = 0; r < 2; r++) { free(rx[r]); free(rw[r]); free(rb[r]); }
    }
    cudaFree(dx); cudaFree(dout); cudaFree(dw); cudaFree(db); cudaFree(dmean); cudaFree(drstd);
    cudaFree(ddo); cudaFree(ddx); cudaFree(ddw); cudaFree(ddb); cudaFree(scratch);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(d); free(gx0); free(gw0); free(gb0);
    for (int r = 0; r < 2; r++) { free(go[r]); free(gm[r]); free(gr[r]); }
}

/* ---------------------------------------------------------------- matmul */

/* out (N,OC) = inp . weight^T + bias in bf16 (the bias rounded to bf16 as it
 * seeds out); dinp (bf16, written); dweight and dbias (fp32, accumulated and
 * written) */
static void test_matmul(const shape *s, const char *layer, int N, int C, int OC, int with_bias) {
    char what[96];
    const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    const double tol32 = C <= 4096 && N <= 4096 && OC <= 4096 ? 1e-5 : 3e-5;
    float *x = hrand_bf16(NC, 1.0f), *w = hrand_bf16(OCC, 0.05f), *b = with_bias ? hrand((size_t)OC, 0.1f) : NULL;
    float *b16 = with_bias ? hcopy(b, (size_t)OC) : NULL;
    if (b16) round_bf16(b16, (size_t)OC);
    float *out = xmalloc(NO * sizeof(float));
    matmul_forward(out, x, w, b16, N, C, OC);
    kc_bf16 *dx = dbf16(x, NC), *dw = dbf16(w, OCC), *dout = dmalloc(NO * sizeof(kc_bf16));
    float *db = b ? dfloats(b, (size_t)OC) : NULL, *g[2];
    for (int r = 0; r < 2; r++) {
        matmul_forward_bf16_cuda(dout, dx, dw, db, N, C, OC);
        synced("matmul_forward_bf16_cuda");
        g[r] = bf16_down(dout, NO);
    }
    snprintf(what, sizeof what, "matmul_forward_bf16 %s out", layer);
    cmp(s->name, what, g[0], out, NO, TOL_BF16);
    same(s->name, what, g[0], g[1], NO);

    float *d = hrand_bf16(NO, 1.0f), *gi = xmalloc(NC * sizeof(float));
    matmul_backward_dinp_first(gi, d, w, N, C, OC);
    kc_bf16 *dd = dbf16(d, NO), *ddi = dmalloc(NC * sizeof(kc_bf16));
    float *ri[2];
    for (int r = 0; r < 2; r++) {
        dnan(ddi, NC * sizeof(kc_bf16));
        matmul_backward_dinp_first_bf16_cuda(ddi, dd, dw, N, C, OC);
        synced("matmul_backward_dinp_first_bf16_cuda");
        ri[r] = bf16_down(ddi, NC);
    }
    snprintf(what, sizeof what, "matmul_backward_dinp_first_bf16 %s", layer);
    cmp(s->name, what, ri[0], gi, NC, TOL_BF16);
    same(s->name, what, ri[0], ri[1], NC);

    float *gw0 = hrand(OCC, 1.0f), *gb0 = hrand((size_t)OC, 1.0f);
    float *ddw = dmalloc(OCC * sizeof(float)), *ddb = with_bias ? dmalloc((size_t)OC * sizeof(float)) : NULL;
    float *scratch = with_bias ? dmalloc(matmul_backward_cuda_scratch(N, OC) * sizeof(float)) : NULL;
    for (int first = 0; first < 2; first++) {
        float *gw = hcopy(gw0, OCC), *gb = with_bias ? hcopy(gb0, (size_t)OC) : NULL;
        if (first) matmul_backward_dweight_first(gw, gb, d, x, N, C, OC);
        else matmul_backward_dweight(gw, gb, d, x, N, C, OC);
        float *rw[2], *rb[2] = {NULL, NULL};
        for (int r = 0; r < 2; r++) {
            if (first) {
                dnan(ddw, OCC * sizeof(float));
                if (ddb) dnan(ddb, (size_t)OC * sizeof(float));
            } else {
                cuda_or_die(cudaMemcpy(ddw, gw0, OCC * sizeof(float), cudaMemcpyHostToDevice), "upload");
                if (ddb) cuda_or_die(cudaMemcpy(ddb, gb0, (size_t)OC * sizeof(float), cudaMemcpyHostToDevice), "up");
            }
            if (first) matmul_backward_dweight_first_bf16_cuda(ddw, ddb, dd, dx, N, C, OC, scratch);
            else matmul_backward_dweight_bf16_cuda(ddw, ddb, dd, dx, N, C, OC, scratch);
            synced("matmul_backward_dweight_bf16_cuda");
            rw[r] = floats_down(ddw, OCC);
            if (ddb) rb[r] = floats_down(ddb, (size_t)OC);
        }
        snprintf(what, sizeof what, "matmul_backward_dweight%s_bf16 %s", first ? "_first" : "", layer);
        cmp(s->name, what, rw[0], gw, OCC, tol32);
        same(s->name, what, rw[0], rw[1], OCC);
        if (ddb) {
            snprintf(what, sizeof what, "matmul_backward_dweight%s_bf16 %s db", first ? "_first" : "", layer);
            cmp(s->name, what, rb[0], gb, (size_t)OC, 1e-5);
            same(s->name, what, rb[0], rb[1], (size_t)OC);
        }
        free(gw); free(gb);
        for (int r = 0; r < 2; r++) { free(rw[r]); free(rb[r]); }
    }
    cudaFree(dx); cudaFree(dw); cudaFree(dout); cudaFree(db); cudaFree(dd); cudaFree(ddi); cudaFree(ddw);
    cudaFree(ddb); cudaFree(scratch);
    free(x); free(w); free(b); free(b16); free(out); free(d); free(gi); free(gw0); free(gb0);
    for (int r = 0; r < 2; r++) { free(g[r]); free(ri[r]); }
}

/* ---------------------------------------------------------------- elementwise and loss */

static void test_elementwise(const shape *s) {
    const size_t n = (size_t)s->B * s->T * 4 * s->C;
    float *x = hrand_bf16(n, 1.5f), *y = hrand_bf16(n, 1.0f), *d = hrand_bf16(n, 1.0f);
    float *out = xmalloc(n * sizeof(float)), *gi = xmalloc(n * sizeof(float)), *sum = xmalloc(n * sizeof(float));
    gelu_forward(out, x, n);
    gelu_backward_first(gi, x, d, n);
    residual_forward(sum, x, y, n);
    round_bf16(sum, n);
    kc_bf16 *dx = dbf16(x, n), *dy = dbf16(y, n), *dd = dbf16(d, n), *dr = dmalloc(n * sizeof(kc_bf16));
    float *g[2], *b[2], *a[2];
    for (int r = 0; r < 2; r++) {
        gelu_forward_bf16_cuda(dr, dx, n);
        synced("gelu_forward_bf16_cuda");
        g[r] = bf16_down(dr, n);
        dnan(dr, n * sizeof(kc_bf16));
        gelu_backward_first_bf16_cuda(dr, dx, dd, n);
        synced("gelu_backward_first_bf16_cuda");
        b[r] = bf16_down(dr, n);
        residual_forward_bf16_cuda(dr, dx, dy, n);
        synced("residual_forward_bf16_cuda");
        a[r] = bf16_down(dr, n);
    }
    cmp(s->name, "gelu_forward_bf16 out", g[0], out, n, TOL_BF16);
    cmp(s->name, "gelu_backward_first_bf16 dinp", b[0], gi, n, TOL_BF16);
    cmp(s->name, "residual_forward_bf16 out", a[0], sum, n, TOL_EXACT);
    same(s->name, "gelu_forward_bf16", g[0], g[1], n);
    same(s->name, "gelu_backward_first_bf16", b[0], b[1], n);
    cudaFree(dx); cudaFree(dy); cudaFree(dd); cudaFree(dr);
    free(x); free(y); free(d); free(out); free(gi); free(sum);
    for (int r = 0; r < 2; r++) { free(g[r]); free(b[r]); free(a[r]); }
}

static void test_xent(const shape *s) {
    const int N = s->B * s->T, V = s->V, Vp = s->Vp;
    const size_t NV = (size_t)N * Vp;
    float *z = hrand_bf16(NV, 2.0f), *loss = xmalloc((size_t)N * sizeof(float));
    int *tgt = xmalloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) tgt[i] = (int)hpt_rng_below(&g_rng, (uint64_t)V);
    float *p = hcopy(z, NV);
    softmax_xent_forward(loss, p, tgt, N, V, Vp);
    int *dt = dmalloc((size_t)N * sizeof(int));
    cuda_or_die(cudaMemcpy(dt, tgt, (size_t)N * sizeof(int), cudaMemcpyHostToDevice), "upload");
    kc_bf16 *dz = dmalloc(NV * sizeof(kc_bf16));
    float *dl = dmalloc((size_t)N * sizeof(float)), *gp[2], *gl[2];
    for (int r = 0; r < 2; r++) {
        bf16_up(dz, z, NV);
        softmax_xent_forward_bf16_cuda(dl, dz, dt, N, V, Vp);
        synced("softmax_xent_forward_bf16_cuda");
        gp[r] = bf16_down(dz, NV);
        gl[r] = floats_down(dl, (size_t)N);
    }
    cmp(s->name, "softmax_xent_forward_bf16 losses", gl[0], loss, (size_t)N, 1e-5);
    cmp(s->name, "softmax_xent_forward_bf16 probs", gp[0], p, NV, TOL_BF16);
    same(s->name, "softmax_xent_forward_bf16 probs", gp[0], gp[1], NV);
    same(s->name, "softmax_xent_forward_bf16 losses", gl[0], gl[1], (size_t)N);

    /* backward from the twin's own (bf16) probabilities: one rounding of
     * the CPU's two operations */
    const float dloss = 1.0f / (float)N;
    float *ref = hcopy(gp[0], NV), *gb;
    softmax_xent_backward(ref, tgt, dloss, N, V, Vp);
    round_bf16(ref, NV);
    softmax_xent_backward_bf16_cuda(dz, dt, dloss, N, V, Vp);
    synced("softmax_xent_backward_bf16_cuda");
    gb = bf16_down(dz, NV);
    cmp(s->name, "softmax_xent_backward_bf16 dlogits", gb, ref, NV, TOL_EXACT);
    cudaFree(dt); cudaFree(dz); cudaFree(dl);
    free(z); free(loss); free(tgt); free(p); free(ref); free(gb);
    for (int r = 0; r < 2; r++) { free(gp[r]); free(gl[r]); }
}

/* ---------------------------------------------------------------- flash attention */

/* The flash twins against the CPU's attention on the same bf16 qkv: out,
 * and the backward's dqkv given the twin's own out and lse (what the CUDA
 * row passes), against attention_backward_first given the CPU's att.
 * tf32: the tensor-core twins (math mode KC_TF32, as under --precision
 * bf16): their products round to TF32, which bf16 inputs already are, but
 * the probabilities and dpre are not: still within 1e-2. */
static void test_flash(const shape *s, int tf32) {
    const int B = s->B, T = s->T, C = s->C, NH = s->NH;
    const size_t BTC = (size_t)B * T * C, BT3C = 3 * BTC, ATT = (size_t)B * NH * T * T;
    const size_t NL = attention_flash_cuda_state(B, T, NH);
    CHECK(kernels_cuda_set_gemm_math(tf32 ? KC_TF32 : KC_FP32) == 0, "math mode: %s", kernels_cuda_error());
    float *qkv = hrand_bf16(BT3C, 1.0f), *out = xmalloc(BTC * sizeof(float)), *att = xmalloc(ATT * sizeof(float));
    attention_forward(out, att, qkv, B, T, C, NH);
    kc_bf16 *dq = dbf16(qkv, BT3C), *dout = dmalloc(BTC * sizeof(kc_bf16));
    float *dlse = dmalloc(NL * sizeof(float)), *g[2];
    for (int r = 0; r < 2; r++) {
        attention_forward_flash_bf16_cuda(dout, dlse, dq, B, T, C, NH);
        synced("attention_forward_flash_bf16_cuda");
        g[r] = bf16_down(dout, BTC);
    }
    const char *tw = tf32 ? "attention_flash_bf16 (TF32 twin)" : "attention_flash_bf16";
    char what[96];
    snprintf(what, sizeof what, "%s out", tw);
    cmp(s->name, what, g[0], out, BTC, TOL_BF16);
    same(s->name, what, g[0], g[1], BTC);

    float *d = hrand_bf16(BTC, 1.0f), *gi = xmalloc(BT3C * sizeof(float));
    attention_backward_first(gi, d, qkv, att, B, T, C, NH);
    kc_bf16 *dd = dbf16(d, BTC), *ddi = dmalloc(BT3C * sizeof(kc_bf16));
    float *scratch = dmalloc(attention_flash_cuda_scratch(B, T, NH) * sizeof(float)), *ri[2];
    for (int r = 0; r < 2; r++) {
        dnan(ddi, BT3C * sizeof(kc_bf16));
        attention_backward_flash_first_bf16_cuda(ddi, dd, dq, dout, dlse, B, T, C, NH, scratch);
        synced("attention_backward_flash_first_bf16_cuda");
        ri[r] = bf16_down(ddi, BT3C);
    }
    snprintf(what, sizeof what, "%s dqkv", tw);
    cmp(s->name, what, ri[0], gi, BT3C, TOL_BF16);
    same(s->name, what, ri[0], ri[1], BT3C);
    CHECK(kernels_cuda_set_gemm_math(KC_FP32) == 0, "math mode back: %s", kernels_cuda_error());
    cudaFree(dq); cudaFree(dout); cudaFree(dlse); cudaFree(dd); cudaFree(ddi); cudaFree(scratch);
    free(qkv); free(out); free(att); free(d); free(gi);
    for (int r = 0; r < 2; r++) { free(g[r]); free(ri[r]); }
}

int main(void) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("skip: no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
        return 0;
    }
    if (kernels_cuda_init() != 0) {
        fprintf(stderr, "FAIL kernels_cuda_init: %s\n", kernels_cuda_error());
        return 1;
    }
    hpt_rng_seed(&g_rng, 16);
    printf("conversion\n");
    test_convert();
    const shape shapes[] = {
        {"124M", 2, 64, 768, 12, 50257, 50304},
        {"odd", 2, 37, 80, 4, 65, 72},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const shape *s = &shapes[k];
        const int N = s->B * s->T, C = s->C;
        printf("%s: B%d T%d C%d NH%d V%d Vp%d\n", s->name, s->B, s->T, s->C, s->NH, s->V, s->Vp);
        test_encoder(s);
        test_layernorm(s);
        test_matmul(s, "qkv", N, C, 3 * C, 1);
        test_matmul(s, "fcproj", N, 4 * C, C, 1);
        test_matmul(s, "lmhead", N, C, s->Vp, 0);
        test_elementwise(s);
        test_xent(s);
        test_flash(s, 0);
        test_flash(s, 1);
    }
    kernels_cuda_shutdown();
    return TEST_REPORT("test_bf16_kernels");
}
