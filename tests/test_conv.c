/* tier: fast (make test; tests/run.sh) */
/*
 * test_conv.c — the image-classifier kernels (conv.c) and models (mlp.c,
 * cnn.c), without torch (tests/test_cnn_ref.c compares against PyTorch):
 *   - conv2d: im2col+sgemm path against the direct-loop reference, forward
 *     and backward (several K, P, shapes; gradients accumulate onto non-zero
 *     values; dcols aliasing cols as the CNN uses it), and central finite
 *     differences of sum(out * R) for dinp, dweight, dbias;
 *   - maxpool 2x2 and ReLU: finite differences on tie-free inputs;
 *   - MLP and CNN: a directional derivative per parameter tensor against
 *     central differences of the loss; 1 vs 2 threads bit-identical;
 *     a batch smaller than the reserved one equals a model reserved for it;
 *     argument checks, descriptions and FLOP counts.
 * Tolerances are stated next to each check.
 */
#include "test.h"
#include "hpt.h"
#include "../src/kernels/kernels.h"
#include "../src/model/model.h"

#include <stdlib.h>
#include <string.h>

static hpt_rng g_rng;

static float *randn(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * hpt_rng_normal(&g_rng);
    return p;
}

static double max_abs(const float *a, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) if (fabs(a[i]) > m) m = fabs(a[i]);
    return m;
}

/* ---------------------------------------------------------------- conv2d */

/* im2col+sgemm against direct loops. Gradients start from the same random
 * values on both sides (accumulation). Tolerance: 1e-5 + 1e-5 * max|ref|
 * (float32, different summation orders). */
static void conv_fast_vs_ref(int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t ni = (size_t)B * C * H * W, no = (size_t)B * OC * OH * OW, nw = (size_t)OC * C * K * K;
    const size_t ncols = (size_t)B * C * K * K * OH * OW;
    float *x = randn(ni, 1.0f), *w = randn(nw, 0.3f), *bias = randn(OC, 0.5f), *dout = randn(no, 1.0f);
    float *out = randn(no, 1.0f), *out_ref = randn(no, 1.0f), *cols = randn(ncols, 1.0f);
    float *dx = randn(ni, 0.1f), *dw = randn(nw, 0.1f), *db = randn(OC, 0.1f);
    float *dx_ref = malloc(ni * sizeof(float)), *dw_ref = malloc(nw * sizeof(float)), *db_ref = malloc(OC * sizeof(float));
    memcpy(dx_ref, dx, ni * sizeof(float)); memcpy(dw_ref, dw, nw * sizeof(float)); memcpy(db_ref, db, OC * sizeof(float));
    char what[96];

    conv2d_forward(out, cols, x, w, bias, B, C, H, W, OC, K, P);
    conv2d_forward_ref(out_ref, x, w, bias, B, C, H, W, OC, K, P);
    double e = max_abs_diff(out, out_ref, no), tol = 1e-5 + 1e-5 * max_abs(out_ref, no);
    snprintf(what, sizeof what, "conv B%d C%d %dx%d OC%d K%d P%d forward", B, C, H, W, OC, K, P);
    CHECK(e <= tol, "%s: max abs err %.3g > %.3g", what, e, tol);

    /* dcols aliases cols, as in the CNN */
    conv2d_backward(dx, dw, db, cols, dout, cols, w, B, C, H, W, OC, K, P);
    conv2d_backward_ref(dx_ref, dw_ref, db_ref, dout, x, w, B, C, H, W, OC, K, P);
    double ex = max_abs_diff(dx, dx_ref, ni), tx = 1e-5 + 1e-5 * max_abs(dx_ref, ni);
    double ew = max_abs_diff(dw, dw_ref, nw), tw = 1e-5 + 1e-5 * max_abs(dw_ref, nw);
    double eb = max_abs_diff(db, db_ref, OC), tb = 1e-5 + 1e-5 * max_abs(db_ref, OC);
    CHECK(ex <= tx, "%s: dinp max abs err %.3g > %.3g", what, ex, tx);
    CHECK(ew <= tw, "%s: dweight max abs err %.3g > %.3g", what, ew, tw);
    CHECK(eb <= tb, "%s: dbias max abs err %.3g > %.3g", what, eb, tb);
    printf("  conv B%d C%d %dx%d OC%d K%d P%d fast vs ref: out %.2g, dinp %.2g, dweight %.2g, dbias %.2g\n",
           B, C, H, W, OC, K, P, e, ex, ew, eb);

    /* dinp NULL (first layer): dweight and dbias unchanged by that choice */
    memcpy(dw, dw_ref, nw * sizeof(float));
    conv2d_forward(out, cols, x, w, bias, B, C, H, W, OC, K, P);
    float *dw2 = malloc(nw * sizeof(float));
    memcpy(dw2, dw_ref, nw * sizeof(float));
    conv2d_backward(NULL, dw2, NULL, NULL, dout, cols, w, B, C, H, W, OC, K, P);
    conv2d_forward(out, cols, x, w, bias, B, C, H, W, OC, K, P);
    conv2d_backward(dx, dw, db, cols, dout, cols, w, B, C, H, W, OC, K, P);
    CHECK(!memcmp(dw, dw2, nw * sizeof(float)), "%s: dweight depends on dinp being requested", what);

    free(x); free(w); free(bias); free(dout); free(out); free(out_ref); free(cols);
    free(dx); free(dw); free(db); free(dx_ref); free(dw_ref); free(db_ref); free(dw2);
}

