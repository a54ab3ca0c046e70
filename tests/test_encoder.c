/* tier: fast (make test; tests/run.sh) */
/*
 * test_encoder.c — the training-state encoder (src/hybrid/phased/encoder.h):
 *   - the slot table: HPT_ENC_NFEAT slots, each named, names unique, and
 *     n_features from init equal to it;
 *   - normalisation: on a long stationary run every slot's output has mean
 *     near 0 and variance near 1, and lies in [-5, 5];
 *   - no dead slots: on a long run shaped like a real one (decaying loss with
 *     noise, warmup + cosine lr, gradient spikes, a W/F/P/C phase cycle with
 *     missing values on Predict steps) every slot varies and stays bounded;
 *   - NaN inputs do not poison: a missing value leaves that slot's raw value,
 *     statistics and output exactly as they were, and the arena stays finite;
 *   - the rollout: holding inputs holds the slots, a predicted loss moves the
 *     level as an EMA, steps in phase advance;
 *   - bad phase ids are rejected.
 */
#include "../src/hybrid/phased/encoder.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_STEPS 4000

/* A run shaped like a real one. Phases: warmup (0) for 100 steps, then
 * Full (1) 20, Predict (2) 10, Correct (3) 5, repeated. Predict steps have
 * no loss and no gradient (NaN), as the driver will pass them. */
static void synth_input(hpt_rng *r, int t, hpt_enc_input *in, int *phase_start) {
    float lr = t < 100 ? 1e-3f * (t + 1) / 100.0f
                       : 1e-4f + 0.5f * 9e-4f * (1.0f + cosf(3.14159265f * (t - 100) / (N_STEPS - 100)));
    int phase;
    if (t < 100) phase = 0;
    else {
        int c = (t - 100) % 35;
        phase = c < 20 ? 1 : c < 30 ? 2 : 3;
    }
    if (t == 0 || phase != in->phase) *phase_start = t;
    float spike = hpt_rng_uniform(r) < 0.02f ? 3.0f : 1.0f;
    in->loss = (2.0f * expf(-t / 300.0f) + 0.3f) * expf(0.03f * hpt_rng_normal(r));
    in->grad_norm = (0.5f + 1.5f * expf(-t / 200.0f)) * expf(0.2f * hpt_rng_normal(r)) * spike;
    in->lr = lr;
    in->m_abs_mean = 1e-3f * (0.5f + expf(-t / 500.0f)) * expf(0.05f * hpt_rng_normal(r));
    in->v_sqrt_mean = 3e-3f * (0.5f + expf(-t / 800.0f)) * expf(0.05f * hpt_rng_normal(r));
    in->update_ratio = lr * 2.0f * expf(0.1f * hpt_rng_normal(r));
    in->update_cos = 0.3f + 0.2f * hpt_rng_normal(r);
    in->phase = phase;
    in->steps_in_phase = t - *phase_start;
    if (phase == 2) {
        in->loss = NAN;
        in->grad_norm = NAN;
        in->m_abs_mean = NAN;
        in->v_sqrt_mean = NAN;
    }
}

static void test_table(void) {
    hpt_encoder e;
    int n = -1;
    CHECK(hpt_encoder_init(&e, &n) == HPT_OK, "init: %s", hpt_errmsg());
    CHECK(n == HPT_ENC_NFEAT, "n_features %d, table has %d", n, HPT_ENC_NFEAT);
    CHECK(n == 16, "the header's table documents 16 slots, init says %d", n);
    for (int i = 0; i < n; i++) {
        const char *s = hpt_encoder_slot_name(i);
        CHECK(s && *s, "slot %d has no name", i);
        for (int j = 0; j < i; j++)
            CHECK(s && strcmp(s, hpt_encoder_slot_name(j)) != 0, "slots %d and %d share a name", i, j);
    }
    CHECK(hpt_encoder_slot_name(n) == NULL && hpt_encoder_slot_name(-1) == NULL, "names outside the table");
    CHECK(!strcmp(hpt_encoder_slot_name(HPT_ENC_LR), "lr") &&
          !strcmp(hpt_encoder_slot_name(HPT_ENC_PHASE_STEPS), "phase_steps"), "enum and names agree");
    hpt_region r;
    CHECK(hpt_encoder_regions(&e, &r) == 1 && r.ptr == e.arena && r.bytes == e.arena_floats * sizeof(float),
          "one region: the arena");
    hpt_enc_input in = {.loss = 1, .grad_norm = 1, .lr = 1e-3f, .phase = HPT_ENC_NPHASES};
    float f[HPT_ENC_NFEAT];
    CHECK(hpt_encoder_update(&e, &in, f) == HPT_ERR_ARG, "phase out of range is rejected");
    in.phase = -1;
    CHECK(hpt_encoder_update(&e, &in, f) == HPT_ERR_ARG, "negative phase is rejected");
    hpt_encoder_free(&e);
    hpt_encoder_free(NULL);
}

