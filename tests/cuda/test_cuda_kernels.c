/*
 * test_cuda_kernels.c — every CUDA kernel of src/cuda/kernels_cuda.h against
 * the CPU kernel it mirrors (src/kernels/kernels.h), forward and backward,
 * at GPT-2 124M's shapes (B4 T64 C768 NH12 V50257 Vp50304, and attention at
 * T1024) and at odd ones (B2 T37 C80 NH4 V65 Vp72; B3 T29 C60 NH3 V50 Vp64).
 * Same random inputs on both sides; the GPU's result downloaded and compared
 * with the CPU's; every backward on gradient buffers pre-filled with random
 * values (the accumulate contract) and every *_first twin on buffers
 * pre-filled with NaN on the GPU (zeros on the CPU: its documented
 * equivalent), so a twin that read them fails. Each kernel also runs twice
 * on the GPU from the same inputs: the two results must be bit-identical.
 *
 * Tolerances (CUDA kernels built with -fmad=false, IEEE division/sqrt):
 *   exact (bit-equal values): encoder forward/backward, residual
 *     forward/backward, softmax_xent_backward: the CPU's operations in the
 *     CPU's order;
 *   1 ulp elementwise: GELU forward/backward(_first), a port of the CPU's
 *     hpt_expf/hpt_tanhf expected to be bit-equal (the line prints how many
 *     elements are), 1 ulp allowed for a libm/compiler difference;
 *   normwise 1e-5 (max |gpu - cpu| <= 1e-5 * max |cpu|): layernorm (row sums
 *     in another order), softmax_xent_forward (its sum; CUDA's logf is
 *     1 ulp), attention forward (the softmax sum) and backward (expected
 *     bit-equal given the same att, printed), GEMMs with an inner dimension
 *     up to 4096 (cuBLAS's blocking against OpenBLAS's);
 *   normwise 3e-5: GEMMs whose inner dimension is longer (the LM head's
 *     dinp sums 50304 products per element);
 *   normwise 1e-4: the flash-style attention (attention_*_flash_cuda, the
 *     CUDA row's default) against the CPU's attention, which stores att:
 *     out, lse (against a double reference) and dinp, dq, dk, dv (its
 *     sums in other orders: test_flash says which; expected near 1e-6). It
 *     runs at every shape above and at its own tails and head sizes (T 1,
 *     7, 65, 129, 100, 70, 200; hs 1, 32, 33, 48, 64, 80, 128; B2 T1024 at
 *     GPT-2 124M), and a head size past 128 must be refused;
 *   normwise 5e-3: the flash attention's tensor-core twins (the math mode
 *     KC_TF32 or KC_BF16: TF32 inputs to its products), at the same shapes
 *     but B2 T1024 (B1 T1024 instead), and out further from the CPU's than
 *     fp32 rounding goes (they did run).
 * Every comparison prints its worst difference, so a GPU run's log is the
 * record of the headroom.
 *
 * On the CPU's CUDA emulator (HPT_CUDA_EMULATED, make CUDA=emu test-cuda)
 * the shapes odd2 and those at T 1024 are left to a GPU: minutes each there.
 *
 * Without a usable GPU (no driver, no device) it prints
 * "skip: no CUDA device: <reason>" and exits 0, so it runs anywhere.
 *
 * By hand, before `make test-cuda` has its rule (from the repository root,
 * after `make lib`; the kernels object from nvcc with the Makefile's flags):
 *   nvcc -O3 -std=c++17 -fmad=false -Xcompiler -fPIC,-Wall,-ffp-contract=off \
 *        -gencode arch=compute_90,code=[sm_90,compute_90] -Iinclude \
 *        -c src/cuda/kernels_cuda.cu -o build/kernels_cuda.o   (and attention_cuda.cu the same way)
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -fopenmp -Iinclude -I/usr/local/cuda/include \
 *      tests/cuda/test_cuda_kernels.c build/kernels_cuda.o build/attention_cuda.o build/libhpt.a \
 *      -o build/test_cuda_kernels \
 *      -fopenmp -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublasLt -lcublas -lcudart \
 *      -lstdc++ -lm -lz $(pkg-config --libs libcjson cairo ompi-c) \
 *      -L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas
 *   (the last two lines are the Makefile's LDLIBS; on a CUDA=1 build libhpt.a
 *   already holds kernels_cuda.o: leave the object out of the cc line then)
 *   build/test_cuda_kernels
 */
#include "cuda_test.h"

/* ---------------------------------------------------------------- host and device buffers */

static float *hzeros(size_t n) {
    float *p = xmalloc(n * sizeof(float));
    memset(p, 0, n * sizeof(float));
    return p;
}

static float *dalloc(size_t n) { return dmalloc(n * sizeof(float)); }

static void up(void *d, const void *h, size_t bytes) {
    cuda_or_die(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "upload");
}

static void down(void *h, const void *d, size_t bytes) {
    cuda_or_die(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "download");
}

static float *dfrom(const float *h, size_t n) {
    float *d = dalloc(n);
    up(d, h, n * sizeof(float));
    return d;
}

static int *dfrom_int(const int *h, size_t n) {
    int *d = dmalloc(n * sizeof(int));
    up(d, h, n * sizeof(int));
    return d;
}

/* NaN in every float (0xffffffff): what a *_first twin must not read */
static void dnan(float *d, size_t n) { cuda_or_die(cudaMemset(d, 0xff, n * sizeof(float)), "cudaMemset"); }

/* After a kernel: the sticky error and the asynchronous ones. */
static void synced(const char *what) {
    int rc = kernels_cuda_sync();
    CHECK(rc == 0, "%s: %s", what, kernels_cuda_error());
    if (rc) exit(TEST_REPORT("test_cuda_kernels"));
}

