/* tier: fast (make test; tests/run.sh) */
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

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/gpt2_ref.bin"

typedef struct ref {
    ref_data d;             /* what both reference fixtures hold */
    int V, Vp, maxT, L, NH, C, B, T;
    int warmup, max_iters;
    float lr, min_lr, beta1, beta2, eps, wd, clip;
} ref;

/* Reads the fixture (little-endian host assumed, as everywhere in hpt) and
 * describes it. */
static int ref_load(void *fixture, const char *path) {
    ref *r = fixture;
    memset(r, 0, sizeof *r);
    FILE *f = ref_open(path, "HPTGPT2R");
    if (!f) return 0;
    int32_t cfg[8], sched[3], nt;
    float o[7];
    int ok = rd(f, cfg, 4, 8) && rd(f, sched, 4, 3) && rd(f, o, 4, 7) && rd(f, &nt, 4, 1) &&
             nt > 0 && nt <= HPT_MAX_TENSORS && sched[0] > 0 && sched[0] <= NSTEPS_MAX;
    if (!ok) { fprintf(stderr, "%s: bad header\n", path); fclose(f); return 0; }
    r->V = cfg[0]; r->Vp = cfg[1]; r->maxT = cfg[2]; r->L = cfg[3];
    r->NH = cfg[4]; r->C = cfg[5]; r->B = cfg[6]; r->T = cfg[7];
    r->d.nsteps = sched[0]; r->warmup = sched[1]; r->max_iters = sched[2];
    r->lr = o[0]; r->min_lr = o[1]; r->beta1 = o[2]; r->beta2 = o[3];
    r->eps = o[4]; r->wd = o[5]; r->clip = o[6];
    if (!ref_read_table(f, &r->d, nt)) { fclose(f); return 0; }
    r->d.ninputs = r->d.ntargets = (size_t)r->B * r->T;
    r->d.nlogits = r->d.ntargets * r->V;
    if (!ref_read_body(f, &r->d, path)) return 0;
    printf("fixture: V %d (Vp %d) maxT %d L %d NH %d C %d, batch %dx%d, %zu params, %d steps\n",
           r->V, r->Vp, r->maxT, r->L, r->NH, r->C, r->B, r->T, r->d.nparams, r->d.nsteps);
    return 1;
}

/* The final parameters. The k slice of qkvb is left out: its gradient is
 * exactly 0 in exact arithmetic (q.b_k adds the same constant to a whole row
 * of scores, which the softmax ignores), so both sides see ~1e-8 of rounding
 * noise that Adam's m/sqrt(v) turns into lr-sized steps in random directions.
 * It does not affect the loss, which check_training compares; its initial
 * gradient is checked to be ~0 by GRAD_ATOL. */
static void check_final(hpt_model *m, const ref *r) {
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    const float *params = hpt_model_params(m, NULL);
    double emax = 0.0, ekb = 0.0;
    g_tol_used = 0.0;
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "final %s", ti[i].name);
        const float *got = params + ti[i].offset, *want = r->d.final + ti[i].offset;
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
}

/* One full comparison at the thread count set by run_at_1_and_2_threads. */
static void run_reference(const void *fixture, run_out *out, int verbose) {
    const ref *r = fixture;
    hpt_gpt2_config mc = {.vocab_size = r->V, .block_size = r->maxT, .n_layer = r->L,
                          .n_head = r->NH, .n_embd = r->C};
    CHECK(hpt_gpt2_padded_vocab(r->V) == r->Vp, "padded vocab %d, fixture %d",
          hpt_gpt2_padded_vocab(r->V), r->Vp);
    hpt_model *m = NULL;
    hpt_status st = hpt_gpt2_init(&m, &mc, r->B, r->T, 1, NULL);
    CHECK(st == HPT_OK, "hpt_gpt2_init: %s", hpt_errmsg());
    if (st != HPT_OK) return;
    if (!ref_load_params(m, &r->d, "tools/ref/gpt2_ref.py")) { hpt_model_free(m); return; }

    /* 1. logits: forward without targets; the first V of each Vp row */
    hpt_batch nob = {.B = r->B, .T = r->T, .tokens = r->d.inputs, .targets = NULL};
    const float *lg = ref_logits(m, &nob, r->V, r->Vp);
    if (lg) {
        float *got = malloc(r->d.nlogits * sizeof(float));
        CHECK(got != NULL, "out of memory");
        for (size_t i = 0; got && i < (size_t)r->B * r->T; i++)
            memcpy(got + i * r->V, lg + i * r->Vp, r->V * sizeof(float));
        if (got) check_logits(got, &r->d, out);
        free(got);
    }

    /* 2.-4. loss, gradients, training with nanoGPT's schedule */
    hpt_batch b = {.B = r->B, .T = r->T, .tokens = r->d.inputs, .targets = r->d.targets};
    check_loss(m, &b, &r->d, out);
    check_grads(m, &r->d, out, verbose);
    hpt_train_config cfg;
    hpt_train_config_default(&cfg);
    cfg.lr = r->lr; cfg.min_lr = r->min_lr; cfg.warmup_iters = r->warmup; cfg.max_iters = r->max_iters;
    cfg.schedule = "cosine";  /* the reference script copies nanoGPT's cosine (hpt's default is D2Z) */
    float lr[NSTEPS_MAX];
    for (int it = 0; it < r->d.nsteps; it++) lr[it] = hpt_lr_at(&cfg, it);
    hpt_adamw opt = {.beta1 = r->beta1, .beta2 = r->beta2, .eps = r->eps,
                     .weight_decay = r->wd, .grad_clip = r->clip};
    check_training(m, &b, &opt, lr, &r->d, out, verbose);
    check_final(m, r);
    hpt_model_free(m);
}

int main(void) {
    ref r;
    return ref_test_main("test_gpt2_ref", FIXTURE, ref_load, run_reference, &r, &r.d);
}
