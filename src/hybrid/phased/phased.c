/*
 * phased.c — the phased controller's steps: the phase machine picks a real
 * step or a Predict phase; a Predict phase applies predicted updates in
 * place, verifies them with forward-only probes and a line search, and
 * keeps the jump or rolls it back byte for byte. See phased.h.
 *
 * A Predict phase is one call of the step hook (predict_phase):
 *   1. snapshot params, m and v into the driver's one snapshot;
 *   2. draw probe_batches training batches and measure their loss L0;
 *   3. apply the predictor's step k = 1..horizon in place (no backward); every
 *      correction_interval steps re-measure the probe loss and stop early
 *      once it rises or falls behind what real steps would buy or what the
 *      dynamics model forecast;
 *   4. line search on the displacement D = theta - snapshot: probe losses at
 *      alpha 0.5 and 1 (and the parabola's minimum in (0.05, 1.5]);
 *   5. keep the best alpha if its gain, in real steps of recent progress, is
 *      worth more than the phase cost; else restore the snapshot (rollback).
 * Accepted, the step counter (the LR schedule's position) moves by the real
 * steps the jump was worth, at most the steps applied; rolled back, it does
 * not, and only the probes' time is lost. Probe passes count as training
 * time. Real steps, rollback after a divergence and phases.jsonl are the
 * driver's (../hybrid.c).
 */
#include "phased.h"
#include "../hybrid_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- probes */

static hpt_status draw_probes(hybrid *h) {
    for (int i = 0; i < h->phz->P; i++) {
        hpt_batch b;
        HPT_TRY(hpt_trainer_draw_batch(h->tr, &b));
        h->phz->pB[i] = b.B;
        size_t rows = (size_t)b.B * b.T;
        if (b.tokens) memcpy(h->phz->ptok + (size_t)i * h->phz->maxB * h->phz->T, b.tokens, rows * sizeof(int));
        memcpy(h->phz->ptgt + (size_t)i * h->phz->maxB * h->phz->T, b.targets, rows * sizeof(int));
        if (b.x) memcpy(h->phz->px + (size_t)i * h->phz->maxB * h->phz->xdim, b.x, (size_t)b.B * h->phz->xdim * sizeof(float));
    }
    return HPT_OK;
}

/* Mean loss over the probe batches at the current parameters. */
static hpt_status probe_loss(hybrid *h, float *loss) {
    double s = 0.0, rows = 0.0;
    for (int i = 0; i < h->phz->P; i++) {
        hpt_batch b = {.B = h->phz->pB[i], .T = h->phz->T,
                       .tokens = h->phz->xdim ? NULL : h->phz->ptok + (size_t)i * h->phz->maxB * h->phz->T,
                       .x = h->phz->xdim ? h->phz->px + (size_t)i * h->phz->maxB * h->phz->xdim : NULL, .x_dim = h->phz->xdim,
                       .targets = h->phz->ptgt + (size_t)i * h->phz->maxB * h->phz->T};
        float l;
        HPT_TRY(hpt_trainer_probe(h->tr, &b, &l));
        s += (double)l * b.B;
        rows += b.B;
        h->cnt.probe_passes++;
    }
    *loss = (float)(s / rows);
    return HPT_OK;
}

/* params = snapshot + alpha * dir */
static void set_along(hybrid *h, float alpha) {
    float *p = h->m->params;
    const float *s = hpt_snapshot_params(&h->snap), *d = h->phz->dir;
    #pragma omp parallel for simd
    for (size_t i = 0; i < h->n; i++) p[i] = s[i] + alpha * d[i];
}

/* ---------------------------------------------------------------- phases */

/* Confidence that a Predict phase pays: the learned dynamics' confidence in
 * its loss forecast at the longest horizon, capped by the acceptance
 * history of verified jumps. The acceptance EMA relaxes back towards 1 over
 * real steps (half-life ~140 steps, hpt_phased_real_step_done), so an old
 * failure does not shut prediction off forever; the controller's backoff
 * and waste budget bound what repeated failures cost. */
static float confidence_now(hybrid *h) {
    return hpt_learner_confidence(h->learn, h->cfg.max_predict_steps, h->phz->accept_ema);
}

