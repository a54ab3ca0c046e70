/*
 * test_gpt2_ref.c — hpt's GPT-2 and optimizer step against PyTorch.
 *
 * tests/fixtures/gpt2_ref.bin is written by tools/ref/gpt2_ref.py (layout in
 * its header comment): a tiny GPT-2 (V 13 -> Vp 16, maxT 8, L 2, NH 2, C 16,
 * batch 3x8) with non-trivial LayerNorm gains and biases, its logits, loss and
 * gradients at the initial parameters, and 10 AdamW steps (clip 1.0, cosine
 * schedule, decay on matrices only) on the same batch. This test needs no
 * torch: it loads the fixture parameters into hpt's arena and compares
 *   - logits (first V of each Vp row) and the loss,
 *   - every gradient tensor, by name (max abs error per tensor printed),
 *   - the 10 training losses and grad norms, and the final parameters,
 * then checks that 1 and 2 threads give bit-identical logits, gradients and
 * final parameters.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|); both sides are float32
 * with different summation orders (cblas vs torch's GEMMs, hpt's grad norm
 * accumulated in double, hpt's vectorised exp/tanh). Observed worst errors
 * when this test was written, and the share of the tolerance they use:
 *   logits              atol 1e-5, rtol 1e-5   max 1.9e-6  (13%)
 *   loss                atol 1e-6, rtol 1e-6   2.4e-7      (5%)
 *   gradients           atol 1e-6, rtol 1e-4   max 1.8e-7  (<= 10% per tensor;
 *                       a 1e-3 relative error fails wherever |grad| > 1.2e-3;
 *                       |grad| reaches ~0.4)
 *   10-step losses      atol 2e-6, rtol 1e-6   max 2.4e-7  (8%)
 *   10-step grad norms  atol 1e-5, rtol 1e-5   max 5.7e-6  (19%)
 *   final parameters    atol 1e-5, rtol 1e-4   max 3.8e-7  (2%), the k slice
 *                       of qkvb excepted (see run_reference)
 * Checked to fail: one attprojw gradient element off by 0.1%, and a missing
 * ln1w gradient during training.
 */
#include "test.h"
#include "ref_fixture.h"
#include "hpt.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/gpt2_ref.bin"
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
    int V, Vp, maxT, L, NH, C, B, T;
    int nsteps, warmup, max_iters;
    float lr, min_lr, beta1, beta2, eps, wd, clip;
    int ntensors;
    ref_tensor t[HPT_MAX_TENSORS];
    size_t nparams;
    int *tokens, *targets;
    float *params, *logits, loss, *grads, losses[NSTEPS_MAX], norms[NSTEPS_MAX], *final;
} ref;


/* Reads the fixture (little-endian host assumed, as everywhere in hpt). */
static int ref_load(ref *r, const char *path) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s (run from the repo root)\n", path); return 0; }
    char magic[8];
    int32_t version, cfg[8], sched[3], nt;
    float o[7];
    int ok = rd(f, magic, 1, 8) && !memcmp(magic, "HPTGPT2R", 8) && rd(f, &version, 4, 1) && version == 1 &&
             rd(f, cfg, 4, 8) && rd(f, sched, 4, 3) && rd(f, o, 4, 7) && rd(f, &nt, 4, 1) &&
             nt > 0 && nt <= HPT_MAX_TENSORS && sched[0] > 0 && sched[0] <= NSTEPS_MAX;
    if (!ok) { fprintf(stderr, "%s: bad header\n", path); fclose(f); return 0; }
    r->V = cfg[0]; r->Vp = cfg[1]; r->maxT = cfg[2]; r->L = cfg[3];
    r->NH = cfg[4]; r->C = cfg[5]; r->B = cfg[6]; r->T = cfg[7];
    r->nsteps = sched[0]; r->warmup = sched[1]; r->max_iters = sched[2];
    r->lr = o[0]; r->min_lr = o[1]; r->beta1 = o[2]; r->beta2 = o[3];
    r->eps = o[4]; r->wd = o[5]; r->clip = o[6];
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
    size_t BT = (size_t)r->B * r->T, P = r->nparams;
    r->tokens = malloc(BT * sizeof(int));
    r->targets = malloc(BT * sizeof(int));
    r->params = malloc(P * sizeof(float));
    r->logits = malloc(BT * r->V * sizeof(float));
    r->grads = malloc(P * sizeof(float));
    r->final = malloc(P * sizeof(float));
    ok = r->tokens && r->targets && r->params && r->logits && r->grads && r->final &&
         rd(f, r->tokens, 4, BT) && rd(f, r->targets, 4, BT) && rd(f, r->params, 4, P) &&
         rd(f, r->logits, 4, BT * r->V) && rd(f, &r->loss, 4, 1) && rd(f, r->grads, 4, P) &&
         rd(f, r->losses, 4, r->nsteps) && rd(f, r->norms, 4, r->nsteps) && rd(f, r->final, 4, P);
    char extra;
    if (ok && fread(&extra, 1, 1, f) != 0) ok = 0;  /* trailing bytes: layout drift */
    fclose(f);
    if (!ok) fprintf(stderr, "%s: truncated or oversized fixture\n", path);
    return ok;
}