/* ---------------------------------------------------------------- comparisons */

/* float bits on a line where adjacent floats are 1 apart (-0 and +0 both 0) */
static int64_t ordered(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* tol TOL_EXACT: every element equal in value (+0 and -0 alike); TOL_1ULP:
 * at most 1 ulp apart; tol >= 0: normwise, max |gpu - cpu| <= tol * max |cpu|
 * (elements near zero are judged against the tensor's scale, not their own).
 * NaN on either side fails. Prints the worst difference and the share of
 * elements that are equal; returns the normwise difference. */
#define TOL_EXACT (-0.5)
#define TOL_1ULP (-1.0)
static double cmp(const char *shape, const char *what, const float *gpu, const float *cpu, size_t n, double tol) {
    double maxdiff = 0.0, maxref = 0.0;
    int64_t maxulp = 0;
    size_t equal = 0, worst = 0, nan = 0;
    for (size_t i = 0; i < n; i++) {
        const float g = gpu[i], c = cpu[i];
        if (g != g || c != c) { nan++; worst = i; continue; }
        if (g == c) equal++;
        const double d = fabs((double)g - c);
        if (d > maxdiff) { maxdiff = d; worst = i; }
        if (fabs((double)c) > maxref) maxref = fabs((double)c);
        int64_t u = ordered(g) - ordered(c);
        if (u < 0) u = -u;
        if (u > maxulp) maxulp = u;
    }
    int ok;
    if (tol < 0) ok = !nan && (tol == TOL_EXACT ? equal == n : maxulp <= (int64_t)(-tol));
    else ok = !nan && maxdiff <= tol * (maxref > 0 ? maxref : 1.0);
    printf("  %-4s %-34s n=%-9zu equal %6.2f%%  max|d| %.3g  rel %.3g  ulps %lld  tol %s%g%s\n", ok ? "ok" : "FAIL",
           what, n, n ? 100.0 * equal / n : 100.0, maxdiff, maxref > 0 ? maxdiff / maxref : maxdiff,
           (long long)maxulp, tol == TOL_EXACT ? "exact" : "", tol == TOL_EXACT ? 0 : tol < 0 ? -tol : tol,
           tol == TOL_EXACT ? "" : tol < 0 ? " ulp" : " normwise");
    CHECK(ok, "%s %s: element %zu: gpu %.9g cpu %.9g (%zu NaN)", shape, what, worst, n ? gpu[worst] : 0.0f,
          n ? cpu[worst] : 0.0f, nan);
    return maxdiff / (maxref > 0 ? maxref : 1.0);
}

static void same(const char *shape, const char *what, const float *a, const float *b, size_t n) {
    const int ok = memcmp(a, b, n * sizeof(float)) == 0;
    if (!ok) printf("  FAIL %-34s not bit-identical across two GPU runs\n", what);
    CHECK(ok, "%s %s: two GPU runs differ", shape, what);
}

/* run[0] against the CPU's cpu (cmp), then run[1] bit for bit against run[0]
 * (same): the kernel agrees with the CPU and with itself */
static double cmp_runs(const char *shape, const char *what, float *const run[2], const float *cpu, size_t n,
                       double tol) {
    const double rel = cmp(shape, what, run[0], cpu, n, tol);
    same(shape, what, run[0], run[1], n);
    return rel;
}

/* The CPU's attention backward into a fresh dqkv (B, T, 3C): the *_first
 * twin's from zeros, the accumulating one's onto g0 */
static float *cpu_attention_grad(int first, const float *g0, const float *d, const float *qkv, const float *att,
                                 int B, int T, int C, int NH) {
    const size_t n = (size_t)B * T * 3 * C;
    float *gi = first ? hzeros(n) : hcopy(g0, n);
    if (first) attention_backward_first(gi, d, qkv, att, B, T, C, NH);
    else attention_backward(gi, d, qkv, att, B, T, C, NH);
    return gi;
}

/* A device gradient of n floats before a backward: NaN for a *_first twin
 * (which must not read it), g0 for the accumulating one */
static void grad_start(float *dgrad, const float *g0, size_t n, int first) {
    if (first) dnan(dgrad, n);
    else up(dgrad, g0, n * sizeof(float));
}

/* ---------------------------------------------------------------- shapes */

typedef struct shape {
    const char *name;
    int B, T, C, NH, V, Vp;
    int full;   /* run every kernel (else attention only) */
} shape;

/* tokens in [0, V): half anywhere, half from the first 5 ids, so the
 * encoder backward's rows collect several positions */
static int *htokens(int n, int V) {
    int *p = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) p[i] = (int)hpt_rng_below(&g_rng, (uint64_t)(i % 2 ? V : (V < 5 ? V : 5)));
    return p;
}

/* ---------------------------------------------------------------- encoder */

static void test_encoder(const shape *s) {
    const int B = s->B, T = s->T, C = s->C, V = s->V, BT = B * T;
    const size_t VC = (size_t)V * C, TC = (size_t)T * C, BTC = (size_t)BT * C;
    int *tok = htokens(BT, V);
    float *wte = hrand(VC, 0.02f), *wpe = hrand(TC, 0.01f), *out = hzeros(BTC), *g1 = hzeros(BTC), *g2 = hzeros(BTC);
    encoder_forward(out, tok, wte, wpe, B, T, C);
    int *dtok = dfrom_int(tok, (size_t)BT);
    float *dwte = dfrom(wte, VC), *dwpe = dfrom(wpe, TC), *dout = dalloc(BTC);
    for (int r = 0; r < 2; r++) {
        encoder_forward_cuda(dout, dtok, dwte, dwpe, B, T, C);
        synced("encoder_forward_cuda");
        down(r ? g2 : g1, dout, BTC * sizeof(float));
    }
    cmp(s->name, "encoder_forward out", g1, out, BTC, TOL_EXACT);
    same(s->name, "encoder_forward out", g1, g2, BTC);

    /* backward onto random gradients (the same on both sides) */
    float *gte0 = hrand(VC, 1.0f), *gpe0 = hrand(TC, 1.0f), *d = hrand(BTC, 1.0f);
    float *gte = hcopy(gte0, VC), *gpe = hcopy(gpe0, TC);
    encoder_backward(gte, gpe, d, tok, B, T, C);
    float *ddo = dfrom(d, BTC);
    int *scratch = dmalloc(encoder_backward_cuda_scratch(V) * sizeof(int));
    float *rte[2] = {hzeros(VC), hzeros(VC)}, *rpe[2] = {hzeros(TC), hzeros(TC)};
    for (int r = 0; r < 2; r++) {
        up(dwte, gte0, VC * sizeof(float));
        up(dwpe, gpe0, TC * sizeof(float));
        encoder_backward_cuda(dwte, dwpe, ddo, dtok, B, T, C, V, scratch);
        synced("encoder_backward_cuda");
        down(rte[r], dwte, VC * sizeof(float));
        down(rpe[r], dwpe, TC * sizeof(float));
    }
    cmp_runs(s->name, "encoder_backward dwte", rte, gte, VC, TOL_EXACT);
    cmp_runs(s->name, "encoder_backward dwpe", rpe, gpe, TC, TOL_EXACT);

    cudaFree(dtok); cudaFree(dwte); cudaFree(dwpe); cudaFree(dout); cudaFree(ddo); cudaFree(scratch);
    free(tok); free(wte); free(wpe); free(out); free(g1); free(g2); free(gte0); free(gpe0); free(d);
    free(gte); free(gpe);
    for (int r = 0; r < 2; r++) { free(rte[r]); free(rpe[r]); }
}

/* ---------------------------------------------------------------- layernorm */

static void test_layernorm(const shape *s) {
    const int N = s->B * s->T, C = s->C;
    const size_t NC = (size_t)N * C;
    const double tol = 1e-5;
    /* an offset mean, as the residual stream has */
    float *x = hrand(NC, 1.0f), *w = hrand((size_t)C, 0.5f), *b = hrand((size_t)C, 0.1f);
    for (size_t i = 0; i < NC; i++) x[i] += 0.3f;
    float *out = hzeros(NC), *mean = hzeros((size_t)N), *rstd = hzeros((size_t)N);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    float *dx = dfrom(x, NC), *dw = dfrom(w, (size_t)C), *db = dfrom(b, (size_t)C);
    float *dout = dalloc(NC), *dmean = dalloc((size_t)N), *drstd = dalloc((size_t)N);
    float *go[2] = {hzeros(NC), hzeros(NC)}, *gm[2] = {hzeros((size_t)N), hzeros((size_t)N)},
          *gr[2] = {hzeros((size_t)N), hzeros((size_t)N)};
    for (int r = 0; r < 2; r++) {
        layernorm_forward_cuda(dout, dmean, drstd, dx, dw, db, N, C);
        synced("layernorm_forward_cuda");
        down(go[r], dout, NC * sizeof(float));
        down(gm[r], dmean, (size_t)N * sizeof(float));
        down(gr[r], drstd, (size_t)N * sizeof(float));
    }
    cmp_runs(s->name, "layernorm_forward out", go, out, NC, tol);
    cmp_runs(s->name, "layernorm_forward mean", gm, mean, (size_t)N, tol);
    cmp_runs(s->name, "layernorm_forward rstd", gr, rstd, (size_t)N, tol);

    /* backward from the CPU's mean/rstd (the same inputs on both sides) */
    up(dmean, mean, (size_t)N * sizeof(float));
    up(drstd, rstd, (size_t)N * sizeof(float));
    float *d = hrand(NC, 1.0f), *gx0 = hrand(NC, 1.0f), *gw0 = hrand((size_t)C, 1.0f), *gb0 = hrand((size_t)C, 1.0f);
    float *ddo = dfrom(d, NC), *ddx = dalloc(NC), *ddw = dalloc((size_t)C), *ddb = dalloc((size_t)C);
    float *scratch = dalloc(layernorm_backward_cuda_scratch(N, C));
    for (int first = 0; first < 2; first++) {
        float *gx = hcopy(gx0, NC), *gw = first ? hzeros((size_t)C) : hcopy(gw0, (size_t)C),
              *gb = first ? hzeros((size_t)C) : hcopy(gb0, (size_t)C);
        if (first) layernorm_backward_first(gx, gw, gb, d, x, w, mean, rstd, N, C);
        else layernorm_backward(gx, gw, gb, d, x, w, mean, rstd, N, C);
        float *rx[2] = {hzeros(NC), hzeros(NC)}, *rw[2] = {hzeros((size_t)C), hzeros((size_t)C)},
              *rb[2] = {hzeros((size_t)C), hzeros((size_t)C)};
        for (int r = 0; r < 2; r++) {
            up(ddx, gx0, NC * sizeof(float));   /* dinp accumulates in both twins */
            if (first) { dnan(ddw, (size_t)C); dnan(ddb, (size_t)C); }
            else { up(ddw, gw0, (size_t)C * sizeof(float)); up(ddb, gb0, (size_t)C * sizeof(float)); }
            if (first) layernorm_backward_first_cuda(ddx, ddw, ddb, ddo, dx, dw, dmean, drstd, N, C, scratch);
            else layernorm_backward_cuda(ddx, ddw, ddb, ddo, dx, dw, dmean, drstd, N, C, scratch);
            synced("layernorm_backward_cuda");
            down(rx[r], ddx, NC * sizeof(float));
            down(rw[r], ddw, (size_t)C * sizeof(float));
            down(rb[r], ddb, (size_t)C * sizeof(float));
        }
        cmp_runs(s->name, first ? "layernorm_backward_first dinp" : "layernorm_backward dinp", rx, gx, NC, tol);
        cmp_runs(s->name, first ? "layernorm_backward_first dweight" : "layernorm_backward dweight", rw, gw, (size_t)C, tol);
        cmp_runs(s->name, first ? "layernorm_backward_first dbias" : "layernorm_backward dbias", rb, gb, (size_t)C, tol);
        free(gx); free(gw); free(gb);
        for (int r = 0; r < 2; r++) { free(rx[r]); free(rw[r]); free(rb[r]); }
    }
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dout); cudaFree(dmean); cudaFree(drstd);
    cudaFree(ddo); cudaFree(ddx); cudaFree(ddw); cudaFree(ddb); cudaFree(scratch);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(d); free(gx0); free(gw0); free(gb0);
    for (int r = 0; r < 2; r++) { free(go[r]); free(gm[r]); free(gr[r]); }
}

