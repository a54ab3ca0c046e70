/*
 * hybrid.c — the hybrid driver: runs the trainer step by step under the
 * phase controller, applies predicted updates in place during Predict,
 * verifies them with forward-only probes and a line search, and rolls back
 * byte for byte when a jump does not pay or training diverges.
 *
 * A Predict phase is one call of the step hook (predict_phase):
 *   1. snapshot params, m and v into the one preallocated snapshot;
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
 * time. A real step is the trainer's, then what the controller learns from
 * it (real_step); a critical divergence or a non-finite step while a
 * snapshot is held rolls back to it (rollback). The hybrid layer sees the
 * model only through model.h (flat arenas and the tensor table) and the
 * trainer only through trainer.h (its counters, clock, moments and batches).
 */
#include "hybrid_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- probes */

static void draw_probes(hybrid *h) {
    for (int i = 0; i < h->P; i++) {
        hpt_batch b;
        hpt_trainer_draw_batch(h->tr, &b);
        h->pB[i] = b.B;
        size_t rows = (size_t)b.B * b.T;
        if (b.tokens) memcpy(h->ptok + (size_t)i * h->maxB * h->T, b.tokens, rows * sizeof(int));
        memcpy(h->ptgt + (size_t)i * h->maxB * h->T, b.targets, rows * sizeof(int));
        if (b.x) memcpy(h->px + (size_t)i * h->maxB * h->xdim, b.x, (size_t)b.B * h->xdim * sizeof(float));
    }
}

/* Mean loss over the probe batches at the current parameters. */
static hpt_status probe_loss(hybrid *h, float *loss) {
    double s = 0.0, rows = 0.0;
    for (int i = 0; i < h->P; i++) {
        hpt_batch b = {.B = h->pB[i], .T = h->T,
                       .tokens = h->xdim ? NULL : h->ptok + (size_t)i * h->maxB * h->T,
                       .x = h->xdim ? h->px + (size_t)i * h->maxB * h->xdim : NULL, .x_dim = h->xdim,
                       .targets = h->ptgt + (size_t)i * h->maxB * h->T};
        float l;
        HPT_TRY(hpt_trainer_probe(h->tr, &b, &l));
        s += (double)l * b.B;
        rows += b.B;
        h->cnt.probe_passes++;
    }
    *loss = (float)(s / rows);
    return HPT_OK;
}

/* ---------------------------------------------------------------- snapshot */

static void take_snapshot(hybrid *h) {
    hpt_snapshot_take(&h->snap, h->m->params, hpt_trainer_moment1(h->tr), hpt_trainer_moment2(h->tr),
                      hpt_trainer_steps(h->tr), hpt_trainer_updates(h->tr));
}

/* Parameters and moments back to the snapshot, and the update count the
 * moments belong to (unknown, -1, only in a snapshot from a checkpoint of
 * an older hpt: then the count stays). The step counter does not move. */
static void restore_snapshot(hybrid *h) {
    hpt_snapshot_restore_params(&h->snap, h->m->params);
    int updates = h->snap.updates >= 0 ? h->snap.updates : hpt_trainer_updates(h->tr);
    hpt_trainer_restore_moments(h->tr, hpt_snapshot_moment1(&h->snap), hpt_snapshot_moment2(&h->snap), updates);
}

/* params = snapshot + alpha * dir */
static void set_along(hybrid *h, float alpha) {
    float *p = h->m->params;
    const float *s = hpt_snapshot_params(&h->snap), *d = h->dir;
    #pragma omp parallel for simd
    for (size_t i = 0; i < h->n; i++) p[i] = s[i] + alpha * d[i];
}

/* One line of phases.jsonl: the step, the phase entered, why (escaped as
 * JSON: a reason may quote anything). */
static void log_transition(hybrid *h, hpt_phase to, const char *why) {
    if (!h->phases_log) return;
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    hpt_json_u64(o, "step", (uint64_t)hpt_trainer_steps(h->tr));
    cJSON_AddStringToObject(o, "phase", hpt_phase_name(to));
    cJSON_AddStringToObject(o, "reason", why);
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!line) return;
    fputs(line, h->phases_log);
    fputc('\n', h->phases_log);
    fflush(h->phases_log);
    cJSON_free(line);
}

/* ---------------------------------------------------------------- progress */

static void record_loss(hybrid *h, float loss) {
    if (!isfinite(loss)) return;
    h->loss_ring[h->loss_head] = loss;
    h->loss_head = (h->loss_head + 1) % LOSS_RING;
    if (h->loss_n < LOSS_RING) h->loss_n++;
}

/* Loss decrease per real step over the ring (least squares), >= 0; NaN
 * until the ring holds 16 losses. */