/* sum(out * R) in double, through the fast path */
static double conv_obj(float *out, float *cols, const float *x, const float *w, const float *b, const float *R,
                       int B, int C, int H, int W, int OC, int K, int P, size_t no) {
    conv2d_forward(out, cols, x, w, b, B, C, H, W, OC, K, P);
    double s = 0.0;
    for (size_t i = 0; i < no; i++) s += (double)out[i] * R[i];
    return s;
}

/* Central differences of sum(out * R), every element of x, w and b. The
 * objective is linear in each, so only rounding separates the two sides:
 * eps 1e-2, tolerance 1e-3 + 1e-3 |analytic|. */
static void conv_finite_diff(int B, int C, int H, int W, int OC, int K, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
    const size_t ni = (size_t)B * C * H * W, no = (size_t)B * OC * OH * OW, nw = (size_t)OC * C * K * K;
    float *x = randn(ni, 1.0f), *w = randn(nw, 0.3f), *b = randn(OC, 0.5f), *R = randn(no, 1.0f);
    float *out = malloc(no * sizeof(float)), *cols = malloc((size_t)B * C * K * K * OH * OW * sizeof(float));
    float *dx = calloc(ni, sizeof(float)), *dw = calloc(nw, sizeof(float)), *db = calloc(OC, sizeof(float));
    conv2d_forward(out, cols, x, w, b, B, C, H, W, OC, K, P);
    conv2d_backward(dx, dw, db, cols, R, cols, w, B, C, H, W, OC, K, P);
    const float eps = 1e-2f;
    struct { const char *name; float *p, *g; size_t n; } v[3] = {{"dinp", x, dx, ni}, {"dweight", w, dw, nw}, {"dbias", b, db, OC}};
    for (int k = 0; k < 3; k++) {
        double maxerr = 0.0;
        int bad = 0;
        for (size_t i = 0; i < v[k].n; i++) {
            float keep = v[k].p[i];
            v[k].p[i] = keep + eps;
            double lp = conv_obj(out, cols, x, w, b, R, B, C, H, W, OC, K, P, no);
            v[k].p[i] = keep - eps;
            double lm = conv_obj(out, cols, x, w, b, R, B, C, H, W, OC, K, P, no);
            v[k].p[i] = keep;
            double fd = (lp - lm) / (2.0 * eps), e = fabs(fd - v[k].g[i]);
            if (e > maxerr) maxerr = e;
            if (!(e <= 1e-3 + 1e-3 * fabs(v[k].g[i]))) {
                if (!bad) fprintf(stderr, "conv %s[%zu]: analytic %.7g, finite difference %.7g\n", v[k].name, i, v[k].g[i], fd);
                bad++;
            }
        }
        CHECK(bad == 0, "conv K%d P%d %s: %d of %zu elements off the finite difference", K, P, v[k].name, bad, v[k].n);
        printf("  conv K%d P%d finite differences: %-7s max abs err %.2g (max |grad| %.2g)\n", K, P, v[k].name,
               maxerr, max_abs(v[k].g, v[k].n));
    }
    free(x); free(w); free(b); free(R); free(out); free(cols); free(dx); free(dw); free(db);
}

