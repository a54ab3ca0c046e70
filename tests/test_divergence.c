/* tier: fast (make test; tests/run.sh) */
/*
 * test_divergence.c — the divergence monitor: NaN/Inf are critical at once;
 * a loss spike is judged by its z-score against the window as it was before
 * the spike; gradient explosion and vanishing; oscillation on an alternating
 * series but not on noise; consecutive warnings escalate and a calm step
 * resets the count; no alarm at all on a smooth, noisy, decaying training
 * curve; NaN and critical values never enter the windows; byte copies;
 * config validation.
 *
 * Series are generated with the library's RNG from fixed seeds, so every
 * run sees the same numbers.
 */
#include "../src/hybrid/divergence.h"
#include "test.h"

#include <string.h>

static int has(const char *why, const char *what) { return why && strstr(why, what); }

/* Fills a monitor's windows with a loss of mean mu and noise sd, and grad
 * norms around g (5% noise). */
static void fill(hpt_div *d, hpt_rng *r, int n, float mu, float sd, float g) {
    for (int i = 0; i < n; i++) {
        const char *why;
        hpt_div_level l = hpt_div_observe(d, d->last_step + 1, mu + sd * hpt_rng_normal(r),
                                          g * (1.0f + 0.05f * hpt_rng_normal(r)), &why);
        CHECK(l == HPT_DIV_OK, "fill step %d: %s: %s", i, hpt_div_level_name(l), why);
    }
}

/* A fresh monitor whose window holds a steady loss of 2 (sd 0.01) and a
 * gradient norm of 1: the baseline every event below stands out of. */
static void refill(hpt_div *d, const hpt_div_config *cfg, hpt_rng *r) {
    hpt_div_init(d, cfg);
    fill(d, r, cfg->window, 2.0f, 0.01f, 1.0f);
}

/* The default config, r seeded, and d's window full of a steady run */
static void filled(hpt_div_config *cfg, hpt_div *d, hpt_rng *r, uint64_t seed) {
    hpt_div_config_default(cfg);
    hpt_rng_seed(r, seed);
    refill(d, cfg, r);
}

static void mean_sd(const hpt_div_ring *r, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < r->n; i++) s += r->v[i];
    *mean = s / r->n;
    for (int i = 0; i < r->n; i++) q += (r->v[i] - *mean) * (r->v[i] - *mean);
    *sd = sqrt(q / r->n);
}

/* ---------------------------------------------------------------- config */