static float progress_per_step(const hybrid *h) {
    int n = h->loss_n;
    if (n < 16) return NAN;
    double xm = (n - 1) / 2.0, sxy = 0.0, sxx = 0.0, ym = 0.0;
    for (int j = 0; j < n; j++) ym += h->loss_ring[(h->loss_head - n + j + LOSS_RING) % LOSS_RING];
    ym /= n;
    for (int j = 0; j < n; j++) {
        double y = h->loss_ring[(h->loss_head - n + j + LOSS_RING) % LOSS_RING];
        sxy += (j - xm) * (y - ym);
        sxx += (j - xm) * (j - xm);
    }
    double slope = sxy / sxx;
    return slope < 0.0 ? (float)-slope : 0.0f;
}

/* ---------------------------------------------------------------- dynamics */

/* The k-th sampled parameter of tensor t: one per stride block, at a
 * position hashed from k (deterministic; never past the tensor's end). */
static inline size_t sample_at(const hybrid *h, const hpt_tensor_info *t, int ti, size_t k) {
    size_t S = h->s_stride[ti], j = (size_t)((k * 2654435761u) % S), i = k * S + j;
    return t->offset + (i < t->numel ? i : t->numel - 1);
}

/* Before a real step: remember theta and the AdamW-direction prediction of
 * this step's update from the current moments (the step the predictors would
 * take), at the sampled parameters, to score it against the real update
 * afterwards. */
static void before_real_step(hybrid *h) {
    hpt_trainer *tr = h->tr;
    const float *p = h->m->params, *m1 = hpt_trainer_moment1(tr), *m2 = hpt_trainer_moment2(tr);
    const int updates = hpt_trainer_updates(tr);
    if (updates == 0) {
        for (int ti = 0; ti < h->m->ntensors; ti++)
            for (size_t k = 0; k < h->s_cnt[ti]; k++)
                h->theta_before[h->s_off[ti] + k] = p[sample_at(h, &h->m->tensors[ti], ti, k)];
        return;
    }
    hpt_adamw o = hpt_trainer_adamw(tr, hpt_trainer_steps(tr));
    hpt_adamw_bc bc = hpt_adamw_bias(o.beta1, o.beta2, updates);
    float bc1 = bc.bc1, bc2s = sqrtf(bc.bc2);
    for (int ti = 0; ti < h->m->ntensors; ti++) {
        const hpt_tensor_info *t = &h->m->tensors[ti];
        float wd = t->decay ? o.weight_decay : 0.0f;
        for (size_t k = 0; k < h->s_cnt[ti]; k++) {
            size_t i = sample_at(h, t, ti, k), s = h->s_off[ti] + k;
            h->theta_before[s] = p[i];
            h->dpred[s] = -o.lr * (wd * p[i] + (m1[i] / bc1) / (sqrtf(m2[i]) / bc2s + o.eps));
        }
    }
}

/* After a real step: the encoder's inputs and the dynamics model's targets,
 * then one online training step of the model and a 1-step forecast for the
 * next step's predicted_loss. */
static hpt_status after_real_step(hybrid *h, const hpt_step_info *info, hpt_phase ph) {
    hpt_trainer *tr = h->tr;
    const float *p = h->m->params;
    double upd2 = 0.0, th2 = 0.0, dotprev = 0.0, prev2 = 0.0, mabs = 0.0, vs = 0.0;
    /* one pass per tensor over its sampled parameters, serially: a few
     * thousand per tensor, and the same bits for any thread count (the sums
     * steer the controller, so they must be reproducible) */
    enum { NQ = 8 };
    const float *m1 = hpt_trainer_moment1(tr), *m2 = hpt_trainer_moment2(tr);
    float *prev = h->prev_upd;
    int have_prev = h->have_prev_upd;
    for (int ti = 0; ti < h->m->ntensors; ti++) {
        const hpt_tensor_info *t = &h->m->tensors[ti];
        double q[NQ] = {0};
        for (size_t k = 0; k < h->s_cnt[ti]; k++) {
            size_t i = sample_at(h, t, ti, k), s = h->s_off[ti] + k;
            double u = (double)p[i] - h->theta_before[s], tb = h->theta_before[s], dp = h->dpred[s];
            q[0] += u * u;
            q[1] += tb * tb;
            q[2] += u * dp;
            q[3] += dp * dp;
            if (have_prev) { q[4] += u * prev[s]; q[5] += (double)prev[s] * prev[s]; }
            prev[s] = (float)u;
            q[6] += fabs(m1[i]);
            q[7] += sqrt(m2[i]);
        }
        upd2 += q[0]; th2 += q[1]; dotprev += q[4]; prev2 += q[5]; mabs += q[6]; vs += q[7];
        if (ti < h->K) h->y[1 + ti] = hpt_trainer_updates(tr) > 1 && q[3] > 0.0 ? (float)(q[2] / q[3]) : NAN;
    }
    hpt_enc_input in = {
        .loss = info->train_loss, .grad_norm = info->grad_norm, .lr = info->lr,
        .m_abs_mean = (float)(mabs / h->ns), .v_sqrt_mean = (float)(vs / h->ns),
        .update_ratio = th2 > 0.0 ? (float)sqrt(upd2 / th2) : NAN,
        .update_cos = h->have_prev_upd && prev2 > 0.0 && upd2 > 0.0 ? (float)(dotprev / sqrt(prev2 * upd2)) : NAN,
        .phase = (int)ph, .steps_in_phase = h->ph.steps_in_phase};
    h->have_prev_upd = 1;
    HPT_TRY(hpt_encoder_update(&h->enc, &in, h->feat));
    h->y[0] = info->train_loss > 0.0f ? logf(info->train_loss) : NAN;
    HPT_TRY(hpt_dyn_observe(&h->dyn, h->feat, h->y));
    float lr1 = hpt_trainer_lr(tr, hpt_trainer_steps(tr));
    HPT_TRY(hpt_dyn_forecast(&h->dyn, 1, &lr1, h->fc_mean, h->fc_std, NULL));
    h->next_pred_loss = expf(h->fc_mean[0]);
    return HPT_OK;
}

