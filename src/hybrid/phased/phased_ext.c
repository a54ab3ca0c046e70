/*
 * phased_ext.c — the phased design's row in the hybrid driver's extension
 * table (../extension.h): the predictors it runs, its controller
 * (phased.c) and learned dynamics (learner.h) created on the driver's
 * services, its HYBR blocks, its summary members and start-of-run line.
 * With --outer-gate dynamics the outer path creates it as a gate: the
 * learned dynamics alone, trained on every real step, whose confidence
 * opens a jump.
 */
#include "phased.h"
#include "../hybr_walk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Its predictors (pred_<id>.c, sharing pred_common.c), in the order of the
 * settings table's --predictor row, whose index is their checkpoint code. */
extern const hpt_pred_ops hpt_pred_coast, hpt_pred_stale_adam, hpt_pred_linear, hpt_pred_shrink;
static const hpt_pred_ops *const predictors[] = {&hpt_pred_coast, &hpt_pred_stale_adam, &hpt_pred_linear,
                                                 &hpt_pred_shrink, NULL};

/* One instance: the learned dynamics, and the controller unless a gate. */
typedef struct phased_ext {
    hpt_hyb_services svc;
    hpt_learner *learn;
    hpt_phased *ctl;         /* NULL for a gate */
} phased_ext;

static hpt_status config_check(const hpt_hybrid_config *c) {
    hpt_phase_config pc;
    hpt_phased_phase_config(c, &pc);
    return hpt_phase_config_check(&pc);
}

static void ext_free(void *ctx) {
    phased_ext *e = ctx;
    if (!e) return;
    hpt_phased_free(e->ctl);
    hpt_learner_free(e->learn);
    free(e);
}

static hpt_status create(const hpt_hyb_services *svc, hpt_hyb_ext_role role, void **out) {
    *out = NULL;
    phased_ext *e = calloc(1, sizeof *e);
    if (!e) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    e->svc = *svc;
    hpt_status st = hpt_learner_new(svc->tr, svc->cfg, &e->learn);
    if (st == HPT_OK && role == HPT_EXT_CONTROLLER) st = hpt_phased_new(&e->svc, e->learn, &e->ctl);
    if (st != HPT_OK) { ext_free(e); return st; }
    *out = e;
    return HPT_OK;
}

static hpt_status step(void *ctx, hpt_step_info *info, double t0) {
    return hpt_phased_step(((phased_ext *)ctx)->ctl, info, t0);
}

static void before_real_step(void *ctx) { hpt_learner_before(((phased_ext *)ctx)->learn); }

/* The learned dynamics' online step (its forecast for this step handed
 * back first), then the controller's count. */
static hpt_status after_real_step(void *ctx, const hpt_step_info *info, hpt_phase ph, float *predicted) {
    phased_ext *e = ctx;
    *predicted = e->learn->next_pred_loss;
    HPT_TRY(hpt_learner_after(e->learn, info, ph, e->ctl ? e->ctl->ph.steps_in_phase : 0));
    if (e->ctl) hpt_phased_real_step_done(e->ctl);
    return HPT_OK;
}

static void held(void *ctx, const char *why) {
    phased_ext *e = ctx;
    if (e->ctl) hpt_phased_hold(e->ctl, why);
}

/* The gate: the learned dynamics' confidence at the longest Predict horizon. */
static float gate_confidence(void *ctx) {
    phased_ext *e = ctx;
    return hpt_learner_confidence(e->learn, e->svc.cfg->max_predict_steps, 1.0f);
}

static void bytes(void *ctx, size_t *buffers, size_t *dynamics, size_t *encoder) {
    phased_ext *e = ctx;
    *buffers = e->learn->buf_bytes + (e->ctl ? e->ctl->buf_bytes : 0);
    *dynamics = hpt_learner_dyn_bytes(e->learn);
    *encoder = e->learn->enc.arena_floats * sizeof(float);
}

/* ---------------------------------------------------------------- summary.json, the start-of-run line */

/* The forecast's calibration: how often the realised loss fell inside the
 * forecast's mean +- 2 std, per horizon bucket (1, 2-3, 4-7, ...); nothing
 * scored yet is null. */
static void calibration(const hpt_dyn *d, cJSON *o) {
    cJSON *a = cJSON_AddArrayToObject(o, "calibration");
    for (int b = 0; a && b < hpt_dyn_buckets(d); b++) {
        hpt_dyn_calib cb;
        hpt_dyn_calibration(d, b, 0, &cb);
        cJSON *item = cJSON_CreateObject();
        if (!item) return;
        cJSON_AddItemToArray(a, item);
        cJSON *hz = cJSON_AddArrayToObject(item, "horizons");
        if (hz) {
            cJSON_AddItemToArray(hz, cJSON_CreateNumber(cb.h_lo));
            cJSON_AddItemToArray(hz, cJSON_CreateNumber(cb.h_hi));
        }
        hpt_json_u64(item, "scored", (uint64_t)cb.n);
        hpt_json_num(item, "coverage", cb.n > 0 ? cb.coverage_all : NAN);
        hpt_json_num(item, "rmse_log_loss", cb.n > 0 ? cb.rmse : NAN);
    }
}

