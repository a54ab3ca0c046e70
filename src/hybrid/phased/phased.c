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
 * time. Real steps, the snapshot, rollback after a divergence and
 * phases.jsonl are the driver's, reached through its services (p->svc,
 * ../extension.h).
 */
#include "phased.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- probes */

static hpt_status draw_probes(hpt_phased *p) {
    for (int i = 0; i < p->P; i++) {
        hpt_batch b;
        HPT_TRY(hpt_trainer_draw_batch(p->svc.tr, &b));
        p->pB[i] = b.B;
        size_t rows = (size_t)b.B * b.T;
        if (b.tokens) memcpy(p->ptok + (size_t)i * p->maxB * p->T, b.tokens, rows * sizeof(int));
        memcpy(p->ptgt + (size_t)i * p->maxB * p->T, b.targets, rows * sizeof(int));
        if (b.x) memcpy(p->px + (size_t)i * p->maxB * p->xdim, b.x, (size_t)b.B * p->xdim * sizeof(float));
    }
    return HPT_OK;
}

/* Mean loss over the probe batches at the current parameters. */
static hpt_status probe_loss(hpt_phased *p, float *loss) {
    double s = 0.0, rows = 0.0;
    for (int i = 0; i < p->P; i++) {
        hpt_batch b = {.B = p->pB[i], .T = p->T,
                       .tokens = p->xdim ? NULL : p->ptok + (size_t)i * p->maxB * p->T,
                       .x = p->xdim ? p->px + (size_t)i * p->maxB * p->xdim : NULL, .x_dim = p->xdim,
                       .targets = p->ptgt + (size_t)i * p->maxB * p->T};
        float l;
        HPT_TRY(hpt_trainer_probe(p->svc.tr, &b, &l));
        s += (double)l * b.B;
        rows += b.B;
        p->svc.cnt->probe_passes++;
    }
    *loss = (float)(s / rows);
    return HPT_OK;
}

/* params = snapshot + alpha * dir */
static void set_along(hpt_phased *p, float alpha) {
    float *w = p->m->params;
    const float *s = p->svc.snapshot_params(p->svc.host), *d = p->dir;
    const size_t n = p->n;
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) w[i] = s[i] + alpha * d[i];
}

/* ---------------------------------------------------------------- phases */

/* Confidence that a Predict phase pays: the learned dynamics' confidence in
 * its loss forecast at the longest horizon, capped by the acceptance
 * history of verified jumps. The acceptance EMA relaxes back towards 1 over
 * real steps (half-life ~140 steps, hpt_phased_real_step_done), so an old
 * failure does not shut prediction off forever; the controller's backoff
 * and waste budget bound what repeated failures cost. */
static float confidence_now(hpt_phased *p) {
    return hpt_learner_confidence(p->learn, p->svc.cfg->max_predict_steps, p->accept_ema);
}

/* What a Predict phase has cost so far, in real steps: its wall time over a
 * real step's, or with count_cost its passes (a probe forward a third of a
 * real step, a predicted step a fiftieth), which no clock can change. */
