/* tier: fast (make test; tests/run.sh) */
/*
 * test_model.c — whole-model checks of the GPT-2 family on a tiny config
 * (V 11 -> Vp 16, block 6, L 2, NH 2, C 8, batches reserved for 2x6):
 *   (a) directional derivatives: (L(p + eps d) - L(p - eps d)) / 2eps against
 *       dot(grad, d) for random unit directions d over the whole arena and the
 *       gradient direction itself (kann's kad_check_grad), in float;
 *   (b) per-tensor spot checks: random coordinates of every tensor in the
 *       tensor table against central differences;
 *   (c) a 1x3 batch through the 2x6 model equals a model reserved for 1x3
 *       with the same parameters, bit for bit (loss, logits, gradients);
 *   (d) argument errors: out-of-range tokens and targets, oversized batches,
 *       backward without a forward with targets, bad configs;
 *   (e) the loss at init is log(V) (GPT-2 init makes the logits ~0);
 *   (f) the tensor table tiles the arena exactly, and the padded rows of wte
 *       (V..Vp-1) are 0 after init and stay 0 through optimizer steps.
 * Gradients are checked at a "scrambled" point (weights ~N(0, 0.3), LayerNorm
 * gains 1 +- 0.2, biases ~N(0, 0.1)) where attention, GELU and LayerNorm are
 * far from linear, as well as at init. Tolerances are stated beside each check.
 */
#include "test.h"
#include "../src/model/model.h"
#include "hpt.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"

#include <stdlib.h>
#include <string.h>

enum { V = 11, MAXT = 6, L = 2, NH = 2, C = 8, B = 2, T = 6 };
static const hpt_gpt2_config CFG = {.vocab_size = V, .block_size = MAXT, .n_layer = L, .n_head = NH, .n_embd = C};

static hpt_rng g_rng;
static int tokens[B * T], targets[B * T];

static hpt_model *make_model(int b, int t, uint64_t seed) {
    hpt_model *m = NULL;
    hpt_status st = hpt_gpt2_init(&m, &CFG, b, t, seed, NULL);
    CHECK(st == HPT_OK && m, "hpt_gpt2_init %dx%d: %s", b, t, hpt_errmsg());
    if (!m) exit(1);
    return m;
}

static int find_tensor(const hpt_model *m, const char *name) {
    int n;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &n);
    for (int i = 0; i < n; i++) if (!strcmp(ti[i].name, name)) return i;
    return -1;
}

static float loss_of(hpt_model *m, int b, int t) {
    hpt_batch batch = {.B = b, .T = t, .tokens = tokens, .targets = targets};
    float loss = NAN;
    hpt_status st = hpt_model_forward(m, &batch, &loss);
    if (st != HPT_OK) { fprintf(stderr, "forward: %s\n", hpt_errmsg()); exit(1); }
    return loss;
}

/* zero grads, forward, backward(1): the gradient of the mean loss */
static float grad_of(hpt_model *m, int b, int t) {
    hpt_model_zero_grad(m);
    float loss = loss_of(m, b, t);
    hpt_status st = hpt_model_backward(m, 1.0f);
    CHECK(st == HPT_OK, "backward: %s", hpt_errmsg());
    return loss;
}

/* Moves the parameters away from init: attention scores, GELU inputs and
 * LayerNorm statistics of order 1. The padded wte rows stay 0. */
static void scramble(hpt_model *m) {
    int n;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &n);
    float *p = hpt_model_params(m, NULL);
    for (int i = 0; i < n; i++) {
        size_t k = ti[i].numel;
        if (!strcmp(ti[i].name, "wte")) k = (size_t)V * C;
        int gain = strstr(ti[i].name, "ln") && ti[i].name[strlen(ti[i].name) - 1] == 'w';
        for (size_t j = 0; j < k; j++) {
            float r = hpt_rng_normal(&g_rng);
            p[ti[i].offset + j] = gain ? 1.0f + 0.2f * r : ti[i].decay ? 0.3f * r : 0.1f * r;
        }
    }
}

