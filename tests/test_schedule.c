/* tier: fast (make test; tests/run.sh) */
/*
 * test_schedule.c — the learning-rate schedules (src/train/schedule.c):
 *   - cosine is the trainer's formula before the schedule table, bit for bit
 *     (the old hpt_lr_at is kept below as the reference);
 *   - each schedule equals its formula, written here in steps, at the
 *     warmup's first and last step, the decay's start and middle, the wsd
 *     cooldown's first step, the last step, and past the end (the hybrid
 *     reads LRs along a horizon that may run past max_iters);
 *   - PyTorch's schedulers give the same rates (tests/fixtures/schedule_ref.txt,
 *     written by tools/ref/schedule_ref.py) within float rounding;
 *   - the table: every name accepted by --schedule, TCFG version 3 stores
 *     the three settings and versions 1 and 2 decode to cosine.
 */
#include "../src/train/settings.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/schedule_ref.txt"

/* trainer.c's hpt_lr_at before the schedule table */
static float old_lr_at(const hpt_train_config *c, int it) {
    if (it < c->warmup_iters) return c->lr * (float)(it + 1) / (float)c->warmup_iters;
    int span = c->max_iters - c->warmup_iters;
    if (span <= 0) return c->min_lr;
    double ratio = (double)(it - c->warmup_iters) / span;
    if (ratio > 1.0) ratio = 1.0;
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}

static hpt_train_config config(const char *sched, int warmup, int max_iters, float lr, float min_lr) {
    hpt_train_config c;
    hpt_train_config_default(&c);
    c.schedule = sched;
    c.warmup_iters = warmup;
    c.max_iters = max_iters;
    c.lr = lr;
    c.min_lr = min_lr;
    return c;
}

static void test_cosine_unchanged(void) {
    static const int warm[] = {0, 1, 10, 100, 2000}, iters[] = {1, 50, 2000, 12345};
    static const float lrs[][2] = {{1e-3f, 1e-4f}, {6e-3f, 0.0f}, {0.1f, 0.1f}, {3e-4f, 1e-5f}};
    long same = 0, total = 0;
    for (size_t w = 0; w < sizeof warm / sizeof *warm; w++)
        for (size_t m = 0; m < sizeof iters / sizeof *iters; m++)
            for (size_t l = 0; l < sizeof lrs / sizeof *lrs; l++) {
                hpt_train_config c = config("cosine", warm[w], iters[m], lrs[l][0], lrs[l][1]);
                for (int it = 0; it < iters[m] + 5; it++) {
                    float a = hpt_lr_at(&c, it), b = old_lr_at(&c, it);
                    same += !memcmp(&a, &b, sizeof a);
                    total++;
                }
            }
    CHECK(same == total, "cosine equals the old hpt_lr_at bit for bit (%ld of %ld)", same, total);
}

/* lr at 0-based step it, as the formulas say it in steps */
static double warmup_lr(const hpt_train_config *c, int it) { return (double)c->lr * (it + 1) / c->warmup_iters; }

static void near(double got, double want, const char *what, const char *sched) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", sched, what);
    CHECK_NEAR(got, want, 1e-12, 2e-7, buf);
}