/* ---------------------------------------------------------------- maxpool, relu */

/* Inputs are a shuffled ramp with steps of 0.01, so no window has a tie and
 * eps 1e-3 never changes an argmax: the finite difference is exact up to
 * rounding (tolerance 1e-3). Odd H, W check that the last row/column is
 * dropped (zero gradient). */
static void maxpool_check(int B, int C, int H, int W) {
    const size_t n = (size_t)B * C * H * W, no = (size_t)B * C * (H / 2) * (W / 2);
    float *x = malloc(n * sizeof(float)), *out = malloc(no * sizeof(float)), *R = randn(no, 1.0f);
    int *idx = malloc(no * sizeof(int));
    float *dx = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = 0.01f * (float)i - 0.005f * (float)n;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = hpt_rng_below(&g_rng, i + 1);
        float t = x[i]; x[i] = x[j]; x[j] = t;
    }
    maxpool2_forward(out, idx, x, B, C, H, W);
    /* forward against a direct max */
    int fwd_ok = 1;
    for (int p = 0; p < B * C; p++)
        for (int i = 0; i < H / 2; i++)
            for (int j = 0; j < W / 2; j++) {
                const float *xp = x + (size_t)p * H * W;
                float m = xp[2 * i * W + 2 * j];
                if (xp[2 * i * W + 2 * j + 1] > m) m = xp[2 * i * W + 2 * j + 1];
                if (xp[(2 * i + 1) * W + 2 * j] > m) m = xp[(2 * i + 1) * W + 2 * j];
                if (xp[(2 * i + 1) * W + 2 * j + 1] > m) m = xp[(2 * i + 1) * W + 2 * j + 1];
                fwd_ok &= out[((size_t)p * (H / 2) + i) * (W / 2) + j] == m;
            }
    CHECK(fwd_ok, "maxpool %dx%d forward differs from a direct max", H, W);
    maxpool2_backward(dx, R, idx, B, C, H, W);
    const float eps = 1e-3f;
    double maxerr = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        double lp = 0.0, lm = 0.0;
        x[i] = keep + eps;
        maxpool2_forward(out, idx, x, B, C, H, W);
        for (size_t k = 0; k < no; k++) lp += (double)out[k] * R[k];
        x[i] = keep - eps;
        maxpool2_forward(out, idx, x, B, C, H, W);
        for (size_t k = 0; k < no; k++) lm += (double)out[k] * R[k];
        x[i] = keep;
        double fd = (lp - lm) / (2.0 * eps), e = fabs(fd - dx[i]);
        if (e > maxerr) maxerr = e;
        if (!(e <= 1e-3)) bad++;
    }
    CHECK(bad == 0, "maxpool %dx%d: %d of %zu input gradients off the finite difference", H, W, bad, n);
    printf("  maxpool B%d C%d %dx%d finite differences: max abs err %.2g\n", B, C, H, W, maxerr);
    free(x); free(out); free(R); free(idx); free(dx);
}

/* ReLU on inputs at least 0.05 away from the kink; eps 1e-2 (exact up to
 * rounding, ~3e-5 here), tolerance 1e-4. */
static void relu_check(void) {
    enum { N = 257 };
    float x[N], y[N], R[N], dx[N];
    for (int i = 0; i < N; i++) {
        float v = hpt_rng_normal(&g_rng);
        x[i] = v >= 0 ? v + 0.05f : v - 0.05f;
        R[i] = hpt_rng_normal(&g_rng);
        dx[i] = 0.25f;  /* accumulation */
    }
    relu_backward(dx, x, R, N);
    const float eps = 1e-2f;
    double maxerr = 0.0;
    for (int i = 0; i < N; i++) {
        float keep = x[i], yp, ym;
        x[i] = keep + eps; relu_forward(y, x, N); yp = y[i];
        x[i] = keep - eps; relu_forward(y, x, N); ym = y[i];
        x[i] = keep;
        double fd = 0.25 + R[i] * ((double)yp - ym) / (2.0 * eps);
        maxerr = fmax(maxerr, fabs(fd - dx[i]));
    }
    CHECK(maxerr <= 1e-4, "relu: max abs err %.3g vs finite differences", maxerr);
    printf("  relu finite differences: max abs err %.2g\n", maxerr);
}