/* ---------------------------------------------------------------- matmul */

static double gemm_tol(int K) { return K <= 4096 ? 1e-5 : 3e-5; }

/* out (N,OC) = inp (N,C) . weight^T + bias, and the three backward GEMMs
 * with the bias sum, accumulate and first. */
static void test_matmul(const shape *s, const char *layer, int N, int C, int OC, int with_bias) {
    char what[96];
    const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    float *x = hrand(NC, 1.0f), *w = hrand(OCC, 0.05f), *b = with_bias ? hrand((size_t)OC, 0.1f) : NULL;
    float *out = hzeros(NO);
    matmul_forward(out, x, w, b, N, C, OC);
    float *dx = dfrom(x, NC), *dw = dfrom(w, OCC), *db = b ? dfrom(b, (size_t)OC) : NULL, *dout = dalloc(NO);
    float *g[2] = {hzeros(NO), hzeros(NO)};
    for (int r = 0; r < 2; r++) {
        dnan(dout, NO);   /* forward overwrites (bias seeded first) */
        matmul_forward_cuda(dout, dx, dw, db, N, C, OC);
        synced("matmul_forward_cuda");
        down(g[r], dout, NO * sizeof(float));
    }
    snprintf(what, sizeof what, "matmul_forward %s", layer);
    cmp_runs(s->name, what, g, out, NO, gemm_tol(C));
    for (int r = 0; r < 2; r++) free(g[r]);

    float *d = hrand(NO, 1.0f), *gx0 = hrand(NC, 1.0f), *gw0 = hrand(OCC, 1.0f), *gb0 = hrand((size_t)OC, 1.0f);
    float *ddo = dfrom(d, NO), *ddx = dalloc(NC), *ddw = dalloc(OCC), *ddb = dalloc((size_t)OC);
    float *scratch = with_bias ? dalloc(matmul_backward_cuda_scratch(N, OC)) : NULL;
    for (int first = 0; first < 2; first++) {
        /* dinp */
        float *gx = first ? hzeros(NC) : hcopy(gx0, NC);
        if (first) matmul_backward_dinp_first(gx, d, w, N, C, OC);
        else matmul_backward_dinp(gx, d, w, N, C, OC);
        float *rx[2] = {hzeros(NC), hzeros(NC)};
        for (int r = 0; r < 2; r++) {
            grad_start(ddx, gx0, NC, first);
            if (first) matmul_backward_dinp_first_cuda(ddx, ddo, dw, N, C, OC);
            else matmul_backward_dinp_cuda(ddx, ddo, dw, N, C, OC);
            synced("matmul_backward_dinp_cuda");
            down(rx[r], ddx, NC * sizeof(float));
        }
        snprintf(what, sizeof what, "matmul_bwd_dinp%s %s", first ? "_first" : "", layer);
        cmp_runs(s->name, what, rx, gx, NC, gemm_tol(OC));
        /* dweight (+ dbias) */
        float *gw = first ? hzeros(OCC) : hcopy(gw0, OCC);
        float *gb = first ? hzeros((size_t)OC) : hcopy(gb0, (size_t)OC);
        if (first) matmul_backward_dweight_first(gw, b ? gb : NULL, d, x, N, C, OC);
        else matmul_backward_dweight(gw, b ? gb : NULL, d, x, N, C, OC);
        float *rw[2] = {hzeros(OCC), hzeros(OCC)}, *rb[2] = {hzeros((size_t)OC), hzeros((size_t)OC)};
        for (int r = 0; r < 2; r++) {
            if (first) { dnan(ddw, OCC); dnan(ddb, (size_t)OC); }
            else { up(ddw, gw0, OCC * sizeof(float)); up(ddb, gb0, (size_t)OC * sizeof(float)); }
            if (first) matmul_backward_dweight_first_cuda(ddw, b ? ddb : NULL, ddo, dx, N, C, OC, scratch);
            else matmul_backward_dweight_cuda(ddw, b ? ddb : NULL, ddo, dx, N, C, OC, scratch);
            synced("matmul_backward_dweight_cuda");
            down(rw[r], ddw, OCC * sizeof(float));
            down(rb[r], ddb, (size_t)OC * sizeof(float));
        }
        snprintf(what, sizeof what, "matmul_bwd_dweight%s %s", first ? "_first" : "", layer);
        cmp_runs(s->name, what, rw, gw, OCC, gemm_tol(N));
        if (b) {
            snprintf(what, sizeof what, "matmul_bwd_dbias%s %s", first ? "_first" : "", layer);
            cmp_runs(s->name, what, rb, gb, (size_t)OC, 1e-5);
        }
        free(gx); free(gw); free(gb);
        for (int r = 0; r < 2; r++) { free(rx[r]); free(rw[r]); free(rb[r]); }
    }
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dout); cudaFree(ddo); cudaFree(ddx); cudaFree(ddw);
    cudaFree(ddb); cudaFree(scratch);
    free(x); free(w); free(b); free(out); free(d); free(gx0); free(gw0); free(gb0);
}

