/*
 * test_cnn_ref.c — hpt's CNN classifier and optimizer step against PyTorch.
 *
 * tests/fixtures/cnn_ref.bin is written by tools/ref/cnn_ref.py (layout in
 * its header comment): a small CNN (1x12x12 input, c1 3, c2 4, hidden 8, 10
 * classes, batch 4) with non-zero biases, its logits, loss and gradients at
 * the initial parameters, and 5 AdamW steps (constant lr 1e-2, betas
 * 0.9/0.99, eps 1e-8, weight decay 0.1 on weights only, clip 1.0) on the same
 * batch. This test needs no torch: it loads the fixture parameters into hpt's
 * arena and compares
 *   - logits and the loss,
 *   - every gradient tensor, by name (max abs error per tensor printed),
 *   - the 5 training losses and grad norms, and the final parameters,
 * then checks that 1 and 2 threads give bit-identical results.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|); both sides are float32
 * with different summation orders (im2col + cblas vs torch's convolution,
 * hpt's grad norm accumulated in double, hpt's vectorised exp). Observed worst
 * errors when this test was written, and the share of the tolerance used:
 *   logits              atol 1e-5, rtol 1e-5   max 9.5e-7  (3%)
 *   loss                atol 1e-6, rtol 1e-6   0           (0%)
 *   gradients           atol 1e-6, rtol 1e-4   max 3.6e-7  (<= 4% per tensor;
 *                       a 1e-3 relative error fails wherever |grad| > 1.1e-3;
 *                       |grad| reaches ~2)
 *   5-step losses       atol 2e-6, rtol 1e-6   max 3.6e-7  (11%)
 *   5-step grad norms   atol 1e-5, rtol 1e-5   max 1.9e-6  (4%)
 *   final parameters    atol 1e-5, rtol 1e-4   max 2.5e-7  (2%)
 * Checked to fail: one conv2w gradient element off by 0.1% (caught by the
 * gradient comparison; its effect on 5 steps stays inside the training
 * tolerances), and conv1's bias gradient dropped (caught by the gradients,
 * the step losses and the grad norms).
 */
#include "test.h"
#include "ref_fixture.h"
#include "hpt.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/cnn_ref.bin"
#define NSTEPS_MAX 64

#define LOGIT_ATOL 1e-5
#define LOGIT_RTOL 1e-5
#define LOSS_ATOL  1e-6
#define LOSS_RTOL  1e-6
#define GRAD_ATOL  1e-6
#define GRAD_RTOL  1e-4
#define STEP_ATOL  2e-6
#define STEP_RTOL  1e-6
#define NORM_ATOL  1e-5
#define NORM_RTOL  1e-5
#define FINAL_ATOL 1e-5
#define FINAL_RTOL 1e-4


typedef struct ref {
    hpt_cnn_config cfg;
    int B, nin, nsteps;
    float lr, beta1, beta2, eps, wd, clip;
    int ntensors;
    ref_tensor t[HPT_MAX_TENSORS];
    size_t nparams;
    float *x;
    int *targets;
    float *params, *logits, loss, *grads, losses[NSTEPS_MAX], norms[NSTEPS_MAX], *final;
} ref;


