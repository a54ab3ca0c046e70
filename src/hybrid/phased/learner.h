/*
 * learner.h — the learned dynamics: the encoder and the GRU ensemble over
 * its features (dynamics.h), trained online on every real step, with the
 * update statistics they read, estimated on a fixed sample of each tensor's
 * parameters. The phased controller reads its confidence and its per-tensor
 * step scales; the outer path creates it only with --outer-gate dynamics,
 * whose gate is its confidence. Nothing else creates, runs or saves it.
 *
 * Its targets per tensor are the optimal scale of the AdamW-direction
 * prediction of a real update, <real update, predicted update> /
 * |predicted update|^2, and the log training loss.
 */
#ifndef HPT_LEARNER_H
#define HPT_LEARNER_H

#include "../../train/trainer.h"
#include "../phase_kind.h"
#include "dynamics.h"
#include "encoder.h"

/* The encoder's update statistics are estimated on a fixed sample of each
 * tensor's parameters (at most SAMPLE_MAX, one per stride block at a hashed
 * position, so no layout aliasing): full passes over every parameter cost a
 * 10M-parameter model 16% of its step time. */
#define SAMPLE_MAX 1024
/* The dynamics model forecasts at most FC_MAX steps ahead. */
#define FC_MAX 64

/* Its buffers, carved from one zeroed arena by this size table: type, name,
 * elements (4 bytes each).
 *   theta_before  (ns) the sampled parameters before a real step
 *   dpred         (ns) the AdamW-direction prediction of that step's update
 *   prev_upd      (ns) the previous real update at the sampled parameters
 *   fc_mean/std   (FC_MAX, 1+K) the dynamics model's forecast: log loss, then
 *                 each tensor's step scale */
#define LEARNER_BUFS(X)                                  \
    X(float, theta_before, l->ns)                        \
    X(float, dpred,        l->ns)                        \
    X(float, prev_upd,     l->ns)                        \
    X(float, fc_mean,      (size_t)FC_MAX * (1 + l->K))  \
    X(float, fc_std,       (size_t)FC_MAX * (1 + l->K))

typedef struct hpt_learner {
    hpt_trainer *tr;
    const hpt_model *m;
    int K;                   /* tensors */
    hpt_encoder enc;
    hpt_dyn dyn;
    int nfeat;
    float feat[64], y[1 + HPT_MAX_TENSORS];
    /* the sampled parameters: per tensor, the first sample's index, the count, the stride */
    size_t ns;
    size_t s_off[HPT_MAX_TENSORS], s_cnt[HPT_MAX_TENSORS], s_stride[HPT_MAX_TENSORS];
#define X(type, name, size) type *name;
    LEARNER_BUFS(X)
#undef X
    float *buf_arena;
    size_t buf_bytes;
    int have_prev_upd;
    float next_pred_loss;    /* 1-step forecast issued after the last real step */
} hpt_learner;

/* The learner for tr's model, every buffer allocated (*out NULL on failure). */
hpt_status hpt_learner_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hpt_learner **out);
void hpt_learner_free(hpt_learner *l);
/* Before a real step: theta and the AdamW-direction prediction of it. */
void hpt_learner_before(hpt_learner *l);
/* After it: one online training step and the next 1-step forecast. ph is
 * the step's phase, steps_in_phase the phase controller's count (0 on the
 * outer path), both encoder inputs. */
hpt_status hpt_learner_after(hpt_learner *l, const hpt_step_info *info, hpt_phase ph, int steps_in_phase);
/* Confidence in the loss forecast max_steps ahead (at most the model's
 * horizon), capped at cap; 0 when the forecast fails. */
float hpt_learner_confidence(hpt_learner *l, int max_steps, float cap);
/* The bytes of the dynamics model's arenas (its buffers: buf_bytes; the
 * encoder's: enc.arena_floats). */
size_t hpt_learner_dyn_bytes(const hpt_learner *l);

#endif /* HPT_LEARNER_H */
