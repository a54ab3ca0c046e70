/*
 * phase.c — the phase state machine of phase.h: a transition table, the
 * conditions it names, and what firing a row does.
 *
 * Design. The original (Rust) controller decided phases in nested ifs, kept
 * a transition table that nothing enforced, and forgot its own bookkeeping
 * (a Predict outcome API that was never called, a consecutive-Predict cap
 * hard-coded, divergence "recovery" that only sometimes reached the
 * controller). Here the table IS the controller: hpt_phase_next walks the
 * rows of the current phase in order and fires the first whose condition
 * holds, so every transition (and every driver event that keeps the phase)
 * has exactly one row, one reason and one test. Driver events
 * (hpt_phase_end_predict, hpt_phase_force_full) update the outcome counters
 * at once, so the state is consistent between calls, and leave a pending
 * flag that the next hpt_phase_next turns into a logged row.
 *
 * Termination: a row either consumes an event or enters a phase whose
 * planned length is >= 1 (Full, Predict, Correct; config-checked), so the
 * loop in advance() fires at most three rows per call (asserted at four).
 */
#include "phase.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* --------------------------------------------------------------- config */

void hpt_phase_config_default(hpt_phase_config *c) {
    memset(c, 0, sizeof *c);
    c->warmup_steps = 100;
    c->full_steps = 20;
    c->min_predict_steps = 5;
    c->max_predict_steps = 40;
    c->correct_steps = 5;
    c->max_consecutive_predict = 4;
    c->backoff_after = 2;
    c->max_backoff = 64;
    c->waste_budget = 0.01f;
    c->confidence_threshold = 0.75f;
}

#define STEPS_MAX 100000000   /* the trainer's --max-iters bound */

#define CHECK_INT(field, lo, hi, flag) \
    if (c->field < (lo) || c->field > (hi)) \
        return hpt_fail(HPT_ERR_ARG, "--%s must be in [%d, %d] (got %d)", flag, (int)(lo), (int)(hi), c->field)

hpt_status hpt_phase_config_check(const hpt_phase_config *c) {
    CHECK_INT(warmup_steps, 0, STEPS_MAX, "warmup-steps");
    CHECK_INT(full_steps, 1, STEPS_MAX, "full-steps");
    CHECK_INT(min_predict_steps, 1, STEPS_MAX, "min-predict-steps");
    CHECK_INT(max_predict_steps, 1, STEPS_MAX, "max-predict-steps");
    if (c->min_predict_steps > c->max_predict_steps)
        return hpt_fail(HPT_ERR_ARG, "--min-predict-steps (%d) must not exceed --max-predict-steps (%d)",
                        c->min_predict_steps, c->max_predict_steps);
    CHECK_INT(correct_steps, 1, STEPS_MAX, "correct-steps");
    CHECK_INT(max_consecutive_predict, 1, STEPS_MAX, "max-consecutive-predict");
    CHECK_INT(backoff_after, 1, STEPS_MAX, "backoff-after");
    CHECK_INT(max_backoff, 1, 1 << 20, "max-backoff");
    /* the longest Full phase must fit an int (step counters are ints) */
    if ((long long)c->full_steps * c->max_backoff > 1000000000LL)
        return hpt_fail(HPT_ERR_ARG, "--full-steps x --max-backoff must be at most 1e9 (got %d x %d)",
                        c->full_steps, c->max_backoff);
    if (!(c->waste_budget >= 0.0f && c->waste_budget <= 1.0f))
        return hpt_fail(HPT_ERR_ARG, "--predict-waste-budget must be in [0, 1] (got %g)", (double)c->waste_budget);
    /* !(x >= 0) also rejects NaN; +Inf is allowed and disables Predict like any value > 1 */
    if (!(c->confidence_threshold >= 0.0f))
        return hpt_fail(HPT_ERR_ARG, "--confidence-threshold must be >= 0 (got %g; above 1 disables Predict)",
                        (double)c->confidence_threshold);
    return HPT_OK;
}