/* What a Predict phase has cost so far, in real steps: its wall time over a
 * real step's, or with count_cost its passes (a probe forward a third of a
 * real step, a predicted step a fiftieth), which no clock can change. */
static double phase_cost(const hybrid *h, double t0, int probes0, int applied) {
    if (h->cfg.count_cost) return (h->cnt.probe_passes - probes0) / 3.0 + applied / 50.0;
    return h->real_step_s > 0.0 ? (hpt_now() - t0) / h->real_step_s : 1.0;
}

/* One Predict phase in the making: what its parts hand on. */
typedef struct jump {
    double t0;
    int probes0;             /* probe passes before it: its cost in passes */
    int step0, updates;      /* the trainer's counters at its start */
    hpt_adamw opt;           /* the last real step's AdamW settings */
    int horizon, fh;         /* predicted steps asked for; of them, forecast */
    float conf, fc_loss;     /* the confidence that opened it; the forecast loss after fh steps */
    float L0;                /* probe loss at the snapshot */
    int applied;             /* predicted steps applied */
    hpt_predict_stop stopped;
    /* the line search: probe losses at alpha 1, 0.5 and the parabola's astar */
    float L1, Lh, La, astar, best_a, best_L;
    /* the verdict */
    float worth;
    double spent;
    int advance, accepted;
} jump;

/* The dynamics model scales each tensor's predicted update: its forecast of
 * the optimal scale of the AdamW-direction step, averaged over the horizon
 * and clipped to [0, 1.5] (0: this tensor does not move). */
static hpt_status forecast_scales(hybrid *h, jump *j) {
    const hpt_train_config *c = hpt_trainer_config(h->tr);
    j->fh = j->horizon < h->learn->dyn.HM ? j->horizon : h->learn->dyn.HM;
    float lrp[FC_MAX];
    for (int s = 0; s < j->fh && s < FC_MAX; s++) lrp[s] = hpt_lr_at(c, j->step0 + s);
    HPT_TRY(hpt_dyn_forecast(&h->learn->dyn, j->fh, lrp, h->learn->fc_mean, h->learn->fc_std, NULL));
    j->fc_loss = expf(h->learn->fc_mean[(size_t)(j->fh - 1) * (1 + h->learn->K)]);
    for (int ti = 0; ti < h->m->ntensors && ti < h->learn->K; ti++) {
        double sum = 0.0;
        for (int s = 0; s < j->fh; s++) sum += h->learn->fc_mean[(size_t)s * (1 + h->learn->K) + 1 + ti];
        float sc = (float)(sum / j->fh);
        h->pred.tensor_scale[ti] = isfinite(sc) ? (sc < 0.0f ? 0.0f : sc > 1.5f ? 1.5f : sc) : 0.0f;
    }
    return HPT_OK;
}

/* Applies predicted steps 1..horizon in place; every correction_interval
 * steps the realised probe loss must keep up: with what k real steps would
 * buy (at half credit) and with the dynamics model's forecast interval (its
 * change from the first forecast step, so over k - 1 steps: errs towards
 * going on). Once it falls behind either or rises, it stops there. */
static hpt_status apply_predicted(hybrid *h, jump *j) {
    const hpt_train_config *c = hpt_trainer_config(h->tr);
    const float *m1 = hpt_trainer_moment1(h->tr), *m2 = hpt_trainer_moment2(h->tr);
    float prev = j->L0, Lk;
    j->applied = 0;
    j->stopped = HPT_STOP_NONE;
    for (int k = 1; k <= j->horizon; k++) {
        float lr = hpt_lr_at(c, j->step0 + k - 1);
        hpt_pred_apply(&h->pred, h->m->params, m1, m2, &j->opt, j->updates, lr, k, h->scale);
        hpt_phase_step_done(&h->phz->ph);
        j->applied = k;
        if (h->cfg.whole_phase || k >= j->horizon || k % h->cfg.correction_interval) continue;
        HPT_TRY(probe_loss(h, &Lk));
        int s = (k < j->fh ? k : j->fh) - 1;
        float dlog = h->learn->fc_mean[(size_t)s * (1 + h->learn->K)] - h->learn->fc_mean[0];
        float sd = h->learn->fc_std[(size_t)s * (1 + h->learn->K)];
        j->stopped = hpt_phase_predict_stop(j->L0, prev, Lk, k, hpt_hyb_progress(h), dlog, sd);
        if (j->stopped != HPT_STOP_NONE) break;
        prev = Lk;
    }
    return HPT_OK;
}

