/*
 * test_hybrid.c — the hybrid layer's invariants at module level:
 *   - every predictor changes the parameters in place and runs no backward
 *     pass (counted on the model, not timed);
 *   - the snapshot restores parameters and AdamW moments byte for byte;
 *   - the linear and shrink predictors extrapolate an exactly linear
 *     trajectory exactly; shrink gates off a jittering tensor and, under
 *     noise, leaves parameters at rest where the per-parameter fit moves them;
 *   - hybrid config validation names the offending flag.
 */
#include "../src/hybrid/predict.h"
#include "../src/hybrid/snapshot.h"
#include "../src/train/optim.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static hpt_model *tiny_gpt(void) {
    hpt_gpt2_config c = {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
    hpt_model *m;
    if (hpt_gpt2_init(&m, &c, 2, 8, 7) != HPT_OK) return NULL;
    return m;
}

/* A few real AdamW steps so that m and v hold something. */
static void train_some(hpt_model *m, float *m1, float *m2, int steps, hpt_adamw *o) {
    int tok[16], tgt[16];
    for (int i = 0; i < 16; i++) { tok[i] = (i * 7) % 11; tgt[i] = (i * 7 + 3) % 11; }
    hpt_batch b = {.B = 2, .T = 8, .tokens = tok, .targets = tgt};
    for (int t = 1; t <= steps; t++) {
        float loss, norm;
        hpt_model_zero_grad(m);
        hpt_model_forward(m, &b, &loss);
        hpt_model_backward(m, 1.0f);
        hpt_optim_step(m, m1, m2, o, t, &norm);
    }
}

static void test_predictors_move_params(void) {
    const char *names[] = {"coast", "stale-adam", "linear", "shrink"};
    for (int k = 0; k < 4; k++) {
        hpt_model *m = tiny_gpt();
        size_t n;
        float *p = hpt_model_params(m, &n);
        float *m1 = calloc(n, sizeof(float)), *m2 = calloc(n, sizeof(float)), *before = malloc(n * sizeof(float));
        hpt_adamw o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
        hpt_predictor pr;
        CHECK(hpt_pred_init(&pr, hpt_pred_parse(names[k]), m, 3, 2) == HPT_OK, "%s init", names[k]);
        for (int t = 1; t <= 12; t++) {  /* real steps, snapshots for linear */
            train_some(m, m1, m2, 1, &o);
            hpt_pred_observe(&pr, p, t);
        }
        CHECK(hpt_pred_ready(&pr), "%s ready after 12 steps", names[k]);
        /* the coast gate may close noisy tensors; open it fully for this test */
        pr.snr_lo = -1.0f; pr.snr_hi = 0.0f;
        pr.straight_lo = -1.0f; pr.straight_hi = 0.0f;  /* and the shrink one */
        size_t calls = hpt_model_backward_calls(m);
        memcpy(before, p, n * sizeof(float));
        hpt_pred_begin(&pr, m1, m2, &o, 12);
        for (int s = 1; s <= 3; s++) hpt_pred_apply(&pr, p, m1, m2, &o, 12, o.lr, s, 1.0f);
        CHECK(hpt_model_backward_calls(m) == calls, "%s ran a backward pass", names[k]);
        int nt;
        const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
        int moved_tensors = 0;
        for (int i = 0; i < nt; i++) {
            size_t changed = 0;
            for (size_t j = ti[i].offset; j < ti[i].offset + ti[i].numel; j++) changed += p[j] != before[j];
            moved_tensors += changed > 0;
        }
        /* wte's padded rows and never-seen tokens may stay, but every tensor
         * has parameters that moved during training, so all must move here */
        CHECK(moved_tensors == nt, "%s moved %d of %d tensors", names[k], moved_tensors, nt);
        hpt_pred_free(&pr);
        free(m1); free(m2); free(before);
        hpt_model_free(m);
    }
}

/* A straight trajectory theta(u) = base + vel * u, observed at updates
 * 1..U by predictor pr, then extrapolated 3 steps: the largest error
 * against theta(U + 3). */