/* --------------------------------------------------------------- the table */

enum {
    C_FORCE,             /* hpt_phase_force_full was called */
    C_ACCEPT,            /* hpt_phase_end_predict(success = 1) */
    C_REJECT,            /* hpt_phase_end_predict(success = 0) */
    C_WARMUP_DONE,
    C_WARMUP_DONE_OFF,   /* ... with Predict disabled (threshold > 1) */
    C_FULL_CONFIDENT,
    C_FULL_UNSURE,
    C_PREDICT_DONE,
    C_CORRECT_BACKOFF,
    C_CORRECT_FAILED,
    C_CORRECT_CAP,
    C_CORRECT_CONFIDENT,
    C_CORRECT_UNSURE
};

#define W HPT_PHASE_WARMUP
#define F HPT_PHASE_FULL
#define P HPT_PHASE_PREDICT
#define K HPT_PHASE_CORRECT

/* Order matters within a phase: driver events first (a verdict before a
 * force, so that "rejected, then rolled back" logs both), then the end of
 * the phase; at the end of Correct a failure outranks the cap, which
 * outranks the confidence. */
static const hpt_phase_rule RULES[] = {
    {W, C_FORCE,             W, "force_full called (warmup goes on; its steps count towards the hold)"},
    {W, C_WARMUP_DONE_OFF,   F, "warmup_steps run, Predict disabled (threshold > 1): Full for good"},
    {W, C_WARMUP_DONE,       F, "warmup_steps run"},
    {F, C_FORCE,             F, "force_full called (Full extended by the hold)"},
    {F, C_FULL_CONFIDENT,    P, "Full length run, hold 0, predictor ready, confidence >= threshold"},
    {F, C_FULL_UNSURE,       F, "Full length run, hold 0, confidence < threshold or predictor waiting: another full_steps"},
    {P, C_REJECT,            K, "end_predict(success 0): the phase failed"},
    {P, C_ACCEPT,            K, "end_predict(success 1): the phase ends early"},
    {P, C_FORCE,             F, "force_full called: the phase failed"},
    {P, C_PREDICT_DONE,      K, "horizon run"},
    {K, C_REJECT,            K, "late end_predict(success 0): the phase before failed"},
    {K, C_ACCEPT,            K, "late end_predict(success 1)"},
    {K, C_FORCE,             F, "force_full called: an open Predict outcome fails"},
    {K, C_CORRECT_BACKOFF,   F, "correct_steps run after a failure, >= backoff_after in a row: longer Full"},
    {K, C_CORRECT_FAILED,    F, "correct_steps run after a failure, < backoff_after in a row"},
    {K, C_CORRECT_CAP,       F, "correct_steps run, max_consecutive_predict reached"},
    {K, C_CORRECT_CONFIDENT, P, "correct_steps run, predictor ready, confidence >= threshold"},
    {K, C_CORRECT_UNSURE,    F, "correct_steps run, confidence < threshold or predictor waiting"},
};
#define NRULES ((int)(sizeof RULES / sizeof RULES[0]))
_Static_assert(sizeof RULES / sizeof RULES[0] <= HPT_PHASE_MAX_RULES, "grow HPT_PHASE_MAX_RULES");

#undef W
#undef F
#undef P
#undef K

const hpt_phase_rule *hpt_phase_rules(int *n) {
    *n = NRULES;
    return RULES;
}

/* --------------------------------------------------------------- helpers */

/* A threshold above 1 can never be met by a confidence in [0, 1]; testing
 * it explicitly (not through conf >= thr) lets Predict-disabled runs skip the
 * confidence entirely and log why. */
static int predict_enabled(const hpt_phase_ctl *c) { return c->cfg.confidence_threshold <= 1.0f; }

/* Full-length multiplier of the backoff gate: 1 below backoff_after
 * consecutive failures, then 2, 4, 8, ... capped at max_backoff. */