/* Reads the fixture (little-endian host assumed, as everywhere in hpt). */
static int ref_load(ref *r, const char *path) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s (run from the repo root)\n", path); return 0; }
    char magic[8];
    int32_t version, cfg[8], nsteps, nt;
    float o[6];
    int ok = rd(f, magic, 1, 8) && !memcmp(magic, "HPTCNNRF", 8) && rd(f, &version, 4, 1) && version == 1 &&
             rd(f, cfg, 4, 8) && rd(f, &nsteps, 4, 1) && rd(f, o, 4, 6) && rd(f, &nt, 4, 1) &&
             nt > 0 && nt <= HPT_MAX_TENSORS && nsteps > 0 && nsteps <= NSTEPS_MAX;
    for (int i = 0; ok && i < 8; i++) ok = cfg[i] > 0 && cfg[i] <= 4096;
    if (!ok) { fprintf(stderr, "%s: bad header\n", path); fclose(f); return 0; }
    r->cfg = (hpt_cnn_config){.in_c = cfg[0], .in_h = cfg[1], .in_w = cfg[2], .c1 = cfg[3], .c2 = cfg[4],
                              .hidden = cfg[5], .n_classes = cfg[6]};
    r->B = cfg[7];
    r->nin = cfg[0] * cfg[1] * cfg[2];
    r->nsteps = nsteps;
    r->lr = o[0]; r->beta1 = o[1]; r->beta2 = o[2]; r->eps = o[3]; r->wd = o[4]; r->clip = o[5];
    r->ntensors = nt;
    for (int i = 0; i < nt; i++) {
        ref_tensor *t = &r->t[i];
        int32_t d[5];
        if (!rd(f, t->name, 1, 16) || !rd(f, d, 4, 5) || d[0] < 1 || d[0] > 4) { fclose(f); return 0; }
        t->name[16] = 0;
        t->ndim = d[0];
        t->numel = 1;
        for (int k = 0; k < 4; k++) t->shape[k] = d[1 + k];
        for (int k = 0; k < t->ndim; k++) t->numel *= (size_t)t->shape[k];
        r->nparams += t->numel;
    }
    const size_t B = (size_t)r->B, P = r->nparams, K = (size_t)r->cfg.n_classes;
    r->x = malloc(B * r->nin * sizeof(float));
    r->targets = malloc(B * sizeof(int));
    r->params = malloc(P * sizeof(float));
    r->logits = malloc(B * K * sizeof(float));
    r->grads = malloc(P * sizeof(float));
    r->final = malloc(P * sizeof(float));
    ok = r->x && r->targets && r->params && r->logits && r->grads && r->final &&
         rd(f, r->x, 4, B * r->nin) && rd(f, r->targets, 4, B) && rd(f, r->params, 4, P) &&
         rd(f, r->logits, 4, B * K) && rd(f, &r->loss, 4, 1) && rd(f, r->grads, 4, P) &&
         rd(f, r->losses, 4, r->nsteps) && rd(f, r->norms, 4, r->nsteps) && rd(f, r->final, 4, P);
    char extra;
    if (ok && fread(&extra, 1, 1, f) != 0) ok = 0;  /* trailing bytes: layout drift */
    fclose(f);
    if (!ok) fprintf(stderr, "%s: truncated or oversized fixture\n", path);
    return ok;
}

static void ref_free(ref *r) {
    free(r->x); free(r->targets); free(r->params);
    free(r->logits); free(r->grads); free(r->final);
}

typedef struct run_out {
    float *logits, *grads, *final;
    float loss, losses[NSTEPS_MAX], norms[NSTEPS_MAX];
} run_out;

/* One full comparison at a given thread count; fills out for the
 * cross-thread determinism check. */