/* --precision tf32 and bf16: the forward GEMM on tensor cores against the
 * CPU's fp32, normwise within its inputs' rounding (TF32 keeps 10 mantissa
 * bits, bf16 7: about 5e-4 and 4e-3 relative per product), deterministic,
 * and measurably not fp32 (a mode that silently fell back to FFMA would be
 * within gemm_tol, 1e-5, and fail here). Leaves the GEMMs in fp32. */
static void test_gemm_math(const shape *s, int N, int C, int OC) {
    static const struct { const char *name; int mode; double tol, least; } modes[] = {
        {"tf32", KC_TF32, 5e-3, 2e-5}, {"bf16", KC_BF16, 3e-2, 2e-4}};
    const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    float *x = hrand(NC, 1.0f), *w = hrand(OCC, 0.05f), *out = hzeros(NO);
    matmul_forward(out, x, w, NULL, N, C, OC);
    float *dx = dfrom(x, NC), *dw = dfrom(w, OCC), *dout = dalloc(NO), *g[2] = {hzeros(NO), hzeros(NO)};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        char what[96];
        if (kernels_cuda_set_gemm_math(modes[m].mode) != 0) {
            CHECK(0, "%s kernels_cuda_set_gemm_math(%s): %s", s->name, modes[m].name, kernels_cuda_error());
            break;
        }
        for (int r = 0; r < 2; r++) {
            dnan(dout, NO);
            matmul_forward_cuda(dout, dx, dw, NULL, N, C, OC);
            synced("matmul_forward_cuda");
            down(g[r], dout, NO * sizeof(float));
        }
        snprintf(what, sizeof what, "matmul_forward %s", modes[m].name);
        const double rel = cmp_runs(s->name, what, g, out, NO, modes[m].tol);
        const int rounded = rel > modes[m].least;
        printf("  %-4s %-4s matmul_forward %s rounds its inputs (rel %.3g, more than %g)\n", rounded ? "ok" : "FAIL",
               s->name, modes[m].name, rel, modes[m].least);
        CHECK(rounded, "%s matmul_forward %s: within fp32's rounding of the CPU's: no tensor cores?", s->name,
              modes[m].name);
    }
    CHECK(kernels_cuda_set_gemm_math(KC_FP32) == 0, "back to fp32: %s", kernels_cuda_error());
    cudaFree(dx); cudaFree(dw); cudaFree(dout);
    free(x); free(w); free(out); free(g[0]); free(g[1]);
}