static void ref_free(ref *r) {
    free(r->tokens); free(r->targets); free(r->params);
    free(r->logits); free(r->grads); free(r->final);
}

typedef struct run_out {
    float *logits;   /* (B*T*V) */
    float *grads;    /* (P) */
    float *final;    /* (P) */
    float loss, losses[NSTEPS_MAX], norms[NSTEPS_MAX];
} run_out;

/* One full comparison at a given thread count; fills out for the
 * cross-thread determinism check. verbose: print the per-tensor table. */
static void run_reference(const ref *r, int threads, run_out *out, int verbose) {
    hpt_set_threads(threads);
    printf("-- threads %d\n", threads);
    const size_t BT = (size_t)r->B * r->T, P = r->nparams;
    hpt_gpt2_config mc = {.vocab_size = r->V, .block_size = r->maxT, .n_layer = r->L,
                          .n_head = r->NH, .n_embd = r->C};
    CHECK(hpt_gpt2_padded_vocab(r->V) == r->Vp, "padded vocab %d, fixture %d",
          hpt_gpt2_padded_vocab(r->V), r->Vp);
    hpt_model *m = NULL;
    hpt_status st = hpt_gpt2_init(&m, &mc, r->B, r->T, 1);
    CHECK(st == HPT_OK, "hpt_gpt2_init: %s", hpt_errmsg());
    if (st != HPT_OK) return;
    size_t np;
    float *params = hpt_model_params(m, &np);
    float *grads = hpt_model_grads(m, NULL);
    CHECK(np == P, "model has %zu params, fixture %zu", np, P);
    if (np != P || !table_matches(m, r->t, r->ntensors)) {
        fprintf(stderr, "tensor table differs from the fixture: regenerate it with "
                        "/usr/bin/python3 tools/ref/gpt2_ref.py or fix gpt2.c\n");
        hpt_model_free(m);
        return;
    }
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    memcpy(params, r->params, P * sizeof(float));

    /* 1. logits: forward without targets */
    hpt_batch nob = {.B = r->B, .T = r->T, .tokens = r->tokens, .targets = NULL};
    CHECK(hpt_model_forward(m, &nob, NULL) == HPT_OK, "forward: %s", hpt_errmsg());
    int n_out = 0, row = 0;
    const float *lg = hpt_model_logits(m, &n_out, &row);
    CHECK(lg && n_out == r->V && row == r->Vp, "logits %p n_out %d row %d", (const void *)lg, n_out, row);
    if (lg && n_out == r->V && row == r->Vp) {
        for (size_t i = 0; i < BT; i++)
            memcpy(out->logits + i * r->V, lg + i * row, r->V * sizeof(float));
        g_tol_used = 0.0;
        double e = compare("logits", out->logits, r->logits, BT * r->V, LOGIT_ATOL, LOGIT_RTOL);
        printf("  logits          max abs err %.3g (%.0f%% of tolerance)\n", e, 100 * g_tol_used);
    }

    /* 2. loss: forward with targets */
    hpt_batch b = {.B = r->B, .T = r->T, .tokens = r->tokens, .targets = r->targets};
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
    hpt_train_config cfg;
    hpt_train_config_default(&cfg);
    cfg.lr = r->lr; cfg.min_lr = r->min_lr; cfg.warmup_iters = r->warmup; cfg.max_iters = r->max_iters;
    cfg.beta1 = r->beta1; cfg.beta2 = r->beta2; cfg.eps = r->eps;
    cfg.weight_decay = r->wd; cfg.grad_clip = r->clip;
    double maxl = 0.0, maxn = 0.0, usel = 0.0, usen = 0.0;
    for (int it = 0; it < r->nsteps; it++) {
        hpt_model_zero_grad(m);
        float l = NAN, norm = NAN;
        CHECK(hpt_model_forward(m, &b, &l) == HPT_OK, "step %d forward: %s", it, hpt_errmsg());
        CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "step %d backward: %s", it, hpt_errmsg());
        hpt_adamw opt = {.lr = hpt_lr_at(&cfg, it), .beta1 = cfg.beta1, .beta2 = cfg.beta2,
                         .eps = cfg.eps, .weight_decay = cfg.weight_decay, .grad_clip = cfg.grad_clip};
        CHECK(hpt_optim_step(m, mom, mom + P, &opt, it + 1, &norm) == HPT_OK, "step %d: %s", it, hpt_errmsg());
        char what[64];
        snprintf(what, sizeof what, "step %d loss", it);
        CHECK_NEAR(l, r->losses[it], STEP_ATOL, STEP_RTOL, what);
        snprintf(what, sizeof what, "step %d grad norm", it);
        CHECK_NEAR(norm, r->norms[it], NORM_ATOL, NORM_RTOL, what);
        usel = fmax(usel, fabs(l - r->losses[it]) / (STEP_ATOL + STEP_RTOL * fabs(r->losses[it])));
        usen = fmax(usen, fabs(norm - r->norms[it]) / (NORM_ATOL + NORM_RTOL * fabs(r->norms[it])));
        if (fabs(l - r->losses[it]) > maxl) maxl = fabs(l - r->losses[it]);
        if (fabs(norm - r->norms[it]) > maxn) maxn = fabs(norm - r->norms[it]);
        out->losses[it] = l;
        out->norms[it] = norm;
        if (verbose)
            printf("  step %2d lr %.6f loss %.7f (torch %.7f) norm %.6f (torch %.6f)\n", it,
                   opt.lr, l, r->losses[it], norm, r->norms[it]);
    }
    printf("  %d steps: losses max abs err %.3g (%.0f%% of tolerance), grad norms max abs err %.3g "
           "(%.0f%%)\n", r->nsteps, maxl, 100 * usel, maxn, 100 * usen);
    /* The k slice of qkvb is left out: its gradient is exactly 0 in exact
     * arithmetic (q.b_k adds the same constant to a whole row of scores, which
     * the softmax ignores), so both sides see ~1e-8 of rounding noise that
     * Adam's m/sqrt(v) turns into lr-sized steps in random directions. It does
     * not affect the loss, which is compared above; its initial gradient is
     * checked to be ~0 by GRAD_ATOL. */
    double emax = 0.0, ekb = 0.0;
    g_tol_used = 0.0;
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "final %s", ti[i].name);
        const float *got = params + ti[i].offset, *want = r->final + ti[i].offset;
        double e;
        if (!strcmp(ti[i].name, "qkvb")) {
            e = 0.0;
            for (int l = 0; l < r->L; l++) {
                const size_t q = (size_t)l * 3 * r->C, k = q + r->C, v = q + 2 * r->C;
                double eq = compare(what, got + q, want + q, r->C, FINAL_ATOL, FINAL_RTOL);
                double ev = compare(what, got + v, want + v, r->C, FINAL_ATOL, FINAL_RTOL);
                e = fmax(e, fmax(eq, ev));
                for (int c = 0; c < r->C; c++) ekb = fmax(ekb, fabs((double)got[k + c] - want[k + c]));
            }
        } else {
            e = compare(what, got, want, ti[i].numel, FINAL_ATOL, FINAL_RTOL);
        }
        if (e > emax) emax = e;
    }
    printf("  final params    max abs err %.3g (%.0f%% of tolerance; k bias, not compared: %.3g)\n",
           emax, 100 * g_tol_used, ekb);
    memcpy(out->final, params, P * sizeof(float));
    free(mom);
    hpt_model_free(m);
}

