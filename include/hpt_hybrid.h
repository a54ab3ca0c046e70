/*
 * hpt_hybrid.h — the hybrid trainer's config and runs
 * (--mode hybrid): the default outer-momentum step under its guard, and
 * the config of the phased research controller (an extension of the
 * driver), its checkpoints resumed.
 * Included by hpt.h (which it needs: include either).
 */
#include "hpt.h"  /* first, outside the guard: hpt.h includes this header at its end */
#ifndef HPT_INCLUDE_HYBRID_H
#define HPT_INCLUDE_HYBRID_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- hybrid */

/* The hybrid trainer's knobs (the CLI flag of each in brackets); docs/hybrid.md
 * has the design, src/hybrid/ the modules. The default, --predictor outer:
 * after warmup_steps real steps, every outer_interval real steps an outer
 * Nesterov jump along the displacement since the last anchor, checked by the
 * next outer_check real losses and rolled back if they got worse (the
 * outer_* fields), under the divergence guard (the div_* fields). The
 * phased design's block comes last: the other predictors run its controller
 * (src/hybrid/phased/, an extension of the driver), which cycles Warmup ->
 * Full -> Predict -> Correct under its dynamics model's confidence; its
 * fields are inert on the outer path but for --outer-gate dynamics (it
 * reads the dynamics model and the confidence threshold). `hpt train
 * --help` lists its flags under their own heading. */
typedef struct hpt_hybrid_config {
    int warmup_steps;            /* [--warmup-steps] real steps before any jump or Predict */
    const char *predictor;       /* [--predictor] coast | shrink | stale-adam | linear | outer */
    /* divergence guard */
    int div_window;              /* [--div-window] */
    float div_loss_z;            /* [--div-loss-z] loss z-score for a warning */
    float div_grad_explode;      /* [--div-grad-explode] grad norm / its mean for a warning */
    float div_grad_vanish;       /* [--div-grad-vanish] */
    /* --predictor outer (docs/hybrid.md): every outer_interval real steps,
     * the outer Nesterov step on the displacement since the anchor */
    int outer_interval;          /* [--outer-interval] H */
    float outer_lr;              /* [--outer-lr] eta */
    float outer_momentum;        /* [--outer-momentum] mu */
    int outer_follow_lr;         /* [--outer-follow-lr] jump scaled by lr(t) / lr */
    int outer_check;             /* [--outer-check] K real losses that check a jump */
    int outer_moments;           /* [--outer-moments] 0 keep, 1 reset: AdamW's first moment at a jump */
    int outer_adapt;             /* [--outer-adapt] 0 none, 1 agree: per-tensor gate on the momentum term */
    int outer_gate;              /* [--outer-gate] 0 none, 1 dynamics: jump only when the dynamics model is confident */

    /* ---- the phased design (--predictor coast|stale-adam|linear|shrink; a
     * build with make PHASED=0 has none of it and refuses those values) */
    /* phases */
    int full_steps;              /* [--full-steps] length of a Full phase */
    int min_predict_steps;       /* [--min-predict-steps] horizon at the threshold */
    int max_predict_steps;       /* [--max-predict-steps] horizon at confidence 1 */
    int correct_steps;           /* [--correct-steps] real steps after each Predict */
    int max_consecutive_predict; /* [--max-consecutive-predict] */
    float confidence_threshold;  /* [--confidence-threshold] phased: > 1 disables Predict; outer: gates jumps only
                                  * with --outer-gate dynamics */
    int backoff_after;           /* [--backoff-after] failed Predict phases before backing off */
    int max_backoff;             /* [--max-backoff] cap on the Full-length multiplier */
    float waste_budget;          /* [--predict-waste-budget] share of steps failed Predict phases may cost */
    /* prediction and verification */
    int correction_interval;     /* [--correction-interval] predicted steps between probe checks */
    int probe_batches;           /* [--probe-batches] batches per verification (>= 2: one batch accepted harmful jumps) */
    int whole_phase;             /* [--whole-phase] apply the horizon's deltas as one jump */
    /* dynamics model */
    int ensemble, hidden, bptt;  /* [--ensemble] [--hidden] [--bptt] */
    /* 1 (default): value a Predict phase's cost by counted passes (a probe
     * forward = 1/3 real step, a predicted step 1/50), so runs are
     * reproducible and resumable bit for bit; 0 [--cost-by-time]: by wall
     * time against the measured real step, truer but not reproducible */
    int count_cost;
} hpt_hybrid_config;

void hpt_hybrid_config_default(hpt_hybrid_config *c);
hpt_status hpt_hybrid_config_check(const hpt_hybrid_config *c);
/* The hybrid under --optimizer schedule-free (schedule_free 1): the outer
 * predictor only (the phased ones read AdamW's moments), without
 * --outer-moments reset (no first moment); HPT_ERR_ARG naming the flag
 * otherwise. HPT_OK for AdamW. */
hpt_status hpt_hybrid_config_check_sf(const hpt_hybrid_config *c, int schedule_free);
/* The same for --optimizer muon (muon nonzero): the outer predictor only,
 * without --outer-gate dynamics. */
hpt_status hpt_hybrid_config_check_muon(const hpt_hybrid_config *c, int muon);
/* hpt_trainer_run in hybrid mode: the same outputs, plus per-step phase
 * fields in metrics.jsonl, DIR/phases.jsonl (every transition with its
 * reason) and the hybrid summary (phase counts and times, backward passes,
 * predictor overhead, acceptance, calibration). */
hpt_status hpt_trainer_run_hybrid(hpt_trainer *tr, const hpt_hybrid_config *hc,
                                  hpt_log_fn log, hpt_step_fn on_step, void *ctx);
/* A trainer from hpt_trainer_resume: 1 if its checkpoint came from a
 * --mode hybrid run (continue it with hpt_trainer_run_hybrid and the config
 * from hpt_hybrid_config_resumed), else 0. */
int hpt_trainer_resumed_hybrid(const hpt_trainer *tr);
/* The hybrid config stored in a resumed trainer's checkpoint (HYBR). */
hpt_status hpt_hybrid_config_resumed(const hpt_trainer *tr, hpt_hybrid_config *hc);

#ifdef __cplusplus
}
#endif
#endif /* HPT_INCLUDE_HYBRID_H */