/* ---------------------------------------------------------------- GELU, residual */

static void test_elementwise(const shape *s) {
    const size_t n = (size_t)s->B * s->T * 4 * s->C;
    float *x = hrand(n, 1.5f), *y = hrand(n, 1.0f), *out = hzeros(n);
    /* the clamps of hpt_expf and large |x| */
    if (n > 4) { x[0] = 60.0f; x[1] = -60.0f; x[2] = 0.0f; x[3] = -0.0f; x[4] = 9.5f; }
    gelu_forward(out, x, n);
    float *dx = dfrom(x, n), *dy = dfrom(y, n), *dout = dalloc(n), *g[2] = {hzeros(n), hzeros(n)};
    for (int r = 0; r < 2; r++) {
        gelu_forward_cuda(dout, dx, n);
        synced("gelu_forward_cuda");
        down(g[r], dout, n * sizeof(float));
    }
    cmp_runs(s->name, "gelu_forward", g, out, n, TOL_1ULP);

    float *g0 = hrand(n, 1.0f);
    for (int first = 0; first < 2; first++) {
        float *gx = first ? hzeros(n) : hcopy(g0, n);
        if (first) gelu_backward_first(gx, x, y, n);
        else gelu_backward(gx, x, y, n);
        for (int r = 0; r < 2; r++) {
            grad_start(dout, g0, n, first);
            if (first) gelu_backward_first_cuda(dout, dx, dy, n);
            else gelu_backward_cuda(dout, dx, dy, n);
            synced("gelu_backward_cuda");
            down(g[r], dout, n * sizeof(float));
        }
        cmp_runs(s->name, first ? "gelu_backward_first" : "gelu_backward", g, gx, n, TOL_1ULP);
        free(gx);
    }

    residual_forward(out, x, y, n);
    for (int r = 0; r < 2; r++) {
        residual_forward_cuda(dout, dx, dy, n);
        synced("residual_forward_cuda");
        down(g[r], dout, n * sizeof(float));
    }
    cmp_runs(s->name, "residual_forward", g, out, n, TOL_EXACT);

    /* da += dout, db += dout, onto random a and b (dx, dy hold them) */
    float *a = hcopy(x, n), *b = hcopy(y, n), *ga = hzeros(n), *gb = hzeros(n);
    residual_backward(a, b, g0, n);
    float *dg = dfrom(g0, n);
    for (int r = 0; r < 2; r++) {
        up(dx, x, n * sizeof(float));
        up(dy, y, n * sizeof(float));
        residual_backward_cuda(dx, dy, dg, n);
        synced("residual_backward_cuda");
        down(r ? ga : g[0], dx, n * sizeof(float));
        down(r ? gb : g[1], dy, n * sizeof(float));
    }
    cmp(s->name, "residual_backward da", g[0], a, n, TOL_EXACT);
    cmp(s->name, "residual_backward db", g[1], b, n, TOL_EXACT);
    same(s->name, "residual_backward da", g[0], ga, n);
    same(s->name, "residual_backward db", g[1], gb, n);

    cudaFree(dx); cudaFree(dy); cudaFree(dout); cudaFree(dg);
    free(x); free(y); free(out); free(g[0]); free(g[1]); free(g0); free(a); free(b); free(ga); free(gb);
}

