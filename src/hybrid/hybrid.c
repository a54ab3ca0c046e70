/*
 * hybrid.c — the hybrid driver: runs the trainer step by step and, on the
 * default path (--predictor outer), every H real steps after the warmup
 * takes an outer Nesterov step on the displacement since the last anchor
 * (the trainer layer's, src/train/outer.h, the step local-step training
 * takes) and guards it: checks it against the next K real steps' training losses
 * and rolls back byte for byte to the snapshot taken before it when the
 * check fails or training diverges.
 *
 * A call of the step hook (hybrid_step) on the outer path:
 *   1. when a jump is due (outer_due; with --outer-gate dynamics also
 *      confident, outer_gate_open): snapshot params, m and v, apply the outer
 *      step in place, start a new interval at the result (outer_jump);
 *   2. one real step: the trainer's, then what the driver learns from it
 *      (real_step: the loss ring, the predictor's observation, an
 *      extension's when the run has one, the divergence guard's verdict; a
 *      critical divergence or a non-finite step while a snapshot is held
 *      rolls back to it, rollback);
 *   3. while a jump is under check, its loss is scored (outer_check): kept
 *      after K real steps, or rolled back.
 * A jump moves no step: the LR schedule's position is the real steps'.
 * Everything the driver does is training time.
 *
 * A predictor the default table does not have is an extension's
 * (extension.h; the phased design, phased/, is the one row): the driver
 * creates the extension that runs it and hands it the step hook and its
 * services (real step, snapshot, phases.jsonl: the calls in
 * hpt_hyb_services); --outer-gate dynamics creates the extension that
 * offers the gate. The driver calls an extension only through its row. The
 * hybrid layer sees the model only through model.h (flat arenas and the
 * tensor table) and the trainer only through trainer.h (its counters,
 * clock, moments and batches).
 */
#include "hybrid_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- snapshot, phases.jsonl, progress */

static void take_snapshot(hybrid *h) {
    hpt_snapshot_take(&h->snap, h->m->params, hpt_trainer_moment1(h->tr), hpt_trainer_moment2(h->tr),
                      hpt_trainer_steps(h->tr), hpt_trainer_updates(h->tr));
    if (h->snap.sf)
        hpt_snapshot_take_sf(&h->snap, hpt_trainer_sf_z(h->tr), hpt_trainer_sf_x(h->tr), hpt_trainer_sf_sums(h->tr));
}

/* Parameters and moments back to the snapshot, and the update count the
 * moments belong to (unknown, -1, only in a snapshot from a checkpoint of
 * an older hpt: then the count stays); under schedule-free its z, x and
 * rate sums too. The step counter does not move. */
static void restore_snapshot(hybrid *h) {
    hpt_snapshot_restore_params(&h->snap, h->m->params);
    int updates = h->snap.updates >= 0 ? h->snap.updates : hpt_trainer_updates(h->tr);
    hpt_trainer_restore_moments(h->tr, hpt_snapshot_moment1(&h->snap), hpt_snapshot_moment2(&h->snap), updates);
    if (h->snap.sf)
        hpt_trainer_restore_sf(h->tr, hpt_snapshot_sf_z(&h->snap), hpt_snapshot_sf_x(&h->snap), h->snap.sf_sums);
}

/* An extension's controller runs every step (its predictor is selected). */
static int runs_extension(const hybrid *h) { return h->ext && h->ext_role == HPT_EXT_CONTROLLER; }

/* One line of phases.jsonl: the step, the phase entered (named by the
 * outer path's names, a jump and its check, unless an extension's
 * controller runs the steps), why (escaped
 * as JSON: a reason may quote anything). */
void hpt_hyb_log_transition(hybrid *h, hpt_phase to, const char *why) {
    if (!h->phases_log) return;
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    hpt_json_u64(o, "step", (uint64_t)hpt_trainer_steps(h->tr));
    cJSON_AddStringToObject(o, "phase", runs_extension(h) ? hpt_phase_name(to) : hpt_outer_phase_name(to));
    cJSON_AddStringToObject(o, "reason", why);
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!line) return;
    fputs(line, h->phases_log);
    fputc('\n', h->phases_log);
    fflush(h->phases_log);
    cJSON_free(line);
}