static void random_batch(void) {
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)hpt_rng_below(&g_rng, V);
        targets[i] = (int)hpt_rng_below(&g_rng, V);
    }
    tokens[0] = tokens[3] = tokens[8];  /* repeated tokens: wte rows accumulate */
}

/* ---------------------------------------------------------------- (a) */

/* Tolerance: |fd - dot| <= 2e-3 |dot| + 2e-5 |g|, fd from Richardson
 * extrapolation of central differences with steps 1e-2 and 5e-3 in float.
 * Observed: at most 38% of the tolerance (init, gradient direction), mostly
 * under 20%. A gradient missing or wrong in any one tensor shifts dot(g, d)
 * by ~|g_tensor| / sqrt(n / numel) (random d) or |g_tensor|^2 / |g| (d = g),
 * one to two orders of magnitude above the tolerance. */
/* Central difference of the loss along d with step h (p0 restored after). */
static double central(hpt_model *m, float *p, const float *p0, const double *d, size_t n, double h) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(p0[i] + h * d[i]);
    double lp = loss_of(m, B, T);
    for (size_t i = 0; i < n; i++) p[i] = (float)(p0[i] - h * d[i]);
    double lm = loss_of(m, B, T);
    memcpy(p, p0, n * sizeof(float));
    return (lp - lm) / (2.0 * h);
}

/* Richardson extrapolation of two central differences (h and h/2): the h^2
 * error term cancels, leaving O(h^4). Needed at init, where the residual
 * stream is ~0.03 and LayerNorm's 1/std (~30) makes the loss change fast on
 * the scale of h along the gradient direction. */
static double richardson(hpt_model *m, float *p, const float *p0, const double *d, size_t n, double h) {
    return (4.0 * central(m, p, p0, d, n, h / 2) - central(m, p, p0, d, n, h)) / 3.0;
}

static void test_directional(hpt_model *m, const char *where) {
    size_t n;
    float *p = hpt_model_params(m, &n);
    float *g0 = hpt_model_grads(m, NULL);
    grad_of(m, B, T);
    float *g = malloc(n * sizeof(float)), *p0 = malloc(n * sizeof(float));
    double *d = malloc(n * sizeof(double));
    memcpy(g, g0, n * sizeof(float));
    memcpy(p0, p, n * sizeof(float));
    double gnorm = 0.0;
    for (size_t i = 0; i < n; i++) gnorm += (double)g[i] * g[i];
    gnorm = sqrt(gnorm);
    const double eps = 1e-2;  /* steps of 1e-2 and 5e-3 */
    for (int k = 0; k < 5; k++) {
        double dn = 0.0;
        for (size_t i = 0; i < n; i++) {
            /* k = 0: the gradient direction; then random directions */
            d[i] = k == 0 ? g[i] : hpt_rng_normal(&g_rng);
            dn += d[i] * d[i];
        }
        dn = sqrt(dn);
        double dot = 0.0;
        for (size_t i = 0; i < n; i++) { d[i] /= dn; dot += (double)g[i] * d[i]; }
        double fd = richardson(m, p, p0, d, n, eps);
        double err = fabs(fd - dot), lim = 2e-3 * fabs(dot) + 2e-5 * gnorm;
        printf("  %s direction %d: fd %+.7f  dot(g,d) %+.7f  |err| %.2g (%.0f%% of tolerance)\n",
               where, k, fd, dot, err, 100.0 * err / lim);
        CHECK(err <= lim, "%s direction %d: finite difference %.8g vs dot(grad, d) %.8g (|g| %.4g)",
              where, k, fd, dot, gnorm);
    }
    free(g); free(p0); free(d);
}

/* ---------------------------------------------------------------- (b) */