static void test_formulas(void) {
    const int W = 100, N = 2000, span = N - W;
    const float lr = 1e-3f, mn = 1e-4f;
    const char *scheds[] = {"cosine", "linear", "constant", "wsd"};
    for (int s = 0; s < 4; s++) {
        hpt_train_config c = config(scheds[s], W, N, lr, mn);
        near(hpt_lr_at(&c, 0), warmup_lr(&c, 0), "warmup's first step lr / W", scheds[s]);
        near(hpt_lr_at(&c, W / 2), warmup_lr(&c, W / 2), "warmup's middle", scheds[s]);
        near(hpt_lr_at(&c, W - 1), lr, "warmup's last step reaches lr", scheds[s]);
        near(hpt_lr_at(&c, W), lr, "decay's first step: lr", scheds[s]);
        double mid = !strcmp(scheds[s], "cosine") || !strcmp(scheds[s], "linear") ? mn + 0.5 * (lr - mn) : lr;
        near(hpt_lr_at(&c, W + span / 2), mid, "mid-decay", scheds[s]);
        double t = (double)(N - 1 - W) / span, last = lr;
        if (!strcmp(scheds[s], "cosine")) last = mn + 0.5 * (1 + cos(M_PI * t)) * (lr - mn);
        if (!strcmp(scheds[s], "linear")) last = mn + (1 - t) * (lr - mn);
        if (!strcmp(scheds[s], "wsd")) last = mn + (1 - sqrt((N - 1 - 0.8 * N) / (0.2 * N))) * (lr - mn);
        near(hpt_lr_at(&c, N - 1), last, "the last step", scheds[s]);
        double past = !strcmp(scheds[s], "constant") ? lr : mn;
        near(hpt_lr_at(&c, N), past, "one step past the end", scheds[s]);
        near(hpt_lr_at(&c, N + 50), past, "a horizon past the end", scheds[s]);
    }
    /* D2Z: linear with min_lr 0 ends at lr / span and reaches 0 one step past the end */
    hpt_train_config d = config("linear", W, N, lr, 0.0f);
    near(hpt_lr_at(&d, N - 1), lr / (double)span, "D2Z's last step lr / span", "linear");
    CHECK(hpt_lr_at(&d, N) == 0.0f, "D2Z: 0 after the last step");
    /* wsd: stable up to the cooldown, which starts at max_iters (1 - decay_frac) */
    const char *shapes[] = {"linear", "sqrt"};
    for (int k = 0; k < 2; k++) {
        hpt_train_config c = config("wsd", W, N, lr, mn);
        c.decay_frac = 0.3f;
        c.cooldown = shapes[k];
        double D = 600, start = N - D;  /* 0.3 x 2000 steps, from step 1400 */
        near(hpt_lr_at(&c, (int)start - 1), lr, "the stable phase's last step", shapes[k]);
        near(hpt_lr_at(&c, (int)start), lr, "the cooldown's first step (progress 0)", shapes[k]);
        for (int it = (int)start; it < N; it += 37) {
            double p = (it - start) / D, f = k ? 1 - sqrt(p) : 1 - p;
            near(hpt_lr_at(&c, it), mn + f * (lr - mn), "in the cooldown", shapes[k]);
        }
        double p = (N - 1 - start) / D, f = k ? 1 - sqrt(p) : 1 - p;
        near(hpt_lr_at(&c, N - 1), mn + f * (lr - mn), "the cooldown's last step", shapes[k]);
        near(hpt_lr_at(&c, N), mn, "the cooldown's end: min_lr", shapes[k]);
    }
    /* a cooldown longer than the steps after the warmup starts at the warmup's end */
    hpt_train_config c = config("wsd", 60, 100, lr, 0.0f);
    c.decay_frac = 0.9f;
    near(hpt_lr_at(&c, 59), lr, "the warmup's last step", "wsd, decay-frac 0.9");
    near(hpt_lr_at(&c, 70), (1 - sqrt(10 / 40.0)) * lr, "cooldown over the 40 steps after the warmup", "wsd, decay-frac 0.9");
    c.decay_frac = 0.0f;
    near(hpt_lr_at(&c, 99), lr, "no cooldown: constant", "wsd, decay-frac 0");
    /* the cooldown is a whole number of steps: 0.25 x 103 = 25.75 -> 26, from step 77 */
    c = config("wsd", 10, 103, lr, 0.0f);
    c.decay_frac = 0.25f;
    near(hpt_lr_at(&c, 76), lr, "before the rounded cooldown", "wsd, 25.75 steps");
    near(hpt_lr_at(&c, 77), lr, "the rounded cooldown's first step", "wsd, 25.75 steps");
    near(hpt_lr_at(&c, 102), (1 - sqrt(25 / 26.0)) * lr, "its last step", "wsd, 25.75 steps");
}

/* schedule.c's wsd before short cooldowns got 2 steps: the cooldown rounded
 * to whole steps */
static double old_wsd_lr(const hpt_train_config *c, int it) {
    if (it < c->warmup_iters) return c->lr * (float)(it + 1) / (float)c->warmup_iters;
    int span = c->max_iters - c->warmup_iters;
    if (span <= 0) return c->min_lr;
    double t = (double)(it - c->warmup_iters) / span;
    if (t > 1.0) t = 1.0;
    double d = floor((double)c->decay_frac * c->max_iters + 0.5), k = 1.0;
    if (d > span) d = span;
    if (d > 0) {
        double p = 1.0 - (1.0 - t) * span / d;
        if (p > 0) k = !strcmp(c->cooldown, "linear") ? 1.0 - p : 1.0 - sqrt(p);
    }
    return (float)(c->min_lr + k * (c->lr - c->min_lr));
}