static double straight_line_error(hpt_predictor *pr, float *p, size_t n, const float *base, const float *vel, int U) {
    for (int u = 1; u <= U; u++) {
        for (size_t i = 0; i < n; i++) p[i] = base[i] + vel[i] * u;
        hpt_pred_observe(pr, p, u);
    }
    hpt_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
    hpt_pred_begin(pr, NULL, NULL, &o, U);
    for (int s = 1; s <= 3; s++) hpt_pred_apply(pr, p, NULL, NULL, &o, U, 0.0f, s, 1.0f);
    double maxerr = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(p[i] - (base[i] + vel[i] * (U + 3)));
        if (e > maxerr) maxerr = e;
    }
    return maxerr;
}

/* base and vel of the straight trajectories the extrapolation tests use */
static void line_params(size_t n, float **base, float **vel) {
    *base = malloc(n * sizeof(float));
    *vel = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        (*base)[i] = (float)(i % 13) * 0.25f;
        (*vel)[i] = (float)((int)(i % 5) - 2) * 0.125f;
    }
}

static void test_linear_exact(void) {
    hpt_model *m = tiny_gpt();
    size_t n;
    float *p = hpt_model_params(m, &n), *base, *vel;
    line_params(n, &base, &vel);
    hpt_predictor pr;
    hpt_pred_init(&pr, hpt_pred_parse("linear"), m, 4, 2);
    /* snapshots at updates 2, 4, 6, 8 */
    double maxerr = straight_line_error(&pr, p, n, base, vel, 8);
    CHECK(maxerr < 1e-5, "linear extrapolation error %.3g", maxerr);
    hpt_pred_free(&pr);
    free(base); free(vel);
    hpt_model_free(m);
}

/* shrink: an exactly linear trajectory is extrapolated exactly (every
 * slope significant, straightness 1); a tensor that only jitters around a fixed
 * point is gated off; under noise, parameters at rest keep (nearly) still
 * where the per-parameter fit moves them, and moving ones lose little (the
 * shrinkage bias, 1 - 4/t^2 of each slope). */
static void test_shrink(void) {
    hpt_model *m = tiny_gpt();
    size_t n;
    float *p = hpt_model_params(m, &n), *base, *vel;
    line_params(n, &base, &vel);
    hpt_predictor pr;
    CHECK(hpt_pred_init(&pr, hpt_pred_parse("shrink"), m, 6, 2) == HPT_OK, "shrink init");
    double maxerr = straight_line_error(&pr, p, n, base, vel, 12);
    CHECK(maxerr < 1e-4, "shrink extrapolation of a straight line: error %.3g", maxerr);
    hpt_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    int open = 0;
    for (int i = 0; i < nt; i++) open += pr.tensor_gate[i] == 1.0f;
    CHECK(open == nt, "straight paths: %d of %d tensors gated open", open, nt);
    hpt_pred_free(&pr);

    /* tensor 0 jitters (independent noise each snapshot), the rest drift
     * with the same noise added: the drift's estimate must beat the
     * per-parameter fit's (linear) on the drifting tensors */
    hpt_predictor lin;
    hpt_pred_init(&pr, hpt_pred_parse("shrink"), m, 6, 2);
    hpt_pred_init(&lin, hpt_pred_parse("linear"), m, 6, 2);
    hpt_rng r;
    hpt_rng_seed(&r, 11);
    for (int u = 1; u <= 12; u++) {
        for (size_t i = 0; i < n; i++) {
            float drift = i < ti[0].numel ? 0.0f : vel[i] * u;
            p[i] = base[i] + drift + 0.05f * hpt_rng_normal(&r);
        }
        hpt_pred_observe(&pr, p, u);
        hpt_pred_observe(&lin, p, u);
    }
    hpt_pred_begin(&pr, NULL, NULL, &o, 12);
    hpt_pred_begin(&lin, NULL, NULL, &o, 12);
    CHECK(pr.tensor_gate[0] == 0.0f, "a jittering tensor is gated off (gate %.2f)", pr.tensor_gate[0]);
    /* squared slope error, on the parameters at rest (vel 0) and on the moving ones */
    double e_sh[2] = {0, 0}, e_lin[2] = {0, 0};
    for (size_t i = ti[0].numel; i < n; i++) {
        int moving = vel[i] != 0.0f;
        e_sh[moving] += (pr.slope[i] - vel[i]) * (double)(pr.slope[i] - vel[i]);
        e_lin[moving] += (lin.slope[i] - vel[i]) * (double)(lin.slope[i] - vel[i]);
    }
    CHECK(e_sh[0] < 0.5 * e_lin[0], "parameters at rest: shrink squared slope error %.4g, per-parameter fit %.4g",
          e_sh[0], e_lin[0]);
    CHECK(e_sh[1] < 1.1 * e_lin[1], "moving parameters: shrink squared slope error %.4g, per-parameter fit %.4g",
          e_sh[1], e_lin[1]);
    hpt_pred_free(&pr);
    hpt_pred_free(&lin);
    free(base); free(vel);
    hpt_model_free(m);
}

