/*
 * trainer.h — the trainer as the layer above it (src/hybrid/) sees it:
 * functions over the opaque hpt_trainer, and the run hooks through which that
 * layer replaces the per-step function and adds to the run's outputs. The
 * struct itself is private to src/train/ (trainer_impl.h). Nothing here knows
 * about phases or predictors: dependencies point upwards only.
 *
 * Who owns what. The trainer owns the step counter (the position in the LR
 * schedule, hpt_trainer_steps), the AdamW update count and moments, the
 * training clock and the data cursor; the layer above changes them only
 * through the calls below. The step counter never moves backwards: a real
 * step moves it by one (hpt_trainer_step), a kept Predict phase by the
 * steps it was worth (hpt_trainer_advance); a rollback to a snapshot undoes
 * the updates since (hpt_trainer_restore_moments), not the schedule.
 */
#ifndef HPT_TRAINER_H
#define HPT_TRAINER_H

#include <cJSON.h>

#include "optim.h"

/* ---------------------------------------------------------------- counters */

/* Completed steps, real or predicted: the schedule position. */
int hpt_trainer_steps(const hpt_trainer *tr);
/* AdamW updates applied to the moments (real steps): the bias correction's t. */
int hpt_trainer_updates(const hpt_trainer *tr);
/* Moves the step counter by k >= 0 predicted steps (never past max_iters). */
void hpt_trainer_advance(hpt_trainer *tr, int k);

/* ---------------------------------------------------------------- clock */

/* The training clock (s, evaluation excluded) and the tokens trained on. */
double hpt_trainer_clock(const hpt_trainer *tr);
double hpt_trainer_tokens(const hpt_trainer *tr);
/* Adds work the trainer did not time itself (probes, predicted steps, the
 * controller's statistics) to the training clock. */
void hpt_trainer_add_time(hpt_trainer *tr, double s);

/* ---------------------------------------------------------------- optimizer */

/* The AdamW settings of step `it` (0-based), learning rate from the schedule. */
hpt_adamw hpt_trainer_adamw(const hpt_trainer *tr, int it);
/* The learning rate of step `it` (0-based). */
float hpt_trainer_lr(const hpt_trainer *tr, int it);
/* 1 when the run uses --optimizer muon (its momentum in the m arena). */
int hpt_trainer_muon(const hpt_trainer *tr);
/* 1 when the run uses --optimizer schedule-free (its evaluations, model.bin
 * and param_crc32 are at the average x; the params hold y while it trains). */
int hpt_trainer_schedule_free(const hpt_trainer *tr);
/* The AdamW moments, each (nparams) floats: read-only views for snapshots
 * and predictors. */
const float *hpt_trainer_moment1(const hpt_trainer *tr);
const float *hpt_trainer_moment2(const hpt_trainer *tr);
/* Back to a snapshot's moments (copies) and the update count they belong
 * to (<= the current one: the updates since are undone, so the next bias
 * correction matches the moments). The step counter does not move. */
void hpt_trainer_restore_moments(hpt_trainer *tr, const float *m1, const float *m2, int updates);
/* The first moment to 0 (the second and the update count stay): after an
 * outer jump, so the next steps do not keep pushing along the old direction. */
void hpt_trainer_reset_moment1(hpt_trainer *tr);
/* Schedule-free's own state (--optimizer schedule-free; NULL under AdamW):
 * its base sequence z and average x, nparams floats each (the params hold
 * the gradient point y; its second moment is moment2), for the snapshot,
 * the rollback and the outer step, which moves them in place. */
float *hpt_trainer_sf_z(hpt_trainer *tr);
float *hpt_trainer_sf_x(hpt_trainer *tr);
/* Its rate sums (the averaging coefficient's), and back to a snapshot's z,
 * x (copies) and sums: with hpt_trainer_restore_moments, which restores v
 * and the update count, the state the snapshot was taken in. */
hpt_sf_state hpt_trainer_sf_sums(const hpt_trainer *tr);
void hpt_trainer_restore_sf(hpt_trainer *tr, const float *z, const float *x, hpt_sf_state sums);