static int backoff_mult(const hpt_phase_ctl *c) {
    if (c->fail_streak < c->cfg.backoff_after) return 1;
    int m = 1;
    for (int i = c->fail_streak - c->cfg.backoff_after + 1; i > 0 && m < c->cfg.max_backoff; i--) m *= 2;
    return m < c->cfg.max_backoff ? m : c->cfg.max_backoff;
}

/* Full steps still needed before the waste fits the budget: the first T
 * with waste <= waste_budget x T, minus the steps already run. */
static int budget_wait(const hpt_phase_ctl *c) {
    if (c->waste <= (double)c->cfg.waste_budget * c->steps_total) return 0;
    if (c->cfg.waste_budget <= 0.0f) return 1000000000;   /* no budget: Predict is over for this run */
    double t = ceil(c->waste / (double)c->cfg.waste_budget) - c->steps_total;
    return t < 1e9 ? (int)t : 1000000000;
}

/* Length of a Full phase entered now: the backoff length, or longer if
 * the waste budget needs it. */
static int full_len(const hpt_phase_ctl *c) {
    int n = c->cfg.full_steps * backoff_mult(c), b = budget_wait(c);
    return b > n ? b : n;
}

/* Horizon of a Predict phase: linear in how far the confidence clears the
 * threshold, min_predict_steps at the threshold, max_predict_steps at 1.
 * Rounding a monotone function keeps it monotone. */
static int horizon_for(const hpt_phase_ctl *c, float conf) {
    double thr = c->cfg.confidence_threshold;
    double f = thr >= 1.0 ? 1.0 : (conf - thr) / (1.0 - thr);
    if (f < 0.0) f = 0.0;
    if (f > 1.0) f = 1.0;
    int lo = c->cfg.min_predict_steps, hi = c->cfg.max_predict_steps;
    return lo + (int)floor(f * (hi - lo) + 0.5);
}

/* Driver reasons are copied (truncated to the buffer): the caller's string
 * may be a stack buffer gone by the next hpt_phase_next. */
static void copy_why(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src && *src ? src : "no reason given");
}

/* Appends to the reason buffer, "; " between the reasons of one call. */
static void say(hpt_phase_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(hpt_phase_ctl *c, const char *fmt, ...) {
    size_t len = strlen(c->why);
    if (len + 3 >= sizeof c->why) return;
    if (len) { memcpy(c->why + len, "; ", 3); len += 2; }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + len, sizeof c->why - len, fmt, ap);
    va_end(ap);
}

/* The outcome bookkeeping, shared by the driver calls and the table. */
static void fail_predict(hpt_phase_ctl *c) {
    HPT_ASSERT(c->pred_open);
    c->pred_open = 0;
    c->last_failed = 1;
    c->fail_streak++;
    c->predict_failed++;
    c->predict_failed_steps += c->pred_steps;
    /* default charge: its Predict steps at the price of full steps (the
     * driver may restate it with hpt_phase_charge) */
    c->last_charge = c->pred_steps;
    c->last_charge_open = 1;
    c->waste += c->last_charge;
}

/* A success is final only when its Correct phase completes: until then a
 * rollback (force_full) or a late rejection can still turn it into a
 * failure, and the backoff and budget must see that. */
static void succeed_predict(hpt_phase_ctl *c) {
    if (!c->pred_open) return;
    c->pred_open = 0;
    c->fail_streak = 0;
    c->waste = 0.0;
    c->predict_ok++;
}

/* --------------------------------------------------------------- conditions */

/* Does row condition `cond` hold now? *read_conf is set when the answer
 * depended on the confidence (hpt_phase_wants_confidence's probe). A
 * waiting predictor (wait non-NULL) is never confident: the rows that
 * enter Predict do not hold, their "unsure" twins do. */