/* ---------------------------------------------------------------- phases */

/* Confidence that a Predict phase pays: the dynamics model's confidence in
 * its loss forecast at the longest horizon (from its members' disagreement
 * and its realised errors at that horizon), capped by the acceptance history of verified
 * jumps. The acceptance EMA relaxes back towards 1 over real steps
 * (half-life ~140 steps, see hybrid_step), so an old failure does not shut
 * prediction off forever; the controller's backoff and waste budget bound
 * what repeated failures cost. */
static float confidence_now(hybrid *h) {
    int H = h->cfg.max_predict_steps < h->dyn.HM ? h->cfg.max_predict_steps : h->dyn.HM;
    float lr[FC_MAX];
    for (int j = 0; j < H && j < FC_MAX; j++) lr[j] = hpt_trainer_lr(h->tr, hpt_trainer_steps(h->tr) + j);
    if (hpt_dyn_forecast(&h->dyn, H, lr, h->fc_mean, h->fc_std, NULL) != HPT_OK) return 0.0f;
    /* the loss column: the per-tensor scale columns are noisy by nature
     * and only scale the step (clipped); they do not gate it */
    float dc = hpt_dyn_confidence(&h->dyn, H, 0);
    return dc < h->accept_ema ? dc : h->accept_ema;
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
    j->fh = j->horizon < h->dyn.HM ? j->horizon : h->dyn.HM;
    float lrp[FC_MAX];
    for (int s = 0; s < j->fh && s < FC_MAX; s++) lrp[s] = hpt_lr_at(c, j->step0 + s);
    HPT_TRY(hpt_dyn_forecast(&h->dyn, j->fh, lrp, h->fc_mean, h->fc_std, NULL));
    j->fc_loss = expf(h->fc_mean[(size_t)(j->fh - 1) * (1 + h->K)]);
    for (int ti = 0; ti < h->m->ntensors && ti < h->K; ti++) {
        double sum = 0.0;
        for (int s = 0; s < j->fh; s++) sum += h->fc_mean[(size_t)s * (1 + h->K) + 1 + ti];
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
        hpt_phase_step_done(&h->ph);
        j->applied = k;
        if (h->cfg.whole_phase || k >= j->horizon || k % h->cfg.correction_interval) continue;
        HPT_TRY(probe_loss(h, &Lk));
        int s = (k < j->fh ? k : j->fh) - 1;
        float dlog = h->fc_mean[(size_t)s * (1 + h->K)] - h->fc_mean[0];
        float sd = h->fc_std[(size_t)s * (1 + h->K)];
        j->stopped = hpt_phase_predict_stop(j->L0, prev, Lk, k, progress_per_step(h), dlog, sd);
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
    for (size_t i = 0; i < h->n; i++) h->dir[i] = p[i] - sp[i];
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
    float per_step = progress_per_step(h);
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
        restore_snapshot(h);
        h->cnt.phases_rejected++;
        h->cnt.rollbacks++;
        h->cnt.predicted_steps_lost += j->applied;
        snprintf(why, sizeof why, "jump of %d predicted steps rolled back: probe loss %.4f at alpha 0, %.4f at 0.5, "
                 "%.4f at 1, best %.4f: worth %.1f real steps, cost the time of %.1f%s%s%s", j->applied, j->L0, j->Lh,
                 j->L1, j->best_L, j->worth, j->spent, so, stop, sc);
    }
    h->accept_ema = 0.7f * h->accept_ema + 0.3f * (j->accepted ? 1.0f : 0.0f);
    if (h->ph.pred_open) {
        hpt_phase_end_predict(&h->ph, j->accepted, why);
        /* charge the waste budget what the phase really cost, in real steps */
        if (!j->accepted && (h->cfg.count_cost || h->real_step_s > 0.0))
            hpt_phase_charge(&h->ph, (int)ceil(phase_cost(h, j->t0, j->probes0, j->applied)));
    }
    log_transition(h, HPT_PHASE_PREDICT, why);
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
    info->probes = h->P * (3 + (isfinite(j->astar) ? 1 : 0)) + h->P * ((j->applied - 1) / h->cfg.correction_interval);
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
    take_snapshot(h);
    draw_probes(h);
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

static void rollback(hybrid *h, const char *what);
/* Whether real steps feed the dynamics model: on the phase controller's
 * path always, on the outer path only with --outer-gate dynamics. */
static int dyn_learns(const hybrid *h) { return !h->pred.ops->outer || h->cfg.outer_gate; }
static hpt_status real_step(hybrid *h, hpt_step_info *info, hpt_phase ph, float conf);

/* ---------------------------------------------------------------- the outer path
 * An outer predictor (--predictor outer, pred_outer.c) bypasses the phase
 * controller, the confidence gate, the probes and the line search: every H
 * real steps after the warmup it jumps (outer_jump), and the next K real
 * steps' training losses are the jump's check (outer_check). A failed check
 * (or a divergence, or a non-finite step, while the snapshot is held) rolls
 * back byte for byte to the snapshot taken just before the jump (rollback:
 * the K real steps since are undone too; the step counter keeps its place),
 * halves the jump's scale and starts a new interval there with the momentum
 * buffer at 0. A jump is a transformation of the weights, not skipped steps:
 * the step counter does not move. */

/* A new interval: anchor = params, momentum buffer 0. */
static void outer_new_interval(hybrid *h) {
    hpt_pred_outer_reset(&h->pred, h->m->params);
    h->out.anchor_updates = hpt_trainer_updates(h->tr);
}

/* The rollback's part for the outer path: a jump under check failed (or the
 * snapshot was restored by a divergence later); the restored parameters
 * start a new interval. */
static void outer_rolled_back(hybrid *h) {
    if (h->out.check_left > 0 || h->out.check_n > 0) h->out.rolled_back++;  /* a jump under check */
    h->out.check_left = 0;
    h->out.check_n = 0;
    h->out.check_sum = 0.0;
    outer_new_interval(h);
}

/* Whether a jump is due: past the warmup, H updates since the anchor, no
 * check under way, 8 losses in the ring for the check's reference, and room
 * before the end for the check's K real steps. */
static int outer_due(const hybrid *h) {
    const hpt_hybrid_config *c = &h->cfg;
    const int updates = hpt_trainer_updates(h->tr);
    return updates >= c->warmup_steps && updates - h->out.anchor_updates >= c->outer_interval &&
           h->out.check_left == 0 && h->loss_n >= 8 &&
           hpt_trainer_steps(h->tr) + c->outer_check <= hpt_trainer_config(h->tr)->max_iters;
}

/* --outer-gate dynamics: a due jump waits until the dynamics model (fed on
 * every real step, as on the phase controller's path) forecasts the loss
 * with confidence >= --confidence-threshold. */
static int outer_gate_open(hybrid *h) {
    return !h->cfg.outer_gate || confidence_now(h) >= h->cfg.confidence_threshold;
}

/* The check's reference: mean and standard deviation of the last 16 real
 * losses before the jump. */
static void outer_reference(hybrid *h) {
    int n = h->loss_n < 16 ? h->loss_n : 16;
    double s = 0.0, ss = 0.0;
    for (int j = 0; j < n; j++) s += h->loss_ring[(h->loss_head - 1 - j + 2 * LOSS_RING) % LOSS_RING];
    double mean = s / n;
    for (int j = 0; j < n; j++) {
        double d = h->loss_ring[(h->loss_head - 1 - j + 2 * LOSS_RING) % LOSS_RING] - mean;
        ss += d * d;
    }
    h->out.ref_mean = mean;
    h->out.ref_sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
}

/* The jump: snapshot (params, moments), the outer step in place at scale
 * h->scale (x lr(t) / lr with --outer-follow-lr), a new interval at the
 * result, and K real steps of check ahead. */
static void outer_jump(hybrid *h) {
    hpt_trainer *tr = h->tr;
    const hpt_train_config *c = hpt_trainer_config(tr);
    const int step = hpt_trainer_steps(tr), updates = hpt_trainer_updates(tr), span = updates - h->out.anchor_updates;
    take_snapshot(h);
    outer_reference(h);
    float s = h->scale;
    if (h->cfg.outer_follow_lr && c->lr > 0.0f) {
        float f = hpt_trainer_lr(tr, step) / c->lr;
        s *= f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f;
    }
    uint32_t crc = hpt_crc32(0, h->m->params, h->n * sizeof(float));
    hpt_pred_apply(&h->pred, h->m->params, hpt_trainer_moment1(tr), hpt_trainer_moment2(tr), NULL, updates,
                   0.0f, 1, s);
    if (h->cfg.outer_moments == 1) hpt_trainer_reset_moment1(tr);  /* the snapshot holds the old one */
    h->out.anchor_updates = updates;
    h->out.applied++;
    h->out.check_left = h->cfg.outer_check;
    h->out.check_n = 0;
    h->out.check_sum = 0.0;
    char why[400];
    snprintf(why, sizeof why, "outer jump %d: the displacement of %d updates, eta %.3g, mu %.3g, scale %.3g; "
             "params crc32 %08x before it; checked by the next %d real losses against %.4f +- %.4f",
             h->out.applied, span,
             h->cfg.outer_lr, h->cfg.outer_momentum, s, crc, h->cfg.outer_check, h->out.ref_mean, h->out.ref_sd);
    if (h->cfg.outer_adapt) {
        float lo = 1.0f, hi = 0.0f, sum = 0.0f;
        for (int ti = 0; ti < h->m->ntensors; ti++) {
            float g = h->pred.tensor_gate[ti];
            lo = g < lo ? g : lo; hi = g > hi ? g : hi; sum += g;
        }
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, "; per-tensor agreement gates mean %.3f, min %.3f, max %.3f",
                 sum / h->m->ntensors, lo, hi);
    }
    log_transition(h, HPT_PHASE_PREDICT, why);
}