/* Line search over the step scale on D = theta - snapshot: probe losses at
 * alpha 1 and 0.5, and at the minimum of the parabola through (0, L0),
 * (0.5, Lh), (1, L1) when it lies in (0.05, 1.5] away from both. */
static hpt_status line_search(hybrid *h, jump *j) {
    float *p = h->m->params;
    const float *sp = hpt_snapshot_params(&h->snap);
    #pragma omp parallel for simd
    for (size_t i = 0; i < h->n; i++) h->phz->dir[i] = p[i] - sp[i];
    const float L0 = j->L0;
    j->La = INFINITY;
    HPT_TRY(probe_loss(h, &j->L1));
    set_along(h, 0.5f);
    HPT_TRY(probe_loss(h, &j->Lh));
    float c2 = 2.0f * (j->L1 - 2.0f * j->Lh + L0), c1 = j->L1 - L0 - c2;
    j->astar = NAN;
    if (c2 > 0.0f) {
        float a = -c1 / (2.0f * c2);
        if (a > 1.5f) a = 1.5f;
        if (a > 0.05f && fabsf(a - 0.5f) >= 0.05f && fabsf(a - 1.0f) >= 0.05f) j->astar = a;
    }
    if (isfinite(j->astar)) { set_along(h, j->astar); HPT_TRY(probe_loss(h, &j->La)); }
    j->best_a = 0.0f;
    j->best_L = L0;
    if (j->Lh < j->best_L) { j->best_a = 0.5f; j->best_L = j->Lh; }
    if (j->L1 < j->best_L) { j->best_a = 1.0f; j->best_L = j->L1; }
    if (j->La < j->best_L) { j->best_a = j->astar; j->best_L = j->La; }
    return HPT_OK;
}

/* What the jump is worth, in real steps: its probe-loss gain over the
 * recent per-step progress of real training. It is kept only if it is worth
 * more than the real steps its own time would have paid for (probes and
 * all), and the step counter, i.e. the LR schedule, moves by what it was
 * worth, at most the steps applied: a jump worth one step must not skip
 * forty steps of the schedule. */
static void judge(hybrid *h, jump *j) {
    float per_step = hpt_hyb_progress(h);
    j->spent = phase_cost(h, j->t0, j->probes0, j->applied);
    float gain = j->L0 - j->best_L;
    j->worth = isfinite(per_step) && per_step > 0.0f ? gain / per_step : 0.0f;
    if (j->worth > (float)j->applied) j->worth = (float)j->applied;
    j->advance = (int)j->worth;
    j->accepted = j->best_a > 0.0f && isfinite(j->best_L) && gain > 0.0f && j->worth > j->spent && j->advance >= 1;
}

/* Keeps the jump at the best alpha (the schedule moves by what it was
 * worth) or restores the snapshot; the counters, the acceptance history,
 * the phase controller and phases.jsonl hear of it. */