static int holds(const hpt_phase_ctl *c, int cond, float conf, const char *wait, int *read_conf) {
    int at_end = c->steps_in_phase >= c->phase_len;
    float thr = c->cfg.confidence_threshold;
    switch (cond) {
    case C_FORCE:  return c->ev_force;
    case C_ACCEPT: return c->ev_verdict == 1;
    case C_REJECT: return c->ev_verdict == 2;
    case C_WARMUP_DONE:     return at_end && predict_enabled(c);
    case C_WARMUP_DONE_OFF: return at_end && !predict_enabled(c);
    case C_FULL_CONFIDENT:
    case C_FULL_UNSURE:
        if (!(at_end && c->hold == 0 && predict_enabled(c))) return 0;
        *read_conf = 1;
        return (!wait && conf >= thr) == (cond == C_FULL_CONFIDENT);
    case C_PREDICT_DONE: return at_end;
    case C_CORRECT_BACKOFF: return at_end && c->last_failed && c->fail_streak >= c->cfg.backoff_after;
    case C_CORRECT_FAILED:  return at_end && c->last_failed && c->fail_streak < c->cfg.backoff_after;
    case C_CORRECT_CAP:     return at_end && !c->last_failed && c->consecutive >= c->cfg.max_consecutive_predict;
    case C_CORRECT_CONFIDENT:
    case C_CORRECT_UNSURE:
        if (!(at_end && !c->last_failed && c->consecutive < c->cfg.max_consecutive_predict)) return 0;
        *read_conf = 1;
        return (!wait && conf >= thr) == (cond == C_CORRECT_CONFIDENT);
    }
    HPT_ASSERT(!"unknown condition");
    return 0;
}

/* --------------------------------------------------------------- firing */

/* Entry actions: the planned length of the new phase, and the per-phase
 * bookkeeping (the cap counts Predict phases since Full was entered; a
 * Predict phase opens an outcome). */
static void enter(hpt_phase_ctl *c, hpt_phase to, float conf) {
    hpt_phase from = c->phase;
    c->phase = to;
    c->steps_in_phase = 0;
    switch (to) {
    case HPT_PHASE_FULL:
        c->phase_len = full_len(c);
        if (from != HPT_PHASE_FULL) c->consecutive = 0;
        break;
    case HPT_PHASE_PREDICT:
        c->phase_len = horizon_for(c, conf);
        c->consecutive++;
        c->predict_started++;
        c->pred_open = 1;
        c->last_failed = 0;
        c->pred_steps = 0;
        c->last_charge_open = 0;
        break;
    case HPT_PHASE_CORRECT:
        c->phase_len = c->cfg.correct_steps;
        break;
    default:
        HPT_ASSERT(!"warmup is never re-entered");
    }
}