/* After a real step under check: a non-finite loss or one above mean + 6 sd
 * of the reference rolls back at once; after K, their mean above
 * mean + 2 sd / sqrt(K) rolls back, else the jump is kept. */
static void outer_check(hybrid *h, float loss) {
    hybrid_outer *o = &h->out;
    if (o->check_left <= 0 || !h->snap.valid) return;
    const double ref = o->ref_mean, sd = o->ref_sd;
    char what[300];
    if (!isfinite(loss) || loss > ref + 6.0 * sd) {
        snprintf(what, sizeof what, "outer jump %d failed its check: real loss %.4f > %.4f + 6 x %.4f",
                 o->applied, loss, ref, sd);
    } else {
        o->check_sum += loss;
        o->check_n++;
        if (--o->check_left > 0) return;
        double mean = o->check_sum / o->check_n, lim = ref + 2.0 * sd / sqrt((double)o->check_n);
        if (mean <= lim) {
            o->kept++;
            snprintf(what, sizeof what, "outer jump %d kept: mean of the next %d real losses %.4f <= %.4f",
                     o->applied, o->check_n, mean, lim);
            o->check_n = 0;
            log_transition(h, HPT_PHASE_FULL, what);
            return;
        }
        snprintf(what, sizeof what, "outer jump %d failed its check: mean of the next %d real losses %.4f > %.4f",
                 o->applied, o->check_n, mean, lim);
    }
    rollback(h, what);
    char done[120];
    snprintf(done, sizeof done, "params crc32 %08x restored", hpt_crc32(0, h->m->params, h->n * sizeof(float)));
    log_transition(h, HPT_PHASE_FULL, done);
}