/* A stationary run: every input fluctuates around a fixed distribution
 * (slow sinusoids plus noise, phases cycling), so a correct normaliser must
 * give every slot mean ~0 and variance ~1. */
static void stationary_input(hpt_rng *r, int t, hpt_enc_input *in) {
    in->loss = expf(0.3f * sinf(t / 97.0f) + 0.05f * hpt_rng_normal(r));
    in->grad_norm = expf(0.3f * hpt_rng_normal(r));
    in->lr = 1e-3f * expf(0.5f * sinf(t / 61.0f));
    in->m_abs_mean = 1e-3f * expf(0.4f * sinf(t / 43.0f) + 0.05f * hpt_rng_normal(r));
    in->v_sqrt_mean = 3e-3f * expf(0.4f * sinf(t / 71.0f) + 0.05f * hpt_rng_normal(r));
    in->update_ratio = 1e-3f * expf(0.3f * hpt_rng_normal(r));
    in->update_cos = 0.3f + 0.2f * hpt_rng_normal(r);
    int c = t % 40;
    in->phase = c < 15 ? 0 : c < 25 ? 1 : c < 35 ? 2 : 3;
    in->steps_in_phase = c < 15 ? c : c < 25 ? c - 15 : c < 35 ? c - 25 : c - 35;
}

typedef struct { double s1[HPT_ENC_NFEAT], s2[HPT_ENC_NFEAT]; int n; } slot_stats;

static void stats_add(slot_stats *st, const float *f) {
    for (int i = 0; i < HPT_ENC_NFEAT; i++) { st->s1[i] += f[i]; st->s2[i] += (double)f[i] * f[i]; }
    st->n++;
}

static void stats_get(const slot_stats *st, int i, double *mean, double *var) {
    *mean = st->s1[i] / st->n;
    *var = st->s2[i] / st->n - *mean * *mean;
}

static void test_normalisation(void) {
    hpt_encoder e;
    int n;
    hpt_encoder_init(&e, &n);
    hpt_rng r;
    hpt_rng_seed(&r, 9);
    hpt_enc_input in = {0};
    slot_stats st = {0};
    int bad = 0;
    for (int t = 0; t < N_STEPS; t++) {
        float f[HPT_ENC_NFEAT];
        stationary_input(&r, t, &in);
        hpt_encoder_update(&e, &in, f);
        for (int i = 0; i < n; i++)
            if (!isfinite(f[i]) || f[i] < -HPT_ENC_CLIP || f[i] > HPT_ENC_CLIP) bad++;
        if (t >= 500) stats_add(&st, f);   /* after the statistics settle */
    }
    CHECK(bad == 0, "%d outputs non-finite or outside [-5, 5]", bad);
    printf("  stationary run, steps 500..%d:\n", N_STEPS);
    for (int i = 0; i < n; i++) {
        double mean, var;
        stats_get(&st, i, &mean, &var);
        printf("    slot %2d %-13s mean %+.3f var %.3f\n", i, hpt_encoder_slot_name(i), mean, var);
        CHECK(fabs(mean) < 0.25, "stationary: slot %s mean %.3f", hpt_encoder_slot_name(i), mean);
        CHECK(var > 0.6 && var < 1.4, "stationary: slot %s variance %.3f", hpt_encoder_slot_name(i), var);
    }
    hpt_encoder_free(&e);
}

/* The realistic run: trending slots (the loss level, lr, the Adam moments)
 * cannot have mean 0 under any causal normaliser (a pure trend sits at about
 * -1 standard deviations behind its running mean, whatever the window), so
 * here the checks are range, boundedness and that no slot is dead. */