static void fire(hpt_phase_ctl *c, int r, float conf, const char *wait) {
    const hpt_phase_rule *rule = &RULES[r];
    float thr = c->cfg.confidence_threshold;
    int s = c->steps_in_phase, len = c->phase_len;
    /* Event rows consume their event; the outcome counters were updated
     * when the driver called (see hpt_phase_end_predict / _force_full). */
    switch (rule->cond) {
    case C_FORCE:
        say(c, "forced full for %d steps: %s", c->ev_force_steps, c->ev_force_why);
        c->ev_force = 0;
        break;
    case C_ACCEPT:
        if (c->phase == HPT_PHASE_PREDICT) say(c, "predict accepted after %d of %d steps: %s", s, len, c->ev_verdict_why);
        else say(c, "predict accepted (late): %s", c->ev_verdict_why);
        c->ev_verdict = 0;
        break;
    case C_REJECT:
        if (c->phase == HPT_PHASE_PREDICT) say(c, "predict rejected after %d of %d steps: %s", s, len, c->ev_verdict_why);
        else say(c, "predict rejected (late): %s", c->ev_verdict_why);
        c->ev_verdict = 0;
        break;
    case C_CORRECT_CAP:
    case C_CORRECT_CONFIDENT:
    case C_CORRECT_UNSURE:
        succeed_predict(c);   /* Correct completed with no rejection or rollback */
        break;
    case C_CORRECT_BACKOFF:
        c->backoffs++;
        break;
    default:
        break;
    }

    if (rule->cond == C_FULL_UNSURE) {
        /* Not confident at the end of a Full phase: another plain full_steps
         * (not the backoff length: the gate spaces attempts, and no attempt
         * is being made). */
        c->steps_in_phase = 0;
        c->phase_len = c->cfg.full_steps;
    } else if (rule->to != rule->from) {
        enter(c, rule->to, conf);
    }

    /* reasons of the rows that are not events, now that the new phase is set */
    switch (rule->cond) {
    case C_WARMUP_DONE:     say(c, "warmup done (%d steps)", s); break;
    case C_WARMUP_DONE_OFF: say(c, "warmup done (%d steps); predict disabled (confidence threshold %.2f > 1)", s, thr); break;
    case C_FULL_CONFIDENT:  say(c, "confidence %.2f >= %.2f; predict %d steps", conf, thr, c->phase_len); break;
    case C_FULL_UNSURE:
        if (wait) say(c, "predict waits: %s", wait);
        else say(c, "confidence %.2f < %.2f", conf, thr);
        break;
    case C_PREDICT_DONE:    say(c, "predict phase done (%d steps)", s); break;
    case C_CORRECT_BACKOFF:
        say(c, "backing off after %d failed predict phases (next try in %d steps)", c->fail_streak, c->phase_len);
        break;
    case C_CORRECT_FAILED:
        say(c, "predict phase failed (%d in a row); full for %d steps", c->fail_streak, c->phase_len);
        break;
    case C_CORRECT_CAP:     say(c, "consecutive predict cap %d reached", c->cfg.max_consecutive_predict); break;
    case C_CORRECT_CONFIDENT: say(c, "correct done; confidence %.2f >= %.2f; predict %d steps", conf, thr, c->phase_len); break;
    case C_CORRECT_UNSURE:
        if (wait) say(c, "correct done; predict waits: %s", wait);
        else say(c, "correct done; confidence %.2f < %.2f", conf, thr);
        break;
    default: break;
    }
    /* when the budget, not the backoff, set the Full length, say so */
    if (rule->to == HPT_PHASE_FULL && rule->from != HPT_PHASE_FULL && c->phase_len > c->cfg.full_steps &&
        budget_wait(c) == c->phase_len)
        say(c, "predict waste %.1f steps is over the %.1f%% budget of %d steps run", c->waste,
            100.0 * c->cfg.waste_budget, c->steps_total);
    c->last_rule = r;
    c->rule_hits[r]++;
    c->transitions++;
}

/* Fires rows until none holds; returns how many fired. Shared by
 * hpt_phase_next and (on a copy) hpt_phase_wants_confidence. */
static int advance(hpt_phase_ctl *c, float conf, const char *wait, int *read_conf) {
    int fired = 0;
    c->why[0] = '\0';
    for (;;) {
        int r = 0;
        for (; r < NRULES; r++)
            if (RULES[r].from == c->phase && holds(c, RULES[r].cond, conf, wait, read_conf)) break;
        if (r == NRULES) break;
        HPT_ASSERT(fired < 4);  /* see "Termination" at the top */
        fire(c, r, conf, wait);
        fired++;
    }
    /* every event has a row in each phase it can arrive in (a verdict only
     * in Predict or Correct, where both it and a force have rows, the
     * verdict first), so none is left over */
    HPT_ASSERT(!c->ev_force && !c->ev_verdict);
    return fired;
}

/* --------------------------------------------------------------- API */

void hpt_phase_init(hpt_phase_ctl *c, const hpt_phase_config *cfg) {
    HPT_ASSERT(hpt_phase_config_check(cfg) == HPT_OK);
    memset(c, 0, sizeof *c);  /* padding too: the struct is saved byte for byte */
    c->cfg = *cfg;
    c->phase = HPT_PHASE_WARMUP;
    c->phase_len = cfg->warmup_steps;
    c->last_rule = -1;
}