#define BAD_CONFIG(field, value, flag) do {                                         \
    hpt_div_config c_;                                                              \
    hpt_div_config_default(&c_);                                                    \
    c_.field = (value);                                                             \
    hpt_status st_ = hpt_div_config_check(&c_);                                     \
    CHECK(st_ == HPT_ERR_ARG, "%s = %s accepted", #field, #value);                  \
    CHECK(strstr(hpt_errmsg(), flag) != NULL, "%s = %s: message '%s' lacks %s",     \
          #field, #value, hpt_errmsg(), flag);                                      \
} while (0)

static void test_config(void) {
    hpt_div_config c;
    hpt_div_config_default(&c);
    CHECK(hpt_div_config_check(&c) == HPT_OK, "defaults rejected: %s", hpt_errmsg());
    BAD_CONFIG(window, 7, "--div-window");
    BAD_CONFIG(window, HPT_DIV_MAX_WINDOW + 1, "--div-window");
    BAD_CONFIG(loss_z_warn, 0.0f, "--div-loss-z");
    BAD_CONFIG(loss_z_warn, NAN, "--div-loss-z");
    BAD_CONFIG(loss_z_crit, 5.0f, "--div-loss-z-crit");   /* below the warning level 6 */
    BAD_CONFIG(loss_z_crit, INFINITY, "--div-loss-z-crit");
    BAD_CONFIG(grad_explode, 1.0f, "--div-grad-explode");
    BAD_CONFIG(grad_explode, NAN, "--div-grad-explode");
    BAD_CONFIG(grad_vanish, 1.0f, "--div-grad-vanish");
    BAD_CONFIG(grad_vanish, -0.1f, "--div-grad-vanish");
    BAD_CONFIG(oscillation, 0.6f, "--div-oscillation");   /* noise alone would trip it */
    BAD_CONFIG(oscillation, 1.1f, "--div-oscillation");
    BAD_CONFIG(escalate, 0, "--div-escalate");
    c.window = 8;
    c.grad_vanish = 0.0f;
    c.oscillation = 1.0f;
    c.escalate = 1;
    CHECK(hpt_div_config_check(&c) == HPT_OK, "legal edges rejected: %s", hpt_errmsg());
    CHECK(!strcmp(hpt_div_level_name(HPT_DIV_OK), "ok") && !strcmp(hpt_div_level_name(HPT_DIV_CAUTION), "caution") &&
          !strcmp(hpt_div_level_name(HPT_DIV_WARNING), "warning") &&
          !strcmp(hpt_div_level_name(HPT_DIV_CRITICAL), "critical"), "level names");
}

/* ---------------------------------------------------------------- non-finite */

static void test_nonfinite(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    hpt_div d;
    const char *why;

    /* at the very first step, before any window exists */
    hpt_div_init(&d, &cfg);
    CHECK(hpt_div_observe(&d, 0, NAN, 1.0f, &why) == HPT_DIV_CRITICAL && has(why, "loss is nan"), "nan loss: %s", why);
    CHECK(hpt_div_observe(&d, 1, INFINITY, 1.0f, &why) == HPT_DIV_CRITICAL && has(why, "loss is inf"), "inf loss");
    CHECK(hpt_div_observe(&d, 2, -INFINITY, 1.0f, &why) == HPT_DIV_CRITICAL && has(why, "loss is inf"), "-inf loss");
    CHECK(hpt_div_observe(&d, 3, 2.0f, NAN, &why) == HPT_DIV_CRITICAL && has(why, "grad norm is nan"), "nan grad");
    CHECK(hpt_div_observe(&d, 4, 2.0f, INFINITY, &why) == HPT_DIV_CRITICAL && has(why, "grad norm is inf"), "inf grad");
    CHECK(d.loss.n == 2 && d.grad.n == 3, "only finite values entered: loss %d grad %d", d.loss.n, d.grad.n);
    CHECK(d.count[HPT_DIV_CRITICAL] == 5 && d.last_alarm_step == 4, "counted");

    /* a negative grad norm means "no backward ran": not judged, not recorded */
    hpt_div_init(&d, &cfg);
    CHECK(hpt_div_observe(&d, 0, 2.0f, HPT_DIV_NO_GRAD, &why) == HPT_DIV_OK && why == NULL, "no grad is fine");
    CHECK(d.loss.n == 1 && d.grad.n == 0, "no grad recorded");

    /* NaN never enters the window: a monitor fed NaNs in between judges the
     * next values exactly like one that never saw them */
    hpt_div a, b;
    hpt_div_init(&a, &cfg);
    hpt_div_init(&b, &cfg);
    hpt_rng r;
    hpt_rng_seed(&r, 5);
    for (int i = 0; i < 300; i++) {
        float loss = 2.0f + 0.05f * hpt_rng_normal(&r), g = 1.0f + 0.1f * hpt_rng_normal(&r);
        if (i % 10 == 3) {
            hpt_div_observe(&a, i, NAN, NAN, NULL);
            hpt_div_observe(&a, i, 2.0f, INFINITY, NULL);   /* finite loss enters, inf grad does not */
            hpt_div_observe(&b, i, 2.0f, HPT_DIV_NO_GRAD, NULL);
        }
        hpt_div_level la = hpt_div_observe(&a, i, loss, g, NULL), lb = hpt_div_observe(&b, i, loss, g, NULL);
        CHECK(la == lb, "step %d: %s vs %s", i, hpt_div_level_name(la), hpt_div_level_name(lb));
        CHECK(a.loss_z == b.loss_z || (isnan(a.loss_z) && isnan(b.loss_z)), "step %d: z %g vs %g", i, a.loss_z, b.loss_z);
    }
    CHECK(!memcmp(&a.loss, &b.loss, sizeof a.loss) && !memcmp(&a.grad, &b.grad, sizeof a.grad), "same windows");
    for (int i = 0; i < a.loss.n; i++) CHECK(isfinite(a.loss.v[i]), "non-finite in the loss window at %d", i);
}

/* ---------------------------------------------------------------- loss spikes */

static void test_loss_spike(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    hpt_div d;
    hpt_rng r;
    const char *why;
    hpt_rng_seed(&r, 11);
    hpt_div_init(&d, &cfg);
    /* before the window fills, only non-finite values are judged */
    for (int i = 0; i < cfg.window - 1; i++) hpt_div_observe(&d, i, 2.0f + 0.01f * hpt_rng_normal(&r), 1.0f, NULL);
    CHECK(hpt_div_observe(&d, 100, 50.0f, 1.0f, &why) == HPT_DIV_OK && isnan(d.loss_z), "window not full: no z");

    refill(&d, &cfg, &r);
    double mean, sd;
    mean_sd(&d.loss, &mean, &sd);
    /* z against the window BEFORE the value enters: exactly (x - mean) / sd */
    float x = (float)(mean + 8.0 * sd);
    hpt_div_level l = hpt_div_observe(&d, 1000, x, 1.0f, &why);
    CHECK_NEAR(d.loss_z, (x - mean) / sd, 1e-3, 1e-4, "z against the prior window");
    CHECK(l == HPT_DIV_WARNING && has(why, "loss z-score 8.0 >= 6.0"), "8 sigma: %s (%s)", hpt_div_level_name(l), why);
    CHECK(d.loss.n == cfg.window && d.loss.v[(d.loss.next + cfg.window - 1) % cfg.window] == x,
          "a warning value enters the window");

    refill(&d, &cfg, &r);
    mean_sd(&d.loss, &mean, &sd);
    int next = d.loss.next;
    float before = d.loss.v[next];
    x = (float)(mean + 20.0 * sd);
    l = hpt_div_observe(&d, 1000, x, 1.0f, &why);
    CHECK(l == HPT_DIV_CRITICAL && has(why, "loss z-score 20.0 >= 12.0"), "20 sigma: %s", why);
    CHECK(d.loss.next == next && d.loss.v[next] == before, "a critical value stays out of the window");
    /* ... so the next spike is still seen against clean statistics */
    l = hpt_div_observe(&d, 1001, (float)(mean + 8.0 * sd), 1.0f, &why);
    CHECK(l == HPT_DIV_WARNING, "second spike after a critical one: %s", hpt_div_level_name(l));

    /* one-sided: a sudden drop is no divergence */
    refill(&d, &cfg, &r);
    CHECK(hpt_div_observe(&d, 1000, 1.0f, 1.0f, &why) == HPT_DIV_OK && d.loss_z < -50, "a drop is fine");

    /* a perfectly flat window: the std floor (1e-3 of the mean) keeps
     * rounding-level changes calm and a real jump visible */
    hpt_div_init(&d, &cfg);
    for (int i = 0; i < cfg.window; i++) hpt_div_observe(&d, i, 1.0f, 1.0f, NULL);
    CHECK(hpt_div_observe(&d, 100, 1.000001f, 1.0f, &why) == HPT_DIV_OK, "flat + 1e-6: %s", why);
    CHECK(hpt_div_observe(&d, 101, 1.05f, 1.0f, &why) == HPT_DIV_CRITICAL, "flat + 5%%: %s", why);
}

/* ---------------------------------------------------------------- gradients */

static void test_grad(void) {
    hpt_div_config cfg;
    hpt_div d;
    hpt_rng r;
    const char *why;
    filled(&cfg, &d, &r, 12);
    hpt_div_level l = hpt_div_observe(&d, 500, 2.0f, 15.0f, &why);
    CHECK(l == HPT_DIV_WARNING && has(why, "grad norm 15 is") && has(why, "(>= 10)"), "15x: %s (%s)",
          hpt_div_level_name(l), why);
    CHECK_NEAR(d.grad_ratio, 15.0, 0.0, 0.03, "ratio against the window mean");

    refill(&d, &cfg, &r);
    int gn = d.grad.n, gnext = d.grad.next;
    l = hpt_div_observe(&d, 500, 2.0f, 150.0f, &why);
    CHECK(l == HPT_DIV_CRITICAL && has(why, "(>= 100)"), "150x: %s", why);
    CHECK(d.grad.n == gn && d.grad.next == gnext, "critical grad stays out");

    refill(&d, &cfg, &r);
    l = hpt_div_observe(&d, 500, 2.0f, 0.005f, &why);
    CHECK(l == HPT_DIV_WARNING && has(why, "vanishing"), "0.005x: %s", why);
    /* vanishing off */
    hpt_div_config off = cfg;
    off.grad_vanish = 0.0f;
    hpt_div_init(&d, &off);
    fill(&d, &r, cfg.window, 2.0f, 0.01f, 1.0f);
    CHECK(hpt_div_observe(&d, 500, 2.0f, 0.0f, &why) == HPT_DIV_OK, "vanish 0 is off: %s", why);

    /* Predict steps (no gradient) do not age the gradient window */
    refill(&d, &cfg, &r);
    for (int i = 0; i < 100; i++) hpt_div_observe(&d, 600 + i, 2.0f + 0.01f * hpt_rng_normal(&r), HPT_DIV_NO_GRAD, NULL);
    CHECK(hpt_div_observe(&d, 700, 2.0f, 15.0f, &why) == HPT_DIV_WARNING, "grad window kept across predict steps");
}

/* ---------------------------------------------------------------- oscillation */

static void test_oscillation(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    hpt_div d;
    const char *why = NULL;
    hpt_div_init(&d, &cfg);
    /* a period-2 instability: 2.0, 2.1, 2.0, 2.1, ... (no z alarm: it is the window itself) */
    hpt_div_level l = HPT_DIV_OK;
    int first = -1;
    for (int i = 0; i < 200; i++) {
        l = hpt_div_observe(&d, i, i % 2 ? 2.1f : 2.0f, 1.0f, &why);
        if (l != HPT_DIV_OK && first < 0) first = i;
    }
    CHECK(l == HPT_DIV_CAUTION && has(why, "loss oscillates: 100% of the last 63 steps changed direction"),
          "alternating: %s (%s)", hpt_div_level_name(l), why);
    CHECK(first == cfg.window, "caution as soon as the window is full (step %d)", first);
    CHECK_NEAR(d.osc_frac, 1.0, 1e-6, 0, "fraction");

    /* i.i.d. noise changes direction about 2/3 of the time: no caution */
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    hpt_div_init(&d, &cfg);
    double sum = 0;
    int n = 0;
    for (int i = 0; i < 5000; i++) {
        l = hpt_div_observe(&d, i, 2.0f + 0.05f * hpt_rng_normal(&r), 1.0f, &why);
        CHECK(l == HPT_DIV_OK, "noise step %d: %s", i, why);
        if (!isnan(d.osc_frac)) { sum += d.osc_frac; n++; }
    }
    CHECK_NEAR(sum / n, 2.0 / 3.0, 0.02, 0, "noise direction-change rate");

    /* the fraction against a plain reference over the last window + 1
     * values: reversals are strictly opposite consecutive moves, a flat step
     * (frequent here: values on a 0.1 grid) is no move */
    float hist[5000];
    hpt_div_init(&d, &cfg);
    for (int i = 0; i < 1000; i++) {
        hist[i] = 2.0f + 0.1f * (float)(int)(2.0f * hpt_rng_uniform(&r) + (i % 3 == 0));
        hpt_div_observe(&d, i, hist[i], 1.0f, NULL);
        if (i < cfg.window) { CHECK(isnan(d.osc_frac), "fraction before the window fills"); continue; }
        int changes = 0, prev = 0;
        for (int k = i - cfg.window + 1; k <= i; k++) {
            int sgn = (hist[k] > hist[k - 1]) - (hist[k] < hist[k - 1]);
            changes += k > i - cfg.window + 1 && sgn * prev < 0;
            prev = sgn;
        }
        CHECK_NEAR(d.osc_frac, (double)changes / (cfg.window - 1), 1e-6, 0, "fraction vs reference");
    }

    /* a flat stretch is no oscillation */
    hpt_div_init(&d, &cfg);
    for (int i = 0; i < 200; i++) l = hpt_div_observe(&d, i, 2.0f, 1.0f, &why);
    CHECK(l == HPT_DIV_OK && d.osc_frac == 0.0f, "flat");
}

/* ---------------------------------------------------------------- escalation */

static void test_escalation(void) {
    hpt_div_config cfg;
    hpt_div d;
    hpt_rng r;
    const char *why;
    filled(&cfg, &d, &r, 21);
    /* grad norm 30x its mean: a warning that stays a warning as it enters
     * the window (the mean creeps up only by 30/64 per step) */
    hpt_div_level l1 = hpt_div_observe(&d, 100, 2.0f, 30.0f, NULL);
    hpt_div_level l2 = hpt_div_observe(&d, 101, 2.0f, 30.0f, NULL);
    hpt_div_level l3 = hpt_div_observe(&d, 102, 2.0f, 30.0f, &why);
    CHECK(l1 == HPT_DIV_WARNING && l2 == HPT_DIV_WARNING, "first two: %s %s", hpt_div_level_name(l1),
          hpt_div_level_name(l2));
    CHECK(l3 == HPT_DIV_CRITICAL && has(why, "3 consecutive warnings; last: grad norm 30 is"), "third: %s", why);
    CHECK(hpt_div_observe(&d, 103, 2.0f, 30.0f, NULL) == HPT_DIV_CRITICAL, "and on while it lasts");

    /* a calm step in between resets the count */
    refill(&d, &cfg, &r);
    hpt_div_observe(&d, 100, 2.0f, 30.0f, NULL);
    hpt_div_observe(&d, 101, 2.0f, 30.0f, NULL);
    CHECK(hpt_div_observe(&d, 102, 2.0f, 1.5f, NULL) == HPT_DIV_OK && d.warn_streak == 0, "calm");
    CHECK(hpt_div_observe(&d, 103, 2.0f, 30.0f, NULL) == HPT_DIV_WARNING, "a new streak starts at 1");

    /* escalate 1: every warning is critical */
    hpt_div_config one = cfg;
    one.escalate = 1;
    hpt_div_init(&d, &one);
    fill(&d, &r, cfg.window, 2.0f, 0.01f, 1.0f);
    CHECK(hpt_div_observe(&d, 100, 2.0f, 30.0f, &why) == HPT_DIV_CRITICAL && has(why, "1 consecutive"), "%s", why);

    /* a moderate loss level shift (8 sigma) warns, then is absorbed: the
     * warning values enter the window */
    refill(&d, &cfg, &r);
    int alarms = 0, last_alarm = -1;
    for (int i = 0; i < 300; i++) {
        hpt_div_level l = hpt_div_observe(&d, 100 + i, 2.08f + 0.002f * hpt_rng_normal(&r), 1.0f, NULL);
        CHECK(l != HPT_DIV_CRITICAL, "moderate shift made critical at %d", i);
        if (l >= HPT_DIV_WARNING) { alarms++; last_alarm = i; }
    }
    CHECK(alarms >= 1 && last_alarm < 3, "moderate shift: %d alarms, last at %d", alarms, last_alarm);

    /* a huge one stays critical: critical values never become baseline */
    refill(&d, &cfg, &r);
    int crit = 0;
    for (int i = 0; i < 100; i++) crit += hpt_div_observe(&d, 100 + i, 3.0f, 1.0f, NULL) == HPT_DIV_CRITICAL;
    CHECK(crit == 100, "huge shift: critical %d of 100 steps", crit);
}

/* ---------------------------------------------------------------- no false alarms */

static void test_smooth_curve(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    for (int seed = 1; seed <= 3; seed++) {
        hpt_div d;
        hpt_div_init(&d, &cfg);
        hpt_rng r;
        hpt_rng_seed(&r, (uint64_t)seed);
        int alarms = 0;
        for (int t = 0; t < 2000; t++) {
            float loss = 2.0f * expf(-t / 500.0f) + 0.02f * hpt_rng_normal(&r);
            /* gradient norms shrink over training too, with multiplicative noise */
            float g = 1.5f * expf(-t / 800.0f) * expf(0.2f * hpt_rng_normal(&r));
            /* every 4th step a Predict step without a backward pass */
            const char *why;
            hpt_div_level l = hpt_div_observe(&d, t, loss, t % 4 == 3 ? HPT_DIV_NO_GRAD : g, &why);
            if (l != HPT_DIV_OK) {
                alarms++;
                CHECK(0, "seed %d step %d: %s: %s", seed, t, hpt_div_level_name(l), why);
            }
        }
        CHECK(alarms == 0 && d.count[HPT_DIV_OK] == 2000, "seed %d: %d alarms", seed, alarms);
    }
}

/* ---------------------------------------------------------------- plain data */

static void test_copy(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    hpt_div a, b;
    hpt_div_init(&a, &cfg);
    hpt_div_init(&b, &cfg);
    CHECK(!memcmp(&a, &b, sizeof a), "init is deterministic to the byte");
    hpt_rng r;
    hpt_rng_seed(&r, 9);
    for (int i = 0; i < 100; i++) hpt_div_observe(&a, i, 2.0f + 0.05f * hpt_rng_normal(&r), 1.0f, NULL);
    memcpy(&b, &a, sizeof a);
    for (int i = 100; i < 300; i++) {
        float loss = i % 50 == 0 ? 9.0f : 2.0f + 0.05f * hpt_rng_normal(&r), g = i % 70 == 0 ? NAN : 1.0f;
        CHECK(hpt_div_observe(&a, i, loss, g, NULL) == hpt_div_observe(&b, i, loss, g, NULL), "step %d", i);
    }
    CHECK(!memcmp(&a, &b, sizeof a), "copies diverged");
}

/* ---------------------------------------------------------------- checkpoints */

static size_t save_bytes(const hpt_div *d, unsigned char *buf, size_t cap) {
    hpt_writer w = test_writer();
    if (w.f) hpt_div_save(d, &w);
    return test_writer_take(&w, buf, cap);
}

static hpt_status load_bytes(hpt_div *d, const unsigned char *buf, size_t n) {
    return TEST_LOAD_ALL(hpt_div_load, d, buf, n);
}

static float step_loss(int i, hpt_rng *r) { return i % 50 == 0 ? 9.0f : 2.0f + 0.05f * hpt_rng_normal(r); }
static float step_grad(int i) { return i % 70 == 0 ? NAN : i % 9 == 0 ? HPT_DIV_NO_GRAD : 1.0f + 0.01f * (i % 7); }

/* Saved while its rings fill and after, loaded into a fresh monitor: both
 * judge the next steps alike and save the same bytes. A ring position or
 * count past the window (which would write out of bounds), a
 * bad counter or a non-finite ring value is refused. */
static void test_checkpoint(void) {
    hpt_div_config cfg;
    hpt_div_config_default(&cfg);
    cfg.window = 16;
    enum { CAP = 8192 };
    static unsigned char buf[CAP], buf2[CAP];
    hpt_div a;
    hpt_div_init(&a, &cfg);
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    int same = 1;
    for (int i = 0; i < 120; i++) {
        size_t n = save_bytes(&a, buf, CAP);
        hpt_div b, a2 = a;
        hpt_div_init(&b, &cfg);
        if (n != hpt_div_state_bytes(&a) || load_bytes(&b, buf, n) != HPT_OK) {
            CHECK(0, "step %d: %zu bytes (want %zu), load: %s", i, n, hpt_div_state_bytes(&a), hpt_errmsg());
            return;
        }
        hpt_rng r2 = r;
        for (int j = i; j < i + 30; j++) {
            float l = step_loss(j, &r2), g = step_grad(j);
            same &= hpt_div_observe(&a2, j, l, g, NULL) == hpt_div_observe(&b, j, l, g, NULL);
        }
        size_t n1 = save_bytes(&a2, buf, CAP), n2 = save_bytes(&b, buf2, CAP);
        same &= n1 == n2 && !memcmp(buf, buf2, n1);
        hpt_div_observe(&a, i, step_loss(i, &r), step_grad(i), NULL);
    }
    CHECK(same, "a loaded monitor judged differently from the one saved");
    CHECK(hpt_div_state_bytes(&a) == 56 + 2 * 4 * 16, "%zu bytes for window 16", hpt_div_state_bytes(&a));

    size_t n = save_bytes(&a, buf, CAP);
    struct { int at; float fv; int32_t v; const char *what; } bad[] = {
        {4, 0, 50000000, "position"}, {4, 0, -1, "position"}, {4, 0, 16, "position"}, {0, 0, 17, "count"},
        {8, 0, -3, "count"}, {12, 0, 99, "position"}, {16, 0, -1, "counter"}, {20, 0, -7, "counter"},
        {28, 0, -1, "counter"}, {44 + 12 + 4 * 3, NAN, 0, "non-finite"}, {44 + 12 + 64 + 4, -1.0f, 0, "non-finite"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(buf2, buf, n);
        if (bad[i].at >= 56) memcpy(buf2 + bad[i].at, &bad[i].fv, 4);
        else memcpy(buf2 + bad[i].at, &bad[i].v, 4);
        hpt_div b;
        hpt_div_init(&b, &cfg);
        hpt_div before = b;
        hpt_status st = load_bytes(&b, buf2, n);
        CHECK(st == HPT_ERR_FORMAT && strstr(hpt_errmsg(), bad[i].what) && !memcmp(&b, &before, sizeof b),
              "field at %d: status %d, '%s' (want '%s')", bad[i].at, st, hpt_errmsg(), bad[i].what);
    }
    hpt_div b;
    hpt_div_init(&b, &cfg);
    CHECK(load_bytes(&b, buf, n - 1) == HPT_ERR_FORMAT && strstr(hpt_errmsg(), "truncated"), "%s", hpt_errmsg());
    /* a partly filled ring: its position must be its count */
    hpt_div c;
    hpt_div_init(&c, &cfg);
    for (int i = 0; i < 5; i++) hpt_div_observe(&c, i, 2.0f, 1.0f, NULL);
    n = save_bytes(&c, buf, CAP);
    int32_t pos = 7;
    memcpy(buf + 4, &pos, 4);
    CHECK(load_bytes(&b, buf, n) == HPT_ERR_FORMAT, "a partly filled ring at position 7 with 5 values loaded");

    /* random damage: whatever loads must observe without going out of bounds */
    hpt_rng_seed(&r, 11);
    n = save_bytes(&a, buf, CAP);
    int loaded = 0;
    for (int t = 0; t < 3000; t++) {
        memcpy(buf2, buf, n);
        size_t at = hpt_rng_below(&r, 56);
        buf2[at] ^= (unsigned char)(1u << hpt_rng_below(&r, 8));
        hpt_div_init(&b, &cfg);
        if (load_bytes(&b, buf2, n) != HPT_OK) continue;
        loaded++;
        for (int j = 0; j < 40; j++) hpt_div_observe(&b, j, step_loss(j, &r), step_grad(j), NULL);
    }
    CHECK(loaded > 100, "only %d damaged states loaded", loaded);
}

int main(void) {
    test_config();
    test_nonfinite();
    test_loss_spike();
    test_grad();
    test_oscillation();
    test_escalation();
    test_smooth_curve();
    test_copy();
    test_checkpoint();
    return TEST_REPORT("test_divergence");
}