static void test_realistic_run(void) {
    hpt_encoder e;
    int n;
    hpt_encoder_init(&e, &n);
    hpt_rng r;
    hpt_rng_seed(&r, 7);
    hpt_enc_input in = {0};
    int ps = 0, bad = 0;
    slot_stats st = {0};
    for (int t = 0; t < N_STEPS; t++) {
        float f[HPT_ENC_NFEAT];
        synth_input(&r, t, &in, &ps);
        hpt_encoder_update(&e, &in, f);
        for (int i = 0; i < n; i++)
            if (!isfinite(f[i]) || f[i] < -HPT_ENC_CLIP || f[i] > HPT_ENC_CLIP) bad++;
        stats_add(&st, f);
    }
    CHECK(bad == 0, "%d outputs non-finite or outside [-5, 5]", bad);
    printf("  realistic run, all %d steps:\n", N_STEPS);
    for (int i = 0; i < n; i++) {
        double mean, var;
        stats_get(&st, i, &mean, &var);
        printf("    slot %2d %-13s mean %+.3f var %.3f\n", i, hpt_encoder_slot_name(i), mean, var);
        CHECK(fabs(mean) < 1.5 && var < 3.0, "realistic: slot %s mean %.3f var %.3f", hpt_encoder_slot_name(i), mean, var);
        /* no dead slot: each one moves */
        CHECK(var > 0.02, "realistic: slot %s is (nearly) constant, var %.4f", hpt_encoder_slot_name(i), var);
    }
    hpt_encoder_free(&e);
}

static int arena_finite(const hpt_encoder *e) {
    for (size_t i = 0; i < e->arena_floats; i++) if (!isfinite(e->arena[i])) return 0;
    return 1;
}

static void test_nan(void) {
    hpt_encoder e;
    int n;
    hpt_encoder_init(&e, &n);
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    hpt_enc_input in = {0};
    int ps = 0;
    float f[HPT_ENC_NFEAT], g[HPT_ENC_NFEAT];
    for (int t = 0; t < 300; t++) { synth_input(&r, t, &in, &ps); hpt_encoder_update(&e, &in, f); }

    /* every float input missing at once: all float-driven slots hold exactly */
    float mean0[HPT_ENC_NFEAT], var0[HPT_ENC_NFEAT];
    memcpy(mean0, e.mean, sizeof mean0);
    memcpy(var0, e.var, sizeof var0);
    hpt_enc_input miss = in;
    miss.loss = miss.grad_norm = miss.lr = miss.m_abs_mean = miss.v_sqrt_mean = NAN;
    miss.update_ratio = miss.update_cos = NAN;
    hpt_encoder_update(&e, &miss, g);
    int held = 0;
    for (int i = 0; i <= HPT_ENC_UPD_COS; i++) {
        held += g[i] == f[i] && e.mean[i] == mean0[i] && e.var[i] == var0[i];
    }
    CHECK(held == HPT_ENC_UPD_COS + 1, "only %d of %d float slots held on an all-NaN step", held, HPT_ENC_UPD_COS + 1);
    CHECK(arena_finite(&e), "the arena holds a non-finite value after NaN inputs");

    /* non-positive scales and infinities count as missing too */
    hpt_enc_input junk = miss;
    junk.loss = -1.0f; junk.grad_norm = 0.0f; junk.lr = INFINITY; junk.update_ratio = -INFINITY;
    hpt_encoder_update(&e, &junk, g);
    CHECK(g[HPT_ENC_LOSS_LEVEL] == f[HPT_ENC_LOSS_LEVEL] && g[HPT_ENC_GRAD_LOG] == f[HPT_ENC_GRAD_LOG] &&
          g[HPT_ENC_LR] == f[HPT_ENC_LR] && g[HPT_ENC_UPD_RATIO] == f[HPT_ENC_UPD_RATIO],
          "non-positive or infinite scales are treated as missing");
    CHECK(arena_finite(&e), "the arena holds a non-finite value after junk inputs");

    /* a run with 30% of the losses missing stays finite and close to the full one */
    hpt_encoder a, b;
    hpt_encoder_init(&a, &n);
    hpt_encoder_init(&b, &n);
    hpt_rng_seed(&r, 11);
    int bad = 0;
    float fa[HPT_ENC_NFEAT], fb[HPT_ENC_NFEAT];
    for (int t = 0; t < 2000; t++) {
        synth_input(&r, t, &in, &ps);
        hpt_enc_input hole = in;
        if (hpt_rng_uniform(&r) < 0.3f) hole.loss = NAN;
        hpt_encoder_update(&a, &in, fa);
        hpt_encoder_update(&b, &hole, fb);
        for (int i = 0; i < n; i++) bad += !isfinite(fb[i]);
    }
    CHECK(bad == 0, "%d non-finite outputs with missing losses", bad);
    CHECK(fabsf(hpt_encoder_level(&a) - hpt_encoder_level(&b)) < 0.05f,
          "level with 30%% missing losses %.4f vs %.4f", hpt_encoder_level(&b), hpt_encoder_level(&a));
    /* before any loss there is no level */
    hpt_encoder c;
    hpt_encoder_init(&c, &n);
    CHECK(isnan(hpt_encoder_level(&c)), "level before any loss must be NaN");
    hpt_encoder_update(&c, &miss, fa);
    int zeros = 0;
    for (int i = 0; i < HPT_ENC_PHASE0; i++) zeros += fa[i] == 0.0f;
    CHECK(zeros == HPT_ENC_PHASE0, "never-observed slots output 0 (%d of %d)", zeros, HPT_ENC_PHASE0);
    hpt_encoder_free(&a);
    hpt_encoder_free(&b);
    hpt_encoder_free(&c);
    hpt_encoder_free(&e);
}

