/*
 * hybrid_report.c — what a hybrid run adds to metrics.jsonl, summary.json
 * and the start-of-run log.
 */
#include "hybrid_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A step's phase fields (after the trainer's own members): the phase, its
 * passes, and for a Predict phase or an outer jump what the jump did. */
void hpt_hyb_metrics(void *hctx, const hpt_step_info *info, cJSON *line) {
    (void)hctx;
    cJSON_AddStringToObject(line, "phase", info->phase);
    cJSON_AddNumberToObject(line, "backward", info->backward);
    cJSON_AddNumberToObject(line, "probe", info->probes);
    if (!strcmp(info->phase, "predict") || !strcmp(info->phase, "jump")) {
        cJSON_AddNumberToObject(line, "predicted_steps", info->predicted_steps);
        cJSON_AddNumberToObject(line, "accepted", info->accepted);
        hpt_json_num(line, "alpha", info->alpha);
    }
    hpt_json_num(line, "predicted_loss", info->predicted_loss);
    hpt_json_num(line, "confidence", info->confidence);
    hpt_json_num(line, "residual", info->residual);
    hpt_json_num(line, "step_ms", info->step_s * 1e3);
}

/* A JSON object member holding one number per phase. */
static void per_phase(cJSON *o, const char *key, const double *v) {
    static const char *names[HPT_PHASE_COUNT] = {"warmup", "full", "predict", "correct"};
    cJSON *p = cJSON_AddObjectToObject(o, key);
    for (int i = 0; p && i < HPT_PHASE_COUNT; i++) hpt_json_num(p, names[i], v[i]);
}

void hpt_hyb_summary(void *hctx, cJSON *o) {
    hybrid *h = hctx;
    const hybrid_counts *c = &h->cnt;
    cJSON_AddStringToObject(o, "mode", "hybrid");
    cJSON_AddStringToObject(o, "predictor", h->cfg.predictor);
    /* the hybrid layer's share of the memory ledger, by role */
    cJSON *mb = cJSON_AddObjectToObject(o, "memory_bytes_hybrid");
    if (mb) {
        hpt_json_u64(mb, "snapshot", 3 * h->n * sizeof(float));
        size_t buffers, dynamics, encoder;
        hpt_hyb_ext_bytes(h, &buffers, &dynamics, &encoder);
        hpt_json_u64(mb, "buffers", buffers);
        hpt_json_u64(mb, "predictor", hpt_hyb_pred_bytes(h));
        hpt_json_u64(mb, "dynamics", dynamics);
        hpt_json_u64(mb, "encoder", encoder);
    }
    double steps[HPT_PHASE_COUNT];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) steps[i] = c->phase_count_steps[i];
    per_phase(o, "phase_steps", steps);
    per_phase(o, "phase_time_s", c->phase_s);
    hpt_json_u64(o, "backward_passes", (uint64_t)c->backward_passes);
    hpt_json_u64(o, "probe_passes", (uint64_t)c->probe_passes);
    /* the hybrid's whole cost over plain training: Predict phases (probes,
     * predictor, line search, rejected jumps) plus its bookkeeping on
     * every real step */
    hpt_json_num(o, "predictor_overhead_s", c->phase_s[HPT_PHASE_PREDICT]);
    hpt_json_num(o, "controller_overhead_s", c->ctrl_s);
    cJSON *pp = cJSON_AddObjectToObject(o, "predict_phases");
    if (pp) {
        hpt_json_u64(pp, "accepted", (uint64_t)c->phases_accepted);
        hpt_json_u64(pp, "rolled_back", (uint64_t)c->phases_rejected);
        hpt_json_u64(pp, "steps_kept", (uint64_t)c->predicted_steps_kept);
        hpt_json_u64(pp, "steps_lost", (uint64_t)c->predicted_steps_lost);
        hpt_json_num(pp, "mean_alpha", c->phases_accepted ? c->alpha_sum / c->phases_accepted : 0.0);
    }
    hpt_json_u64(o, "divergence_rollbacks", (uint64_t)c->div_rollbacks);
    if (h->pred.ops->outer) {
        /* jumps move no step: applied = kept + rolled back (+ 1 under check at the end) */
        cJSON *oj = cJSON_AddObjectToObject(o, "outer_jumps");
        if (oj) {
            hpt_json_u64(oj, "applied", (uint64_t)h->out.applied);
            hpt_json_u64(oj, "kept", (uint64_t)h->out.kept);
            hpt_json_u64(oj, "rolled_back", (uint64_t)h->out.rolled_back);
            hpt_json_num(oj, "scale", h->scale);
        }
    }
    /* what the rollbacks undid: every real step is an update in effect or
     * undone, every step of the schedule a real step or a predicted one,
     * kept or undone (the step counter itself never moves back) */
    int real = c->phase_count_steps[HPT_PHASE_WARMUP] + c->phase_count_steps[HPT_PHASE_FULL] +
               c->phase_count_steps[HPT_PHASE_CORRECT];
    int undone_u = real - hpt_trainer_updates(h->tr);
    int undone_p = hpt_trainer_steps(h->tr) - real - c->predicted_steps_kept;
    cJSON *rb = cJSON_AddObjectToObject(o, "rolled_back");
    if (rb) {
        hpt_json_u64(rb, "updates", (uint64_t)(undone_u > 0 ? undone_u : 0));
        hpt_json_u64(rb, "predicted_steps", (uint64_t)(undone_p > 0 ? undone_p : 0));
    }
    /* an extension's members: its transitions and what it learned */
    if (h->ext_ctx && h->ext->summary) h->ext->summary(h->ext_ctx, o);
    else hpt_json_u64(o, "transitions", 0);
}

void hpt_hyb_log_config(void *hctx, hpt_log_fn log, void *ctx) {
    hybrid *h = hctx;
    const hpt_hybrid_config *c = &h->cfg;
    char line[512];
    if (h->pred.ops->outer) {
        snprintf(line, sizeof line, "hybrid     predictor %s: a jump every %d real steps after warmup %d, eta %g, "
                 "mu %g%s, checked by the next %d real losses; hybrid state %.1f MiB (snapshot %.1f, anchor and "
                 "momentum %.1f)", c->predictor, c->outer_interval, c->warmup_steps, c->outer_lr, c->outer_momentum,
                 c->outer_follow_lr ? ", following the lr" : "", c->outer_check, h->arena_bytes / 1048576.0,
                 3.0 * h->n * sizeof(float) / 1048576.0, hpt_hyb_pred_bytes(h) / 1048576.0);
        if (log) log(ctx, line);
        return;
    }
    /* an extension's controller says what it runs */
    if (h->ext_ctx && h->ext->log_config)
        h->ext->log_config(h->ext_ctx, log, ctx, h->arena_bytes / 1048576.0, 3.0 * h->n * sizeof(float) / 1048576.0);
}