/* Per coordinate, eps = 1e-2 in float: the loss changes by ~eps * |g_i|, so
 * the float noise (~2e-7 on a loss of ~2.5, /2eps) is ~1e-5 absolute.
 * Tolerance: |a - n| <= 1e-2 |n| + 3e-5. A missing factor or sign moves a
 * gradient of 1e-3 or more by far more than that; coordinates are drawn until
 * each tensor has 3 with |n| >= 1e-3 (or 40 tries). */
static void test_spots(hpt_model *m, const char *where) {
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    float *p = hpt_model_params(m, NULL);
    float *g0 = hpt_model_grads(m, NULL);
    grad_of(m, B, T);
    size_t n = hpt_model_num_params(m);
    float *g = malloc(n * sizeof(float));
    memcpy(g, g0, n * sizeof(float));
    const float eps = 1e-2f;
    for (int i = 0; i < nt; i++) {
        size_t rows_ok = ti[i].numel;
        if (!strcmp(ti[i].name, "wte")) rows_ok = (size_t)V * C;  /* real vocabulary rows */
        int big = 0, tries = 0;
        double worst = 0.0, worst_n = 0.0, worst_a = 0.0;
        while (big < 3 && tries < 40) {
            tries++;
            size_t j = ti[i].offset + (size_t)hpt_rng_below(&g_rng, rows_ok);
            float x0 = p[j], xp = x0 + eps, xm = x0 - eps;
            p[j] = xp; double lp = loss_of(m, B, T);
            p[j] = xm; double lm = loss_of(m, B, T);
            p[j] = x0;
            double num = (lp - lm) / ((double)xp - xm), a = g[j];
            double err = fabs(a - num), lim = 1e-2 * fabs(num) + 3e-5;
            if (err / lim > worst) { worst = err / lim; worst_n = num; worst_a = a; }
            if (fabs(num) >= 1e-3) big++;
            CHECK(err <= lim, "%s %s[%zu]: analytic %.8g vs numeric %.8g", where, ti[i].name,
                  j - ti[i].offset, a, num);
        }
        printf("  %s %-9s %2d coords (%d with |g| >= 1e-3), worst: analytic %+.6f numeric %+.6f (%.0f%% of tol)\n",
               where, ti[i].name, tries, big, worst_a, worst_n, 100.0 * worst);
        CHECK(big >= 1, "%s %s: no coordinate with a gradient >= 1e-3: vacuous check", where, ti[i].name);
    }
    free(g);
}

/* ---------------------------------------------------------------- (c) */

static void test_small_batch(void) {
    hpt_model *big = make_model(B, T, 5), *small = make_model(1, 3, 6);
    scramble(big);
    size_t n1, n2;
    float *pbig = hpt_model_params(big, &n1), *psmall = hpt_model_params(small, &n2);
    memcpy(psmall, pbig, n1 * sizeof(float));
    CHECK(n1 == n2, "parameter counts differ with the reserved batch: %zu vs %zu", n1, n2);
    hpt_batch b13 = {.B = 1, .T = 3, .tokens = tokens};
    /* logits without targets */
    CHECK(hpt_model_forward(big, &b13, NULL) == HPT_OK, "1x3 forward in a 2x6 model: %s", hpt_errmsg());
    CHECK(hpt_model_forward(small, &b13, NULL) == HPT_OK, "1x3 forward in a 1x3 model: %s", hpt_errmsg());
    int no1, row1, no2, row2;
    const float *lg1 = hpt_model_logits(big, &no1, &row1), *lg2 = hpt_model_logits(small, &no2, &row2);
    CHECK(lg1 && lg2 && no1 == V && no2 == V && row1 == row2 && row1 >= V, "logits shape: %d/%d %d/%d", no1, row1, no2, row2);
    if (lg1 && lg2 && row1 == row2)
        CHECK(memcmp(lg1, lg2, (size_t)3 * row1 * sizeof(float)) == 0, "1x3 logits differ between the 2x6 and 1x3 models");
    /* loss and gradients */
    float l1 = grad_of(big, 1, 3), l2 = grad_of(small, 1, 3);
    CHECK(l1 == l2, "1x3 loss %.9g (2x6 model) vs %.9g (1x3 model)", l1, l2);
    CHECK(memcmp(hpt_model_grads(big, NULL), hpt_model_grads(small, NULL), n1 * sizeof(float)) == 0,
          "1x3 gradients differ between the 2x6 and 1x3 models");
    /* positions 3..5 of wpe are unused by a 1x3 batch: gradient exactly 0 */
    int iw = find_tensor(big, "wpe");
    const hpt_tensor_info *ti = hpt_model_tensors(big, &(int){0});
    const float *gw = hpt_model_grads(big, NULL) + ti[iw].offset;
    int zero = 1, nonzero = 0;
    for (int k = 3 * C; k < MAXT * C; k++) zero &= gw[k] == 0.0f;
    for (int k = 0; k < 3 * C; k++) nonzero |= gw[k] != 0.0f;
    CHECK(zero && nonzero, "wpe gradient: rows 0-2 must be non-zero (%d), rows 3-5 zero (%d)", nonzero, zero);
    /* and the full batch still works in the big model after the small one */
    float lf = loss_of(big, B, T);
    CHECK(isfinite(lf), "2x6 forward after a 1x3 one: loss %g", lf);
    printf("  1x3 batch: loss %.7f in both models, logits and gradients bit-identical\n", l1);
    hpt_model_free(big);
    hpt_model_free(small);
}

