/*
 * phase.h — the hybrid controller's phase state machine: which kind of step
 * runs next, for how long, and why.
 *
 *   Warmup(warmup_steps) -> Full(full_steps) -> Predict(horizon) -> Correct(correct_steps)
 *        -> Predict again (confident, last Predict succeeded, cap not reached) or Full.
 *
 * Warmup and Full steps are plain training steps (forward, backward, AdamW);
 * Predict steps apply the dynamics model's update without a backward pass;
 * Correct steps are full-gradient steps that repair what Predict got wrong.
 * The phased controller (phased.c) runs the steps; this module only decides. It is pure
 * logic: no I/O, no allocation, no RNG, no clock. Every transition is a row
 * of one table (phase.c), reported with its reason through hpt_phase_next.
 *
 * Per step, the driver does:
 *
 *     int h; const char *why;
 *     float conf = hpt_phase_wants_confidence(&ctl) ? dynamics_confidence() : 0.0f;
 *     hpt_phase ph = hpt_phase_next(&ctl, conf, &h, &why);
 *         (hpt_phase_next_wait while the predictor lacks its history)
 *     if (why) log("phase %s: %s", hpt_phase_name(ph), why);
 *     ... run one step of kind ph ...
 *     hpt_phase_step_done(&ctl);
 *     ... and, when it knows, hpt_phase_end_predict / hpt_phase_force_full.
 *
 * Outcome of a Predict phase. A Predict phase FAILS when the driver rejects
 * it (hpt_phase_end_predict(c, 0, ...), during the phase or during the
 * Correct phase after it) or forces Full while its outcome is open (a
 * rollback). It SUCCEEDS when its Correct phase completes without either.
 *
 * Two gates keep a useless predictor cheap; both reset on a success:
 *   - backoff: after backoff_after consecutive failures, each further
 *     failure doubles the Full phase before the next attempt, up to
 *     max_backoff x full_steps (paces retries);
 *   - waste budget: what failed Predict phases cost, in full-step
 *     equivalents, may not exceed waste_budget x all steps run; the Full
 *     phase after a failure lasts until the next attempt fits (bounds the
 *     total: with the default 1%, a predictor that never works costs 1% of
 *     the run plus one attempt, whatever the run length; the backoff alone
 *     allows 7 attempts in a 2000-step run, 14% of it if each runs a
 *     40-step horizon). A failed phase is charged its
 *     Predict steps as if each cost a full step, unless the driver states
 *     the real cost with hpt_phase_charge (it knows what its Predict steps,
 *     probes and rollbacks cost; the controller has no clock).
 *
 * A confidence threshold above 1 disables Predict: after warmup the
 * controller stays in Full forever, never asks for a confidence and never
 * logs again; a hybrid run is then the plain run (this module has no side
 * effects that could make it differ).
 *
 * Invariants: hpt_phase_ctl is plain data (no pointers; padding zeroed by
 * hpt_phase_init), so a copy behaves exactly like the original; checkpoints
 * save it field by field (hpt_phase_save) and check it on load. After each
 * hpt_phase_next: hold > 0
 * only in Warmup or Full, pred_open only in Predict or Correct, no driver
 * event pending. Every phase but Warmup starts with
 * phase_len >= 1, so one call to hpt_phase_next fires a bounded number of
 * rows (each consumes a driver event or enters a phase with steps to run).
 */
#ifndef HPT_PHASE_H
#define HPT_PHASE_H

#include "../../base/base.h"
#include "../phase_kind.h"

/* hpt_phase and hpt_phase_name: ../phase_kind.h */

typedef struct hpt_phase_config {
    int warmup_steps;            /* --warmup-steps: full steps before Predict is considered (>= 0) */
    int full_steps;              /* --full-steps: length of a Full phase (>= 1) */
    int min_predict_steps;       /* --min-predict-steps: horizon at confidence == threshold (>= 1) */
    int max_predict_steps;       /* --max-predict-steps: horizon at confidence 1 (>= min) */
    int correct_steps;           /* --correct-steps: full-gradient steps after each Predict (>= 1) */
    int max_consecutive_predict; /* --max-consecutive-predict: Predict phases between two Full phases */
    int backoff_after;           /* --backoff-after: consecutive failed Predict phases before backing off */
    int max_backoff;             /* --max-backoff: cap on the Full-length multiplier (1: no backoff) */
    float waste_budget;          /* --predict-waste-budget: failed-Predict cost / steps run, in [0, 1] (1: off) */
    float confidence_threshold;  /* --confidence-threshold: Predict at confidence >= this; > 1 disables */
} hpt_phase_config;