/* ---------------------------------------------------------------- softmax cross-entropy */

static void test_xent(const shape *s) {
    const int N = s->B * s->T, V = s->V, Vp = s->Vp;
    const size_t NV = (size_t)N * Vp;
    float *logits = hrand(NV, 3.0f), *probs = hcopy(logits, NV), *loss = hzeros((size_t)N);
    int *tgt = htokens(N, V);
    softmax_xent_forward(loss, probs, tgt, N, V, Vp);
    int *dtgt = dfrom_int(tgt, (size_t)N);
    float *dl = dalloc(NV), *dloss = dalloc((size_t)N);
    float *gp[2] = {hzeros(NV), hzeros(NV)}, *gl[2] = {hzeros((size_t)N), hzeros((size_t)N)};
    for (int r = 0; r < 2; r++) {
        up(dl, logits, NV * sizeof(float));   /* padding holds garbage: must come out 0 */
        softmax_xent_forward_cuda(dloss, dl, dtgt, N, V, Vp);
        synced("softmax_xent_forward_cuda");
        down(gp[r], dl, NV * sizeof(float));
        down(gl[r], dloss, (size_t)N * sizeof(float));
    }
    cmp_runs(s->name, "softmax_xent_forward probs", gp, probs, NV, 1e-5);
    cmp_runs(s->name, "softmax_xent_forward losses", gl, loss, (size_t)N, 1e-5);

    /* backward from the CPU's probabilities */
    const float dscale = 1.0f / (float)N;
    float *dlog = hcopy(probs, NV);
    softmax_xent_backward(dlog, tgt, dscale, N, V, Vp);
    for (int r = 0; r < 2; r++) {
        up(dl, probs, NV * sizeof(float));
        softmax_xent_backward_cuda(dl, dtgt, dscale, N, V, Vp);
        synced("softmax_xent_backward_cuda");
        down(gp[r], dl, NV * sizeof(float));
    }
    cmp_runs(s->name, "softmax_xent_backward", gp, dlog, NV, TOL_EXACT);

    cudaFree(dtgt); cudaFree(dl); cudaFree(dloss);
    free(logits); free(probs); free(loss); free(tgt); free(dlog);
    for (int r = 0; r < 2; r++) { free(gp[r]); free(gl[r]); }
}

/* ---------------------------------------------------------------- attention */

static void test_attention(const shape *s) {
    const int B = s->B, T = s->T, C = s->C, NH = s->NH;
    const size_t BTC = (size_t)B * T * C, BT3C = 3 * BTC, ATT = (size_t)B * NH * T * T;
    const double tol = 1e-5;
    float *qkv = hrand(BT3C, 1.0f), *out = hzeros(BTC), *att = hzeros(ATT);
    attention_forward(out, att, qkv, B, T, C, NH);
    float *dqkv = dfrom(qkv, BT3C), *dout = dalloc(BTC), *datt = dalloc(ATT);
    float *go[2] = {hzeros(BTC), hzeros(BTC)}, *ga[2] = {hzeros(ATT), hzeros(ATT)};
    for (int r = 0; r < 2; r++) {
        dnan(datt, ATT);   /* the zeros above the diagonal are the kernel's to write */
        attention_forward_cuda(dout, datt, dqkv, B, T, C, NH);
        synced("attention_forward_cuda");
        down(go[r], dout, BTC * sizeof(float));
        down(ga[r], datt, ATT * sizeof(float));
    }
    cmp_runs(s->name, "attention_forward out", go, out, BTC, tol);
    cmp_runs(s->name, "attention_forward att", ga, att, ATT, tol);

    /* backward from the CPU's att */
    up(datt, att, ATT * sizeof(float));
    float *d = hrand(BTC, 1.0f), *g0 = hrand(BT3C, 1.0f), *ddo = dfrom(d, BTC), *ddi = dalloc(BT3C);
    float *scratch = dalloc(attention_backward_cuda_scratch(B, T, NH));
    for (int first = 0; first < 2; first++) {
        float *gi = cpu_attention_grad(first, g0, d, qkv, att, B, T, C, NH);
        float *r2[2] = {hzeros(BT3C), hzeros(BT3C)};
        for (int r = 0; r < 2; r++) {
            grad_start(ddi, g0, BT3C, first);
            if (first) attention_backward_first_cuda(ddi, ddo, dqkv, datt, B, T, C, NH, scratch);
            else attention_backward_cuda(ddi, ddo, dqkv, datt, B, T, C, NH, scratch);
            synced("attention_backward_cuda");
            down(r2[r], ddi, BT3C * sizeof(float));
        }
        cmp_runs(s->name, first ? "attention_backward_first dinp" : "attention_backward dinp", r2, gi, BT3C, tol);
        free(gi); free(r2[0]); free(r2[1]);
    }
    cudaFree(dqkv); cudaFree(dout); cudaFree(datt); cudaFree(ddo); cudaFree(ddi); cudaFree(scratch);
    free(qkv); free(out); free(att); free(d); free(g0);
    for (int r = 0; r < 2; r++) { free(go[r]); free(ga[r]); }
}

/* ---------------------------------------------------------------- flash attention */

/* lse (B,NH,T): each softmax row's log-sum-exp, in double from the same
 * float scale the kernels use (the flash forward's second output) */
static void lse_ref(float *lse, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const double scale = 1.0f / sqrtf((float)hs);
    double *s = xmalloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                    s[t2] = d * scale;
                    if (s[t2] > mx) mx = s[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(s[t2] - mx);
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
            }
    free(s);
}