/* ---------------------------------------------------------------- models */

static float model_loss(hpt_model *m, const hpt_batch *b) {
    float l = NAN;
    hpt_status st = hpt_model_forward(m, b, &l);
    CHECK(st == HPT_OK, "forward: %s", hpt_errmsg());
    return l;
}

/* For each parameter tensor: a random unit direction d on that tensor;
 * analytic g.d (in double) against (L(p + eps d) - L(p - eps d)) / 2eps.
 * The loss is float32 (rounding ~1e-7 of ~1.5), eps 1e-3: rounding noise
 * ~1e-4 absolute; ReLU/maxpool kinks are not crossed at these seeds.
 * Tolerance 3e-4 + 1e-2 |g.d|. Biases start random (not 0) so their
 * gradients are generic. */
static void model_grad_check(hpt_model *m, const hpt_batch *b, const char *label) {
    size_t np;
    float *p = hpt_model_params(m, &np), *g = hpt_model_grads(m, NULL);
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    for (int i = 0; i < nt; i++)
        if (!ti[i].decay)
            for (size_t k = 0; k < ti[i].numel; k++) p[ti[i].offset + k] = 0.1f * hpt_rng_normal(&g_rng);
    hpt_model_zero_grad(m);
    float l0 = model_loss(m, b);
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    float *p0 = malloc(np * sizeof(float));
    memcpy(p0, p, np * sizeof(float));
    const float eps = 1e-3f;
    double worst = 0.0;
    for (int i = 0; i < nt; i++) {
        size_t n = ti[i].numel, off = ti[i].offset;
        float *d = randn(n, 1.0f);
        double norm = 0.0;
        for (size_t k = 0; k < n; k++) norm += (double)d[k] * d[k];
        norm = sqrt(norm);
        double gd = 0.0;
        for (size_t k = 0; k < n; k++) { d[k] = (float)(d[k] / norm); gd += (double)g[off + k] * d[k]; }
        for (size_t k = 0; k < n; k++) p[off + k] = p0[off + k] + eps * d[k];
        double lp = model_loss(m, b);
        for (size_t k = 0; k < n; k++) p[off + k] = p0[off + k] - eps * d[k];
        double lm = model_loss(m, b);
        memcpy(p + off, p0 + off, n * sizeof(float));
        double fd = (lp - lm) / (2.0 * eps), e = fabs(fd - gd);
        CHECK(e <= 3e-4 + 1e-2 * fabs(gd), "%s %s: g.d %.7g, finite difference %.7g", label, ti[i].name, gd, fd);
        /* a dead network (every ReLU off) would pass vacuously */
        CHECK(fabs(gd) > 1e-4, "%s %s: g.d %.3g, the check is vacuous", label, ti[i].name, gd);
        worst = fmax(worst, e / (3e-4 + 1e-2 * fabs(gd)));
        printf("  %s %-7s g.d %+.6f  finite diff %+.6f  abs err %.2g\n", label, ti[i].name, gd, fd, e);
        free(d);
    }
    printf("  %s loss %.6f, worst error %.0f%% of tolerance\n", label, l0, 100 * worst);
    free(p0);
}

typedef struct snap { float loss, *probs, *grads; } snap;

/* forward (targets) + backward from zeroed gradients; copies the results */
static void snap_take(snap *s, hpt_model *m, const hpt_batch *b) {
    size_t np;
    hpt_model_grads(m, &np);
    hpt_model_zero_grad(m);
    s->loss = model_loss(m, b);
    int n_out, row;
    const float *pr = hpt_model_logits(m, &n_out, &row);
    s->probs = malloc((size_t)b->B * row * sizeof(float));
    memcpy(s->probs, pr, (size_t)b->B * row * sizeof(float));
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    s->grads = malloc(np * sizeof(float));
    memcpy(s->grads, hpt_model_grads(m, NULL), np * sizeof(float));
}

static int snap_same(const snap *a, const snap *b, size_t nprobs, size_t np) {
    return !memcmp(&a->loss, &b->loss, sizeof(float)) && !memcmp(a->probs, b->probs, nprobs * sizeof(float)) &&
           !memcmp(a->grads, b->grads, np * sizeof(float));
}