/* One call on the outer path: a jump when due, then a real step (warmup,
 * correct while a check is under way, else full) and its check. The jump's
 * time is returned in h->out.jump_s (the caller puts it on the clock). */
static hpt_status outer_step(hybrid *h, hpt_step_info *info, hpt_phase *ph, hpt_phase *real) {
    const hpt_hybrid_config *c = &h->cfg;
    int updates = hpt_trainer_updates(h->tr);
    h->out.jump_s = 0.0;
    /* the first interval starts after the warmup */
    if (h->out.anchor_updates < c->warmup_steps && updates >= c->warmup_steps) outer_new_interval(h);
    int jumped = outer_due(h) && outer_gate_open(h);
    if (jumped) {
        double t = hpt_now();
        outer_jump(h);
        h->out.jump_s = hpt_now() - t;
    }
    *real = hpt_trainer_updates(h->tr) < c->warmup_steps ? HPT_PHASE_WARMUP
          : h->out.check_left > 0 ? HPT_PHASE_CORRECT : HPT_PHASE_FULL;
    HPT_TRY(real_step(h, info, *real, NAN));
    outer_check(h, info->train_loss);
    *ph = jumped ? HPT_PHASE_PREDICT : *real;
    return HPT_OK;
}

/* Back to the snapshot after a divergence or a non-finite step: what the
 * real steps and the kept jump since it did is undone (parameters, moments,
 * the update count and the kept predicted steps), the step counter keeps
 * its place (the schedule does not rewind; summary.json reports what was
 * undone), the predicted step scale halves and Full steps are forced. */