/* warmup 100, full 20, predict 5..40, correct 5, 4 consecutive, backoff
 * after 2 failures up to 64x, waste budget 1%, threshold 0.75. */
void hpt_phase_config_default(hpt_phase_config *c);
/* Checks every field; the message names the offending flag. */
hpt_status hpt_phase_config_check(const hpt_phase_config *c);

/* One row of the transition table: in phase `from`, when condition `when`
 * holds, go to `to` (to == from: a logged event that keeps the phase). */
typedef struct hpt_phase_rule {
    hpt_phase from;
    int cond;            /* internal condition id */
    hpt_phase to;
    const char *when;    /* the condition in words, for documentation and tests */
} hpt_phase_rule;

/* The transition table, in evaluation order (first matching row fires). */
const hpt_phase_rule *hpt_phase_rules(int *n);
#define HPT_PHASE_MAX_RULES 24   /* room in rule_hits; the table is smaller (static assert) */

typedef struct hpt_phase_ctl {
    hpt_phase_config cfg;
    hpt_phase phase;
    int steps_in_phase;     /* steps run in the current phase */
    int phase_len;          /* its planned length (Warmup: warmup_steps; Predict: the horizon) */
    int hold;               /* full-gradient steps still owed to a hpt_phase_force_full */
    int consecutive;        /* Predict phases started since Full was last entered */
    int fail_streak;        /* consecutive failed Predict phases (0 after a success) */
    int pred_open;          /* the last Predict phase's outcome is not final yet */
    int last_failed;        /* the last Predict phase failed */
    int pred_steps;         /* steps run in the last Predict phase */
    double waste;           /* cost of failed Predict phases since the last success, in full steps */
    double last_charge;     /* what the last failed phase was charged */
    int last_charge_open;   /* hpt_phase_charge may still restate it */
    /* driver events, turned into transitions by the next hpt_phase_next */
    int ev_force, ev_force_steps;
    int ev_verdict;         /* 0 none, 1 accepted, 2 rejected */
    char ev_force_why[200], ev_verdict_why[200];
    int last_rule;          /* index into hpt_phase_rules of the last row fired (-1: none yet) */
    char why[512];          /* reason(s) of the last call's transition(s), "; "-separated */
    /* counters */
    int steps_total;
    int steps[HPT_PHASE_COUNT];
    int transitions;        /* rows fired (= reason lines reported) */
    int predict_started, predict_ok, predict_failed;
    int predict_failed_steps; /* steps run in Predict phases that failed */
    int forced_full;        /* hpt_phase_force_full calls */
    int backoffs;           /* Full phases lengthened by the backoff gate */
    int rule_hits[HPT_PHASE_MAX_RULES]; /* times each row of the table fired */
} hpt_phase_ctl;

/* Starts in Warmup. cfg must pass hpt_phase_config_check (asserted). */
void hpt_phase_init(hpt_phase_ctl *c, const hpt_phase_config *cfg);

/* Decides the phase of the next step. confidence: the dynamics model's, in
 * [0, 1] (NaN counts as 0); read only when hpt_phase_wants_confidence says
 * so. Returns the phase; *horizon (may be NULL) receives the length of the
 * current Predict phase (chosen from the confidence when it starts: min at
 * the threshold, max at 1, monotone in between), 0 outside Predict. *why (may
 * be NULL) receives NULL when nothing happened, else the reason(s) of the
 * transition(s) (valid until the next call), e.g. "warmup done (100 steps)",
 * "confidence 0.83 >= 0.60; predict 27 steps", "predict phase done (27
 * steps)", "correct done; confidence 0.41 < 0.60", "consecutive predict cap
 * 4 reached", "forced full for 40 steps: <driver's reason>", "backing off
 * after 3 failed predict phases (next try in 80 steps)". Calling it twice
 * without a step in between returns the same phase and no new reason. */
hpt_phase hpt_phase_next(hpt_phase_ctl *c, float confidence, int *horizon, const char **why);