static void settle(hybrid *h, jump *j) {
    const char *stop = j->stopped ? hpt_predict_stop_name(j->stopped) : "";
    const char *so = j->stopped ? " (stopped early: " : "", *sc = j->stopped ? ")" : "";
    char why[240];
    if (j->accepted) {
        set_along(h, j->best_a);
        hpt_trainer_advance(h->tr, j->advance);
        h->cnt.phases_accepted++;
        h->cnt.predicted_steps_kept += j->advance;
        h->cnt.alpha_sum += j->best_a;
        snprintf(why, sizeof why, "jump of %d predicted steps kept at alpha %.2f: probe loss %.4f -> %.4f, "
                 "worth %.1f real steps for the time of %.1f%s%s%s", j->applied, j->best_a, j->L0, j->best_L,
                 j->worth, j->spent, so, stop, sc);
    } else {
        hpt_hyb_restore_snapshot(h);
        h->cnt.phases_rejected++;
        h->cnt.rollbacks++;
        h->cnt.predicted_steps_lost += j->applied;
        snprintf(why, sizeof why, "jump of %d predicted steps rolled back: probe loss %.4f at alpha 0, %.4f at 0.5, "
                 "%.4f at 1, best %.4f: worth %.1f real steps, cost the time of %.1f%s%s%s", j->applied, j->L0, j->Lh,
                 j->L1, j->best_L, j->worth, j->spent, so, stop, sc);
    }
    h->phz->accept_ema = 0.7f * h->phz->accept_ema + 0.3f * (j->accepted ? 1.0f : 0.0f);
    if (h->phz->ph.pred_open) {
        hpt_phase_end_predict(&h->phz->ph, j->accepted, why);
        /* charge the waste budget what the phase really cost, in real steps */
        if (!j->accepted && (h->cfg.count_cost || h->real_step_s > 0.0))
            hpt_phase_charge(&h->phz->ph, (int)ceil(phase_cost(h, j->t0, j->probes0, j->applied)));
    }
    hpt_hyb_log_transition(h, HPT_PHASE_PREDICT, why);
}

/* The phase's line of metrics, its time on the training clock. */
static void predict_info(hybrid *h, const jump *j, hpt_step_info *info) {
    hpt_trainer *tr = h->tr;
    const hpt_train_config *c = hpt_trainer_config(tr);
    double dt = hpt_now() - j->t0;
    hpt_trainer_add_time(tr, dt);  /* probes and predicted steps are training time */
    const int step = hpt_trainer_steps(tr);
    memset(info, 0, sizeof *info);
    info->step = step;
    info->max_iters = c->max_iters;
    info->train_loss = j->accepted ? j->best_L : j->L0;  /* probe loss at the kept point */
    info->lr = hpt_lr_at(c, step > 0 ? step - 1 : 0);
    info->grad_norm = NAN;
    info->step_s = dt;
    info->time_s = hpt_trainer_clock(tr);
    info->tokens = hpt_trainer_tokens(tr);
    info->val_loss = info->val_accuracy = NAN;
    info->backward = 0;
    info->probes = h->phz->P * (3 + (isfinite(j->astar) ? 1 : 0)) + h->phz->P * ((j->applied - 1) / h->cfg.correction_interval);
    /* the dynamics model's forecast of the training loss after the horizon */
    info->predicted_loss = j->fc_loss;
    info->confidence = j->conf;
    info->residual = NAN;  /* probe and training losses are on different batches */
    info->predicted_steps = j->accepted ? j->advance : j->applied;
    info->accepted = j->accepted;
    info->alpha = j->accepted ? j->best_a : 0.0f;
}

static hpt_status predict_phase(hybrid *h, hpt_step_info *info, int horizon, float conf) {
    hpt_trainer *tr = h->tr;
    jump j = {.t0 = hpt_now(), .probes0 = h->cnt.probe_passes, .conf = conf,
              .step0 = hpt_trainer_steps(tr), .updates = hpt_trainer_updates(tr)};
    int left = hpt_trainer_config(tr)->max_iters - j.step0;
    j.horizon = horizon > left ? left : horizon;
    if (j.horizon < 1) j.horizon = 1;
    hpt_hyb_take_snapshot(h);
    HPT_TRY(draw_probes(h));
    HPT_TRY(probe_loss(h, &j.L0));
    j.opt = hpt_trainer_adamw(tr, j.step0 > 0 ? j.step0 - 1 : 0);
    hpt_pred_begin(&h->pred, hpt_trainer_moment1(tr), hpt_trainer_moment2(tr), &j.opt, j.updates);
    HPT_TRY(forecast_scales(h, &j));
    HPT_TRY(apply_predicted(h, &j));
    HPT_TRY(line_search(h, &j));
    judge(h, &j);
    settle(h, &j);
    predict_info(h, &j, info);
    return HPT_OK;
}