hpt_phase hpt_phase_next(hpt_phase_ctl *c, float confidence, int *horizon, const char **why) {
    return hpt_phase_next_wait(c, confidence, NULL, horizon, why);
}

hpt_phase hpt_phase_next_wait(hpt_phase_ctl *c, float confidence, const char *wait, int *horizon, const char **why) {
    /* NaN compares false with everything: make "not confident" explicit, and
     * keep the logged value in [0, 1] */
    float conf = confidence >= 0.0f ? (confidence <= 1.0f ? confidence : 1.0f) : 0.0f;
    int read_conf = 0;
    int fired = advance(c, conf, wait, &read_conf);
    if (horizon) *horizon = c->phase == HPT_PHASE_PREDICT ? c->phase_len : 0;
    if (why) *why = fired ? c->why : NULL;
    return c->phase;
}

int hpt_phase_wants_confidence(const hpt_phase_ctl *c) {
    /* Run the real decision on a copy (the struct is plain data), so this
     * can never disagree with hpt_phase_next. A few hundred bytes, and a
     * snprintf only when a row fires: cheap next to a training step. */
    hpt_phase_ctl probe = *c;
    int read_conf = 0;
    advance(&probe, 0.0f, NULL, &read_conf);
    return read_conf;
}

/* Warmup steps pay a hold as Full steps do: both are full-gradient steps.
 * Correct steps do not: a force always leaves Correct for Full. */
void hpt_phase_step_done(hpt_phase_ctl *c) {
    c->steps_in_phase++;
    c->steps[c->phase]++;
    c->steps_total++;
    if (c->phase == HPT_PHASE_PREDICT) c->pred_steps++;
    if (c->hold > 0 && (c->phase == HPT_PHASE_WARMUP || c->phase == HPT_PHASE_FULL)) c->hold--;
}

/* The counters change now (so the state between calls is already right,
 * e.g. for hpt_phase_charge); the transition and its log line come with the
 * next hpt_phase_next. */
void hpt_phase_end_predict(hpt_phase_ctl *c, int success, const char *why) {
    HPT_ASSERT(c->pred_open && (c->phase == HPT_PHASE_PREDICT || c->phase == HPT_PHASE_CORRECT));
    if (!success) fail_predict(c);
    c->ev_verdict = success ? 1 : 2;
    copy_why(c->ev_verdict_why, sizeof c->ev_verdict_why, why);
}

void hpt_phase_charge(hpt_phase_ctl *c, double full_steps) {
    HPT_ASSERT(c->last_charge_open && full_steps >= 0.0 && isfinite(full_steps));
    c->waste += full_steps - c->last_charge;
    c->last_charge = full_steps;
}

void hpt_phase_force_full(hpt_phase_ctl *c, int steps, const char *why) {
    HPT_ASSERT(steps >= 0);
    if (c->pred_open) fail_predict(c);
    if (steps > c->hold) c->hold = steps;
    c->forced_full++;
    /* several calls before one hpt_phase_next: the longest hold, the last reason */
    if (!c->ev_force || steps > c->ev_force_steps) c->ev_force_steps = steps;
    c->ev_force = 1;
    copy_why(c->ev_force_why, sizeof c->ev_force_why, why);
}

hpt_predict_stop hpt_phase_predict_stop(float L0, float prev, float Lk, int k, float per_step, float fc_dlog,
                                        float fc_std) {
    if (!(Lk < prev) || !isfinite(Lk)) return HPT_STOP_ROSE;
    if (isfinite(per_step) && L0 - Lk < 0.5f * per_step * (float)k) return HPT_STOP_BEHIND;
    /* the forecast is of the training loss under real steps; its change over
     * k steps, not its level, is compared, since the probe batches sit at
     * their own level */
    if (isfinite(fc_dlog) && isfinite(fc_std) && L0 > 0.0f && Lk > 0.0f &&
        logf(Lk) > logf(L0) + fc_dlog + 2.0f * fc_std)
        return HPT_STOP_FORECAST;
    return HPT_STOP_NONE;
}