/* ---------------------------------------------------------------- (d) */

static void test_errors(void) {
    hpt_model *m = make_model(B, T, 7);
    int bad[B * T];
    memcpy(bad, tokens, sizeof bad);
    float loss = 123.0f;
    hpt_batch b = {.B = B, .T = T, .tokens = bad, .targets = targets};
    /* backward before any forward */
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "backward on a fresh model succeeded");
    bad[7] = V;
    CHECK(hpt_model_forward(m, &b, &loss) == HPT_ERR_ARG, "token V accepted");
    CHECK(strstr(hpt_errmsg(), "11") != NULL, "token error message does not name the token: '%s'", hpt_errmsg());
    bad[7] = -1;
    CHECK(hpt_model_forward(m, &b, &loss) == HPT_ERR_ARG, "token -1 accepted");
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "backward after a failed forward succeeded");
    bad[7] = tokens[7];
    int badt[B * T];
    memcpy(badt, targets, sizeof badt);
    badt[B * T - 1] = V + 5;
    hpt_batch bt = {.B = B, .T = T, .tokens = tokens, .targets = badt};
    CHECK(hpt_model_forward(m, &bt, &loss) == HPT_ERR_ARG, "target V+5 accepted");
    badt[B * T - 1] = -2;
    CHECK(hpt_model_forward(m, &bt, &loss) == HPT_ERR_ARG, "target -2 accepted");
    CHECK(loss == 123.0f, "a failed forward wrote the loss");
    hpt_batch big1 = {.B = B + 1, .T = T, .tokens = tokens, .targets = targets};
    hpt_batch big2 = {.B = B, .T = T + 1, .tokens = tokens, .targets = targets};
    hpt_batch zero = {.B = 0, .T = T, .tokens = tokens, .targets = targets};
    hpt_batch notok = {.B = B, .T = T, .tokens = NULL, .targets = targets};
    CHECK(hpt_model_forward(m, &big1, &loss) == HPT_ERR_ARG, "B > reserved accepted");
    CHECK(hpt_model_forward(m, &big2, &loss) == HPT_ERR_ARG, "T > reserved accepted");
    CHECK(hpt_model_forward(m, &zero, &loss) == HPT_ERR_ARG, "B = 0 accepted");
    CHECK(hpt_model_forward(m, &notok, &loss) == HPT_ERR_ARG, "NULL tokens accepted");
    /* forward without targets: no loss, no backward */
    hpt_batch nt = {.B = B, .T = T, .tokens = tokens, .targets = NULL};
    CHECK(hpt_model_forward(m, &nt, NULL) == HPT_OK, "forward without targets: %s", hpt_errmsg());
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "backward after a forward without targets succeeded");
    /* one backward per forward: the in-place softmax is consumed */
    CHECK(hpt_model_forward(m, &(hpt_batch){.B = B, .T = T, .tokens = tokens, .targets = targets}, &loss) == HPT_OK,
          "forward: %s", hpt_errmsg());
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "a second backward for one forward succeeded");
    hpt_model_free(m);

    /* configs */
    hpt_model *x = (hpt_model *)&x;
    hpt_gpt2_config c = CFG;
    c.n_embd = 9;
    CHECK(hpt_gpt2_init(&x, &c, 1, 1, 1, NULL) == HPT_ERR_ARG && x == NULL, "n_embd 9 with 2 heads accepted");
    c = CFG; c.vocab_size = 1;
    CHECK(hpt_gpt2_init(&x, &c, 1, 1, 1, NULL) == HPT_ERR_ARG, "vocab 1 accepted");
    c = CFG;
    CHECK(hpt_gpt2_init(&x, &c, 1, MAXT + 1, 1, NULL) == HPT_ERR_ARG, "T > block_size accepted");
    CHECK(hpt_gpt2_init(&x, &c, 0, 1, 1, NULL) == HPT_ERR_ARG, "B = 0 accepted");
    c.n_layer = 0;
    CHECK(hpt_gpt2_init(&x, &c, 1, 1, 1, NULL) == HPT_ERR_ARG, "0 layers accepted");
    hpt_model_free(NULL);  /* must be a no-op */
}