/* ---------------------------------------------------------------- data */

/* The shape of the task's training batches: at most max_b rows of t tokens
 * (t = 1 for images), x_dim floats per row for image batches (0: tokens). */
void hpt_trainer_batch_shape(const hpt_trainer *tr, int *max_b, int *t, int *x_dim);
/* The next training batch (advances the data cursor; the buffers are the
 * task's, valid until the next draw). */
hpt_status hpt_trainer_draw_batch(hpt_trainer *tr, hpt_batch *b);
/* Forward-only mean loss of a batch: no gradient, no state change except
 * the model's activation buffers. */
hpt_status hpt_trainer_probe(hpt_trainer *tr, const hpt_batch *b, float *loss);

/* ---------------------------------------------------------------- resume */

/* 1 if the trainer was restored from a checkpoint (hpt_trainer_resume). */
int hpt_trainer_is_resumed(const hpt_trainer *tr);
/* The layer above's state in the checkpoint resumed from (its HYBR
 * payload; NULL and *n = 0 if none). Valid until the run's first step. */
const unsigned char *hpt_trainer_resume_state(const hpt_trainer *tr, size_t *n);

/* ---------------------------------------------------------------- ranks */

/* 1 if this process writes the run directory: always in one process; rank
 * 0 alone under mpirun (the layer above writes its own logs only then). */
int hpt_trainer_writes(const hpt_trainer *tr);

/* ---------------------------------------------------------------- run hooks */

/* Replaceable parts of the run loop; any may be NULL but step.
 *   step        one step: fills info like hpt_trainer_step.
 *   metrics     adds the layer's own members to the step's metrics.jsonl
 *               line (after the trainer's step, loss, lr, grad_norm, time_s,
 *               tokens and rss_bytes, before the evaluation's members).
 *   summary     adds the layer's members to summary.json's object (after
 *               the trainer's counters, before threads and memory).
 *   log_config  adds lines to the start-of-run log.
 * The layer above's own state in checkpoints (section HYBR, TCFG mode 1):
 * state_bytes the exact payload length, save_state writes exactly that many
 * bytes, load_state restores from a resumed checkpoint's payload (called
 * once, before the first step of a resumed run). All or none. */
typedef struct hpt_run_hooks {
    hpt_status (*step)(void *hctx, hpt_trainer *tr, hpt_step_info *info);
    void (*metrics)(void *hctx, const hpt_step_info *info, cJSON *line);
    void (*summary)(void *hctx, cJSON *summary);
    void (*log_config)(void *hctx, hpt_log_fn log, void *ctx);
    uint64_t (*state_bytes)(void *hctx);
    void (*save_state)(void *hctx, hpt_writer *w);
    hpt_status (*load_state)(void *hctx, const unsigned char *p, size_t n);
    void *hctx;
} hpt_run_hooks;

hpt_status hpt_trainer_run_hooks(hpt_trainer *tr, const hpt_run_hooks *hooks,
                                 hpt_log_fn log, hpt_step_fn on_step, void *ctx);

/* JSON members for the hooks and the trainer's own files: a number, NaN and
 * infinities as null (JSON has neither), with 9 significant digits (every
 * float round-trips); a count, exactly. */
void hpt_json_num(cJSON *obj, const char *key, double v);
void hpt_json_u64(cJSON *obj, const char *key, uint64_t v);

/* Tests (hybrid_state.c): builds the hybrid driver of a resumed hybrid
 * trainer, loads its checkpoint's HYBR payload and saves it again into *out
 * (malloc'd, *out_n bytes): equal to the payload byte for byte. */
hpt_status hpt_hybrid_state_roundtrip(hpt_trainer *tr, unsigned char **out, size_t *out_n);

/* Drops a stop request the run ended without consuming (one made during
 * its last step): a later run in this process starts afresh. */
void hpt_trainer_clear_stop(void);

#endif /* HPT_TRAINER_H */