const char *hpt_predict_stop_name(hpt_predict_stop s) {
    static const char *n[] = {"none", "probe loss rose", "behind half the real-step progress",
                              "above the forecast interval"};
    return (unsigned)s < 4 ? n[s] : "?";
}

/* --------------------------------------------------------------- checkpoints
 * Field by field (docs/format.md, HYBR): i32 phase, steps_in_phase,
 * phase_len, hold, consecutive, fail_streak, pred_open, last_failed,
 * pred_steps, last_charge_open, ev_force, ev_force_steps, ev_verdict,
 * last_rule, steps_total, steps[4], transitions, predict_started,
 * predict_ok, predict_failed, predict_failed_steps, forced_full, backoffs;
 * f64 waste, last_charge; u32 rows in the table, then i32 hits per row;
 * ev_force_why and ev_verdict_why as 200 bytes each (the string, then
 * zeros). Not saved: the config (the run supplies it, checked against the
 * HYBR config) and `why` (the last call's reasons, cleared by the next). */

#define N_INTS (22 + HPT_PHASE_COUNT)   /* the 26 of int_fields */
#define WHY_BYTES 200
_Static_assert(sizeof ((hpt_phase_ctl *)0)->ev_force_why == WHY_BYTES &&
               sizeof ((hpt_phase_ctl *)0)->ev_verdict_why == WHY_BYTES, "the format fixes the reason fields");
/* a counter beyond this is not from a run (runs are at most 1e8 steps) and
 * would overflow an int within a few more */
#define COUNT_MAX 1000000000

/* The saved integers, in file order; the same table serves both ways. */
static void int_fields(hpt_phase_ctl *c, int **f) {
    int *p[] = {(int *)&c->phase, &c->steps_in_phase, &c->phase_len, &c->hold, &c->consecutive,
                &c->fail_streak, &c->pred_open, &c->last_failed, &c->pred_steps, &c->last_charge_open,
                &c->ev_force, &c->ev_force_steps, &c->ev_verdict, &c->last_rule, &c->steps_total,
                &c->steps[0], &c->steps[1], &c->steps[2], &c->steps[3], &c->transitions,
                &c->predict_started, &c->predict_ok, &c->predict_failed, &c->predict_failed_steps,
                &c->forced_full, &c->backoffs};
    _Static_assert(HPT_PHASE_COUNT == 4, "int_fields lists steps[0..3]");
    _Static_assert(sizeof(hpt_phase) == sizeof(int), "phase is read as an int");
    _Static_assert(sizeof p / sizeof p[0] == N_INTS, "N_INTS counts int_fields");
    memcpy(f, p, sizeof p);
}

size_t hpt_phase_state_bytes(void) { return 4 * N_INTS + 16 + 4 + 4 * NRULES + 2 * WHY_BYTES; }

static void put_why(hpt_writer *w, const char *s) {
    char buf[WHY_BYTES] = {0};
    size_t n = strnlen(s, WHY_BYTES - 1);
    memcpy(buf, s, n);
    hpt_w_bytes(w, buf, WHY_BYTES);
}

void hpt_phase_save(const hpt_phase_ctl *c, hpt_writer *w) {
    int *f[N_INTS];
    int_fields((hpt_phase_ctl *)c, f);
    for (int i = 0; i < N_INTS; i++) hpt_w_u32(w, (uint32_t)*f[i]);
    hpt_w_bytes(w, &c->waste, 8);
    hpt_w_bytes(w, &c->last_charge, 8);
    hpt_w_u32(w, (uint32_t)NRULES);
    for (int r = 0; r < NRULES; r++) hpt_w_u32(w, (uint32_t)c->rule_hits[r]);
    put_why(w, c->ev_force_why);
    put_why(w, c->ev_verdict_why);
}

static int is_flag(int v) { return v == 0 || v == 1; }
static int is_count(int v) { return v >= 0 && v <= COUNT_MAX; }