/* ---------------------------------------------------------------- (e) */

static void test_init_loss(void) {
    hpt_model *m = make_model(B, T, 1337);
    float loss = loss_of(m, B, T);
    /* logits ~ N(0, (0.02 sqrt(C))^2): the loss exceeds log V by ~var/2 ~ 2e-3 */
    printf("  loss at init %.5f, log(V) = %.5f\n", loss, log((double)V));
    CHECK_NEAR(loss, log((double)V), 0.02, 0.0, "loss at init vs log(V)");
    /* different seeds give different parameters, the same seed the same */
    hpt_model *a = make_model(B, T, 1337), *b = make_model(B, T, 1338);
    size_t n;
    float *p = hpt_model_params(m, &n);
    CHECK(memcmp(p, hpt_model_params(a, NULL), n * sizeof(float)) == 0, "same seed, different init");
    CHECK(memcmp(p, hpt_model_params(b, NULL), n * sizeof(float)) != 0, "different seeds, same init");
    /* GPT-2 init statistics: wte ~ N(0, 0.02), LayerNorm gains 1, biases 0 */
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    for (int i = 0; i < nt; i++) {
        const float *t = p + ti[i].offset;
        size_t k = !strcmp(ti[i].name, "wte") ? (size_t)V * C : ti[i].numel;
        double s = 0, s2 = 0;
        for (size_t j = 0; j < k; j++) { s += t[j]; s2 += (double)t[j] * t[j]; }
        double mean = s / k, sd = sqrt(s2 / k - mean * mean);
        const char *nm = ti[i].name;
        int gain = strstr(nm, "ln") && nm[strlen(nm) - 1] == 'w';
        if (gain) CHECK(mean == 1.0 && sd == 0.0, "%s: gains not 1 at init", nm);
        else if (!ti[i].decay) CHECK(mean == 0.0 && sd == 0.0, "%s: biases not 0 at init", nm);
        else if (!strcmp(nm, "wte") || !strcmp(nm, "wpe") || !strcmp(nm, "qkvw") || !strcmp(nm, "fcw"))
            CHECK(sd > 0.012 && sd < 0.028, "%s: std %.4f, want ~0.02", nm, sd);
        else  /* residual projections: 0.02 / sqrt(2L) = 0.01 */
            CHECK(sd > 0.006 && sd < 0.014, "%s: std %.4f, want ~0.01", nm, sd);
    }
    hpt_model_free(m); hpt_model_free(a); hpt_model_free(b);
}

