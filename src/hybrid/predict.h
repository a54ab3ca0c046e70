/*
 * predict.h — predicted weight updates, written in place into a model's
 * parameter arena. No model copy is ever made: a predicted step is one pass
 * over the flat arena, driven by the tensor table.
 *
 * Predictors (--predictor):
 *   coast       the AdamW step with the momentum left to decay (m <- beta1 m
 *               per predicted step, no new gradient), scaled per tensor by a
 *               gate on the tensor's gradient signal-to-noise |m^|/sqrt(v^):
 *               tensors whose recent gradients agree move, noisy ones stay.
 *               Total displacement over a phase is bounded (geometric), not
 *               linear in the horizon. This is hpt's own predictor.
 *   stale-adam  control: the last AdamW update re-applied unchanged every
 *               predicted step (the probe's "stale AdamW").
 *   linear      control: a per-parameter least-squares line through the last
 *               c snapshots (taken every s real steps), extrapolated.
 *   shrink      the per-parameter least-squares line through the last c
 *               snapshots (taken every s real steps, a longer window than
 *               linear's), each parameter's slope shrunk by its own
 *               significance, max(0, 1 - 4 / t^2) with t its t statistic
 *               against the fit's residuals, so that parameters that only
 *               jitter stay put; and each tensor gated by how straight its
 *               path was (the squared net displacement over (c-1) x the
 *               summed squared hops: 1 for a drift, 1/(c-1) for a random
 *               walk, ~1/(c-1)^2 for noise around a fixed point).
 * All four share the verification and rollback of the driver (hybrid.c).
 */
#ifndef HPT_PREDICT_H
#define HPT_PREDICT_H

#include "../model/model.h"
#include "../train/optim.h"

typedef enum { HPT_PRED_COAST = 0, HPT_PRED_STALE_ADAM, HPT_PRED_LINEAR, HPT_PRED_SHRINK } hpt_pred_kind;
#define HPT_PRED_MAX_RING 16

/* Parses "coast", "stale-adam", "linear", "shrink"; -1 if unknown. */
int hpt_pred_parse(const char *name);
const char *hpt_pred_name(hpt_pred_kind k);

typedef struct hpt_predictor {
    hpt_pred_kind kind;
    size_t n;                    /* parameters */
    const hpt_model *m;          /* for the tensor table */
    float snr_lo, snr_hi;        /* coast gate: scale 0 below lo, 1 above hi */
    float tensor_gate[HPT_MAX_TENSORS];   /* last computed per-tensor gate in [0, 1] (coast, shrink) */
    float straight_lo, straight_hi;      /* shrink gate: 0 at or below lo, 1 at or above hi */
    float tensor_scale[HPT_MAX_TENSORS];  /* per-tensor scale from the dynamics model, all predictors (1: none) */
    /* linear, shrink: ring of c parameter snapshots, one every s real steps */
    float *ring;                 /* (c, n) */
    int ring_c, ring_s, ring_count, ring_head;
    float *slope;                /* (n) per-step slope of the last fit */
    float *arena;                /* owns ring and slope */
    size_t arena_bytes;
} hpt_predictor;

hpt_status hpt_pred_init(hpt_predictor *p, hpt_pred_kind kind, const hpt_model *m, int ring_c, int ring_s);
void hpt_pred_free(hpt_predictor *p);

/* After every real step (the updates-th AdamW update): the linear predictor
 * takes its snapshots here. */
void hpt_pred_observe(hpt_predictor *p, const float *params, int updates);
/* Whether the predictor has what it needs to propose (linear: a full ring). */
int hpt_pred_ready(const hpt_predictor *p);
/* Prepares a Predict phase (coast: per-tensor gates from m, v; linear: the
 * fit). opt/t: the AdamW settings and update count of the last real step. */
void hpt_pred_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *opt, int t);
/* Applies predicted step k (1-based within the phase) in place, scaled by
 * `scale`: params += scale * delta_k. lr is this step's scheduled rate. */
void hpt_pred_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                    const hpt_adamw *opt, int t, float lr, int k, float scale);

#endif /* HPT_PREDICT_H */