/* Why a loaded state cannot be continued, or NULL. The checks are what the
 * transitions rely on (the asserts in advance, enter, fail_predict and the
 * array indices), plus the invariants phase.h states. */
static const char *state_problem(const hpt_phase_ctl *c) {
    if ((unsigned)c->phase >= HPT_PHASE_COUNT) return "phase out of range";
    int *f[N_INTS];
    int_fields((hpt_phase_ctl *)c, f);
    const int counts[] = {1, 2, 3, 4, 5, 8, 11, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (!is_count(*f[counts[i]])) return "a step or event counter out of range";
    for (int r = 0; r < NRULES; r++)
        if (!is_count(c->rule_hits[r])) return "a rule hit count out of range";
    if (!is_flag(c->pred_open) || !is_flag(c->last_failed) || !is_flag(c->last_charge_open) || !is_flag(c->ev_force))
        return "a flag is neither 0 nor 1";
    if (c->ev_verdict < 0 || c->ev_verdict > 2) return "pending verdict out of range";
    int pk = c->phase == HPT_PHASE_PREDICT || c->phase == HPT_PHASE_CORRECT;
    if ((c->ev_verdict || c->pred_open) && !pk) return "a Predict outcome outside Predict and Correct";
    if (c->pred_open && c->last_failed) return "an open Predict outcome marked failed";
    if (c->phase == HPT_PHASE_PREDICT && !c->pred_open && !c->ev_verdict && !c->ev_force)
        return "a Predict phase without an open outcome";
    if (c->phase == HPT_PHASE_WARMUP ? c->phase_len != c->cfg.warmup_steps : c->phase_len < 1)
        return "phase length does not fit the phase";
    if (c->consecutive > c->cfg.max_consecutive_predict) return "more consecutive Predict phases than the cap";
    if (c->last_rule < -1 || c->last_rule >= NRULES) return "last rule out of range";
    if (!(c->waste >= 0.0 && isfinite(c->waste)) || !(c->last_charge >= 0.0 && isfinite(c->last_charge)))
        return "waste not a finite non-negative number";
    if (!memchr(c->ev_force_why, 0, WHY_BYTES) || !memchr(c->ev_verdict_why, 0, WHY_BYTES))
        return "an unterminated reason";
    return NULL;
}

hpt_status hpt_phase_load(hpt_phase_ctl *c, hpt_cursor *k) {
    hpt_phase_ctl t;
    hpt_phase_init(&t, &c->cfg);
    int *f[N_INTS];
    int_fields(&t, f);
    uint32_t v, nrules = 0;
    int ok = 1;
    for (int i = 0; i < N_INTS && ok; i++) {
        ok = hpt_cur_u32(k, &v);
        *f[i] = (int)(int32_t)v;
    }
    ok = ok && hpt_cur_bytes(k, &t.waste, 8) && hpt_cur_bytes(k, &t.last_charge, 8) && hpt_cur_u32(k, &nrules);
    if (!ok) return hpt_fail(HPT_ERR_FORMAT, "phase controller state: truncated");
    if (nrules != (uint32_t)NRULES)
        return hpt_fail(HPT_ERR_FORMAT, "phase controller state: %u transition rules, this hpt has %d", nrules, NRULES);
    for (int r = 0; r < NRULES && ok; r++) {
        ok = hpt_cur_u32(k, &v);
        t.rule_hits[r] = (int)(int32_t)v;
    }
    ok = ok && hpt_cur_bytes(k, t.ev_force_why, WHY_BYTES) && hpt_cur_bytes(k, t.ev_verdict_why, WHY_BYTES);
    if (!ok) return hpt_fail(HPT_ERR_FORMAT, "phase controller state: truncated");
    const char *why = state_problem(&t);
    if (why) return hpt_fail(HPT_ERR_FORMAT, "phase controller state: %s", why);
    *c = t;
    return HPT_OK;
}