static void run_reference(const ref *r, int threads, run_out *out, int verbose) {
    hpt_set_threads(threads);
    printf("-- threads %d\n", threads);
    const size_t P = r->nparams, BK = (size_t)r->B * r->cfg.n_classes;
    hpt_model *m = NULL;
    hpt_status st = hpt_cnn_init(&m, &r->cfg, r->B, 1);
    CHECK(st == HPT_OK, "hpt_cnn_init: %s", hpt_errmsg());
    if (st != HPT_OK) return;
    size_t np;
    float *params = hpt_model_params(m, &np);
    float *grads = hpt_model_grads(m, NULL);
    CHECK(np == P, "model has %zu params, fixture %zu", np, P);
    if (np != P || !table_matches(m, r->t, r->ntensors)) {
        fprintf(stderr, "tensor table differs from the fixture: regenerate it with "
                        "/usr/bin/python3 tools/ref/cnn_ref.py or fix cnn.c\n");
        hpt_model_free(m);
        return;
    }
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    memcpy(params, r->params, P * sizeof(float));

    /* 1. logits: forward without targets */
    hpt_batch nob = {.B = r->B, .T = 1, .x = r->x, .targets = NULL};
    CHECK(hpt_model_forward(m, &nob, NULL) == HPT_OK, "forward: %s", hpt_errmsg());
    int n_out = 0, row = 0;
    const float *lg = hpt_model_logits(m, &n_out, &row);
    CHECK(lg && n_out == r->cfg.n_classes && row == n_out, "logits %p n_out %d row %d", (const void *)lg, n_out, row);
    if (lg && n_out == r->cfg.n_classes && row == n_out) {
        memcpy(out->logits, lg, BK * sizeof(float));
        g_tol_used = 0.0;
        double e = compare("logits", out->logits, r->logits, BK, LOGIT_ATOL, LOGIT_RTOL);
        printf("  logits          max abs err %.3g (%.0f%% of tolerance)\n", e, 100 * g_tol_used);
    }

    /* 2. loss: forward with targets */
    hpt_batch b = {.B = r->B, .T = 1, .x = r->x, .targets = r->targets};
    float loss = NAN;
    CHECK(hpt_model_forward(m, &b, &loss) == HPT_OK, "forward: %s", hpt_errmsg());
    CHECK_NEAR(loss, r->loss, LOSS_ATOL, LOSS_RTOL, "loss");
    printf("  loss            %.7f (torch %.7f) abs err %.3g (%.0f%% of tolerance)\n", loss, r->loss,
           fabs(loss - r->loss), 100 * fabs(loss - r->loss) / (LOSS_ATOL + LOSS_RTOL * fabs(r->loss)));
    out->loss = loss;

    /* 3. gradients, tensor by tensor */
    hpt_model_zero_grad(m);
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "grad %s", ti[i].name);
        const float *g = grads + ti[i].offset, *w = r->grads + ti[i].offset;
        g_tol_used = 0.0;
        double e = compare(what, g, w, ti[i].numel, GRAD_ATOL, GRAD_RTOL);
        double mx = 0.0;
        for (size_t k = 0; k < ti[i].numel; k++) if (fabs(w[k]) > mx) mx = fabs(w[k]);
        if (verbose) printf("  grad %-10s max abs err %.3g (max |grad| %.3g, %.0f%% of tolerance)\n",
                            ti[i].name, e, mx, 100 * g_tol_used);
    }
    memcpy(out->grads, grads, P * sizeof(float));

    /* 4. training: reset, nsteps on the same batch with hpt's optimizer step */
    memcpy(params, r->params, P * sizeof(float));
    float *mom = calloc(2 * P, sizeof(float));
    CHECK(mom != NULL, "out of memory");
    if (!mom) { hpt_model_free(m); return; }
    hpt_adamw opt = {.lr = r->lr, .beta1 = r->beta1, .beta2 = r->beta2, .eps = r->eps,
                     .weight_decay = r->wd, .grad_clip = r->clip};
    double maxl = 0.0, maxn = 0.0, usel = 0.0, usen = 0.0;
    for (int it = 0; it < r->nsteps; it++) {
        hpt_model_zero_grad(m);
        float l = NAN, norm = NAN;
        CHECK(hpt_model_forward(m, &b, &l) == HPT_OK, "step %d forward: %s", it, hpt_errmsg());
        CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "step %d backward: %s", it, hpt_errmsg());
        CHECK(hpt_optim_step(m, mom, mom + P, &opt, it + 1, &norm) == HPT_OK, "step %d: %s", it, hpt_errmsg());
        char what[64];
        snprintf(what, sizeof what, "step %d loss", it);
        CHECK_NEAR(l, r->losses[it], STEP_ATOL, STEP_RTOL, what);
        snprintf(what, sizeof what, "step %d grad norm", it);
        CHECK_NEAR(norm, r->norms[it], NORM_ATOL, NORM_RTOL, what);
        usel = fmax(usel, fabs(l - r->losses[it]) / (STEP_ATOL + STEP_RTOL * fabs(r->losses[it])));
        usen = fmax(usen, fabs(norm - r->norms[it]) / (NORM_ATOL + NORM_RTOL * fabs(r->norms[it])));
        maxl = fmax(maxl, fabs(l - r->losses[it]));
        maxn = fmax(maxn, fabs(norm - r->norms[it]));
        out->losses[it] = l;
        out->norms[it] = norm;
        if (verbose)
            printf("  step %d loss %.7f (torch %.7f) norm %.6f (torch %.6f)\n", it, l, r->losses[it],
                   norm, r->norms[it]);
    }
    printf("  %d steps: losses max abs err %.3g (%.0f%% of tolerance), grad norms max abs err %.3g "
           "(%.0f%%)\n", r->nsteps, maxl, 100 * usel, maxn, 100 * usen);
    g_tol_used = 0.0;
    double emax = 0.0;
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "final %s", ti[i].name);
        emax = fmax(emax, compare(what, params + ti[i].offset, r->final + ti[i].offset, ti[i].numel,
                                  FINAL_ATOL, FINAL_RTOL));
    }
    printf("  final params    max abs err %.3g (%.0f%% of tolerance)\n", emax, 100 * g_tol_used);
    memcpy(out->final, params, P * sizeof(float));
    free(mom);
    hpt_model_free(m);
}