static double phase_cost(const hpt_phased *p, double t0, int probes0, int applied) {
    if (p->svc.cfg->count_cost) return (p->svc.cnt->probe_passes - probes0) / 3.0 + applied / 50.0;
    return p->svc.real_step_s(p->svc.host) > 0.0 ? (hpt_now() - t0) / p->svc.real_step_s(p->svc.host) : 1.0;
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
static hpt_status forecast_scales(hpt_phased *p, jump *j) {
    const hpt_train_config *c = hpt_trainer_config(p->svc.tr);
    j->fh = j->horizon < p->learn->dyn.HM ? j->horizon : p->learn->dyn.HM;
    float lrp[FC_MAX];
    for (int s = 0; s < j->fh && s < FC_MAX; s++) lrp[s] = hpt_lr_at(c, j->step0 + s);
    HPT_TRY(hpt_dyn_forecast(&p->learn->dyn, j->fh, lrp, p->learn->fc_mean, p->learn->fc_std, NULL));
    j->fc_loss = expf(p->learn->fc_mean[(size_t)(j->fh - 1) * (1 + p->learn->K)]);
    for (int ti = 0; ti < p->m->ntensors && ti < p->learn->K; ti++) {
        double sum = 0.0;
        for (int s = 0; s < j->fh; s++) sum += p->learn->fc_mean[(size_t)s * (1 + p->learn->K) + 1 + ti];
        float sc = (float)(sum / j->fh);
        p->svc.pred->tensor_scale[ti] = isfinite(sc) ? (sc < 0.0f ? 0.0f : sc > 1.5f ? 1.5f : sc) : 0.0f;
    }
    return HPT_OK;
}

/* Applies predicted steps 1..horizon in place; every correction_interval
 * steps the realised probe loss must keep up: with what k real steps would
 * buy (at half credit) and with the dynamics model's forecast interval (its
 * change from the first forecast step, so over k - 1 steps: errs towards
 * going on). Once it falls behind either or rises, it stops there. */
static hpt_status apply_predicted(hpt_phased *p, jump *j) {
    const hpt_train_config *c = hpt_trainer_config(p->svc.tr);
    const float *m1 = hpt_trainer_moment1(p->svc.tr), *m2 = hpt_trainer_moment2(p->svc.tr);
    float prev = j->L0, Lk;
    j->applied = 0;
    j->stopped = HPT_STOP_NONE;
    for (int k = 1; k <= j->horizon; k++) {
        float lr = hpt_lr_at(c, j->step0 + k - 1);
        hpt_pred_apply(p->svc.pred, p->m->params, m1, m2, &j->opt, j->updates, lr, k, p->svc.scale(p->svc.host));
        hpt_phase_step_done(&p->ph);
        j->applied = k;
        if (p->svc.cfg->whole_phase || k >= j->horizon || k % p->svc.cfg->correction_interval) continue;
        HPT_TRY(probe_loss(p, &Lk));
        int s = (k < j->fh ? k : j->fh) - 1;
        float dlog = p->learn->fc_mean[(size_t)s * (1 + p->learn->K)] - p->learn->fc_mean[0];
        float sd = p->learn->fc_std[(size_t)s * (1 + p->learn->K)];
        j->stopped = hpt_phase_predict_stop(j->L0, prev, Lk, k, p->svc.progress(p->svc.host), dlog, sd);
        if (j->stopped != HPT_STOP_NONE) break;
        prev = Lk;
    }
    return HPT_OK;
}

/* Line search over the step scale on D = theta - snapshot: probe losses at
 * alpha 1 and 0.5, and at the minimum of the parabola through (0, L0),
 * (0.5, Lh), (1, L1) when it lies in (0.05, 1.5] away from both. */
static hpt_status line_search(hpt_phased *p, jump *j) {
    const float *w = p->m->params, *sp = p->svc.snapshot_params(p->svc.host);
    float *dir = p->dir;
    const size_t n = p->n;
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) dir[i] = w[i] - sp[i];
    const float L0 = j->L0;
    j->La = INFINITY;
    HPT_TRY(probe_loss(p, &j->L1));
    set_along(p, 0.5f);
    HPT_TRY(probe_loss(p, &j->Lh));
    float c2 = 2.0f * (j->L1 - 2.0f * j->Lh + L0), c1 = j->L1 - L0 - c2;
    j->astar = NAN;
    if (c2 > 0.0f) {
        float a = -c1 / (2.0f * c2);
        if (a > 1.5f) a = 1.5f;
        if (a > 0.05f && fabsf(a - 0.5f) >= 0.05f && fabsf(a - 1.0f) >= 0.05f) j->astar = a;
    }
    if (isfinite(j->astar)) { set_along(p, j->astar); HPT_TRY(probe_loss(p, &j->La)); }
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
static void judge(hpt_phased *p, jump *j) {
    float per_step = p->svc.progress(p->svc.host);
    j->spent = phase_cost(p, j->t0, j->probes0, j->applied);
    float gain = j->L0 - j->best_L;
    j->worth = isfinite(per_step) && per_step > 0.0f ? gain / per_step : 0.0f;
    if (j->worth > (float)j->applied) j->worth = (float)j->applied;
    j->advance = (int)j->worth;
    j->accepted = j->best_a > 0.0f && isfinite(j->best_L) && gain > 0.0f && j->worth > j->spent && j->advance >= 1;
}

/* Keeps the jump at the best alpha (the schedule moves by what it was
 * worth) or restores the snapshot; the counters, the acceptance history,
 * the phase controller and phases.jsonl hear of it. */
static void settle(hpt_phased *p, jump *j) {
    const char *stop = j->stopped ? hpt_predict_stop_name(j->stopped) : "";
    const char *so = j->stopped ? " (stopped early: " : "", *sc = j->stopped ? ")" : "";
    char why[240];
    if (j->accepted) {
        set_along(p, j->best_a);
        hpt_trainer_advance(p->svc.tr, j->advance);
        p->svc.cnt->phases_accepted++;
        p->svc.cnt->predicted_steps_kept += j->advance;
        p->svc.cnt->alpha_sum += j->best_a;
        snprintf(why, sizeof why, "jump of %d predicted steps kept at alpha %.2f: probe loss %.4f -> %.4f, "
                 "worth %.1f real steps for the time of %.1f%s%s%s", j->applied, j->best_a, j->L0, j->best_L,
                 j->worth, j->spent, so, stop, sc);
    } else {
        p->svc.restore_snapshot(p->svc.host);
        p->svc.cnt->phases_rejected++;
        p->svc.cnt->rollbacks++;
        p->svc.cnt->predicted_steps_lost += j->applied;
        snprintf(why, sizeof why, "jump of %d predicted steps rolled back: probe loss %.4f at alpha 0, %.4f at 0.5, "
                 "%.4f at 1, best %.4f: worth %.1f real steps, cost the time of %.1f%s%s%s", j->applied, j->L0, j->Lh,
                 j->L1, j->best_L, j->worth, j->spent, so, stop, sc);
    }
    p->accept_ema = 0.7f * p->accept_ema + 0.3f * (j->accepted ? 1.0f : 0.0f);
    if (p->ph.pred_open) {
        hpt_phase_end_predict(&p->ph, j->accepted, why);
        /* charge the waste budget what the phase really cost, in real steps */
        if (!j->accepted && (p->svc.cfg->count_cost || p->svc.real_step_s(p->svc.host) > 0.0))
            hpt_phase_charge(&p->ph, (int)ceil(phase_cost(p, j->t0, j->probes0, j->applied)));
    }
    p->svc.log_transition(p->svc.host, HPT_PHASE_PREDICT, why);
}

/* The phase's line of metrics, its time on the training clock. */
static void predict_info(hpt_phased *p, const jump *j, hpt_step_info *info) {
    hpt_trainer *tr = p->svc.tr;
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
    info->probes = p->P * (3 + (isfinite(j->astar) ? 1 : 0)) + p->P * ((j->applied - 1) / p->svc.cfg->correction_interval);
    /* the dynamics model's forecast of the training loss after the horizon */
    info->predicted_loss = j->fc_loss;
    info->confidence = j->conf;
    info->residual = NAN;  /* probe and training losses are on different batches */
    info->predicted_steps = j->accepted ? j->advance : j->applied;
    info->accepted = j->accepted;
    info->alpha = j->accepted ? j->best_a : 0.0f;
}

static hpt_status predict_phase(hpt_phased *p, hpt_step_info *info, int horizon, float conf) {
    hpt_trainer *tr = p->svc.tr;
    jump j = {.t0 = hpt_now(), .probes0 = p->svc.cnt->probe_passes, .conf = conf,
              .step0 = hpt_trainer_steps(tr), .updates = hpt_trainer_updates(tr)};
    int left = hpt_trainer_config(tr)->max_iters - j.step0;
    j.horizon = horizon > left ? left : horizon;
    if (j.horizon < 1) j.horizon = 1;
    p->svc.take_snapshot(p->svc.host);
    HPT_TRY(draw_probes(p));
    HPT_TRY(probe_loss(p, &j.L0));
    j.opt = hpt_trainer_adamw(tr, j.step0 > 0 ? j.step0 - 1 : 0);
    hpt_pred_begin(p->svc.pred, hpt_trainer_moment1(tr), hpt_trainer_moment2(tr), &j.opt, j.updates);
    HPT_TRY(forecast_scales(p, &j));
    HPT_TRY(apply_predicted(p, &j));
    HPT_TRY(line_search(p, &j));
    judge(p, &j);
    settle(p, &j);
    predict_info(p, &j, info);
    return HPT_OK;
}

/* ---------------------------------------------------------------- the step hook */

hpt_status hpt_phased_step(hpt_phased *p, hpt_step_info *info, double t0) {
    hpt_trainer *tr = p->svc.tr;
    float conf = NAN;
    /* a predictor without the history it reads waits in Full, even at
     * threshold 0, where a confidence of 0 would pass */
    char wait_buf[160];
    const char *wait = NULL;
    if (!hpt_pred_ready(p->svc.pred)) {
        hpt_pred_wait_reason(p->svc.pred, wait_buf, sizeof wait_buf);
        wait = wait_buf;
    }
    if (hpt_phase_wants_confidence(&p->ph)) conf = wait ? 0.0f : confidence_now(p);
    int horizon = 0;
    const char *why = NULL;
    hpt_phase ph = hpt_phase_next_wait(&p->ph, isfinite(conf) ? conf : 0.0f, wait, &horizon, &why);
    if (why) p->svc.log_transition(p->svc.host, ph, why);
    if (ph == HPT_PHASE_PREDICT) HPT_TRY(predict_phase(p, info, horizon, conf));
    else HPT_TRY(p->svc.real_step(p->svc.host, info, ph, conf));
    info->phase = hpt_phase_name(ph);
    double whole = hpt_now() - t0, extra = whole - info->step_s;
    if (extra > 0.0) hpt_trainer_add_time(tr, extra);  /* step_s is on the clock already */
    /* on a real step, the time beyond the trainer's own step is the
     * controller's: encoder, dynamics-model training, statistics */
    if (info->backward && extra > 0.0) p->svc.cnt->ctrl_s += extra;
    info->step_s = whole;
    info->time_s = hpt_trainer_clock(tr);
    p->svc.cnt->phase_s[ph] += whole;
    p->svc.cnt->phase_count_steps[ph] += ph == HPT_PHASE_PREDICT ? info->predicted_steps : 1;
    return HPT_OK;
}

void hpt_phased_real_step_done(hpt_phased *p) {
    p->accept_ema = 1.0f - 0.995f * (1.0f - p->accept_ema);
    hpt_phase_step_done(&p->ph);
}

void hpt_phased_hold(hpt_phased *p, const char *why) { hpt_phase_force_full(&p->ph, 2 * p->svc.cfg->full_steps, why); }

void hpt_phased_phase_config(const hpt_hybrid_config *c, hpt_phase_config *pc) {
    hpt_phase_config_default(pc);
    pc->warmup_steps = c->warmup_steps;
    pc->full_steps = c->full_steps;
    pc->min_predict_steps = c->min_predict_steps;
    pc->max_predict_steps = c->max_predict_steps;
    pc->correct_steps = c->correct_steps;
    pc->max_consecutive_predict = c->max_consecutive_predict;
    pc->confidence_threshold = c->confidence_threshold;
    pc->backoff_after = c->backoff_after;
    pc->max_backoff = c->max_backoff;
    pc->waste_budget = c->waste_budget;
}

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

hpt_status hpt_phased_new(const hpt_hyb_services *svc, hpt_learner *learn, hpt_phased **out) {
    *out = NULL;
    hpt_phased *p = calloc(1, sizeof *p);
    if (!p) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    p->svc = *svc;
    p->m = hpt_trainer_model(svc->tr);
    p->n = p->m->nparams;
    p->learn = learn;
    hpt_phase_config pc;
    hpt_phased_phase_config(svc->cfg, &pc);
    hpt_phase_init(&p->ph, &pc);
    p->P = svc->cfg->probe_batches;
    hpt_trainer_batch_shape(svc->tr, &p->maxB, &p->T, &p->xdim);
    p->accept_ema = 1.0f;
    hpt_status st = carve_buffers(p, p->n);
    if (st != HPT_OK) { hpt_phased_free(p); return st; }
    *out = p;
    return HPT_OK;
}

void hpt_phased_free(hpt_phased *p) {
    if (!p) return;
    hpt_arena_free(p->buf_arena);
    free(p);
}