static void test_snapshot_bytes(void) {
    size_t n = 1000;
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *p0 = malloc(n * 4), *m0 = malloc(n * 4), *v0 = malloc(n * 4);
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) { p[i] = hpt_rng_normal(&r); m[i] = hpt_rng_normal(&r); v[i] = hpt_rng_uniform(&r); }
    p[0] = -0.0f; p[1] = NAN; m[2] = INFINITY;  /* bits that arithmetic would not preserve */
    memcpy(p0, p, n * 4); memcpy(m0, m, n * 4); memcpy(v0, v, n * 4);
    hpt_snapshot s;
    CHECK(hpt_snapshot_init(&s, n) == HPT_OK, "snapshot init");
    hpt_snapshot_take(&s, p, m, v, 42);
    for (size_t i = 0; i < n; i++) { p[i] += 1.0f; m[i] *= 3.0f; v[i] = 0.0f; }
    hpt_snapshot_restore_params(&s, p);
    memcpy(m, hpt_snapshot_moment1(&s), n * 4);
    memcpy(v, hpt_snapshot_moment2(&s), n * 4);
    CHECK(!memcmp(p, p0, n * 4) && !memcmp(m, m0, n * 4) && !memcmp(v, v0, n * 4), "restore is byte for byte");
    CHECK(s.step == 42 && s.valid, "snapshot remembers its step");
    hpt_snapshot_free(&s);
    free(p); free(m); free(v); free(p0); free(m0); free(v0);
}

static void test_config_messages(void) {
    hpt_hybrid_config c;
    hpt_hybrid_config_default(&c);
    CHECK(hpt_hybrid_config_check(&c) == HPT_OK, "defaults valid: %s", hpt_errmsg());
    c.predictor = "oracle";
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--predictor"), "bad predictor: %s", hpt_errmsg());
    hpt_hybrid_config_default(&c);
    c.probe_batches = 0;
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--probe-batches"), "bad probes: %s", hpt_errmsg());
    hpt_hybrid_config_default(&c);
    c.full_steps = 0;
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--full-steps"), "bad full steps: %s", hpt_errmsg());
}

/* The predictor table: each name parses to its row, and the rows keep the
 * indices checkpoints store (HYBR): coast 0, stale-adam 1, linear 2, shrink 3. */
static void test_predictor_table(void) {
    const char *names[] = {"coast", "stale-adam", "linear", "shrink"};
    CHECK(hpt_pred_count() >= 4, "%d predictors", hpt_pred_count());
    for (int i = 0; i < 4; i++)
        CHECK(hpt_pred_parse(names[i]) == i && !strcmp(hpt_pred_name(i), names[i]), "%s is row %d", names[i], i);
    for (int i = 0; i < hpt_pred_count(); i++)
        CHECK(hpt_pred_parse(hpt_pred_name(i)) == i, "row %d round-trips", i);
    CHECK(hpt_pred_parse("oracle") == -1 && hpt_pred_parse(NULL) == -1, "unknown names are refused");
    CHECK(hpt_pred_name(-1) == NULL && hpt_pred_name(hpt_pred_count()) == NULL, "no row past the table");
    char list[256];
    hpt_pred_list(list, sizeof list);
    CHECK(!strcmp(list, "coast, stale-adam, linear or shrink"), "list: %s", list);
}

int main(void) {
    test_predictor_table();
    hpt_set_threads(1);
    test_predictors_move_params();
    test_shrink();
    test_linear_exact();
    test_snapshot_bytes();
    test_config_messages();
    return TEST_REPORT("test_hybrid");
}