/* part p (0 q, 1 k, 2 v) of a packed (N, 3C) gradient, contiguous */
static float *third(const float *x, size_t N, int C, int p) {
    float *o = xmalloc(N * (size_t)C * sizeof(float));
    for (size_t n = 0; n < N; n++) memcpy(o + n * C, x + n * 3 * C + (size_t)p * C, (size_t)C * sizeof(float));
    return o;
}

/* The flash-style kernels (attention_*_flash_cuda) against the CPU's
 * attention (which stores att): out against attention_forward's, lse
 * against lse_ref, and the backward, given the GPU forward's out and lse
 * (what the CUDA row passes), against attention_backward(_first) given the
 * CPU's att. Tolerance normwise 1e-4: the scores are one ascending chain
 * over the channels where the CPU adds 16 lanes (dot16), the softmax is
 * rescaled tile by tile, and the backward's row dot is dout . out where
 * the CPU sums datt att; each a few ulps per element, expected near 1e-6
 * (printed), with room for T 1024's longer sums.
 *
 * tf32: the same kernels' tensor-core twins (the GEMM math mode KC_TF32,
 * as under --precision tf32 or bf16): the products' inputs rounded to TF32
 * (10-bit mantissas), so normwise 5e-3 as test_gemm_math's TF32 GEMM, and
 * out must differ from the CPU's by more than fp32 rounding would (else the
 * tensor cores did not run). */
static void test_flash_mode(const char *name, int B, int T, int C, int NH, int tf32) {
    printf("%s: flash attention%s B%d T%d C%d NH%d (hs %d)\n", name, tf32 ? ", TF32 tensor cores," : "", B, T, C,
           NH, C / NH);
    const size_t BT = (size_t)B * T, BTC = BT * C, BT3C = 3 * BTC, ATT = (size_t)B * NH * T * T;
    const size_t NL = attention_flash_cuda_state(B, T, NH);
    const double tol = tf32 ? 5e-3 : 1e-4;
    if (kernels_cuda_set_gemm_math(tf32 ? KC_TF32 : KC_FP32) != 0) {
        CHECK(0, "%s kernels_cuda_set_gemm_math: %s", name, kernels_cuda_error());
        return;
    }
    CHECK(NL == (size_t)B * NH * T, "attention_flash_cuda_state %zu, not B*NH*T", NL);
    float *qkv = hrand(BT3C, 1.0f), *out = hzeros(BTC), *att = hzeros(ATT), *lse = hzeros(NL);
    attention_forward(out, att, qkv, B, T, C, NH);
    lse_ref(lse, qkv, B, T, C, NH);
    float *dqkv = dfrom(qkv, BT3C), *dout = dalloc(BTC), *dlse = dalloc(NL);
    float *go[2] = {hzeros(BTC), hzeros(BTC)}, *gl[2] = {hzeros(NL), hzeros(NL)};
    for (int r = 0; r < 2; r++) {
        dnan(dout, BTC);   /* every element is the kernel's to write */
        dnan(dlse, NL);
        attention_forward_flash_cuda(dout, dlse, dqkv, B, T, C, NH);
        synced("attention_forward_flash_cuda");
        down(go[r], dout, BTC * sizeof(float));
        down(gl[r], dlse, NL * sizeof(float));
    }
    const double rel = cmp(name, "flash_forward out", go[0], out, BTC, tol);
    cmp(name, "flash_forward lse", gl[0], lse, NL, tol);
    if (tf32 && T > 1) {   /* at T 1 the one probability is 1 in every precision: out is v exactly */
        printf("  %-4s flash_forward out: TF32's rounding shows (rel %.3g, more than 1e-5)\n", rel > 1e-5 ? "ok" : "FAIL",
               rel);
        CHECK(rel > 1e-5, "%s flash_forward under KC_TF32: within fp32's rounding of the CPU's: no tensor cores?",
              name);
    }
    same(name, "flash_forward out", go[0], go[1], BTC);
    same(name, "flash_forward lse", gl[0], gl[1], NL);

    /* backward from the GPU forward's out and lse (in dout and dlse since its
     * second run), as the CUDA row passes them */
    float *d = hrand(BTC, 1.0f), *g0 = hrand(BT3C, 1.0f), *ddo = dfrom(d, BTC), *ddi = dalloc(BT3C);
    const size_t ns = attention_flash_cuda_scratch(B, T, NH);
    float *scratch = dalloc(ns);
    for (int first = 0; first < 2; first++) {
        float *gi = cpu_attention_grad(first, g0, d, qkv, att, B, T, C, NH);
        float *r2[2] = {hzeros(BT3C), hzeros(BT3C)};
        for (int r = 0; r < 2; r++) {
            grad_start(ddi, g0, BT3C, first);
            dnan(scratch, ns);   /* the row dots are the kernel's to write before it reads them */
            if (first) attention_backward_flash_first_cuda(ddi, ddo, dqkv, dout, dlse, B, T, C, NH, scratch);
            else attention_backward_flash_cuda(ddi, ddo, dqkv, dout, dlse, B, T, C, NH, scratch);
            synced("attention_backward_flash_cuda");
            down(r2[r], ddi, BT3C * sizeof(float));
        }
        cmp(name, first ? "flash_backward_first dinp" : "flash_backward dinp", r2[0], gi, BT3C, tol);
        same(name, first ? "flash_backward_first dinp" : "flash_backward dinp", r2[0], r2[1], BT3C);
        if (first) {   /* dq, dk, dv each on its own scale (onto zeros: nothing swamps them) */
            static const char *part[3] = {"flash_backward_first dq", "flash_backward_first dk",
                                          "flash_backward_first dv"};
            for (int p = 0; p < 3; p++) {
                float *gp = third(r2[0], BT, C, p), *cp = third(gi, BT, C, p);
                cmp(name, part[p], gp, cp, BTC, tol);
                free(gp); free(cp);
            }
        }
        free(gi); free(r2[0]); free(r2[1]);
    }
    cudaFree(dqkv); cudaFree(dout); cudaFree(dlse); cudaFree(ddo); cudaFree(ddi); cudaFree(scratch);
    free(qkv); free(out); free(att); free(lse); free(d); free(g0);
    for (int r = 0; r < 2; r++) { free(go[r]); free(gl[r]); }
    CHECK(kernels_cuda_set_gemm_math(KC_FP32) == 0, "back to fp32: %s", kernels_cuda_error());
}