/* ---------------------------------------------------------------- (f) */

static void test_table_and_padding(void) {
    hpt_model *m = make_model(B, T, 11);
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    size_t n = hpt_model_num_params(m), sum = 0, off = 0;
    int contiguous = 1, shapes = 1, names = 1;
    for (int i = 0; i < nt; i++) {
        contiguous &= ti[i].offset == off;
        size_t prod = 1;
        for (int d = 0; d < ti[i].ndim; d++) prod *= (size_t)ti[i].shape[d];
        shapes &= prod == ti[i].numel && ti[i].ndim >= 1 && ti[i].ndim <= 4;
        names &= ti[i].name && *ti[i].name;
        for (int j = 0; j < i; j++) names &= strcmp(ti[i].name, ti[j].name) != 0;
        off += ti[i].numel;
        sum += ti[i].numel;
    }
    CHECK(nt == 16, "GPT-2 has 16 parameter tensors, the table has %d", nt);
    CHECK(contiguous, "tensor offsets are not contiguous");
    CHECK(shapes, "a tensor's numel is not the product of its shape");
    CHECK(names, "tensor names empty or repeated");
    CHECK(sum == n, "tensors cover %zu floats, the arena has %zu", sum, n);
    size_t pn, gn;
    hpt_model_params(m, &pn);
    hpt_model_grads(m, &gn);
    CHECK(pn == n && gn == n, "arena lengths %zu/%zu vs %zu parameters", pn, gn, n);
    size_t pb, gb, ab;
    hpt_model_bytes(m, &pb, &gb, &ab);
    CHECK(pb == n * sizeof(float) && gb == pb && ab > 0, "hpt_model_bytes: %zu %zu %zu", pb, gb, ab);
    /* expected parameter count: V padded to 16, the GPT-2 formula */
    const int Vp = hpt_gpt2_padded_vocab(V);
    size_t expect = (size_t)Vp * C + (size_t)MAXT * C + (size_t)L * (12 * C * C + 13 * C) + 2 * C;
    CHECK(Vp == 16 && n == expect, "Vp %d, nparams %zu, want 16 and %zu", Vp, n, expect);
    int iw = find_tensor(m, "wte");
    CHECK(iw == 0 && ti[iw].shape[0] == Vp && ti[iw].shape[1] == C, "wte is not the first tensor of shape (Vp, C)");
    CHECK(hpt_gpt2_padded_vocab(65) == 72 && hpt_gpt2_padded_vocab(50257) == 50304 && hpt_gpt2_padded_vocab(8) == 8,
          "padded vocab: 65 -> %d, 50257 -> %d, 8 -> %d", hpt_gpt2_padded_vocab(65),
          hpt_gpt2_padded_vocab(50257), hpt_gpt2_padded_vocab(8));

    /* padded wte rows: 0 at init, 0 gradient, 0 after AdamW with weight decay */
    float *p = hpt_model_params(m, NULL), *g = hpt_model_grads(m, NULL);
    const float *pad = p + ti[iw].offset + (size_t)V * C, *gpad = g + ti[iw].offset + (size_t)V * C;
    size_t npad = (size_t)(Vp - V) * C;
    int pz = 1;
    for (size_t k = 0; k < npad; k++) pz &= pad[k] == 0.0f;
    CHECK(pz, "padded wte rows are not 0 after init");
    float *mom = calloc(2 * n, sizeof(float));
    hpt_adamw opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    float first = 0, last = 0, norm = 0;
    int gz = 1;
    for (int step = 1; step <= 25; step++) {
        float loss = grad_of(m, B, T);  /* the same batch: the loss must fall */
        if (step == 1) first = loss;
        last = loss;
        for (size_t k = 0; k < npad; k++) gz &= gpad[k] == 0.0f;
        CHECK(hpt_optim_step(m, mom, mom + n, &opt, step, &norm) == HPT_OK, "optim step %d: %s", step, hpt_errmsg());
    }
    pz = 1;
    for (size_t k = 0; k < npad; k++) pz &= pad[k] == 0.0f;
    CHECK(gz, "padded wte rows got a non-zero gradient");
    CHECK(pz, "padded wte rows are not 0 after 25 AdamW steps");
    printf("  25 AdamW steps on one batch: loss %.4f -> %.4f, padded wte rows still 0\n", first, last);
    CHECK(last < first - 0.5f, "loss did not fall on a repeated batch: %.4f -> %.4f", first, last);
    free(mom);
    hpt_model_free(m);
}

