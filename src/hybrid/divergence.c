/*
 * divergence.c — the divergence monitor of divergence.h: fixed rings of
 * recent losses and gradient norms, the checks, and the level logic.
 *
 * Order inside hpt_div_observe: judge (non-finite values, then the loss
 * z-score, gradient explosion and vanishing, oscillation), escalate
 * consecutive warnings, and only then record the values that are fit to
 * become baseline. The checks read the rings; only the recording writes them.
 */
#include "divergence.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* --------------------------------------------------------------- config */

void hpt_div_config_default(hpt_div_config *c) {
    memset(c, 0, sizeof *c);
    /* 64 steps: long enough that noise gives a stable mean and std and that
     * the oscillation fraction of pure noise (2/3, sd ~0.06) stays far from
     * 0.9; short enough to follow a loss that halves every few hundred steps. */
    c->window = 64;
    /* z 6 for a warning: minibatch losses have heavier tails than a Gaussian,
     * and a real divergence is far beyond it within a step or two. */
    c->loss_z_warn = 6.0f;
    c->loss_z_crit = 12.0f;
    c->grad_explode = 10.0f;
    c->grad_vanish = 0.01f;
    c->oscillation = 0.9f;
    c->escalate = 3;
}

hpt_status hpt_div_config_check(const hpt_div_config *c) {
    if (c->window < 8 || c->window > HPT_DIV_MAX_WINDOW)
        return hpt_fail(HPT_ERR_ARG, "--div-window must be in [8, %d] (got %d)", HPT_DIV_MAX_WINDOW, c->window);
    /* the !(x > y) forms reject NaN as well */
    if (!(c->loss_z_warn > 0.0f) || !isfinite(c->loss_z_warn))
        return hpt_fail(HPT_ERR_ARG, "--div-loss-z must be a positive number (got %g)", (double)c->loss_z_warn);
    if (!(c->loss_z_crit >= c->loss_z_warn) || !isfinite(c->loss_z_crit))
        return hpt_fail(HPT_ERR_ARG, "--div-loss-z-crit must be finite and >= --div-loss-z (%g) (got %g)",
                        (double)c->loss_z_warn, (double)c->loss_z_crit);
    if (!(c->grad_explode > 1.0f) || !isfinite(c->grad_explode))
        return hpt_fail(HPT_ERR_ARG, "--div-grad-explode must be finite and > 1 (got %g)", (double)c->grad_explode);
    if (!(c->grad_vanish >= 0.0f && c->grad_vanish < 1.0f))
        return hpt_fail(HPT_ERR_ARG, "--div-grad-vanish must be in [0, 1) (got %g; 0 turns the check off)",
                        (double)c->grad_vanish);
    if (!(c->oscillation >= 0.7f && c->oscillation <= 1.0f))
        return hpt_fail(HPT_ERR_ARG, "--div-oscillation must be in [0.7, 1] (got %g; noise alone changes "
                        "direction 2/3 of the time)", (double)c->oscillation);
    if (c->escalate < 1 || c->escalate > 1000000)
        return hpt_fail(HPT_ERR_ARG, "--div-escalate must be in [1, 1000000] (got %d)", c->escalate);
    return HPT_OK;
}

const char *hpt_div_level_name(hpt_div_level l) {
    static const char *names[] = {"ok", "caution", "warning", "critical"};
    return l >= HPT_DIV_OK && l <= HPT_DIV_CRITICAL ? names[l] : "?";
}

/* --------------------------------------------------------------- rings */

/* The ring holds the last `window` accepted values; once full, `next` is
 * the oldest, so chronological order starts there (ring_oscillation). */
static void ring_push(hpt_div_ring *r, int window, float x) {
    r->v[r->next] = x;
    r->next = (r->next + 1) % window;
    if (r->n < window) r->n++;
}

/* Mean and population standard deviation, two passes in double. */
static void ring_stats(const hpt_div_ring *r, double *mean, double *sd) {
    double s = 0.0;
    for (int i = 0; i < r->n; i++) s += r->v[i];
    double m = s / r->n, q = 0.0;
    for (int i = 0; i < r->n; i++) q += (r->v[i] - m) * (r->v[i] - m);
    *mean = m;
    *sd = sqrt(q / r->n);
}

/* Fraction of direction changes over the full ring followed by x: of the
 * window - 1 pairs of consecutive differences, those with strictly opposite
 * signs (a flat step breaks a run, it is no reversal). */
static double ring_oscillation(const hpt_div_ring *r, int window, float x) {
    int changes = 0, prev_sign = 0;
    for (int i = 0; i < window; i++) {
        float a = r->v[(r->next + i) % window];
        float b = i + 1 < window ? r->v[(r->next + i + 1) % window] : x;
        int sign = (b > a) - (b < a);
        if (i > 0 && sign * prev_sign < 0) changes++;
        prev_sign = sign;
    }
    return (double)changes / (window - 1);
}