static void snap_free(snap *s) { free(s->probs); free(s->grads); }

typedef hpt_status (*init_fn)(hpt_model **m, const void *cfg, int B, uint64_t seed);
static hpt_status init_mlp(hpt_model **m, const void *cfg, int B, uint64_t seed) { return hpt_mlp_init(m, cfg, B, seed); }
static hpt_status init_cnn(hpt_model **m, const void *cfg, int B, uint64_t seed) { return hpt_cnn_init(m, cfg, B, seed); }

/* Thread-count determinism and smaller-than-reserved batches, bit for bit. */
static void model_determinism(init_fn init, const void *cfg, int n_in, int n_cls, int B, const char *label) {
    float *x = randn((size_t)B * n_in, 1.0f);
    int *y = malloc((size_t)B * sizeof(int));
    for (int i = 0; i < B; i++) y[i] = (int)hpt_rng_below(&g_rng, (uint64_t)n_cls);
    hpt_batch b = {.B = B, .T = 1, .x = x, .x_dim = n_in, .targets = y};
    hpt_model *m = NULL;
    CHECK(init(&m, cfg, B, 7) == HPT_OK, "%s init: %s", label, hpt_errmsg());
    if (!m) return;
    size_t np = hpt_model_num_params(m);

    snap s1, s2;
    hpt_set_threads(1);
    snap_take(&s1, m, &b);
    hpt_set_threads(2);
    snap_take(&s2, m, &b);
#ifdef _OPENMP
    CHECK(snap_same(&s1, &s2, (size_t)B * n_cls, np), "%s: 1 and 2 threads differ", label);
    printf("  %s B %d: 1 vs 2 threads %s (loss %.6f)\n", label, B, snap_same(&s1, &s2, (size_t)B * n_cls, np) ? "bit-identical" : "DIFFER", s1.loss);
#else
    /* Without OpenMP the kernels call OpenBLAS outside any parallel region,
     * where it threads itself, and its split changes the sums. */
    printf("  %s B %d: thread-count determinism not checked (built without OpenMP)\n", label, B);
#endif

    /* the last, short batch of an epoch: after a full batch, B-3 samples
     * must give what a model reserved for B-3 gives */
    int Bs = B - 3;
    hpt_batch bs = {.B = Bs, .T = 1, .x = x, .x_dim = n_in, .targets = y};
    snap s3, s4;
    snap_take(&s3, m, &bs);
    hpt_model *ms = NULL;
    CHECK(init(&ms, cfg, Bs, 7) == HPT_OK, "%s init: %s", label, hpt_errmsg());
    snap_take(&s4, ms, &bs);
    CHECK(snap_same(&s3, &s4, (size_t)Bs * n_cls, np), "%s: batch %d in a model reserved for %d differs", label, Bs, B);
    /* probabilities: rows sum to 1 */
    double worst = 0.0;
    for (int i = 0; i < Bs; i++) {
        double s = 0.0;
        for (int k = 0; k < n_cls; k++) s += s3.probs[(size_t)i * n_cls + k];
        worst = fmax(worst, fabs(s - 1.0));
    }
    CHECK(worst < 1e-5, "%s: probabilities sum to 1 +- %.3g", label, worst);
    /* a forward without targets leaves logits with the same argmax */
    CHECK(hpt_model_forward(m, &(hpt_batch){.B = Bs, .T = 1, .x = x, .x_dim = n_in}, NULL) == HPT_OK, "forward: %s", hpt_errmsg());
    const float *lg = hpt_model_logits(m, NULL, NULL);
    int same_argmax = 1;
    for (int i = 0; i < Bs; i++) {
        int a1 = 0, a2 = 0;
        for (int k = 1; k < n_cls; k++) {
            if (lg[(size_t)i * n_cls + k] > lg[(size_t)i * n_cls + a1]) a1 = k;
            if (s3.probs[(size_t)i * n_cls + k] > s3.probs[(size_t)i * n_cls + a2]) a2 = k;
        }
        same_argmax &= a1 == a2;
    }
    CHECK(same_argmax, "%s: argmax of logits and probabilities differ", label);
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "%s: backward after a forward without targets must fail", label);
    /* larger than reserved, bad targets */
    hpt_batch big = {.B = B + 1, .T = 1, .x = x, .x_dim = n_in, .targets = y};
    CHECK(hpt_model_forward(m, &big, NULL) == HPT_ERR_ARG, "%s: batch above the reservation accepted", label);
    int bad_y = n_cls;
    CHECK(hpt_model_forward(m, &(hpt_batch){.B = 1, .T = 1, .x = x, .x_dim = n_in, .targets = &bad_y}, NULL) == HPT_ERR_ARG,
          "%s: target %d accepted", label, bad_y);
    CHECK(hpt_model_forward(m, &(hpt_batch){.B = 1, .T = 1, .targets = y}, NULL) == HPT_ERR_ARG,
          "%s: batch without x accepted", label);

    snap_free(&s1); snap_free(&s2); snap_free(&s3); snap_free(&s4);
    hpt_model_free(m); hpt_model_free(ms);
    free(x); free(y);
}