static void record_loss(hybrid *h, float loss) {
    if (!isfinite(loss)) return;
    h->loss_ring[h->loss_head] = loss;
    h->loss_head = (h->loss_head + 1) % LOSS_RING;
    if (h->loss_n < LOSS_RING) h->loss_n++;
}

/* Loss decrease per real step over the ring (least squares), >= 0; NaN
 * until the ring holds 16 losses. */
static float progress(const hybrid *h) {
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

/* ---------------------------------------------------------------- the outer path's interval
 * An outer predictor (--predictor outer, pred_outer.c's row; the step is
 * src/train/outer.h's, held in h->out.step) has no phase
 * controller, no confidence gate (unless --outer-gate dynamics), no probes
 * and no line search: every H real steps after the warmup it jumps
 * (outer_jump), and the next K real steps' training losses are the jump's
 * check (outer_check). A failed check (or a divergence, or a non-finite
 * step, while the snapshot is held) rolls back byte for byte to the
 * snapshot taken just before the jump (rollback: the K real steps since are
 * undone too; the step counter keeps its place), halves the jump's scale
 * and starts a new interval there with the momentum buffer at 0. A jump is
 * a transformation of the weights, not skipped steps: the step counter does
 * not move. */

/* A new interval: anchor = params, momentum buffer 0. */
static void outer_new_interval(hybrid *h) {
    hpt_outer_reset(&h->out.step, h->m->params);
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

/* ---------------------------------------------------------------- real steps and rollback */

/* Back to the snapshot after a divergence, a non-finite step or a failed
 * outer check: what the real steps and the kept jump since it did is undone
 * (parameters, moments, the update count and the kept predicted steps), the
 * step counter keeps its place (the schedule does not rewind; summary.json
 * reports what was undone), the predicted step scale halves, the outer path
 * starts a new interval and an extension hears of it (the phased
 * controller holds Full). */
static void rollback(hybrid *h, const char *what) {
    int updates = hpt_trainer_updates(h->tr);
    if (h->snap.updates >= 0) {
        /* since the snapshot: one jump, which kept `jumped` steps of the
         * schedule (a Predict phase's advance; 0 for an outer jump or a
         * phase rolled back), then real steps, one update each */
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
    if (h->ext && h->ext->held) h->ext->held(h->ext_ctx, w);
    hpt_hyb_log_transition(h, HPT_PHASE_FULL, w);
}

/* The trainer's real step. A non-finite loss or gradient while a snapshot
 * is held undoes everything since it and redoes the step. Every backward
 * pass the model ran counts, the failed attempt's included. */
static hpt_status trainer_step(hybrid *h, hpt_step_info *info) {
    size_t calls0 = hpt_model_backward_calls(h->m);
    if (h->ext && h->ext->before_real_step) h->ext->before_real_step(h->ext_ctx);
    hpt_status st = hpt_trainer_step(h->tr, info);
    if (st == HPT_ERR_NUMERIC && h->snap.valid) {
        char what[300];
        snprintf(what, sizeof what, "%s", hpt_errmsg());
        rollback(h, what);
        if (h->ext && h->ext->before_real_step) h->ext->before_real_step(h->ext_ctx);
        st = hpt_trainer_step(h->tr, info);
    }
    h->cnt.backward_passes += (int)(hpt_model_backward_calls(h->m) - calls0);
    return st;
}

/* The divergence guard's verdict on a real step: critical rolls back to
 * the snapshot when one is held, else tells an extension (the phased
 * controller holds Full) and says so in phases.jsonl. */
static void guard_divergence(hybrid *h, const hpt_step_info *info) {
    const char *dwhy = NULL;
    hpt_div_level lv = hpt_div_observe(&h->div, hpt_trainer_steps(h->tr), info->train_loss, info->grad_norm, &dwhy);
    if (lv != HPT_DIV_CRITICAL) return;
    char what[300];
    snprintf(what, sizeof what, "divergence (%s)", dwhy ? dwhy : "critical");
    if (h->snap.valid) {
        rollback(h, what);
        return;
    }
    snprintf(what + strlen(what), sizeof what - strlen(what), ": no snapshot held, forcing full steps");
    if (h->ext && h->ext->held) h->ext->held(h->ext_ctx, what);
    hpt_hyb_log_transition(h, HPT_PHASE_FULL, what);
}

/* A real step and what the driver learns from it: the step-time average,
 * the loss ring, the predictor's observation, an extension's (when the run
 * has one), the divergence guard's verdict. An extension's controller
 * takes its real steps through here too (hpt_hyb_services). */
static hpt_status real_step(hybrid *h, hpt_step_info *info, hpt_phase ph, float conf) {
    HPT_TRY(trainer_step(h, info));
    h->real_step_s = h->real_step_s > 0.0 ? 0.9 * h->real_step_s + 0.1 * info->step_s : info->step_s;
    record_loss(h, info->train_loss);
    hpt_pred_observe(&h->pred, h->m->params, hpt_trainer_updates(h->tr));
    float predicted = NAN;
    if (h->ext && h->ext->after_real_step) HPT_TRY(h->ext->after_real_step(h->ext_ctx, info, ph, &predicted));
    guard_divergence(h, info);
    info->backward = 1;
    info->confidence = conf;
    info->predicted_loss = predicted;
    info->residual = info->train_loss - predicted;
    return HPT_OK;
}

/* ---------------------------------------------------------------- the outer path's step */

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

/* --outer-gate dynamics: a due jump waits until the gate's extension (the
 * phased design's learned dynamics, fed on every real step) is confident
 * enough: >= --confidence-threshold. */
static int outer_gate_open(hybrid *h) {
    return !h->cfg.outer_gate || h->ext->gate_confidence(h->ext_ctx) >= h->cfg.confidence_threshold;
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

/* The parameters' crc32 for the log, " params crc32 xxxxxxxx" (the tests
 * match a rollback's against its jump's: the restore is byte-exact), or ""
 * on a device whose memory is not the host's: there it would copy every
 * parameter to the host at each jump and rollback, which the CUDA
 * emulator's traffic count caught (tests/cuda/cli_device_cuda.sh). */
static void params_crc_text(const hybrid *h, char *buf, size_t len) {
    buf[0] = 0;
    if (h->m->dev->host_memory) snprintf(buf, len, " params crc32 %08x", hpt_model_crc32(h->m, h->m->params, h->n));
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
    char crc[40];
    params_crc_text(h, crc, sizeof crc);
    hpt_outer_apply(&h->out.step, h->m->params, NULL, s, h->pred.tensor_gate);
    if (h->cfg.outer_moments == 1) hpt_trainer_reset_moment1(tr);  /* the snapshot holds the old one */
    h->out.anchor_updates = updates;
    h->out.applied++;
    h->out.check_left = h->cfg.outer_check;
    h->out.check_n = 0;
    h->out.check_sum = 0.0;
    char why[400];
    snprintf(why, sizeof why, "outer jump %d: the displacement of %d updates, eta %.3g, mu %.3g, scale %.3g;%s%s "
             "checked by the next %d real losses against %.4f +- %.4f",
             h->out.applied, span, h->cfg.outer_lr, h->cfg.outer_momentum, s, crc, *crc ? " before it;" : "",
             h->cfg.outer_check, h->out.ref_mean, h->out.ref_sd);
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
    hpt_hyb_log_transition(h, HPT_PHASE_JUMP, why);
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
            hpt_hyb_log_transition(h, HPT_PHASE_FULL, what);
            return;
        }
        snprintf(what, sizeof what, "outer jump %d failed its check: mean of the next %d real losses %.4f > %.4f",
                 o->applied, o->check_n, mean, lim);
    }
    rollback(h, what);
    char crc[40], done[120];
    params_crc_text(h, crc, sizeof crc);
    snprintf(done, sizeof done, "%s restored", *crc ? crc + 1 : "params");
    hpt_hyb_log_transition(h, HPT_PHASE_FULL, done);
}

/* One call on the outer path: a jump when due, then a real step (warmup,
 * check while a check is under way, else full) and its check. The jump's
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
          : h->out.check_left > 0 ? HPT_PHASE_CHECK : HPT_PHASE_FULL;
    HPT_TRY(real_step(h, info, *real, NAN));
    outer_check(h, info->train_loss);
    *ph = jumped ? HPT_PHASE_JUMP : *real;
    return HPT_OK;
}

/* The outer path's call with its accounting: everything beyond the
 * trainer's step is training time; the jump (snapshot, outer step, new
 * anchor) is the jump's time (in predict's slot), the rest the
 * controller's; the call counts one step of its real step's phase (a jump
 * moves no step). */
static hpt_status outer_timed(hybrid *h, hpt_step_info *info, double t0) {
    hpt_phase ph, real;
    HPT_TRY(outer_step(h, info, &ph, &real));
    info->phase = hpt_outer_phase_name(ph);
    double whole = hpt_now() - t0, extra = whole - info->step_s;
    if (extra > 0.0) hpt_trainer_add_time(h->tr, extra);  /* step_s is on the clock already */
    double ctrl = extra - h->out.jump_s;
    if (ctrl > 0.0) h->cnt.ctrl_s += ctrl;
    info->step_s = whole;
    info->time_s = hpt_trainer_clock(h->tr);
    h->cnt.phase_s[HPT_PHASE_JUMP] += h->out.jump_s;
    h->cnt.phase_s[real] += whole - h->out.jump_s;
    h->cnt.phase_count_steps[real] += 1;
    return HPT_OK;
}

/* The step hook: the outer path, or the controlling extension's step. Its whole
 * time is training time: the statistics around a real step, the jump or
 * Predict phase, the divergence checks (the trainer's clock only saw the
 * step itself). */
static hpt_status hybrid_step(void *hctx, hpt_trainer *tr, hpt_step_info *info) {
    (void)tr;
    hybrid *h = hctx;
    double t0 = hpt_now();
    return runs_extension(h) ? h->ext->step(h->ext_ctx, info, t0)
                                                      : outer_timed(h, info, t0);
}

/* ---------------------------------------------------------------- setup */

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

/* The predictor; on the outer path the outer step, whose first interval's
 * anchor starts here (a resume loads its own). */
static hpt_status init_predictor(hybrid *h) {
    HPT_TRY(hpt_pred_init(&h->pred, hpt_pred_parse(h->cfg.predictor), h->m, 0, 0));
    if (!h->pred.ops->outer) return HPT_OK;
    hpt_outer *o = &h->out.step;
    HPT_TRY(hpt_outer_init(o, h->m, h->cfg.outer_lr, h->cfg.outer_momentum));
    o->adapt = h->cfg.outer_adapt;
    o->sf_z = hpt_trainer_sf_z(h->tr);   /* NULL under AdamW */
    o->sf_x = hpt_trainer_sf_x(h->tr);
    hpt_outer_reset(o, h->m->params);
    return HPT_OK;
}

/* ---------------------------------------------------------------- the services an extension is handed */

static const float *snapshot_params(const hybrid *h) { return hpt_snapshot_params(&h->snap); }
static float scale_now(const hybrid *h) { return h->scale; }
static double real_step_time(const hybrid *h) { return h->real_step_s; }

/* The extension the run needs (extension.h), created with the driver's
 * services: the one whose predictor is selected (it controls every step),
 * or with --outer-gate dynamics the one that offers the gate. */
static hpt_status init_extension(hybrid *h) {
    h->ext = hpt_hyb_ext_for_predictor(h->cfg.predictor);
    h->ext_role = HPT_EXT_CONTROLLER;
    if (!h->ext && h->cfg.outer_gate) {
        h->ext = hpt_hyb_ext_gate();
        h->ext_role = HPT_EXT_GATE;
    }
    if (!h->ext) return HPT_OK;
    h->svc = (hpt_hyb_services){.host = h, .tr = h->tr, .cfg = &h->cfg, .pred = &h->pred, .cnt = &h->cnt,
                                .real_step = real_step, .take_snapshot = take_snapshot,
                                .restore_snapshot = restore_snapshot, .snapshot_params = snapshot_params,
                                .log_transition = hpt_hyb_log_transition, .progress = progress,
                                .scale = scale_now, .real_step_s = real_step_time};
    return h->ext->create(&h->svc, h->ext_role, &h->ext_ctx);
}

void hpt_hyb_ext_bytes(const hybrid *h, size_t *buffers, size_t *dynamics, size_t *encoder) {
    *buffers = *dynamics = *encoder = 0;
    if (h->ext_ctx && h->ext->bytes) h->ext->bytes(h->ext_ctx, buffers, dynamics, encoder);
}

/* All of the driver's memory, before step 0: the divergence guard, the
 * predictor, the snapshot; an extension when the run has one. */
static hpt_status init_parts(hybrid *h) {
    hpt_div_config dc;
    hpt_hyb_to_div_config(&h->cfg, &dc);
    hpt_div_init(&h->div, &dc);
    HPT_TRY(init_predictor(h));
    HPT_TRY(hpt_snapshot_init(&h->snap, h->n, hpt_trainer_schedule_free(h->tr), h->m->dev));
    HPT_TRY(init_extension(h));
    HPT_TRY(open_phases_log(h));
    size_t buffers, dynamics, encoder;
    hpt_hyb_ext_bytes(h, &buffers, &dynamics, &encoder);
    h->arena_bytes = hpt_snapshot_floats(&h->snap) * sizeof(float) + buffers + hpt_hyb_pred_bytes(h) + dynamics;
    return HPT_OK;
}

hpt_status hpt_hyb_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hybrid **out) {
    *out = NULL;
    HPT_TRY(hpt_hybrid_config_check(hc));
    HPT_TRY(hpt_hybrid_config_check_sf(hc, hpt_trainer_schedule_free(tr)));
    HPT_TRY(hpt_hybrid_config_check_muon(hc, hpt_trainer_muon(tr)));
    const hpt_device *dev = hpt_trainer_model(tr)->dev;
    const int extension = hpt_hyb_ext_for_predictor(hc->predictor) != NULL;
    if (!dev->host_memory && (extension || hc->outer_adapt || hc->outer_gate))
        /* the outer step's path goes through the device table; these read
         * the weights and moments in host memory */
        return hpt_fail(HPT_ERR_ARG, "--mode hybrid on --device %s: only the outer step (--predictor outer, without "
                        "--outer-adapt and --outer-gate) runs on the device in this version; the phased predictors, "
                        "the agreement gate and the dynamics gate run on the CPU", dev->name);
    if (hpt_trainer_config(tr)->sync_interval > 0)  /* its steps would move each rank alone */
        return hpt_fail(HPT_ERR_ARG, "--mode hybrid cannot be combined with --sync-interval (local-step mode): "
                        "use one or the other");
    hybrid *h = calloc(1, sizeof *h);
    if (!h) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    h->cfg = *hc;
    h->tr = tr;
    h->m = hpt_trainer_model(tr);
    h->n = h->m->nparams;
    h->scale = 1.0f;
    /* the snapshot (3 arrays, 5 under schedule-free) and the outer step's
     * anchor and momentum, beside the model on its device: checked against
     * what the device has left (a device with memory of its own) */
    const size_t extra = (size_t)(hpt_trainer_schedule_free(tr) ? 7 : 5) * h->n * sizeof(float);
    hpt_status st = hpt_device_check_plan(dev, extra, "the hybrid's snapshot, the outer step's anchor and momentum");
    if (st == HPT_OK) st = init_parts(h);
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
    hpt_outer_free(&h->out.step);
    hpt_snapshot_free(&h->snap);
    if (h->ext_ctx) h->ext->free(h->ext_ctx);
    free(h);
}