static void test_roll(void) {
    hpt_encoder e;
    int n;
    hpt_encoder_init(&e, &n);
    hpt_rng r;
    hpt_rng_seed(&r, 5);
    hpt_enc_input in = {0};
    int ps = 0;
    float f[HPT_ENC_NFEAT], g[HPT_ENC_NFEAT];
    for (int t = 0; t < 400; t++) { synth_input(&r, t, &in, &ps); hpt_encoder_update(&e, &in, f); }
    hpt_enc_roll roll;
    hpt_encoder_roll_begin(&e, &roll);
    CHECK(hpt_encoder_roll_level(&roll) == hpt_encoder_level(&e), "roll starts at the encoder's level");
    memcpy(g, f, sizeof g);
    hpt_encoder_roll_step(&e, &roll, NAN, NAN, g);
    int same = 0;
    for (int i = 0; i < n; i++) same += g[i] == f[i] || i == HPT_ENC_PHASE_STEPS;
    CHECK(same == n, "a roll step with nothing predicted changes only phase_steps");
    CHECK(g[HPT_ENC_PHASE_STEPS] >= f[HPT_ENC_PHASE_STEPS], "phase_steps advances");
    float lv = hpt_encoder_roll_level(&roll), ll = lv + 0.5f;
    hpt_encoder_roll_step(&e, &roll, ll, 2e-4f, g);
    CHECK_NEAR(hpt_encoder_roll_level(&roll), lv + 0.1f * 0.5f, 1e-5, 0, "level moves as E_0.1");
    CHECK(g[HPT_ENC_LOSS_INNOV] > f[HPT_ENC_LOSS_INNOV] && g[HPT_ENC_LR] != f[HPT_ENC_LR],
          "a higher predicted loss raises loss_innov, a new lr moves the lr slot");
    CHECK(g[HPT_ENC_GRAD_LOG] == f[HPT_ENC_GRAD_LOG] && g[HPT_ENC_PHASE0 + in.phase] == f[HPT_ENC_PHASE0 + in.phase],
          "slots without a predicted input hold");
    /* the encoder itself is untouched by rollouts */
    hpt_enc_roll r2;
    hpt_encoder_roll_begin(&e, &r2);
    CHECK(hpt_encoder_roll_level(&r2) == lv, "rollout must not change the encoder");
    hpt_encoder_free(&e);
}

int main(void) {
    test_table();
    test_normalisation();
    test_realistic_run();
    test_nan();
    test_roll();
    return TEST_REPORT("test_encoder");
}