static void rollback(hybrid *h, const char *what) {
    int updates = hpt_trainer_updates(h->tr);
    if (h->snap.updates >= 0) {
        /* since the snapshot: one Predict phase, which kept `jumped` steps
         * (0 if rolled back), then real steps, one update each */
        int real = updates - h->snap.updates, jumped = hpt_trainer_steps(h->tr) - h->snap.step - real;
        h->cnt.predicted_steps_kept -= jumped > 0 ? jumped : 0;
    }
    restore_snapshot(h);
    h->snap.valid = 0;
    h->cnt.div_rollbacks++;
    h->scale *= 0.5f;
    if (h->pred.ops->outer) outer_rolled_back(h);
    char w[400];
    snprintf(w, sizeof w, "%s: rolled back to the snapshot of step %d (%d updates undone), predicted step scale %.3g",
             what, h->snap.step, updates - hpt_trainer_updates(h->tr), h->scale);
    hpt_phase_force_full(&h->ph, 2 * h->cfg.full_steps, w);
    log_transition(h, HPT_PHASE_FULL, w);
}

/* The trainer's real step. A non-finite loss or gradient while a snapshot
 * is held undoes everything since it and redoes the step. Every backward
 * pass the model ran counts, the failed attempt's included. */
static hpt_status trainer_step(hybrid *h, hpt_step_info *info) {
    size_t calls0 = hpt_model_backward_calls(h->m);
    const int learn = dyn_learns(h);
    if (learn) before_real_step(h);
    hpt_status st = hpt_trainer_step(h->tr, info);
    if (st == HPT_ERR_NUMERIC && h->snap.valid) {
        char what[300];
        snprintf(what, sizeof what, "%s", hpt_errmsg());
        rollback(h, what);
        if (learn) before_real_step(h);
        st = hpt_trainer_step(h->tr, info);
    }
    h->cnt.backward_passes += (int)(hpt_model_backward_calls(h->m) - calls0);
    return st;
}

/* A real step and what the controller learns from it: the step-time and
 * acceptance averages, the loss ring, the predictor's and the dynamics
 * model's observations, the divergence monitor's verdict. */
static hpt_status real_step(hybrid *h, hpt_step_info *info, hpt_phase ph, float conf) {
    HPT_TRY(trainer_step(h, info));
    h->real_step_s = h->real_step_s > 0.0 ? 0.9 * h->real_step_s + 0.1 * info->step_s : info->step_s;
    h->accept_ema = 1.0f - 0.995f * (1.0f - h->accept_ema);
    record_loss(h, info->train_loss);
    hpt_pred_observe(&h->pred, h->m->params, hpt_trainer_updates(h->tr));
    float predicted = h->next_pred_loss;
    if (dyn_learns(h)) HPT_TRY(after_real_step(h, info, ph));
    if (!h->pred.ops->outer) hpt_phase_step_done(&h->ph);  /* the outer path has no phase controller */
    const char *dwhy = NULL;
    hpt_div_level lv = hpt_div_observe(&h->div, hpt_trainer_steps(h->tr), info->train_loss, info->grad_norm, &dwhy);
    if (lv == HPT_DIV_CRITICAL) {
        char what[300];
        snprintf(what, sizeof what, "divergence (%s)", dwhy ? dwhy : "critical");
        if (h->snap.valid) {
            rollback(h, what);
        } else {
            snprintf(what + strlen(what), sizeof what - strlen(what), ": no snapshot held, forcing full steps");
            hpt_phase_force_full(&h->ph, 2 * h->cfg.full_steps, what);
            log_transition(h, HPT_PHASE_FULL, what);
        }
    }
    info->backward = 1;
    info->confidence = conf;
    info->predicted_loss = predicted;
    info->residual = info->train_loss - predicted;
    return HPT_OK;
}

/* The outer path's call with its accounting: everything beyond the
 * trainer's step is training time; the jump (snapshot, outer step, new
 * anchor) is the predict phase's time, the rest the controller's; the call
 * counts one step of its real step's phase (a jump moves no step). */
