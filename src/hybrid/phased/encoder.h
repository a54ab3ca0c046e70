/*
 * encoder.h — the training-state encoder: turns what the driver measured at
 * one optimizer step (loss, gradient norm, learning rate, AdamW moment and
 * update statistics, phase) into a fixed-length, normalised feature vector
 * for the dynamics model (dynamics.h).
 *
 * Why it looks like this (against the original's 64-float vector, of which
 * 38 slots were constant zeros and the rest raw values such as a loss of 450):
 *   - every slot carries information on a real run (tests/test_encoder.c
 *     checks that none is constant);
 *   - every slot is a log or a difference of logs where the quantity is a
 *     positive scale, so a 10x change of loss or lr is a step, not a cliff;
 *   - every slot is normalised by its own running mean and variance and
 *     clipped to [-HPT_ENC_CLIP, HPT_ENC_CLIP];
 *   - a missing input (NaN: no loss on a Predict step, no gradient without a
 *     backward pass) keeps the slot's previous raw value and leaves its
 *     statistics alone, so gaps neither poison nor shrink the statistics.
 *
 * Feature slots (n_features = HPT_ENC_NFEAT = 16). l = log(loss),
 * E_a = exponential moving average of l with weight a on the new value:
 *
 *   slot  name          raw value before normalisation                 input
 *   ----  ------------  ---------------------------------------------  ---------
 *    0    loss_level    E_0.1                                          loss
 *    1    loss_trend_s  E_0.3 - E_0.1   (short-term trend)             loss
 *    2    loss_trend_l  E_0.1 - E_0.03  (long-term trend)              loss
 *    3    loss_innov    l - E_0.3       (this step's deviation)        loss
 *    4    grad_log      log(grad_norm)                                 grad_norm
 *    5    grad_ratio    log(grad_norm) - G, G = EMA_0.1 of log(grad_norm)
 *                       before this step (log of norm / its EMA)       grad_norm
 *    6    adam_m        log(mean |m|)                                  m_abs_mean
 *    7    adam_v        log(mean sqrt(v))                              v_sqrt_mean
 *    8    lr            log(lr)                                        lr
 *    9    upd_ratio     log(||delta theta|| / ||theta||)               update_ratio
 *   10    upd_cos       cos(delta theta_t, delta theta_{t-1})          update_cos
 *   11-14 phase_0..3    one-hot of the phase id (0..3)                 phase
 *   15    phase_steps   log(1 + steps in the current phase)            steps_in_phase
 *
 * The driver measures the inputs of slots 6, 7, 9 and 10 on a fixed sample
 * of each tensor's parameters (at most 1024 per tensor, learner.h),
 * not over the whole arena.
 *
 * Slots 0-3 are the three loss EMAs and the raw loss written as one level and
 * three differences: the same information as (l, E_0.3, E_0.1, E_0.03), but
 * without four nearly collinear columns (collinear inputs make the residual
 * corrector's RLS covariance wind up along their difference).
 *
 * Normalisation: per slot, mean and variance with weight max(1/n, 1/256) on
 * the n-th observed value: the exact running mean and (population) variance
 * for the first 256 values, then an EMA over about 256 steps, so the slots
 * follow a learning rate that decays tenfold. Output = clip((raw - mean) /
 * max(std, floor), +-5); the per-slot floor (in raw units, see encoder.c) keeps
 * a slot that was constant for a while (lr during warmup-free stretches) from
 * turning its first small change into +-5. A slot that has never been
 * observed outputs 0.
 *
 * State: one flat arena (pointer + size below); saving those bytes saves the
 * encoder exactly. Nothing is allocated after hpt_encoder_init.
 */
#ifndef HPT_ENCODER_H
#define HPT_ENCODER_H

#include "../../base/base.h"

#define HPT_ENC_NPHASES 4      /* phase ids 0..3 (the driver's W/F/P/C) */
#define HPT_ENC_CLIP 5.0f      /* normalised features lie in [-5, 5] */
#define HPT_ENC_NORM_WINDOW 256

enum {
    HPT_ENC_LOSS_LEVEL = 0,
    HPT_ENC_LOSS_TREND_S,
    HPT_ENC_LOSS_TREND_L,
    HPT_ENC_LOSS_INNOV,
    HPT_ENC_GRAD_LOG,
    HPT_ENC_GRAD_RATIO,
    HPT_ENC_ADAM_M,
    HPT_ENC_ADAM_V,
    HPT_ENC_LR,
    HPT_ENC_UPD_RATIO,
    HPT_ENC_UPD_COS,
    HPT_ENC_PHASE0,
    HPT_ENC_PHASE_STEPS = HPT_ENC_PHASE0 + HPT_ENC_NPHASES,
    HPT_ENC_NFEAT
};