/* both twins at one shape */
static void test_flash(const char *name, int B, int T, int C, int NH) {
    test_flash_mode(name, B, T, C, NH, 0);
    test_flash_mode(name, B, T, C, NH, 1);
}

/* A head size past ATTENTION_FLASH_CUDA_MAX_HS is refused, through
 * kernels_cuda_error, before anything is launched. Last: the error sticks. */
static void test_flash_refusal(void) {
    const int C = ATTENTION_FLASH_CUDA_MAX_HS + 8, NH = 1;
    float *p = dalloc(3 * (size_t)C);
    attention_forward_flash_cuda(p, p, p, 1, 1, C, NH);
    const int rc = kernels_cuda_sync();
    printf("flash refusal, hs %d: %s\n", C / NH, rc ? kernels_cuda_error() : "(accepted)");
    CHECK(rc != 0 && strstr(kernels_cuda_error(), "head size"), "attention_forward_flash_cuda took hs %d", C / NH);
    cudaFree(p);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("skip: no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
        return 0;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("device 0: %s, compute capability %d.%d, %d SMs\n", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount);
    if (kernels_cuda_init() != 0) {
        fprintf(stderr, "FAIL kernels_cuda_init: %s\n", kernels_cuda_error());
        return 1;
    }
    hpt_rng_seed(&g_rng, 24);
    const shape shapes[] = {
        {"124M", 4, 64, 768, 12, 50257, 50304, 1},
        {"odd1", 2, 37, 80, 4, 65, 72, 1},
        {"odd2", 3, 29, 60, 3, 50, 64, 1},
        {"124M-T1024", 1, 1024, 768, 12, 0, 0, 0},   /* attention at GPT-2's context */
    };
    /* HPT_CUDA_TEST_ONLY=flash: the flash attention's tests alone (for
     * tests/cudaemu/mutate.sh on attention_cuda.cu: minutes per mutant) */
    const char *only = getenv("HPT_CUDA_TEST_ONLY");
    const int flash_only = only && !strcmp(only, "flash");
    /* On the CPU's CUDA emulator (make CUDA=emu test-cuda, in CI) a kernel
     * runs thousands of times slower than on a GPU: there each test runs at
     * GPT-2 124M's shape and one odd one, and the flash attention's tails
     * below T 1024; a GPU runs every shape. */
    const int emulated = getenv("HPT_CUDA_EMULATED") != NULL;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const shape *s = &shapes[k];
        if (emulated && (!strcmp(s->name, "odd2") || s->T >= 1024)) {
            printf("%s: skipped on the emulator (a GPU runs it)\n", s->name);
            continue;
        }
        printf("%s: B%d T%d C%d NH%d V%d Vp%d\n", s->name, s->B, s->T, s->C, s->NH, s->V, s->Vp);
        if (s->full && !flash_only) {
            const int N = s->B * s->T, C = s->C;
            test_encoder(s);
            test_layernorm(s);
            test_matmul(s, "qkv", N, C, 3 * C, 1);
            test_matmul(s, "fcproj", N, 4 * C, C, 1);
            test_matmul(s, "lmhead", N, C, s->Vp, 0);
            test_gemm_math(s, N, C, 3 * C);
            test_elementwise(s);
            test_xent(s);
        }
        if (!flash_only) test_attention(s);
        test_flash(s->name, s->B, s->T, s->C, s->NH);
    }
    /* the flash attention's tails (T past a multiple of its 64-row tiles,
     * T below one tile) and head sizes (one to eight 16-channel groups per
     * thread, an odd one) */
    const struct { const char *name; int B, T, C, NH; } flash[] = {
        {"flash-T1-hs32", 2, 1, 64, 2},     {"flash-T7-hs48", 2, 7, 96, 2},
        {"flash-T65-hs64", 2, 65, 128, 2},  {"flash-T129-hs80", 1, 129, 160, 2},
        {"flash-T100-hs128", 1, 100, 256, 2}, {"flash-T70-hs1", 1, 70, 3, 3},
        {"flash-T200-hs33", 1, 200, 66, 2}, {"flash-124M-B2-T1024", 2, 1024, 768, 12},
    };
    for (size_t k = 0; k < sizeof flash / sizeof flash[0]; k++) {
        if (emulated && flash[k].T >= 1024) {
            printf("%s: skipped on the emulator (a GPU runs it)\n", flash[k].name);
            continue;
        }
        test_flash_mode(flash[k].name, flash[k].B, flash[k].T, flash[k].C, flash[k].NH, 0);
        /* the TF32 twins at T 1024 once (124M-T1024 above): on the CPU's
         * emulator each T 1024 run of them takes minutes */
        if (flash[k].T < 1024) test_flash_mode(flash[k].name, flash[k].B, flash[k].T, flash[k].C, flash[k].NH, 1);
    }
    test_flash_refusal();
    kernels_cuda_shutdown();
    return TEST_REPORT("test_cuda_kernels");
}
