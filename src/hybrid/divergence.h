/*
 * divergence.h — the divergence monitor: judges each step's loss and
 * gradient norm against the recent past and returns a level with a reason.
 *
 *   CRITICAL  loss or gradient norm NaN/Inf; loss z-score >= loss_z_crit;
 *             gradient norm >= grad_explode^2 x its window mean; or
 *             `escalate` consecutive steps at WARNING or above
 *   WARNING   loss z-score >= loss_z_warn; gradient norm >= grad_explode x
 *             its window mean, or <= grad_vanish x it
 *   CAUTION   the loss changed direction in >= `oscillation` of the window's
 *             steps (a period-2 instability; noise alone does it 2/3 of the time)
 *   OK        anything else, and every finite value until the windows fill
 *
 * The driver (hybrid.c, guard_divergence) acts on CRITICAL only: it rolls
 * back to the snapshot when one is held (on the outer path, to before the
 * jump under check), else holds the phased controller in Full
 * (hpt_phase_force_full). WARNING and CAUTION are reported, not acted on.
 * The monitor itself takes no action.
 *
 * Statistics (llm.c's OutlierDetector, with the bugs of the original Rust
 * monitor fixed): one fixed ring per signal of `window` values; a value is
 * judged against the ring BEFORE it enters it, so a spike never hides
 * itself. Non-finite values, and values whose own signal is CRITICAL, never
 * enter their ring (one 1e30 spike would otherwise blind the z-score for a
 * whole window); WARNING values do enter, so a moderate level shift is
 * absorbed after a few steps instead of alarming forever. Consequences: a
 * sustained loss shift beyond loss_z_crit stays CRITICAL until the driver
 * rolls back (restoring the monitor's copy) or re-inits the monitor; a
 * smaller one warns for a step or two (the z of a shifted value cannot stay
 * above ~sqrt(window) once two of them are in), so `escalate` mostly turns
 * persistent gradient warnings into CRITICAL. Means and
 * variances are recomputed in double over the ring at each step (at most 256
 * values): no running sums to drift. The loss z-score is one-sided (a
 * falling loss is not a divergence), against max(std, 1e-3 |mean|) so a
 * perfectly flat window does not turn rounding into an alarm.
 *
 * The baseline gradient norm is the rolling window mean, not a value frozen
 * at the start of training (norms legitimately shrink by orders of magnitude
 * over a run: a frozen baseline turns that into "vanishing").
 *
 * hpt_div is plain data (fixed arrays, no pointers, padding zeroed by
 * hpt_div_init): a driver that rolls back should restore the copy taken with
 * its snapshot; a checkpoint saves it field by field (hpt_div_save) and
 * checks it on load. Nothing allocates.
 */
#ifndef HPT_DIVERGENCE_H
#define HPT_DIVERGENCE_H

#include "../base/base.h"

typedef enum hpt_div_level {
    HPT_DIV_OK,
    HPT_DIV_CAUTION,
    HPT_DIV_WARNING,
    HPT_DIV_CRITICAL
} hpt_div_level;

/* "ok", "caution", "warning", "critical". */
const char *hpt_div_level_name(hpt_div_level l);

#define HPT_DIV_MAX_WINDOW 256
/* grad_norm value meaning "no backward pass ran this step" (a Predict step).
 * Any negative value means that; NaN and Inf mean a broken gradient. */
#define HPT_DIV_NO_GRAD (-1.0f)

typedef struct hpt_div_config {
    int window;           /* --div-window: values per ring, 8..256 */
    float loss_z_warn;    /* --div-loss-z: loss z-score for WARNING */
    float loss_z_crit;    /* --div-loss-z-crit: loss z-score for CRITICAL (>= warn) */
    float grad_explode;   /* --div-grad-explode: grad norm / window mean for WARNING (> 1); its square: CRITICAL */
    float grad_vanish;    /* --div-grad-vanish: grad norm / window mean for WARNING, in [0, 1) (0: off) */
    float oscillation;    /* --div-oscillation: fraction of direction changes for CAUTION, in [0.7, 1] */
    int escalate;         /* --div-escalate: consecutive WARNING+ steps that make CRITICAL (>= 1) */
} hpt_div_config;

/* window 64, z 6 / 12, explode 10 (critical 100), vanish 0.01, oscillation
 * 0.9, escalate 3. */
void hpt_div_config_default(hpt_div_config *c);
/* Checks every field; the message names the offending flag. */
hpt_status hpt_div_config_check(const hpt_div_config *c);

typedef struct hpt_div_ring {
    float v[HPT_DIV_MAX_WINDOW];
    int n;      /* values held, <= window */
    int next;   /* slot the next value goes to (the oldest once full) */
} hpt_div_ring;

typedef struct hpt_div {
    hpt_div_config cfg;
    hpt_div_ring loss, grad;
    int warn_streak;       /* consecutive observations at WARNING or above (before escalation) */
    /* the last observation's statistics, NaN until their ring is full */
    float loss_z;          /* (loss - mean) / std of the loss ring */
    float grad_ratio;      /* grad norm / mean of the grad ring */
    float osc_frac;        /* direction changes / (window - 1) */
    int last_step;         /* step of the last observation */
    int last_alarm_step;   /* step of the last WARNING or CRITICAL (-1: none) */
    int count[4];          /* observations per level */
    char why[256];         /* reason of the last non-OK level */
} hpt_div;

/* cfg must pass hpt_div_config_check (asserted). */
void hpt_div_init(hpt_div *d, const hpt_div_config *cfg);

/* Judges one step: loss (the training loss of the step) and grad_norm (the
 * gradient norm before clipping, or a negative value when no backward ran).
 * Returns the level; *why (may be NULL) receives NULL for OK, else the
 * reason (valid until the next call), e.g. "loss is nan", "loss z-score 7.3
 * >= 6.0 (loss 2.9100, window mean 2.1003, std 0.1103)", "grad norm 13.2 is
 * 12.1x the window mean 1.09 (>= 10)", "3 consecutive warnings; last: ...".
 * Then records the values (see the top of this file for which enter). */
hpt_div_level hpt_div_observe(hpt_div *d, int step, float loss, float grad_norm, const char **why);

/* Checkpoints (the HYBR section, docs/format.md): the state field by field,
 * little-endian, without the config (the run supplies it): exactly
 * hpt_div_state_bytes(d) bytes, which depends on the window. hpt_div_load
 * reads into d, which must be hpt_div_init'ed with the run's config: ring
 * counts and positions, counters and steps are checked (a ring position
 * past the window would write out of bounds), and the ring values must be
 * ones that could have entered; on failure (HPT_ERR_FORMAT) d is unchanged. */
size_t hpt_div_state_bytes(const hpt_div *d);
void hpt_div_save(const hpt_div *d, hpt_writer *w);
hpt_status hpt_div_load(hpt_div *d, hpt_cursor *k);

#endif /* HPT_DIVERGENCE_H */