/* ---------------------------------------------------------------- scaling */

/* backward's loss_scale multiplies the gradient, and two backward passes
 * (each after its forward) accumulate. Tolerance: float rounding only. */
static void test_scale_and_accumulate(void) {
    hpt_model *m = make_model(B, T, 21);
    scramble(m);
    size_t n;
    float *g = hpt_model_grads(m, &n);
    grad_of(m, B, T);
    float *g1 = malloc(n * sizeof(float));
    memcpy(g1, g, n * sizeof(float));
    hpt_model_zero_grad(m);
    loss_of(m, B, T);
    hpt_model_backward(m, 0.25f);
    double e_scale = 0, e_acc = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e_scale = fmax(e_scale, fabs(g[i] - 0.25 * g1[i]));
        s = fmax(s, fabs(g1[i]));
    }
    loss_of(m, B, T);
    hpt_model_backward(m, 0.75f);
    for (size_t i = 0; i < n; i++) e_acc = fmax(e_acc, fabs(g[i] - g1[i]));
    printf("  loss_scale 0.25: max err %.3g; 0.25 + 0.75 accumulated: max err %.3g (max |g| %.3g)\n", e_scale, e_acc, s);
    CHECK(e_scale <= 1e-6 * s, "backward(0.25) is not 0.25 x backward(1): %.3g", e_scale);
    CHECK(e_acc <= 1e-6 * s, "backward(0.25) + backward(0.75) is not backward(1): %.3g", e_acc);
    free(g1);
    hpt_model_free(m);
}

/* hpt_model_backward_fresh = zero_grad + backward, bit for bit, over a
 * gradient arena full of garbage (NaN), at the reserved shape and at a
 * shorter T (position rows past it must come out 0). */
static void test_backward_fresh(void) {
    hpt_model *m = make_model(B, T, 22);
    scramble(m);
    size_t n;
    float *g = hpt_model_grads(m, &n), *want = malloc(n * sizeof(float));
    const int shapes[2][2] = {{B, T}, {1, T - 2}};
    for (int k = 0; k < 2; k++) {
        const int b = shapes[k][0], t = shapes[k][1];
        grad_of(m, b, t);
        memcpy(want, g, n * sizeof(float));
        for (size_t i = 0; i < n; i++) g[i] = NAN;
        loss_of(m, b, t);
        CHECK(hpt_model_backward_fresh(m, 1.0f) == HPT_OK, "backward_fresh: %s", hpt_errmsg());
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&g[i], &want[i], sizeof(float)) != 0;
        printf("  %dx%d: %zu of %zu gradient floats differ from zero_grad + backward\n", b, t, diff, n);
        CHECK(diff == 0, "backward_fresh %dx%d: %zu gradient floats differ from zero_grad + backward", b, t, diff);
    }
    free(want);
    hpt_model_free(m);
}

/* hpt_model_conf_params (what the loaders check stored arenas against before
 * allocating) must agree with every family's tensor table. */