/* hpt_phase_next when the predictor may not be able to propose yet: wait
 * non-NULL says why not (e.g. "the shrink predictor holds 2 of the 6
 * snapshots it needs"), and no Predict phase starts, whatever the
 * confidence and the threshold: a Full or Correct phase at its end goes on
 * as if not confident (another full_steps; Full after Correct), with wait
 * as its reason. wait NULL: hpt_phase_next. */
hpt_phase hpt_phase_next_wait(hpt_phase_ctl *c, float confidence, const char *wait, int *horizon, const char **why);

/* 1 when the next hpt_phase_next would compare the confidence with the
 * threshold (a Full or Correct phase is at its end): the driver need not
 * compute a confidence otherwise. Never 1 when Predict is disabled. */
int hpt_phase_wants_confidence(const hpt_phase_ctl *c);

/* Counts the step just run (in the phase the last hpt_phase_next returned). */
void hpt_phase_step_done(hpt_phase_ctl *c);

/* The verdict on the current Predict phase: during Predict it ends the phase
 * now (the next phase is Correct); during the Correct phase that follows it
 * records a late verdict. success = 0 fails the phase at once (backoff gate);
 * success = 1 leaves it to succeed when Correct completes. why (may be NULL)
 * is copied. Only legal while c->pred_open (asserted). */
void hpt_phase_end_predict(hpt_phase_ctl *c, int success, const char *why);

/* States what the last failed Predict phase really cost, in full-step
 * equivalents (its wall time over a Full step's: predicted updates, probes,
 * the rollback, and the Correct steps if the rollback undid them),
 * replacing the default charge (its Predict steps). Legal from the failure
 * until the next Predict phase starts (asserted); it sets the length of the
 * Full phase after the failure if made before that phase is entered (for a
 * rejection: before its Correct phase ends; for a force: before the next
 * hpt_phase_next). Repeated calls restate, they do not add. */
void hpt_phase_charge(hpt_phase_ctl *c, double full_steps);

/* Forces at least `steps` full-gradient steps from the next step on (after a
 * divergence or a rollback), then a normal Full/Predict decision. Fails an
 * open Predict phase. In Warmup, warmup continues and counts towards steps.
 * why (may be NULL) is copied. */
void hpt_phase_force_full(hpt_phase_ctl *c, int steps, const char *why);

/* Whether a Predict phase ends early at one of its intermediate probe
 * checks, and why. Inputs, all on the same probe batches: L0 the probe loss
 * when the phase began, prev at the previous check, Lk after k predicted
 * steps; per_step the recent progress of one real step (loss drop, may be
 * NaN when unknown); fc_dlog and fc_std the dynamics model's forecast of
 * the change of log loss over k real steps and its standard deviation (NaN
 * when there is no forecast). The phase stops when the loss
 *   HPT_STOP_ROSE      rose since the previous check (or is not finite);
 *   HPT_STOP_BEHIND    fell by less than half of what k real steps buy;
 *   HPT_STOP_FORECAST  left the forecast interval from above: log Lk above
 *                      log L0 + fc_dlog + 2 fc_std (a loss below the
 *                      interval is a better jump than forecast, not a
 *                      reason to stop).
 * HPT_STOP_NONE: go on. Pure, like the rest of this module. */
typedef enum { HPT_STOP_NONE = 0, HPT_STOP_ROSE, HPT_STOP_BEHIND, HPT_STOP_FORECAST } hpt_predict_stop;
hpt_predict_stop hpt_phase_predict_stop(float L0, float prev, float Lk, int k, float per_step, float fc_dlog,
                                        float fc_std);
const char *hpt_predict_stop_name(hpt_predict_stop s);

/* Checkpoints (the HYBR section, docs/format.md): the state field by field,
 * little-endian, without the config (the run supplies it) or the last
 * call's reasons. hpt_phase_save writes exactly hpt_phase_state_bytes().
 * hpt_phase_load reads into c, which must be hpt_phase_init'ed with the
 * run's config: every enum, index, flag and counter is checked against it
 * and against the invariants above, so that no crafted file can reach an
 * assert or an index out of range; on failure (HPT_ERR_FORMAT, saying
 * which check) c is unchanged. */
size_t hpt_phase_state_bytes(void);
void hpt_phase_save(const hpt_phase_ctl *c, hpt_writer *w);
hpt_status hpt_phase_load(hpt_phase_ctl *c, hpt_cursor *k);

#endif /* HPT_PHASE_H */