/* A short cooldown still cools: --decay-frac 0.05 over 10 steps
 * rounded to a cooldown of 1 step (0.04: 0 steps), and a 1-step cooldown
 * runs its one step at progress 0, the full rate: the run never decayed.
 * A decay-frac > 0 now gets at least 2 steps (the fewest whose last step
 * decays); every run whose rounded cooldown was 2 steps or more keeps its
 * rates bit for bit. */
static void test_wsd_short(void) {
    const float lr = 1e-3f;
    const float fracs[] = {0.05f, 0.04f, 0.01f, 0.1f};
    for (size_t i = 0; i < sizeof fracs / sizeof *fracs; i++) {
        for (int k = 0; k < 2; k++) {
            hpt_train_config c = config("wsd", 0, 10, lr, 0.0f);
            c.decay_frac = fracs[i];
            c.cooldown = k ? "sqrt" : "linear";
            char what[96];
            snprintf(what, sizeof what, "wsd --decay-frac %g over 10 steps, %s", (double)fracs[i], c.cooldown);
            near(hpt_lr_at(&c, 7), lr, "the last stable step", what);
            near(hpt_lr_at(&c, 8), lr, "the 2-step cooldown's first step (progress 0)", what);
            near(hpt_lr_at(&c, 9), (k ? 1 - sqrt(0.5) : 0.5) * lr, "its last step decays (progress 1/2)", what);
            CHECK(hpt_lr_at(&c, 9) < lr, "%s: never decays", what);
        }
    }
    /* decay-frac 0 stays constant; a run with one step after the warmup
     * has no room for a 2-step cooldown and keeps its one */
    hpt_train_config c = config("wsd", 0, 10, lr, 0.0f);
    c.decay_frac = 0.0f;
    near(hpt_lr_at(&c, 9), lr, "no cooldown: constant", "wsd, decay-frac 0, 10 steps");
    c = config("wsd", 9, 10, lr, 0.0f);
    c.decay_frac = 0.05f;
    near(hpt_lr_at(&c, 9), lr, "one step after the warmup: a 1-step cooldown", "wsd, decay-frac 0.05");
    /* every config whose rounded cooldown was >= 2 steps: the old rates, bit for bit */
    static const int warm[] = {0, 3, 50}, iters[] = {10, 37, 200, 1001};
    static const float fr[] = {0.05f, 0.1f, 0.15f, 0.2f, 0.3f, 0.5f, 0.9f, 1.0f};
    long same = 0, total = 0;
    for (size_t w = 0; w < 3; w++)
        for (size_t m = 0; m < 4; m++)
            for (size_t f = 0; f < 8; f++)
                for (int k = 0; k < 2; k++) {
                    hpt_train_config d = config("wsd", warm[w], iters[m], lr, 1e-4f);
                    d.decay_frac = fr[f];
                    d.cooldown = k ? "sqrt" : "linear";
                    double D = floor((double)d.decay_frac * d.max_iters + 0.5);
                    int span = d.max_iters - d.warmup_iters;
                    if (span <= 0 || (D < span ? D : span) < 2) continue;  /* the changed cases */
                    for (int it = 0; it < iters[m] + 3; it++) {
                        float a = hpt_lr_at(&d, it), b = (float)old_wsd_lr(&d, it);
                        same += !memcmp(&a, &b, sizeof a);
                        total++;
                    }
                }
    CHECK(total > 1000 && same == total, "wsd with a cooldown of >= 2 steps unchanged bit for bit (%ld of %ld)",
          same, total);
}

/* ---------------------------------------------------------------- PyTorch's rates */

static void test_torch_fixture(void) {
    FILE *f = fopen(FIXTURE, "r");
    CHECK(f != NULL, "cannot open %s (tools/ref/schedule_ref.py writes it)", FIXTURE);
    if (!f) return;
    char line[256], sched[32], cool[32];
    int cases = 0, values = 0, bad = 0;
    hpt_train_config c;
    int n = 0, it = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        float lr, mn, frac;
        int w, m;
        if (sscanf(line, "case %31s %31s %d %d %f %f %f", sched, cool, &w, &m, &lr, &mn, &frac) == 7) {
            CHECK(it == n, "case %d: %d rates of %d", cases, it, n);
            c = config(sched, w, m, lr, mn);
            c.decay_frac = frac;
            c.cooldown = cool;
            n = m, it = 0;
            cases++;
            continue;
        }
        double want = strtod(line, NULL), got = hpt_lr_at(&c, it);
        if (!(fabs(got - want) <= 1e-12 + 1e-6 * fabs(want))) {
            if (bad++ < 5) fprintf(stderr, "  %s %s step %d: hpt %.9g, torch %.9g\n", sched, cool, it, got, want);
        }
        it++, values++;
    }
    fclose(f);
    CHECK(it == n && cases >= 9, "%d cases read, the last complete", cases);
    CHECK(bad == 0, "hpt's rates equal PyTorch's within 1e-6 relative (%d of %d differ)", bad, values);
}

