/*
 * schedule.c — the learning rate along a run: a linear warmup over
 * --warmup-iters, then one of the schedules of the table below from --lr
 * down to --min-lr. A schedule is a shape: at progress t in [0, 1] (0 at the
 * warmup's end, 1 one step past the last) it gives the coefficient k(t) in
 * [0, 1], and lr(t) = min_lr + k(t) (lr - min_lr). Adding a schedule is one
 * row and one function.
 *
 * cosine is the trainer's original formula, operation for operation (runs
 * with it are unchanged bit for bit). The others:
 *   linear    1 - t (with --min-lr 0 the linear decay to zero, D2Z, Bergsma
 *             et al. 2025, arXiv 2502.15938)
 *   constant  1
 *   wsd       1 until the cooldown, the last --decay-frac of the run's steps
 *             (rounded to whole steps, at least 2 when > 0; of all of them, warmup included, as "the last 20% of training"
 *             in Hägele et al. 2024, arXiv 2405.18392; never reaching into
 *             the warmup); over it, at cooldown progress p in [0, 1]:
 *             1 - p (--cooldown linear) or 1 - sqrt(p) (sqrt)
 * --optimizer schedule-free: the warmup, then constant lr (its averaging
 * stands in for the decay; Defazio et al. 2024).
 * tools/ref/schedule_ref.py writes PyTorch's values of the same schedules
 * (tests/fixtures/schedule_ref.txt, checked by tests/test_schedule.c).
 */
#include "schedule.h"

#include <math.h>
#include <string.h>

typedef double (*shape_fn)(const hpt_train_config *c, double t, int span);

static double cosine(const hpt_train_config *c, double t, int span) { return 0.5 * (1.0 + cos(M_PI * t)); }
static double linear(const hpt_train_config *c, double t, int span) { return 1.0 - t; }
static double constant(const hpt_train_config *c, double t, int span) { return 1.0; }

/* Constant, then the cooldown over the last D = decay_frac x max_iters
 * steps, rounded to a whole number of steps (so that the cooldown starts at
 * a step, with progress 0, whatever float 0.2 is) and at most the span after
 * the warmup. At step it the cooldown's progress is
 * p = (it - (max_iters - D)) / D = 1 - (1 - t) span / D, so its last step
 * is at 1 - 1/D: a cooldown of 1 step (or 0, --decay-frac 0.05 over 10
 * steps rounds to 1, 0.04 to 0) never lowers the rate. A decay_frac > 0
 * gets at least 2 steps, the fewest that decay (a short cooldown still
 * cools); a rounded D of 2
 * or more is left as it was, so those runs keep their rates bit for bit. */
static double wsd(const hpt_train_config *c, double t, int span) {
    double d = floor((double)c->decay_frac * c->max_iters + 0.5);
    if (c->decay_frac > 0.0f && d < 2) d = 2;
    if (d > span) d = span;
    if (!(d > 0)) return 1.0;
    double p = 1.0 - (1.0 - t) * span / d;
    if (p <= 0) return 1.0;
    return !strcmp(c->cooldown, "linear") ? 1.0 - p : 1.0 - sqrt(p);
}

static const struct { const char *name; shape_fn shape; } table[] = {
    {"cosine", cosine},
    {"linear", linear},
    {"constant", constant},
    {"wsd", wsd},
};
#define NSCHED ((int)(sizeof table / sizeof table[0]))

const char *hpt_schedule_name(int i) { return i >= 0 && i < NSCHED ? table[i].name : NULL; }

static shape_fn shape_of(const char *name) {
    for (int i = 0; i < NSCHED; i++)
        if (name && !strcmp(table[i].name, name)) return table[i].shape;
    HPT_ASSERT(!"a schedule the settings table accepted");
    return cosine;
}

float hpt_lr_at(const hpt_train_config *c, int it) {
    if (it < c->warmup_iters) return c->lr * (float)(it + 1) / (float)c->warmup_iters;
    if (c->optimizer && !strcmp(c->optimizer, "schedule-free")) return c->lr;  /* its averaging replaces the decay */
    int span = c->max_iters - c->warmup_iters;
    if (span <= 0) return c->min_lr;
    double ratio = (double)(it - c->warmup_iters) / span;
    if (ratio > 1.0) ratio = 1.0;
    double coeff = shape_of(c->schedule)(c, ratio, span);
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}

void hpt_schedule_intern(hpt_train_config *c) {
    for (int i = 0; i < NSCHED; i++)
        if (c->schedule && !strcmp(table[i].name, c->schedule)) c->schedule = table[i].name;
    if (c->cooldown) c->cooldown = !strcmp(c->cooldown, "linear") ? "linear" : "sqrt";
    if (c->optimizer)
        c->optimizer = !strcmp(c->optimizer, "schedule-free") ? "schedule-free"
                       : !strcmp(c->optimizer, "muon")        ? "muon"
                                                              : "adamw";
    if (c->muon_scale) c->muon_scale = !strcmp(c->muon_scale, "rms") ? "rms" : "spectral";
}

int hpt_schedule_describe(const hpt_train_config *c, char *buf, size_t n) {
    if (c->optimizer && !strcmp(c->optimizer, "schedule-free"))
        return snprintf(buf, n, "then constant: schedule-free AdamW, evaluated at its average");
    if (!strcmp(c->schedule, "wsd"))
        return snprintf(buf, n, "wsd, %s cooldown over the last %g of the steps", c->cooldown, c->decay_frac);
    return snprintf(buf, n, "%s", c->schedule);
}

void hpt_schedule_summary(const hpt_train_config *c, cJSON *o) {
    if (c->optimizer && !strcmp(c->optimizer, "schedule-free")) {
        cJSON_AddStringToObject(o, "schedule", "constant");
        cJSON_AddStringToObject(o, "optimizer", "schedule-free");
        return;
    }
    cJSON_AddStringToObject(o, "schedule", c->schedule);
    if (c->optimizer && !strcmp(c->optimizer, "muon")) cJSON_AddStringToObject(o, "optimizer", "muon");
    if (strcmp(c->schedule, "wsd")) return;
    char frac[32];  /* as the table formats it: 0.3, not 0.300000012 */
    hpt_setting_format(hpt_setting_find("--decay-frac"), c, frac, sizeof frac);
    cJSON_AddItemToObject(o, "decay_frac", cJSON_CreateRaw(frac));
    cJSON_AddStringToObject(o, "cooldown", c->cooldown);
}