static int run_alloc(run_out *o, const ref *r) {
    memset(o, 0, sizeof *o);
    o->logits = calloc((size_t)r->B * r->T * r->V, sizeof(float));
    o->grads = calloc(r->nparams, sizeof(float));
    o->final = calloc(r->nparams, sizeof(float));
    return o->logits && o->grads && o->final;
}

static void run_free(run_out *o) { free(o->logits); free(o->grads); free(o->final); }

int main(void) {
    ref r;
    int ok = ref_load(&r, FIXTURE);
    CHECK(ok, "cannot load %s", FIXTURE);
    if (!ok) { ref_free(&r); return TEST_REPORT("test_gpt2_ref"); }
    printf("fixture: V %d (Vp %d) maxT %d L %d NH %d C %d, batch %dx%d, %zu params, %d steps\n",
           r.V, r.Vp, r.maxT, r.L, r.NH, r.C, r.B, r.T, r.nparams, r.nsteps);

    run_out o1, o2;
    CHECK(run_alloc(&o1, &r) && run_alloc(&o2, &r), "out of memory");
    run_reference(&r, 1, &o1, 1);
    run_reference(&r, 2, &o2, 0);

    /* determinism across thread counts: bit-identical results */
    size_t BTV = (size_t)r.B * r.T * r.V;
    CHECK(!memcmp(o1.logits, o2.logits, BTV * sizeof(float)), "logits differ between 1 and 2 threads");
    CHECK(!memcmp(&o1.loss, &o2.loss, sizeof(float)), "loss differs between 1 and 2 threads");
    hpt_gpt2_config mc = {.vocab_size = r.V, .block_size = r.maxT, .n_layer = r.L,
                          .n_head = r.NH, .n_embd = r.C};
    hpt_model *m = NULL;
    if (hpt_gpt2_init(&m, &mc, r.B, r.T, 1) == HPT_OK) {
        int nt;
        const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
        for (int i = 0; i < nt; i++)
            CHECK(!memcmp(o1.grads + ti[i].offset, o2.grads + ti[i].offset, ti[i].numel * sizeof(float)),
                  "grad %s differs between 1 and 2 threads", ti[i].name);
        hpt_model_free(m);
    }
    CHECK(!memcmp(o1.losses, o2.losses, r.nsteps * sizeof(float)) &&
          !memcmp(o1.norms, o2.norms, r.nsteps * sizeof(float)),
          "training losses/norms differ between 1 and 2 threads");
    CHECK(!memcmp(o1.final, o2.final, r.nparams * sizeof(float)),
          "final parameters differ between 1 and 2 threads");

    run_free(&o1);
    run_free(&o2);
    ref_free(&r);
    return TEST_REPORT("test_gpt2_ref");
}