/* model_grad_check on a random batch of B inputs of nin floats each and
 * targets y; then frees the model (NULL: a failed init, already reported). */
static void grad_check_random_batch(hpt_model *m, int B, size_t nin, const int *y, const char *label) {
    if (!m) return;
    float *x = randn((size_t)B * nin, 1.0f);
    hpt_batch b = {.B = B, .T = 1, .x = x, .x_dim = (int)nin, .targets = y};
    model_grad_check(m, &b, label);
    hpt_model_free(m);
    free(x);
}

static void mlp_checks(void) {
    /* tiny: gradient checks */
    hpt_mlp_config c = {.n_in = 12, .n_hidden = 2, .hidden = {7, 5}, .n_classes = 4};
    hpt_model *m = NULL;
    enum { B = 3 };
    const int y[B] = {1, 3, 0};
    CHECK(hpt_mlp_init(&m, &c, B, 11) == HPT_OK, "mlp init: %s", hpt_errmsg());
    grad_check_random_batch(m, B, 12, y, "mlp");

    hpt_mlp_config c0 = {.n_in = 12, .n_hidden = 0, .n_classes = 4};  /* softmax regression */
    CHECK(hpt_mlp_init(&m, &c0, B, 11) == HPT_OK, "mlp init: %s", hpt_errmsg());
    CHECK(!strcmp(hpt_model_describe(m), "mlp 12-4 (B 3)"), "describe: '%s'", hpt_model_describe(m));
    grad_check_random_batch(m, B, 12, y, "mlp0");

    hpt_mlp_config d;
    hpt_mlp_config_default(&d);
    CHECK(hpt_mlp_init(&m, &d, 128, 1) == HPT_OK, "mlp init: %s", hpt_errmsg());
    CHECK(!strcmp(hpt_model_describe(m), "mlp 784-256-128-10 (B 128)"), "describe: '%s'", hpt_model_describe(m));
    CHECK(hpt_model_num_params(m) == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, "mlp params %zu",
          hpt_model_num_params(m));
    CHECK_NEAR(hpt_model_train_flops(m, 128, 1), 6.0 * 128 * (784 * 256 + 256 * 128 + 128 * 10), 0, 1e-12, "mlp flops");
    hpt_model_free(m);

    hpt_mlp_config bad = d;
    bad.n_hidden = 5;
    CHECK(hpt_mlp_init(&m, &bad, 4, 1) == HPT_ERR_ARG && !m, "n_hidden 5 accepted");
    bad = d; bad.hidden[1] = 0;
    CHECK(hpt_mlp_init(&m, &bad, 4, 1) == HPT_ERR_ARG, "hidden width 0 accepted");
    bad = d; bad.n_classes = 1;
    CHECK(hpt_mlp_init(&m, &bad, 4, 1) == HPT_ERR_ARG, "1 class accepted");
    CHECK(hpt_mlp_init(&m, &d, 0, 1) == HPT_ERR_ARG, "batch 0 accepted");

    /* 20 rows cross sgemm_rows' 16-row blocks */
    model_determinism(init_mlp, &d, 784, 10, 20, "mlp 784-256-128-10");
}