static hpt_status outer_timed(hybrid *h, hpt_step_info *info, double t0) {
    hpt_phase ph, real;
    HPT_TRY(outer_step(h, info, &ph, &real));
    info->phase = hpt_phase_name(ph);
    double whole = hpt_now() - t0, extra = whole - info->step_s;
    if (extra > 0.0) hpt_trainer_add_time(h->tr, extra);  /* step_s is on the clock already */
    double ctrl = extra - h->out.jump_s;
    if (ctrl > 0.0) h->cnt.ctrl_s += ctrl;
    info->step_s = whole;
    info->time_s = hpt_trainer_clock(h->tr);
    h->cnt.phase_s[HPT_PHASE_PREDICT] += h->out.jump_s;
    h->cnt.phase_s[real] += whole - h->out.jump_s;
    h->cnt.phase_count_steps[real] += 1;
    return HPT_OK;
}

static hpt_status hybrid_step(void *hctx, hpt_trainer *tr, hpt_step_info *info) {
    hybrid *h = hctx;
    /* everything the hybrid does is training time: the confidence forecast,
     * the statistics around a real step, the dynamics model's update, the
     * divergence checks (the trainer's clock only saw the step itself) */
    double t0 = hpt_now();
    if (h->pred.ops->outer) return outer_timed(h, info, t0);
    float conf = NAN;
    /* a predictor without the history it reads waits in Full, even at
     * threshold 0, where a confidence of 0 would pass */
    char wait_buf[160];
    const char *wait = NULL;
    if (!hpt_pred_ready(&h->pred)) {
        hpt_pred_wait_reason(&h->pred, wait_buf, sizeof wait_buf);
        wait = wait_buf;
    }
    if (hpt_phase_wants_confidence(&h->ph)) conf = wait ? 0.0f : confidence_now(h);
    int horizon = 0;
    const char *why = NULL;
    hpt_phase ph = hpt_phase_next_wait(&h->ph, isfinite(conf) ? conf : 0.0f, wait, &horizon, &why);
    if (why) log_transition(h, ph, why);
    if (ph == HPT_PHASE_PREDICT) HPT_TRY(predict_phase(h, info, horizon, conf));
    else HPT_TRY(real_step(h, info, ph, conf));
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

/* The learned dynamics: the encoder, then the GRU ensemble over its features. */
static hpt_status init_dynamics(hybrid *h) {
    const hpt_hybrid_config *hc = &h->cfg;
    HPT_TRY(hpt_encoder_init(&h->enc, &h->nfeat));
    hpt_dyn_config dc;
    hpt_dyn_config_default(&dc, h->nfeat, h->K);
    dc.ensemble = hc->ensemble;
    dc.hidden = hc->hidden;
    dc.bptt = hc->bptt;
    if (dc.max_horizon < hc->max_predict_steps) dc.max_horizon = hc->max_predict_steps > FC_MAX ? FC_MAX : hc->max_predict_steps;
    dc.seed = hpt_trainer_config(h->tr)->seed ^ 0xD1A6u;
    return hpt_dyn_init(&h->dyn, &dc, &h->enc);
}

/* Which parameters of each tensor the update statistics sample. */
static void layout_samples(hybrid *h) {
    h->ns = 0;
    for (int ti = 0; ti < h->m->ntensors; ti++) {
        size_t numel = h->m->tensors[ti].numel;
        h->s_stride[ti] = (numel + SAMPLE_MAX - 1) / SAMPLE_MAX;
        h->s_cnt[ti] = (numel + h->s_stride[ti] - 1) / h->s_stride[ti];
        h->s_off[ti] = h->ns;
        h->ns += h->s_cnt[ti];
    }
}

/* The buffers: one arena carved by HYBRID_BUFS. */
static hpt_status carve_buffers(hybrid *h) {
    _Static_assert(sizeof(int) == sizeof(float), "int slices share the float arena");
#define X(type, name, size) size,
    size_t sizes[] = {HYBRID_BUFS(X)};
#undef X
    enum { NB = sizeof sizes / sizeof sizes[0] };
    float *slice[NB], **ptrs[NB];
    for (int i = 0; i < NB; i++) ptrs[i] = &slice[i];
    size_t total;
    h->buf_arena = hpt_arena_carve(sizes, NB, ptrs, &total);
    if (!h->buf_arena) return hpt_fail(HPT_ERR_NOMEM, "hybrid: out of memory for its buffers");
    h->buf_bytes = total * sizeof(float);
    int i = 0;
#define X(type, name, size) h->name = (type *)slice[i++];
    HYBRID_BUFS(X)
#undef X
    return HPT_OK;
}

/* phases.jsonl: a fresh run starts it (a resumed one reopens it in
 * hpt_hyb_load_state, cut back to the checkpoint). */
static hpt_status open_phases_log(hybrid *h) {
    const char *out_dir = hpt_trainer_config(h->tr)->out_dir;
    snprintf(h->phases_path, sizeof h->phases_path, "%s/phases.jsonl", out_dir);
    if (hpt_trainer_is_resumed(h->tr)) {
        if (!hpt_trainer_resumed_hybrid(h->tr))
            return hpt_fail(HPT_ERR_ARG, "'%s' comes from a --mode baseline run: resume it in baseline mode",
                            hpt_trainer_checkpoint(h->tr));
        return HPT_OK;
    }
    if (!hpt_trainer_writes(h->tr)) return HPT_OK;  /* rank 0 writes the run's files */
    HPT_TRY(hpt_mkdir_p(out_dir));
    h->phases_log = fopen(h->phases_path, "w");
    if (!h->phases_log) return hpt_fail(HPT_ERR_IO, "cannot create '%s': %s", h->phases_path, strerror(errno));
    return HPT_OK;
}

/* All of the driver's memory, before step 0. */
static hpt_status init_parts(hybrid *h) {
    hpt_phase_config pc;
    hpt_div_config dc;
    hpt_hyb_to_phase_config(&h->cfg, &pc);
    hpt_hyb_to_div_config(&h->cfg, &dc);
    hpt_phase_init(&h->ph, &pc);
    hpt_div_init(&h->div, &dc);
    HPT_TRY(hpt_pred_init(&h->pred, hpt_pred_parse(h->cfg.predictor), h->m, 0, 0));
    h->pred.outer_lr = h->cfg.outer_lr;
    h->pred.outer_mom = h->cfg.outer_momentum;
    h->pred.outer_adapt = h->cfg.outer_adapt;
    hpt_pred_outer_reset(&h->pred, h->m->params);  /* the first interval's anchor (a resume loads its own) */
    HPT_TRY(hpt_snapshot_init(&h->snap, h->n));
    HPT_TRY(init_dynamics(h));
    layout_samples(h);
    HPT_TRY(carve_buffers(h));
    HPT_TRY(open_phases_log(h));
    h->arena_bytes = 3 * h->n * sizeof(float) + h->buf_bytes + h->pred.arena_bytes +
                     (h->dyn.params_n + h->dyn.grads_n + h->dyn.adam_n + h->dyn.state_n + h->dyn.scratch_n) * sizeof(float);
    return HPT_OK;
}

hpt_status hpt_hyb_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hybrid **out) {
    *out = NULL;
    HPT_TRY(hpt_hybrid_config_check(hc));
    if (hpt_trainer_schedule_free(tr))  /* its predictors read and move AdamW's moments and weights */
        return hpt_fail(HPT_ERR_ARG, "--mode hybrid needs --optimizer adamw (schedule-free is not supported by "
                        "the hybrid controller)");
    if (hpt_trainer_config(tr)->sync_interval > 0)  /* its steps would move each rank alone */
        return hpt_fail(HPT_ERR_ARG, "--mode hybrid cannot be combined with --sync-interval (local-step mode): "
                        "use one or the other");
    hybrid *h = calloc(1, sizeof *h);
    if (!h) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    h->cfg = *hc;
    h->tr = tr;
    h->m = hpt_trainer_model(tr);
    h->n = h->m->nparams;
    h->K = h->m->ntensors;
    h->P = hc->probe_batches;
    hpt_trainer_batch_shape(tr, &h->maxB, &h->T, &h->xdim);
    h->scale = 1.0f;
    h->accept_ema = 1.0f;
    h->next_pred_loss = NAN;
    hpt_status st = init_parts(h);
    if (st != HPT_OK) { hpt_hyb_free(h); return st; }
    *out = h;
    return HPT_OK;
}

hpt_status hpt_trainer_run_hybrid(hpt_trainer *tr, const hpt_hybrid_config *hc,
                                  hpt_log_fn log, hpt_step_fn on_step, void *ctx) {
    hybrid *h;
    HPT_TRY(hpt_hyb_new(tr, hc, &h));
    h->log = log;
    h->log_ctx = ctx;
    hpt_run_hooks hooks = {.step = hybrid_step, .metrics = hpt_hyb_metrics, .summary = hpt_hyb_summary, .log_config = hpt_hyb_log_config,
                           .state_bytes = hpt_hyb_state_bytes, .save_state = hpt_hyb_save_state,
                           .load_state = hpt_hyb_load_state, .hctx = h};
    hpt_status st = hpt_trainer_run_hooks(tr, &hooks, log, on_step, ctx);
    hpt_hyb_free(h);
    return st;
}

void hpt_hyb_free(hybrid *h) {
    if (!h) return;
    if (h->phases_log) fclose(h->phases_log);
    hpt_pred_free(&h->pred);
    hpt_snapshot_free(&h->snap);
    hpt_dyn_free(&h->dyn);
    hpt_encoder_free(&h->enc);
    hpt_arena_free(h->buf_arena);
    free(h);
}
