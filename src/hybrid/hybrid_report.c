/*
 * hybrid_report.c — what a hybrid run adds to metrics.jsonl, summary.json
 * and the start-of-run log.
 */
#include "hybrid_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* JSON has no NaN: a value not measured yet is null. */
static void json_num_(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, "\"%s\": %.5g", key, v); else fprintf(f, "\"%s\": null", key);
}

/* A step's phase fields (after the trainer's own members): the phase, its
 * passes, and for a Predict phase what its jump did. */
void hpt_hyb_metrics(void *hctx, const hpt_step_info *info, cJSON *line) {
    (void)hctx;
    cJSON_AddStringToObject(line, "phase", info->phase);
    cJSON_AddNumberToObject(line, "backward", info->backward);
    cJSON_AddNumberToObject(line, "probe", info->probes);
    if (!strcmp(info->phase, "predict")) {
        cJSON_AddNumberToObject(line, "predicted_steps", info->predicted_steps);
        cJSON_AddNumberToObject(line, "accepted", info->accepted);
        hpt_json_num(line, "alpha", info->alpha);
    }
    hpt_json_num(line, "predicted_loss", info->predicted_loss);
    hpt_json_num(line, "confidence", info->confidence);
    hpt_json_num(line, "residual", info->residual);
    hpt_json_num(line, "step_ms", info->step_s * 1e3);
}

void hpt_hyb_summary(void *hctx, FILE *f) {
    hybrid *h = hctx;
    fprintf(f, "  \"mode\": \"hybrid\",\n  \"predictor\": \"%s\",\n", h->cfg.predictor);
    /* the hybrid layer's share of the memory ledger, by role */
    fprintf(f, "  \"memory_bytes_hybrid\": {\"snapshot\": %zu, \"buffers\": %zu, \"predictor\": %zu, "
            "\"dynamics\": %zu, \"encoder\": %zu},\n", 3 * h->n * sizeof(float), h->buf_bytes,
            h->pred.arena_bytes,
            (h->dyn.params_n + h->dyn.grads_n + h->dyn.adam_n + h->dyn.state_n + h->dyn.scratch_n) * sizeof(float),
            h->enc.arena_floats * sizeof(float));
    fprintf(f, "  \"phase_steps\": {\"warmup\": %d, \"full\": %d, \"predict\": %d, \"correct\": %d},\n",
            h->cnt.phase_count_steps[0], h->cnt.phase_count_steps[1], h->cnt.phase_count_steps[2], h->cnt.phase_count_steps[3]);
    fprintf(f, "  \"phase_time_s\": {\"warmup\": %.3f, \"full\": %.3f, \"predict\": %.3f, \"correct\": %.3f},\n",
            h->cnt.phase_s[0], h->cnt.phase_s[1], h->cnt.phase_s[2], h->cnt.phase_s[3]);
    fprintf(f, "  \"backward_passes\": %d,\n  \"probe_passes\": %d,\n", h->cnt.backward_passes, h->cnt.probe_passes);
    /* the hybrid's whole cost over plain training: Predict phases (probes,
     * predictor, line search, rejected jumps) plus its bookkeeping on
     * every real step */
    fprintf(f, "  \"predictor_overhead_s\": %.6f,\n  \"controller_overhead_s\": %.6f,\n",
            h->cnt.phase_s[HPT_PHASE_PREDICT], h->cnt.ctrl_s);
    fprintf(f, "  \"predict_phases\": {\"accepted\": %d, \"rolled_back\": %d, \"steps_kept\": %d, \"steps_lost\": %d, "
            "\"mean_alpha\": %.3f},\n", h->cnt.phases_accepted, h->cnt.phases_rejected, h->cnt.predicted_steps_kept,
            h->cnt.predicted_steps_lost, h->cnt.phases_accepted ? h->cnt.alpha_sum / h->cnt.phases_accepted : 0.0);
    fprintf(f, "  \"divergence_rollbacks\": %d,\n  \"transitions\": %d,\n", h->cnt.div_rollbacks, h->ph.transitions);
    /* how often the realised loss fell inside the forecast's mean +- 2 std,
     * per horizon bucket (1, 2-3, 4-7, ...), and what the corrector changed */
    fprintf(f, "  \"calibration\": [");
    for (int b = 0; b < hpt_dyn_buckets(&h->dyn); b++) {
        hpt_dyn_calib cb;
        hpt_dyn_calibration(&h->dyn, b, 0, &cb);
        fprintf(f, "%s{\"horizons\": [%d, %d], \"scored\": %.0f, ", b ? ", " : "", cb.h_lo, cb.h_hi, cb.n);
        json_num_(f, "coverage", cb.n > 0 ? cb.coverage_all : NAN);  /* nothing scored yet: null */
        fputs(", ", f);
        json_num_(f, "rmse_log_loss", cb.n > 0 ? cb.rmse : NAN);
        fputc('}', f);
    }
    float before, after;
    hpt_dyn_corrector_effect(&h->dyn, 0, &before, &after);
    fputs("],\n  \"corrector_loss_residual\": {", f);
    json_num_(f, "raw", before);
    fputs(", ", f);
    json_num_(f, "corrected", after);
    fputs("},\n", f);
}

void hpt_hyb_log_config(void *hctx, hpt_log_fn log, void *ctx) {
    hybrid *h = hctx;
    const hpt_hybrid_config *c = &h->cfg;
    char line[512];
    snprintf(line, sizeof line, "hybrid     predictor %s, warmup %d, full %d, predict %d..%d, correct %d, "
             "threshold %g, correction interval %d, %d probe batches%s; hybrid state %.1f MiB "
             "(snapshot %.1f, buffers %.1f)",
             c->predictor, c->warmup_steps, c->full_steps, c->min_predict_steps, c->max_predict_steps,
             c->correct_steps, c->confidence_threshold, c->correction_interval, c->probe_batches,
             c->whole_phase ? ", whole-phase jumps" : "", h->arena_bytes / 1048576.0,
             3.0 * h->n * sizeof(float) / 1048576.0, h->buf_bytes / 1048576.0);
    if (log) log(ctx, line);
}