static void cnn_checks(void) {
    hpt_cnn_config c = {.in_c = 1, .in_h = 8, .in_w = 8, .c1 = 2, .c2 = 3, .hidden = 5, .n_classes = 4};
    hpt_model *m = NULL;
    enum { B = 3 };
    CHECK(hpt_cnn_init(&m, &c, B, 5) == HPT_OK, "cnn init: %s", hpt_errmsg());
    grad_check_random_batch(m, B, 64, (const int[B]){2, 0, 3}, "cnn");

    /* two input channels, odd 9x7 input (pooling drops edges: 9x7 -> 4x3 -> 2x1) */
    hpt_cnn_config c2 = {.in_c = 2, .in_h = 9, .in_w = 7, .c1 = 3, .c2 = 4, .hidden = 6, .n_classes = 3};
    CHECK(hpt_cnn_init(&m, &c2, B, 6) == HPT_OK, "cnn init: %s", hpt_errmsg());
    CHECK(!strcmp(hpt_model_describe(m), "cnn 2x9x7 c3-c4-h6-3 (B 3)"), "describe: '%s'", hpt_model_describe(m));
    grad_check_random_batch(m, B, 2 * 9 * 7, (const int[B]){2, 0, 1}, "cnn2");

    hpt_cnn_config d;
    hpt_cnn_config_default(&d);
    CHECK(hpt_cnn_init(&m, &d, 128, 1) == HPT_OK, "cnn init: %s", hpt_errmsg());
    CHECK(!strcmp(hpt_model_describe(m), "cnn 1x28x28 c32-c64-h128-10 (B 128)"), "describe: '%s'", hpt_model_describe(m));
    CHECK(hpt_model_num_params(m) == 32 * 9 + 32 + 64 * 32 * 9 + 64 + 3136 * 128 + 128 + 128 * 10 + 10,
          "cnn params %zu", hpt_model_num_params(m));
    double macs = 32.0 * 9 * 784 + 64.0 * 32 * 9 * 196 + 3136.0 * 128 + 128.0 * 10;
    CHECK_NEAR(hpt_model_train_flops(m, 128, 1), 6.0 * 128 * macs, 0, 1e-12, "cnn flops");
    size_t pb, gb, ab;
    hpt_model_bytes(m, &pb, &gb, &ab);
    printf("  %s: %zu params, activations %.1f MiB\n", hpt_model_describe(m), hpt_model_num_params(m), ab / 1048576.0);
    hpt_model_free(m);

    hpt_cnn_config bad = d;
    bad.in_h = 3;
    CHECK(hpt_cnn_init(&m, &bad, 4, 1) == HPT_ERR_ARG && !m, "3x28 input accepted");
    bad = d; bad.c2 = 0;
    CHECK(hpt_cnn_init(&m, &bad, 4, 1) == HPT_ERR_ARG, "c2 0 accepted");
    bad = d; bad.hidden = -1;
    CHECK(hpt_cnn_init(&m, &bad, 4, 1) == HPT_ERR_ARG, "hidden -1 accepted");

    /* 20 and 40 channels cross the 16-channel dweight blocks */
    hpt_cnn_config t = {.in_c = 1, .in_h = 28, .in_w = 28, .c1 = 20, .c2 = 40, .hidden = 24, .n_classes = 10};
    model_determinism(init_cnn, &t, 784, 10, 7, "cnn 1x28x28 c20-c40-h24");
}

int main(void) {
    hpt_rng_seed(&g_rng, 20240611);
    hpt_set_threads(2);
    printf("conv2d\n");
    conv_fast_vs_ref(3, 4, 9, 7, 18, 3, 1);
    conv_fast_vs_ref(2, 1, 28, 28, 5, 3, 1);
    conv_fast_vs_ref(2, 3, 6, 5, 4, 3, 0);
    conv_fast_vs_ref(1, 2, 7, 8, 3, 5, 2);
    conv_fast_vs_ref(2, 3, 5, 5, 2, 1, 0);
    conv_finite_diff(2, 2, 5, 4, 3, 3, 1);
    conv_finite_diff(1, 2, 6, 5, 2, 3, 0);
    printf("maxpool, relu\n");
    maxpool_check(2, 3, 6, 6);
    maxpool_check(1, 2, 7, 5);
    relu_check();
    printf("mlp\n");
    mlp_checks();
    printf("cnn\n");
    cnn_checks();
    return TEST_REPORT("test_conv");
}