static int run_alloc(run_out *o, const ref *r) {
    memset(o, 0, sizeof *o);
    o->logits = calloc((size_t)r->B * r->cfg.n_classes, sizeof(float));
    o->grads = calloc(r->nparams, sizeof(float));
    o->final = calloc(r->nparams, sizeof(float));
    return o->logits && o->grads && o->final;
}

static void run_free(run_out *o) { free(o->logits); free(o->grads); free(o->final); }

int main(void) {
    ref r;
    int ok = ref_load(&r, FIXTURE);
    CHECK(ok, "cannot load %s", FIXTURE);
    if (!ok) { ref_free(&r); return TEST_REPORT("test_cnn_ref"); }
    printf("fixture: %dx%dx%d c%d c%d hidden %d, %d classes, batch %d, %zu params, %d steps\n",
           r.cfg.in_c, r.cfg.in_h, r.cfg.in_w, r.cfg.c1, r.cfg.c2, r.cfg.hidden, r.cfg.n_classes, r.B,
           r.nparams, r.nsteps);

    run_out o1, o2;
    CHECK(run_alloc(&o1, &r) && run_alloc(&o2, &r), "out of memory");
    run_reference(&r, 1, &o1, 1);
    run_reference(&r, 2, &o2, 0);

    /* determinism across thread counts: bit-identical results */
    CHECK(!memcmp(o1.logits, o2.logits, (size_t)r.B * r.cfg.n_classes * sizeof(float)),
          "logits differ between 1 and 2 threads");
    CHECK(!memcmp(&o1.loss, &o2.loss, sizeof(float)), "loss differs between 1 and 2 threads");
    CHECK(!memcmp(o1.grads, o2.grads, r.nparams * sizeof(float)), "gradients differ between 1 and 2 threads");
    CHECK(!memcmp(o1.losses, o2.losses, r.nsteps * sizeof(float)) &&
          !memcmp(o1.norms, o2.norms, r.nsteps * sizeof(float)),
          "training losses/norms differ between 1 and 2 threads");
    CHECK(!memcmp(o1.final, o2.final, r.nparams * sizeof(float)),
          "final parameters differ between 1 and 2 threads");

    run_free(&o1);
    run_free(&o2);
    ref_free(&r);
    return TEST_REPORT("test_cnn_ref");
}