static void conf_count_matches(hpt_model *m, const char *what) {
    size_t n = 0;
    CHECK(m && hpt_model_conf_params(m->conf, m->nconf, &n) == HPT_OK && n == m->nparams,
          "%s: conf says %zu parameters, the table has %zu", what, n, m ? m->nparams : 0);
    /* and hpt_model_conf_bytes (the memory check) with its activation table */
    size_t pb = 0, ab = 0;
    CHECK(m && hpt_model_conf_bytes(m->conf, m->nconf, m->max_B, m->max_T, NULL, &pb, &ab) &&
          pb == m->nparams * sizeof(float) && ab == m->act_bytes,
          "%s: conf_bytes says %zu activation bytes, init allocated %zu", what, ab, m ? m->act_bytes : 0);
    hpt_model_free(m);
}

static void test_conf_params(void) {
    static const int gp[][5] = {{65, 64, 4, 4, 128}, {2, 1, 1, 1, 1}, {50257, 16, 2, 2, 8}, {300, 33, 3, 3, 24}};
    for (size_t i = 0; i < sizeof gp / sizeof gp[0]; i++) {
        hpt_gpt2_config c = {.vocab_size = gp[i][0], .block_size = gp[i][1], .n_layer = gp[i][2],
                             .n_head = gp[i][3], .n_embd = gp[i][4]};
        hpt_model *m = NULL;
        hpt_gpt2_init(&m, &c, 1, 1, 1, NULL);
        conf_count_matches(m, "gpt2");
    }
    for (int nh = 0; nh <= HPT_MLP_MAX_HIDDEN; nh++) {
        hpt_mlp_config c = {.n_in = 13, .n_hidden = nh, .n_classes = 7};
        for (int l = 0; l < nh; l++) c.hidden[l] = 5 + 3 * l;
        hpt_model *m = NULL;
        hpt_mlp_init(&m, &c, 2, 1);
        conf_count_matches(m, "mlp");
    }
    static const int cp[][7] = {{1, 28, 28, 32, 64, 128, 10}, {3, 9, 7, 2, 3, 5, 4}, {2, 4, 4, 1, 1, 1, 2}};
    for (size_t i = 0; i < sizeof cp / sizeof cp[0]; i++) {
        hpt_cnn_config c = {.in_c = cp[i][0], .in_h = cp[i][1], .in_w = cp[i][2], .c1 = cp[i][3],
                            .c2 = cp[i][4], .hidden = cp[i][5], .n_classes = cp[i][6]};
        hpt_model *m = NULL;
        hpt_cnn_init(&m, &c, 2, 1);
        conf_count_matches(m, "cnn");
    }
    uint32_t bad[8] = {99}, huge[6] = {HPT_FAMILY_GPT2, 65, 8192, 256, 1, 1u << 24};
    size_t n;
    CHECK(hpt_model_conf_params(bad, 8, &n) == HPT_ERR_FORMAT, "unknown family accepted");
    CHECK(hpt_model_conf_params(huge, 6, &n) == HPT_ERR_FORMAT, "a 2^24-wide, 256-layer GPT-2 accepted");
}

int main(void) {
    hpt_set_threads(1);
    hpt_rng_seed(&g_rng, 4242);
    random_batch();

    printf("(a) directional derivatives\n");
    hpt_model *m = make_model(B, T, 3);
    test_directional(m, "init");
    scramble(m);
    test_directional(m, "scrambled");
    printf("(b) per-tensor spot checks\n");
    test_spots(m, "scrambled");
    hpt_model_free(m);
    printf("    loss scale and accumulation\n");
    test_scale_and_accumulate();
    printf("    backward_fresh = zero_grad + backward\n");
    test_backward_fresh();
    printf("(c) smaller batch than reserved\n");
    test_small_batch();
    printf("(d) argument errors\n");
    test_errors();
    printf("(e) loss and statistics at init\n");
    test_init_loss();
    printf("(f) tensor table and padded vocabulary rows\n");
    test_table_and_padding();
    printf("(g) parameter count from the stored config\n");
    test_conf_params();
    return TEST_REPORT("test_model");
}