/* ---------------------------------------------------------------- the table and TCFG */

static void test_table(void) {
    const hpt_setting *s = hpt_setting_find("--schedule");
    CHECK(s != NULL, "--schedule is a setting");
    if (!s) return;
    int n = 0;
    for (; hpt_schedule_name(n); n++) {
        hpt_train_config c;
        hpt_train_config_default(&c);
        CHECK(hpt_setting_parse(s, &c, hpt_schedule_name(n)) == HPT_OK && !strcmp(c.schedule, hpt_schedule_name(n)),
              "--schedule %s accepted", hpt_schedule_name(n));
    }
    CHECK(n == 4 && hpt_setting_name(s, n) == NULL, "four schedules, each a name of --schedule");
    hpt_train_config c;
    hpt_train_config_default(&c);
    CHECK(hpt_setting_parse(s, &c, "d2z") == HPT_ERR_ARG && strstr(hpt_errmsg(), "--schedule"), "an unknown name: %s",
          hpt_errmsg());
    CHECK(!strcmp(c.schedule, "linear") && c.min_lr == 0.0f && c.decay_frac == 0.2f && !strcmp(c.cooldown, "sqrt"),
          "defaults: linear to 0 (D2Z); wsd's cooldown sqrt over the last 0.2");
}

static void test_tcfg(void) {
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    static unsigned char buf[20000];
    static char strs[2 * 4096];
    hpt_train_config c, d;
    hpt_train_config_default(&c);
    c.data_path = "x";
    c.schedule = "wsd"; c.decay_frac = 0.3f; c.cooldown = "linear";
    size_t n3 = hpt_settings_encode(rows, n, &c, 3, 0, buf, sizeof buf);
    size_t n2 = hpt_settings_encode(rows, n, &c, 2, 0, buf, sizeof buf);
    CHECK(n3 == n2 + (4 + 3) + 4 + (4 + 6), "TCFG v3 appends schedule, decay_frac, cooldown (%zu vs %zu)", n3, n2);
    n3 = hpt_settings_encode(rows, n, &c, 3, 0, buf, sizeof buf);
    hpt_train_config_default(&d);
    hpt_cursor k = {buf, n3, 0};
    CHECK(hpt_settings_decode(rows, n, &d, 3, 0, &k, strs, sizeof strs) && k.pos == n3 && !strcmp(d.schedule, "wsd") &&
          d.decay_frac == 0.3f && !strcmp(d.cooldown, "linear"), "v3 round trip: %s", hpt_errmsg());
    hpt_train_config_default(&d);
    k = (hpt_cursor){buf, n2, 0};
    int ok = hpt_settings_decode(rows, n, &d, 2, 0, &k, strs, sizeof strs);
    hpt_train_config_legacy(&d, 2);
    CHECK(ok && !strcmp(d.schedule, "cosine"), "a v2 TCFG decodes to cosine (the default then)");
    hpt_train_config_default(&d);
    hpt_train_config_legacy(&d, 3);
    CHECK(!strcmp(d.schedule, "linear"), "a v3 TCFG's rows keep today's values");
    /* a stored name the table does not know is refused naming the flag */
    hpt_train_config_default(&c);
    c.data_path = "x";
    c.schedule = "stair";
    n3 = hpt_settings_encode(rows, n, &c, 3, 0, buf, sizeof buf);
    k = (hpt_cursor){buf, n3, 0};
    CHECK(!hpt_settings_decode(rows, n, &d, 3, 0, &k, strs, sizeof strs) && strstr(hpt_errmsg(), "--schedule"),
          "an unknown stored schedule refused: %s", hpt_errmsg());
}

int main(void) {
    test_cosine_unchanged();
    test_formulas();
    test_wsd_short();
    test_torch_fixture();
    test_table();
    test_tcfg();
    return TEST_REPORT("test_schedule");
}