/* What the driver measured at one optimizer step. Any float may be NaN
 * (missing this step); non-positive values of the scale quantities (loss,
 * grad_norm, lr, m_abs_mean, v_sqrt_mean, update_ratio) count as missing. */
typedef struct hpt_enc_input {
    float loss;            /* mean training loss of the step (NaN: no forward with targets) */
    float grad_norm;       /* global gradient norm before clipping (NaN: no backward) */
    float lr;              /* learning rate used by the step */
    float m_abs_mean;      /* mean |m| over the AdamW first-moment arena */
    float v_sqrt_mean;     /* mean sqrt(v) over the second-moment arena */
    float update_ratio;    /* ||theta_t - theta_{t-1}|| / ||theta_{t-1}|| */
    float update_cos;      /* cosine between this step's update and the previous one */
    int phase;             /* 0..HPT_ENC_NPHASES-1 */
    int steps_in_phase;    /* steps already done in this phase (0 on its first step) */
} hpt_enc_input;

typedef struct hpt_encoder {
    float *arena;          /* the whole state; arena_floats floats */
    size_t arena_floats;
    float *raw;            /* (NFEAT) last raw value of each slot */
    float *mean, *var;     /* (NFEAT) running statistics of the raw values */
    float *count;          /* (NFEAT) values observed, capped at HPT_ENC_NORM_WINDOW */
    float *ema;            /* (4) E_0.3, E_0.1, E_0.03 of log loss; EMA_0.1 of log grad norm */
    float *misc;           /* (3) a loss has been seen, a grad norm has been seen, steps_in_phase */
} hpt_encoder;

/* A region of state to save or restore byte for byte. */
typedef struct hpt_region {
    const char *name;
    void *ptr;
    size_t bytes;
} hpt_region;

/* Allocates the arena; *n_features receives HPT_ENC_NFEAT. */
hpt_status hpt_encoder_init(hpt_encoder *e, int *n_features);
void hpt_encoder_free(hpt_encoder *e);   /* NULL-safe; e may be reused after init */
/* Folds one step into the state and writes the normalised features
 * (n_features floats, finite, in [-5, 5]). HPT_ERR_ARG on a phase out of range. */
hpt_status hpt_encoder_update(hpt_encoder *e, const hpt_enc_input *in, float *features_out);
/* E_0.1 of log loss in raw units (the level the dynamics model predicts the
 * next loss against); NaN until a loss has been seen. */
float hpt_encoder_level(const hpt_encoder *e);
/* Name of slot i ("loss_level", ...), NULL outside [0, HPT_ENC_NFEAT). */
const char *hpt_encoder_slot_name(int i);
/* The state regions (one: the arena); returns their count. */
int hpt_encoder_regions(const hpt_encoder *e, hpt_region *out);

/* ---------------------------------------------------------------- rollout
 * Hypothetical future steps for the dynamics model's forecasts: a copy of the
 * loss EMAs advanced with predicted losses, the normalisation frozen at its
 * current statistics. A roll step rewrites these slots of a feature vector:
 *   0-3 (loss_*) from the predicted log loss,
 *   8   (lr)     when a future learning rate is given (not NaN),
 *   15  (phase_steps) one step further into the current phase;
 * every other slot keeps the value it had (the last observed step's). */
typedef struct hpt_enc_roll {
    float ema[3];          /* E_0.3, E_0.1, E_0.03 of log loss */
    float have_loss;
    float steps;           /* steps in phase */
} hpt_enc_roll;

void hpt_encoder_roll_begin(const hpt_encoder *e, hpt_enc_roll *r);
/* One step with log loss log_loss (NaN: hold the loss slots) and learning rate
 * lr (NaN: hold the lr slot); feat is read and rewritten in place. */
void hpt_encoder_roll_step(const hpt_encoder *e, hpt_enc_roll *r, float log_loss, float lr, float *feat);
float hpt_encoder_roll_level(const hpt_enc_roll *r);   /* E_0.1 after the roll steps */

/* After a restore from a checkpoint: HPT_ERR_FORMAT (naming what) unless
 * every count and flag of the state is in range. */
hpt_status hpt_encoder_check_state(const hpt_encoder *e);

#endif /* HPT_ENCODER_H */