/* The controller's transitions (0 for a gate), the forecast's calibration
 * and what the residual corrector changed. */
static void summary(void *ctx, cJSON *o) {
    phased_ext *e = ctx;
    hpt_json_u64(o, "transitions", (uint64_t)(e->ctl ? e->ctl->ph.transitions : 0));
    calibration(&e->learn->dyn, o);
    float before, after;
    hpt_dyn_corrector_effect(&e->learn->dyn, 0, &before, &after);
    cJSON *cr = cJSON_AddObjectToObject(o, "corrector_loss_residual");
    if (cr) {
        hpt_json_num(cr, "raw", before);
        hpt_json_num(cr, "corrected", after);
    }
}

static void log_config(void *ctx, hpt_log_fn log, void *lctx, double state_mib, double snapshot_mib) {
    phased_ext *e = ctx;
    const hpt_hybrid_config *c = e->svc.cfg;
    size_t buffers, dynamics, encoder;
    bytes(ctx, &buffers, &dynamics, &encoder);
    char line[512];
    snprintf(line, sizeof line, "hybrid     predictor %s, warmup %d, full %d, predict %d..%d, correct %d, "
             "threshold %g, correction interval %d, %d probe batches%s; hybrid state %.1f MiB "
             "(snapshot %.1f, buffers %.1f)",
             c->predictor, c->warmup_steps, c->full_steps, c->min_predict_steps, c->max_predict_steps,
             c->correct_steps, c->confidence_threshold, c->correction_interval, c->probe_batches,
             c->whole_phase ? ", whole-phase jumps" : "", state_mib, snapshot_mib, buffers / 1048576.0);
    if (log) log(lctx, line);
}

/* ---------------------------------------------------------------- its HYBR blocks */

static void phase_save(const void *o, hpt_writer *w) { hpt_phase_save(o, w); }
static hpt_status phase_load(void *o, hpt_cursor *k) { return hpt_phase_load(o, k); }

/* Whether the layout being read holds the controller's block in every run
 * (version 6), a gate's included. */
static int all_blocks(const hpt_hyb_walker *x) { return x->mode == 2 && x->version < 7; }

/* The phase controller, field by field (a gate has none: skipped in a
 * version-6 checkpoint, which held it for every run). */
static void walk_control(phased_ext *e, hpt_hyb_walker *x) {
    if (!e->ctl) {
        if (all_blocks(x)) hpt_walk_skip(x, "phase controller");
        return;
    }
    hpt_walk_fields ph = {"phase controller", hpt_phase_state_bytes(), phase_save, phase_load};
    hpt_walk_fields_block(x, &ph, &e->ctl->ph);
}

/* The learned dynamics: encoder and dynamics arenas, byte for byte (floats,
 * and the dynamics model's scalars, an explicitly padded struct of fixed
 * width fields), their indices and counters checked after the read. */
static void walk_models(phased_ext *e, hpt_hyb_walker *x) {
    hpt_learner *l = e->learn;
    hpt_region r[8];
    int nr = hpt_encoder_regions(&l->enc, r);
    for (int i = 0; i < nr; i++) hpt_walk_block(x, r[i].name, r[i].ptr, r[i].bytes);
    nr = hpt_dyn_regions(&l->dyn, r);
    for (int i = 0; i < nr; i++) hpt_walk_block(x, r[i].name, r[i].ptr, r[i].bytes);
    if (!hpt_walk_reading(x)) return;
    if (hpt_encoder_check_state(&l->enc) != HPT_OK || hpt_dyn_check_state(&l->dyn) != HPT_OK)
        hpt_walk_fail(x, "%s", hpt_errmsg());
}

static void walk(void *ctx, hpt_hyb_ext_part part, hpt_hyb_walker *x) {
    phased_ext *e = ctx;
    if (part == HPT_EXT_PART_CONTROL) walk_control(e, x);
    else if (part == HPT_EXT_PART_MODELS) walk_models(e, x);
    else hpt_walk_block(x, "previous update", e->learn->prev_upd, e->learn->ns * sizeof(float));
}

static void get_words(void *ctx, hpt_hyb_ext_words *w) {
    phased_ext *e = ctx;
    w->have_prev_upd = e->learn->have_prev_upd;
    w->next_pred_loss = e->learn->next_pred_loss;
    w->accept_ema = e->ctl ? e->ctl->accept_ema : 1.0f;
}

static void set_words(void *ctx, const hpt_hyb_ext_words *w) {
    phased_ext *e = ctx;
    e->learn->have_prev_upd = w->have_prev_upd;
    e->learn->next_pred_loss = w->next_pred_loss;
    if (e->ctl) e->ctl->accept_ema = w->accept_ema;
}

static const hpt_hyb_ext phased_row = {
    .name = "phased",
    .predictors = predictors,
    .config_check = config_check,
    .create = create,
    .free = ext_free,
    .step = step,
    .before_real_step = before_real_step,
    .after_real_step = after_real_step,
    .held = held,
    .gate_confidence = gate_confidence,
    .bytes = bytes,
    .summary = summary,
    .log_config = log_config,
    .walk = walk,
    .get_words = get_words,
    .set_words = set_words,
};

const hpt_hyb_ext *const hpt_hyb_ext_phased_row = &phased_row;