/* --------------------------------------------------------------- observe */

void hpt_div_init(hpt_div *d, const hpt_div_config *cfg) {
    HPT_ASSERT(hpt_div_config_check(cfg) == HPT_OK);
    memset(d, 0, sizeof *d);  /* padding too: the struct is saved byte for byte */
    d->cfg = *cfg;
    d->loss_z = d->grad_ratio = d->osc_frac = NAN;
    d->last_step = -1;
    d->last_alarm_step = -1;
}

/* Raises *level to lvl with a reason, if lvl is higher (the first reason at
 * the highest level wins). */
static void raise_to(hpt_div *d, hpt_div_level *level, hpt_div_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void raise_to(hpt_div *d, hpt_div_level *level, hpt_div_level lvl, const char *fmt, ...) {
    if (lvl <= *level) return;
    *level = lvl;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
}

hpt_div_level hpt_div_observe(hpt_div *d, int step, float loss, float grad_norm, const char **why) {
    const hpt_div_config *c = &d->cfg;
    hpt_div_level level = HPT_DIV_OK;
    hpt_div_level loss_level = HPT_DIV_OK, grad_level = HPT_DIV_OK;
    int has_grad = !(grad_norm < 0.0f);   /* NaN has a gradient: a broken one */
    /* statistics of this observation only: NaN unless computed below */
    d->loss_z = d->grad_ratio = d->osc_frac = NAN;

    /* non-finite: critical at once, full window or not */
    if (!isfinite(loss)) {
        raise_to(d, &level, HPT_DIV_CRITICAL, "loss is %s", isnan(loss) ? "nan" : "inf");
        loss_level = HPT_DIV_CRITICAL;
    }
    if (has_grad && !isfinite(grad_norm)) {
        raise_to(d, &level, HPT_DIV_CRITICAL, "grad norm is %s", isnan(grad_norm) ? "nan" : "inf");
        grad_level = HPT_DIV_CRITICAL;
    }

    /* loss z-score against the ring as it was before this step */
    if (loss_level == HPT_DIV_OK && d->loss.n == c->window) {
        double mean, sd;
        ring_stats(&d->loss, &mean, &sd);
        double floor_sd = 1e-3 * fabs(mean) + 1e-12;
        /* signed, and only the upper tail alarms: a falling loss is progress */
        double z = (loss - mean) / (sd > floor_sd ? sd : floor_sd);
        d->loss_z = (float)z;
        hpt_div_level l = z >= c->loss_z_crit ? HPT_DIV_CRITICAL : z >= c->loss_z_warn ? HPT_DIV_WARNING : HPT_DIV_OK;
        if (l != HPT_DIV_OK)
            raise_to(d, &level, l, "loss z-score %.1f >= %.1f (loss %.4f, window mean %.4f, std %.4f)", z,
                     l == HPT_DIV_CRITICAL ? c->loss_z_crit : c->loss_z_warn, loss, mean, sd);
        loss_level = l;
    }

    /* gradient norm against the mean of its ring */
    if (has_grad && grad_level == HPT_DIV_OK && d->grad.n == c->window) {
        double mean, sd;
        ring_stats(&d->grad, &mean, &sd);
        /* a window of zero norms (a model with no trainable signal) has no
         * scale to compare against */
        if (mean > 0.0) {
            double ratio = grad_norm / mean, crit = (double)c->grad_explode * c->grad_explode;
            d->grad_ratio = (float)ratio;
            if (ratio >= c->grad_explode) {
                grad_level = ratio >= crit ? HPT_DIV_CRITICAL : HPT_DIV_WARNING;
                raise_to(d, &level, grad_level, "grad norm %.4g is %.1fx the window mean %.4g (>= %g)", grad_norm,
                         ratio, mean, grad_level == HPT_DIV_CRITICAL ? crit : (double)c->grad_explode);
            } else if (c->grad_vanish > 0.0f && ratio <= c->grad_vanish) {
                grad_level = HPT_DIV_WARNING;
                raise_to(d, &level, grad_level, "grad norm %.4g is %.4fx the window mean %.4g (<= %g): vanishing",
                         grad_norm, ratio, mean, (double)c->grad_vanish);
            }
        }
    }

    /* oscillation of the loss over the ring and this step: the new value is
     * part of the pattern here, not judged against it, so it is included */
    if (isfinite(loss) && d->loss.n == c->window) {
        double f = ring_oscillation(&d->loss, c->window, loss);
        d->osc_frac = (float)f;
        if (f >= c->oscillation)
            raise_to(d, &level, HPT_DIV_CAUTION, "loss oscillates: %.0f%% of the last %d steps changed direction "
                     "(>= %.0f%%)", 100.0 * f, c->window - 1, 100.0 * c->oscillation);
    }

    /* persistence: a WARNING that keeps coming is a divergence */
    if (level >= HPT_DIV_WARNING) {
        d->warn_streak++;
        if (level == HPT_DIV_WARNING && d->warn_streak >= c->escalate) {
            char last[sizeof d->why];
            memcpy(last, d->why, sizeof last);
            level = HPT_DIV_CRITICAL;
            snprintf(d->why, sizeof d->why, "%d consecutive warnings; last: %.200s", d->warn_streak, last);
        }
        d->last_alarm_step = step;
    } else {
        d->warn_streak = 0;
    }

    /* record: only values fit to be baseline (see divergence.h) */
    if (loss_level < HPT_DIV_CRITICAL) ring_push(&d->loss, c->window, loss);
    if (has_grad && grad_level < HPT_DIV_CRITICAL) ring_push(&d->grad, c->window, grad_norm);

    /* bookkeeping; why stays valid until the next call */
    d->last_step = step;
    d->count[level]++;
    if (level == HPT_DIV_OK) d->why[0] = '\0';
    if (why) *why = level == HPT_DIV_OK ? NULL : d->why;
    return level;
}

/* --------------------------------------------------------------- checkpoints
 * Field by field (docs/format.md, HYBR): i32 loss.n, loss.next, grad.n,
 * grad.next, warn_streak, last_step, last_alarm_step, count[4]; f32 loss_z,
 * grad_ratio, osc_frac; f32 loss.v[window], grad.v[window]. Not saved: the
 * config (the run supplies it) and `why` (rewritten by every observation
 * before it is read). */

#define COUNT_MAX 1000000000   /* runs are at most 1e8 steps */

size_t hpt_div_state_bytes(const hpt_div *d) { return 4 * 11 + 4 * 3 + 2 * 4 * (size_t)d->cfg.window; }

void hpt_div_save(const hpt_div *d, hpt_writer *w) {
    int32_t iv[11] = {d->loss.n, d->loss.next, d->grad.n, d->grad.next, d->warn_streak, d->last_step,
                      d->last_alarm_step, d->count[0], d->count[1], d->count[2], d->count[3]};
    float fv[3] = {d->loss_z, d->grad_ratio, d->osc_frac};
    hpt_w_bytes(w, iv, sizeof iv);
    hpt_w_bytes(w, fv, sizeof fv);
    hpt_w_bytes(w, d->loss.v, (size_t)d->cfg.window * sizeof(float));
    hpt_w_bytes(w, d->grad.v, (size_t)d->cfg.window * sizeof(float));
}

/* A ring is filled from slot 0 on, so until it is full `next` is its count;
 * the values it holds entered it finite (loss) or finite and >= 0 (grad). */
static int ring_ok(const hpt_div_ring *r, int window, int is_grad) {
    if (r->n < 0 || r->n > window || r->next < 0 || r->next >= window || (r->n < window && r->next != r->n))
        return 0;
    for (int i = 0; i < r->n; i++)
        if (!isfinite(r->v[i]) || (is_grad && r->v[i] < 0.0f)) return 0;
    return 1;
}

hpt_status hpt_div_load(hpt_div *d, hpt_cursor *k) {
    hpt_div t;
    hpt_div_init(&t, &d->cfg);
    int32_t iv[11];
    float fv[3];
    size_t wb = (size_t)t.cfg.window * sizeof(float);
    if (!hpt_cur_bytes(k, iv, sizeof iv) || !hpt_cur_bytes(k, fv, sizeof fv) || !hpt_cur_bytes(k, t.loss.v, wb) ||
        !hpt_cur_bytes(k, t.grad.v, wb))
        return hpt_fail(HPT_ERR_FORMAT, "divergence monitor state: truncated");
    t.loss.n = iv[0]; t.loss.next = iv[1]; t.grad.n = iv[2]; t.grad.next = iv[3];
    t.warn_streak = iv[4]; t.last_step = iv[5]; t.last_alarm_step = iv[6];
    for (int i = 0; i < 4; i++) t.count[i] = iv[7 + i];
    t.loss_z = fv[0]; t.grad_ratio = fv[1]; t.osc_frac = fv[2];
    if (!ring_ok(&t.loss, t.cfg.window, 0) || !ring_ok(&t.grad, t.cfg.window, 1))
        return hpt_fail(HPT_ERR_FORMAT, "divergence monitor state: a ring's count or position is out of range "
                        "(window %d) or it holds a non-finite value", t.cfg.window);
    int ok = t.warn_streak >= 0 && t.warn_streak <= COUNT_MAX && t.last_step >= -1 && t.last_step <= COUNT_MAX &&
             t.last_alarm_step >= -1 && t.last_alarm_step <= COUNT_MAX;
    for (int i = 0; i < 4; i++) ok = ok && t.count[i] >= 0 && t.count[i] <= COUNT_MAX;
    if (!ok) return hpt_fail(HPT_ERR_FORMAT, "divergence monitor state: a counter or step is out of range");
    *d = t;
    return HPT_OK;
}