/* ---------------------------------------------------------------- the step hook */

hpt_status hpt_phased_step(hybrid *h, hpt_step_info *info, double t0) {
    hpt_trainer *tr = h->tr;
    float conf = NAN;
    /* a predictor without the history it reads waits in Full, even at
     * threshold 0, where a confidence of 0 would pass */
    char wait_buf[160];
    const char *wait = NULL;
    if (!hpt_pred_ready(&h->pred)) {
        hpt_pred_wait_reason(&h->pred, wait_buf, sizeof wait_buf);
        wait = wait_buf;
    }
    if (hpt_phase_wants_confidence(&h->phz->ph)) conf = wait ? 0.0f : confidence_now(h);
    int horizon = 0;
    const char *why = NULL;
    hpt_phase ph = hpt_phase_next_wait(&h->phz->ph, isfinite(conf) ? conf : 0.0f, wait, &horizon, &why);
    if (why) hpt_hyb_log_transition(h, ph, why);
    if (ph == HPT_PHASE_PREDICT) HPT_TRY(predict_phase(h, info, horizon, conf));
    else HPT_TRY(hpt_hyb_real_step(h, info, ph, conf));
    info->phase = hpt_phase_name(ph);
    double whole = hpt_now() - t0, extra = whole - info->step_s;
    if (extra > 0.0) hpt_trainer_add_time(tr, extra);  /* step_s is on the clock already */
    /* on a real step, the time beyond the trainer's own step is the
     * controller's: encoder, dynamics-model training, statistics */
    if (info->backward && extra > 0.0) h->cnt.ctrl_s += extra;
    info->step_s = whole;
    info->time_s = hpt_trainer_clock(tr);
    h->cnt.phase_s[ph] += whole;
    h->cnt.phase_count_steps[ph] += ph == HPT_PHASE_PREDICT ? info->predicted_steps : 1;
    return HPT_OK;
}

void hpt_phased_real_step_done(hpt_phased *p) {
    p->accept_ema = 1.0f - 0.995f * (1.0f - p->accept_ema);
    hpt_phase_step_done(&p->ph);
}

void hpt_phased_force_full(hpt_phased *p, int steps, const char *why) { hpt_phase_force_full(&p->ph, steps, why); }

/* ---------------------------------------------------------------- setup */

/* The buffers: one arena carved by PHASED_BUFS. */
static hpt_status carve_buffers(hpt_phased *p, size_t n) {
    _Static_assert(sizeof(int) == sizeof(float), "int slices share the float arena");
#define X(type, name, size) size,
    size_t sizes[] = {PHASED_BUFS(X)};
#undef X
    enum { NB = sizeof sizes / sizeof sizes[0] };
    float *slice[NB], **ptrs[NB];
    for (int i = 0; i < NB; i++) ptrs[i] = &slice[i];
    size_t total;
    p->buf_arena = hpt_arena_carve(sizes, NB, ptrs, &total);
    if (!p->buf_arena) return hpt_fail(HPT_ERR_NOMEM, "hybrid: out of memory for the probe batches and line search");
    p->buf_bytes = total * sizeof(float);
    int i = 0;
#define X(type, name, size) p->name = (type *)slice[i++];
    PHASED_BUFS(X)
#undef X
    return HPT_OK;
}

hpt_status hpt_phased_new(hybrid *h, hpt_phased **out) {
    *out = NULL;
    hpt_phased *p = calloc(1, sizeof *p);
    if (!p) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    hpt_phase_config pc;
    hpt_hyb_to_phase_config(&h->cfg, &pc);
    hpt_phase_init(&p->ph, &pc);
    p->P = h->cfg.probe_batches;
    hpt_trainer_batch_shape(h->tr, &p->maxB, &p->T, &p->xdim);
    p->accept_ema = 1.0f;
    hpt_status st = carve_buffers(p, h->n);
    if (st != HPT_OK) { hpt_phased_free(p); return st; }
    *out = p;
    return HPT_OK;
}

void hpt_phased_free(hpt_phased *p) {
    if (!p) return;
    hpt_arena_free(p->buf_arena);
    free(p);
}
