/* tier: fast (make test; tests/run.sh) */
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

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/cnn_ref.bin"

typedef struct ref {
    ref_data d;             /* what both reference fixtures hold */
    hpt_cnn_config cfg;
    int B, nin;
    float lr, beta1, beta2, eps, wd, clip;
} ref;

/* Reads the fixture (little-endian host assumed, as everywhere in hpt) and
 * describes it. */
static int ref_load(void *fixture, const char *path) {
    ref *r = fixture;
    memset(r, 0, sizeof *r);
    FILE *f = ref_open(path, "HPTCNNRF");
    if (!f) return 0;
    int32_t cfg[8], nsteps, nt;
    float o[6];
    int ok = rd(f, cfg, 4, 8) && rd(f, &nsteps, 4, 1) && rd(f, o, 4, 6) && rd(f, &nt, 4, 1) &&
             nt > 0 && nt <= HPT_MAX_TENSORS && nsteps > 0 && nsteps <= NSTEPS_MAX;
    for (int i = 0; ok && i < 8; i++) ok = cfg[i] > 0 && cfg[i] <= 4096;
    if (!ok) { fprintf(stderr, "%s: bad header\n", path); fclose(f); return 0; }
    r->cfg = (hpt_cnn_config){.in_c = cfg[0], .in_h = cfg[1], .in_w = cfg[2], .c1 = cfg[3], .c2 = cfg[4],
                              .hidden = cfg[5], .n_classes = cfg[6]};
    r->B = cfg[7];
    r->nin = cfg[0] * cfg[1] * cfg[2];
    r->d.nsteps = nsteps;
    r->lr = o[0]; r->beta1 = o[1]; r->beta2 = o[2]; r->eps = o[3]; r->wd = o[4]; r->clip = o[5];
    if (!ref_read_table(f, &r->d, nt)) { fclose(f); return 0; }
    r->d.ninputs = (size_t)r->B * r->nin;
    r->d.ntargets = (size_t)r->B;
    r->d.nlogits = (size_t)r->B * r->cfg.n_classes;
    if (!ref_read_body(f, &r->d, path)) return 0;
    printf("fixture: %dx%dx%d c%d c%d hidden %d, %d classes, batch %d, %zu params, %d steps\n",
           r->cfg.in_c, r->cfg.in_h, r->cfg.in_w, r->cfg.c1, r->cfg.c2, r->cfg.hidden, r->cfg.n_classes, r->B,
           r->d.nparams, r->d.nsteps);
    return 1;
}

/* The final parameters, every tensor. */
static void check_final(hpt_model *m, const ref *r) {
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    const float *params = hpt_model_params(m, NULL);
    g_tol_used = 0.0;
    double emax = 0.0;
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "final %s", ti[i].name);
        emax = fmax(emax, compare(what, params + ti[i].offset, r->d.final + ti[i].offset, ti[i].numel,
                                  FINAL_ATOL, FINAL_RTOL));
    }
    printf("  final params    max abs err %.3g (%.0f%% of tolerance)\n", emax, 100 * g_tol_used);
}

/* One full comparison at the thread count set by run_at_1_and_2_threads. */
static void run_reference(const void *fixture, run_out *out, int verbose) {
    const ref *r = fixture;
    hpt_model *m = NULL;
    hpt_status st = hpt_cnn_init(&m, &r->cfg, r->B, 1);
    CHECK(st == HPT_OK, "hpt_cnn_init: %s", hpt_errmsg());
    if (st != HPT_OK) return;
    if (!ref_load_params(m, &r->d, "tools/ref/cnn_ref.py")) { hpt_model_free(m); return; }

    /* 1. logits: forward without targets */
    hpt_batch nob = {.B = r->B, .T = 1, .x = r->d.inputs, .x_dim = hpt_model_input_dim(m), .targets = NULL};
    const float *lg = ref_logits(m, &nob, r->cfg.n_classes, r->cfg.n_classes);
    if (lg) check_logits(lg, &r->d, out);

    /* 2.-4. loss, gradients, training at a constant LR */
    hpt_batch b = {.B = r->B, .T = 1, .x = r->d.inputs, .x_dim = hpt_model_input_dim(m), .targets = r->d.targets};
    check_loss(m, &b, &r->d, out);
    check_grads(m, &r->d, out, verbose);
    float lr[NSTEPS_MAX];
    for (int it = 0; it < r->d.nsteps; it++) lr[it] = r->lr;
    hpt_adamw opt = {.beta1 = r->beta1, .beta2 = r->beta2, .eps = r->eps, .weight_decay = r->wd,
                     .grad_clip = r->clip};
    check_training(m, &b, &opt, lr, &r->d, out, verbose);
    check_final(m, r);
    hpt_model_free(m);
}

int main(void) {
    ref r;
    return ref_test_main("test_cnn_ref", FIXTURE, ref_load, run_reference, &r, &r.d);
}
