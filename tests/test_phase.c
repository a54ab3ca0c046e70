/* tier: fast (make test; tests/run.sh) */
/*
 * test_phase.c — the phase state machine, transition by transition: every
 * row of the table fires somewhere below (checked at the end), with its
 * reason; the horizon against the confidence; the consecutive-Predict cap;
 * the backoff gate (doubling, cap, reset); the cost of a useless predictor;
 * Predict disabled by a threshold above 1; forced Full in every phase;
 * hpt_phase_wants_confidence against the decision itself; byte-for-byte
 * copies; checkpoints (save, load, going on alike, damaged fields refused);
 * config validation.
 *
 * Scenarios use a small config (warmup 3, full 2, predict 2..6, correct 1,
 * cap 2, backoff after 2 up to 8x, no waste budget, threshold 0.6) so every
 * phase boundary is a few steps away and the expected sequences can be
 * written out.
 */
#include "../src/hybrid/phased/phase.h"
#include "test.h"

#include <string.h>

static int g_hits[HPT_PHASE_MAX_RULES];   /* rule hits over every controller used */

static hpt_phase_config small_cfg(void) {
    hpt_phase_config c;
    hpt_phase_config_default(&c);
    c.warmup_steps = 3;
    c.full_steps = 2;
    c.min_predict_steps = 2;
    c.max_predict_steps = 6;
    c.correct_steps = 1;
    c.max_consecutive_predict = 2;
    c.backoff_after = 2;
    c.max_backoff = 8;
    c.waste_budget = 1.0f;   /* off (waste never exceeds the steps run); test_budget turns it on */
    c.confidence_threshold = 0.6f;
    return c;
}

static void collect(const hpt_phase_ctl *c) {
    for (int i = 0; i < HPT_PHASE_MAX_RULES; i++) g_hits[i] += c->rule_hits[i];
}

static int has(const char *why, const char *what) { return why && strstr(why, what); }

/* Runs n steps at a fixed confidence; returns the last phase. Fails the
 * test if any step other than the first reports a transition. */
static hpt_phase run_quiet(hpt_phase_ctl *c, int n, float conf, const char *ctx) {
    hpt_phase p = c->phase;
    for (int i = 0; i < n; i++) {
        const char *why;
        p = hpt_phase_next(c, conf, NULL, &why);
        CHECK(why == NULL, "%s: step %d: unexpected transition: %s", ctx, i, why);
        hpt_phase_step_done(c);
    }
    return p;
}

/* A controller past warmup and its first Full phase, about to decide. */
static void to_full_end(hpt_phase_ctl *c, const hpt_phase_config *cfg) {
    hpt_phase_init(c, cfg);
    run_quiet(c, cfg->warmup_steps, 0.9f, "warmup");
    const char *why;
    hpt_phase p = hpt_phase_next(c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL, "after warmup: %s", hpt_phase_name(p));
    hpt_phase_step_done(c);
    run_quiet(c, cfg->full_steps - 1, 0.9f, "full");
}

/* ---------------------------------------------------------------- config */

/* Sets one field of the defaults to a bad value and expects a message that
 * names flag. */
#define BAD_CONFIG(field, value, flag) do {                                         \
    hpt_phase_config c_;                                                            \
    hpt_phase_config_default(&c_);                                                  \
    c_.field = (value);                                                             \
    hpt_status st_ = hpt_phase_config_check(&c_);                                   \
    CHECK(st_ == HPT_ERR_ARG, "%s = %s accepted", #field, #value);                  \
    CHECK(strstr(hpt_errmsg(), flag) != NULL, "%s = %s: message '%s' lacks %s",     \
          #field, #value, hpt_errmsg(), flag);                                      \
} while (0)

static void test_config(void) {
    hpt_phase_config d;
    hpt_phase_config_default(&d);
    CHECK(hpt_phase_config_check(&d) == HPT_OK, "defaults rejected: %s", hpt_errmsg());
    hpt_phase_config s = small_cfg();
    CHECK(hpt_phase_config_check(&s) == HPT_OK, "small config rejected: %s", hpt_errmsg());

    BAD_CONFIG(warmup_steps, -1, "--warmup-steps");
    BAD_CONFIG(full_steps, 0, "--full-steps");
    BAD_CONFIG(min_predict_steps, 0, "--min-predict-steps");
    BAD_CONFIG(max_predict_steps, 0, "--max-predict-steps");
    BAD_CONFIG(max_predict_steps, 4, "--max-predict-steps");   /* below min 5 */
    BAD_CONFIG(correct_steps, 0, "--correct-steps");
    BAD_CONFIG(max_consecutive_predict, 0, "--max-consecutive-predict");
    BAD_CONFIG(backoff_after, 0, "--backoff-after");
    BAD_CONFIG(max_backoff, 0, "--max-backoff");
    BAD_CONFIG(max_backoff, 100000000, "--max-backoff");
    BAD_CONFIG(waste_budget, -0.01f, "--predict-waste-budget");
    BAD_CONFIG(waste_budget, 1.5f, "--predict-waste-budget");
    BAD_CONFIG(waste_budget, NAN, "--predict-waste-budget");
    BAD_CONFIG(confidence_threshold, -0.1f, "--confidence-threshold");
    BAD_CONFIG(confidence_threshold, NAN, "--confidence-threshold");
    {   /* the product bound */
        hpt_phase_config c = d;
        c.full_steps = 100000;
        c.max_backoff = 1 << 20;
        CHECK(hpt_phase_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--full-steps x --max-backoff"),
              "huge full x backoff: '%s'", hpt_errmsg());
    }
    /* legal edges: no warmup, threshold 0, threshold above 1 (disables), min == max */
    hpt_phase_config e = d;
    e.warmup_steps = 0;
    e.confidence_threshold = 0.0f;
    e.min_predict_steps = e.max_predict_steps = 7;
    CHECK(hpt_phase_config_check(&e) == HPT_OK, "edge config rejected: %s", hpt_errmsg());
    e.confidence_threshold = 5.0f;
    CHECK(hpt_phase_config_check(&e) == HPT_OK, "threshold 5 rejected: %s", hpt_errmsg());

    CHECK(!strcmp(hpt_phase_name(HPT_PHASE_WARMUP), "warmup") && !strcmp(hpt_phase_name(HPT_PHASE_FULL), "full") &&
          !strcmp(hpt_phase_name(HPT_PHASE_PREDICT), "predict") && !strcmp(hpt_phase_name(HPT_PHASE_CORRECT), "correct") &&
          !strcmp(hpt_phase_name(HPT_PHASE_COUNT), "?"), "phase names");
}

/* ---------------------------------------------------------------- the main cycle */

/* W3 F2 P C P C (cap) F2 F2 (unsure) P(rejected) C F2 (failed) P(rejected) C
 * F4 (backoff), with the reason of every transition. */
static void test_cycle(void) {
    hpt_phase_config cfg = small_cfg();
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    const char *why;
    int h;

    CHECK(c.phase == HPT_PHASE_WARMUP && c.last_rule == -1, "starts in warmup");
    CHECK(run_quiet(&c, 3, 0.9f, "warmup") == HPT_PHASE_WARMUP, "3 warmup steps");
    CHECK(!hpt_phase_wants_confidence(&c), "warmup end reads no confidence");

    hpt_phase p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && h == 0, "warmup -> full: %s", hpt_phase_name(p));
    CHECK(has(why, "warmup done (3 steps)"), "why: %s", why);
    hpt_phase_step_done(&c);
    run_quiet(&c, 1, 0.9f, "full");
    CHECK(hpt_phase_wants_confidence(&c), "full end reads the confidence");

    /* (0.9 - 0.6) / 0.4 = 0.75 of the way from 2 to 6: 5 steps */
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_PREDICT && h == 5, "full -> predict: %s h %d", hpt_phase_name(p), h);
    CHECK(has(why, "confidence 0.90 >= 0.60; predict 5 steps"), "why: %s", why);
    CHECK(c.predict_started == 1 && c.pred_open && c.consecutive == 1, "predict bookkeeping");
    hpt_phase_step_done(&c);
    for (int i = 1; i < 5; i++) {
        p = hpt_phase_next(&c, 0.1f, &h, &why);   /* the confidence is not read inside Predict */
        CHECK(p == HPT_PHASE_PREDICT && h == 5 && why == NULL, "predict step %d", i);
        hpt_phase_step_done(&c);
    }
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_CORRECT && h == 0, "predict -> correct: %s", hpt_phase_name(p));
    CHECK(has(why, "predict phase done (5 steps)"), "why: %s", why);
    CHECK(c.pred_open && c.predict_ok == 0, "outcome stays open through Correct");
    hpt_phase_step_done(&c);

    p = hpt_phase_next(&c, 1.0f, &h, &why);
    CHECK(p == HPT_PHASE_PREDICT && h == 6, "correct -> predict: %s h %d", hpt_phase_name(p), h);
    CHECK(has(why, "correct done; confidence 1.00 >= 0.60; predict 6 steps"), "why: %s", why);
    CHECK(c.predict_ok == 1 && c.consecutive == 2, "first predict succeeded when its Correct completed");
    run_quiet(&c, 1, 0.9f, "predict");
    run_quiet(&c, 5, 0.9f, "predict");
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_CORRECT && has(why, "predict phase done (6 steps)"), "why: %s", why);
    hpt_phase_step_done(&c);

    p = hpt_phase_next(&c, 0.99f, &h, &why);
    CHECK(p == HPT_PHASE_FULL, "cap -> full: %s", hpt_phase_name(p));
    CHECK(has(why, "consecutive predict cap 2 reached"), "why: %s", why);
    CHECK(c.predict_ok == 2 && c.consecutive == 0 && c.phase_len == 2, "cap bookkeeping");
    hpt_phase_step_done(&c);
    run_quiet(&c, 1, 0.9f, "full");

    p = hpt_phase_next(&c, 0.3f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && c.steps_in_phase == 0 && c.phase_len == 2, "unsure -> another full");
    CHECK(has(why, "confidence 0.30 < 0.60"), "why: %s", why);
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && why == NULL, "a second call decides nothing new");
    run_quiet(&c, 2, 0.9f, "full");

    /* rejected mid-phase */
    p = hpt_phase_next(&c, 0.6f, &h, &why);
    CHECK(p == HPT_PHASE_PREDICT && h == 2, "at the threshold: min horizon, got %d", h);
    hpt_phase_step_done(&c);
    hpt_phase_end_predict(&c, 0, "loss 2.31 left the forecast interval [1.9, 2.1]");
    CHECK(c.predict_failed == 1 && c.fail_streak == 1 && !c.pred_open && c.predict_failed_steps == 1,
          "rejection counted at once");
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_CORRECT, "rejected -> correct: %s", hpt_phase_name(p));
    CHECK(has(why, "predict rejected after 1 of 2 steps: loss 2.31 left the forecast interval"), "why: %s", why);
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && c.phase_len == 2, "failed -> full at the base length");
    CHECK(has(why, "predict phase failed (1 in a row); full for 2 steps"), "why: %s", why);
    CHECK(!hpt_phase_wants_confidence(&c) || c.steps_in_phase >= c.phase_len, "wants only at the end");
    hpt_phase_step_done(&c);
    run_quiet(&c, 1, 0.9f, "full");

    /* second failure in a row: backoff doubles the Full phase */
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_PREDICT, "try again");
    hpt_phase_step_done(&c);
    hpt_phase_step_done(&c);
    hpt_phase_end_predict(&c, 0, NULL);
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_CORRECT && has(why, "predict rejected after 2 of 5 steps: no reason given"), "why: %s", why);
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && c.phase_len == 4, "backoff: full %d", c.phase_len);
    CHECK(has(why, "backing off after 2 failed predict phases (next try in 4 steps)"), "why: %s", why);
    CHECK(c.backoffs == 1 && c.predict_failed_steps == 3, "backoff counters");
    hpt_phase_step_done(&c);
    run_quiet(&c, 3, 0.9f, "backoff full");
    /* not confident after a backoff Full: another plain full_steps, not the backoff length */
    p = hpt_phase_next(&c, 0.3f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && c.phase_len == 2 && has(why, "confidence 0.30 < 0.60"), "unsure after backoff: %d",
          c.phase_len);

    int total = 0;
    for (int i = 0; i < HPT_PHASE_COUNT; i++) total += c.steps[i];
    CHECK(total == c.steps_total && c.steps[HPT_PHASE_WARMUP] == 3 && c.steps[HPT_PHASE_PREDICT] == 14 &&
          c.steps[HPT_PHASE_CORRECT] == 4 && c.steps[HPT_PHASE_FULL] == 12,
          "step counters: total %d predict %d", c.steps_total, c.steps[HPT_PHASE_PREDICT]);
    collect(&c);
}

/* ---------------------------------------------------------------- horizon */

static int horizon_at(const hpt_phase_config *cfg, float conf) {
    hpt_phase_ctl c;
    hpt_phase_init(&c, cfg);
    hpt_phase_next(&c, conf, NULL, NULL);   /* warmup 0 -> full */
    hpt_phase_step_done(&c);
    int h = -1;
    hpt_phase p = hpt_phase_next(&c, conf, &h, NULL);
    collect(&c);
    return p == HPT_PHASE_PREDICT ? h : 0;
}

static void test_horizon(void) {
    hpt_phase_config cfg = small_cfg();
    cfg.warmup_steps = 0;
    cfg.full_steps = 1;
    cfg.min_predict_steps = 5;
    cfg.max_predict_steps = 40;
    int prev = 0, distinct = 0;
    for (int i = 0; i <= 100; i++) {
        float conf = 0.6f + 0.4f * i / 100;
        int h = horizon_at(&cfg, conf);
        CHECK(h >= 5 && h <= 40, "conf %.3f: horizon %d outside [5, 40]", conf, h);
        CHECK(h >= prev, "conf %.3f: horizon %d < %d at lower confidence", conf, h, prev);
        distinct += h != prev;
        prev = h;
    }
    CHECK(distinct >= 30, "horizon barely depends on confidence (%d distinct values)", distinct);
    CHECK(horizon_at(&cfg, 0.6f) == 5, "threshold -> min horizon");
    CHECK(horizon_at(&cfg, 1.0f) == 40, "confidence 1 -> max horizon");
    CHECK(horizon_at(&cfg, 7.0f) == 40, "confidence above 1 counts as 1");
    CHECK(horizon_at(&cfg, 0.59f) == 0, "below the threshold: no predict");
    CHECK(horizon_at(&cfg, NAN) == 0, "NaN confidence: no predict");
    cfg.confidence_threshold = 1.0f;
    CHECK(horizon_at(&cfg, 1.0f) == 40 && horizon_at(&cfg, 0.999f) == 0, "threshold exactly 1");
    cfg.confidence_threshold = 0.0f;
    CHECK(horizon_at(&cfg, 0.0f) == 5 && horizon_at(&cfg, NAN) == 5, "threshold 0 always predicts");
}

/* ---------------------------------------------------------------- driver events */

static void test_events(void) {
    hpt_phase_config cfg = small_cfg();
    hpt_phase_ctl c;
    const char *why;
    int h;
    hpt_phase p;

    /* forced Full inside Full: the phase lasts until the hold is paid */
    to_full_end(&c, &cfg);
    hpt_phase_force_full(&c, 6, "loss z-score 7.1 >= 6.0");
    CHECK(!hpt_phase_wants_confidence(&c), "a hold reads no confidence");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "forced full for 6 steps: loss z-score 7.1 >= 6.0"), "why: %s", why);
    CHECK(c.forced_full == 1 && c.hold == 6, "hold 6, got %d", c.hold);
    hpt_phase_step_done(&c);
    CHECK(run_quiet(&c, 5, 0.9f, "held full") == HPT_PHASE_FULL, "held for 6 steps");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_PREDICT, "predict once the hold is paid: %s", hpt_phase_name(p));
    collect(&c);

    /* forced Full during Predict: the phase fails, Full at the backoff length */
    to_full_end(&c, &cfg);
    hpt_phase_next(&c, 0.9f, NULL, NULL);
    hpt_phase_step_done(&c);
    hpt_phase_step_done(&c);
    hpt_phase_force_full(&c, 0, "rolled back to step 5");
    CHECK(c.predict_failed == 1 && c.fail_streak == 1 && !c.pred_open && c.predict_failed_steps == 2,
          "rollback during Predict fails it");
    p = hpt_phase_next(&c, 0.9f, &h, &why);
    CHECK(p == HPT_PHASE_FULL && h == 0 && c.phase_len == 2 && has(why, "forced full for 0 steps: rolled back"),
          "predict -> full: %s (%s)", hpt_phase_name(p), why);
    collect(&c);

    /* forced Full during Correct: the tentative success becomes a failure */
    to_full_end(&c, &cfg);
    hpt_phase_next(&c, 0.62f, &h, NULL);
    run_quiet(&c, h, 0.9f, "predict");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_CORRECT && c.pred_open, "in correct, outcome open");
    hpt_phase_force_full(&c, 3, "loss z-score 13.0 >= 12.0");
    CHECK(c.predict_ok == 0 && c.predict_failed == 1, "rollback during Correct fails the Predict phase");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "forced full for 3 steps"), "correct -> full: %s", why);
    collect(&c);

    /* rejected, then rolled back, before one hpt_phase_next: both logged, one failure */
    to_full_end(&c, &cfg);
    hpt_phase_next(&c, 0.9f, NULL, NULL);
    hpt_phase_step_done(&c);
    hpt_phase_end_predict(&c, 0, "forecast missed");
    hpt_phase_force_full(&c, 4, "rollback");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "predict rejected after 1 of 5 steps: forecast missed; forced full for 4"),
          "reject + force: %s (%s)", hpt_phase_name(p), why);
    CHECK(c.predict_failed == 1 && c.fail_streak == 1, "counted once: %d", c.predict_failed);
    collect(&c);

    /* accepted early: ends Predict, succeeds when Correct completes */
    to_full_end(&c, &cfg);
    hpt_phase_next(&c, 0.9f, NULL, NULL);
    run_quiet(&c, 3, 0.9f, "predict");
    hpt_phase_end_predict(&c, 1, "forecast horizon reached");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_CORRECT && has(why, "predict accepted after 3 of 5 steps: forecast horizon reached"),
          "accept: %s", why);
    CHECK(c.predict_ok == 0 && c.pred_open, "success only when Correct completes");
    /* a late accept in Correct is logged and changes nothing */
    hpt_phase_end_predict(&c, 1, "loss after correct 1.98 within 1%");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_CORRECT && has(why, "predict accepted (late): loss after correct"), "late accept: %s", why);
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_PREDICT && c.predict_ok == 1 && c.fail_streak == 0, "success counted");
    collect(&c);

    /* a late reject in Correct: logged, Correct goes on, then Full */
    to_full_end(&c, &cfg);
    hpt_phase_next(&c, 0.9f, &h, NULL);
    run_quiet(&c, h, 0.9f, "predict");
    hpt_phase_next(&c, 0.9f, NULL, NULL);
    hpt_phase_end_predict(&c, 0, "loss after correct 2.40 > forecast 2.10");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_CORRECT && has(why, "predict rejected (late): loss after correct"), "late reject: %s", why);
    CHECK(c.predict_failed == 1 && c.predict_failed_steps == h, "late failure counts the Predict steps");
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "predict phase failed (1 in a row)"), "then full: %s", why);
    collect(&c);

    /* forced Full during Warmup: warmup runs to its end, its steps pay the hold */
    hpt_phase_config wc = small_cfg();
    wc.warmup_steps = 5;
    hpt_phase_init(&c, &wc);
    run_quiet(&c, 2, 0.9f, "warmup");
    hpt_phase_force_full(&c, 10, "loss is nan");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_WARMUP && has(why, "forced full for 10 steps: loss is nan"), "warmup force: %s", why);
    hpt_phase_step_done(&c);
    run_quiet(&c, 2, 0.9f, "warmup");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "warmup done (5 steps)") && c.hold == 7, "hold %d after warmup", c.hold);
    hpt_phase_step_done(&c);
    CHECK(run_quiet(&c, 6, 0.9f, "held") == HPT_PHASE_FULL, "held");
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_PREDICT, "predict after 10 forced steps");
    collect(&c);

    /* force on the very step warmup ends: both rows fire in one call */
    hpt_phase_init(&c, &wc);
    run_quiet(&c, 5, 0.9f, "warmup");
    hpt_phase_force_full(&c, 3, "grad norm is inf");
    hpt_phase_force_full(&c, 1, "second reason");   /* the longest hold, the last reason */
    p = hpt_phase_next(&c, 0.9f, NULL, &why);
    CHECK(p == HPT_PHASE_FULL && has(why, "forced full for 3 steps: second reason; warmup done (5 steps)"),
          "two rows in one call: %s", why);
    CHECK(c.transitions == 2 && c.forced_full == 2 && c.hold == 3, "two rows counted");
    collect(&c);
}

/* ---------------------------------------------------------------- cap and backoff */

static void test_cap(void) {
    hpt_phase_config cfg = small_cfg();
    cfg.max_consecutive_predict = 3;
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    /* always confident, every Predict succeeds: P C P C P C F ... */
    int run = 0, blocks = 0;
    hpt_phase prev = HPT_PHASE_WARMUP;
    for (int i = 0; i < 2000; i++) {
        hpt_phase p = hpt_phase_next(&c, 0.8f, NULL, NULL);
        if (p == HPT_PHASE_PREDICT && prev != HPT_PHASE_PREDICT) run++;
        if (p == HPT_PHASE_FULL && prev == HPT_PHASE_CORRECT) {
            CHECK(run == 3, "block %d: %d predict phases between fulls", blocks, run);
            CHECK(c.rule_hits[c.last_rule] > 0 && strstr(c.why, "consecutive predict cap 3 reached"),
                  "cap reason: %s", c.why);
            run = 0;
            blocks++;
        }
        CHECK(p != HPT_PHASE_FULL || prev == HPT_PHASE_FULL || run == 0, "full resets the count");
        prev = p;
        hpt_phase_step_done(&c);
    }
    CHECK(blocks > 20 && c.predict_failed == 0 && c.backoffs == 0, "%d blocks", blocks);
    collect(&c);
}

/* Always confident; the driver rejects every Predict after `fail_after`
 * steps (0: never). Records the length of each Full phase entered after a
 * failed Predict's Correct; returns how many. */
static int full_lengths(hpt_phase_ctl *c, int steps, int fail_after, int *lens, int max_lens) {
    int n = 0;
    for (int i = 0; i < steps; i++) {
        hpt_phase before = c->phase;
        hpt_phase p = hpt_phase_next(c, 0.95f, NULL, NULL);
        if (before == HPT_PHASE_CORRECT && p == HPT_PHASE_FULL && c->last_failed && n < max_lens)
            lens[n++] = c->phase_len;
        hpt_phase_step_done(c);
        if (p == HPT_PHASE_PREDICT && fail_after && c->steps_in_phase == fail_after)
            hpt_phase_end_predict(c, 0, "useless");
    }
    return n;
}

static void test_backoff(void) {
    hpt_phase_config cfg = small_cfg();   /* full 2, backoff after 2, up to 8x */
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    int lens[16];
    int n = full_lengths(&c, 400, 1, lens, 16);
    int want[] = {2, 4, 8, 16, 16, 16};
    CHECK(n >= 6, "only %d failures in 400 steps", n);
    for (int i = 0; i < 6 && i < n; i++)
        CHECK(lens[i] == want[i], "failure %d: full %d, want %d", i + 1, lens[i], want[i]);
    CHECK(c.backoffs == c.predict_failed - 1, "backoffs %d, failures %d", c.backoffs, c.predict_failed);

    /* one success resets the gate: the next failures start over at the base length */
    CHECK(c.fail_streak >= 6, "streak %d", c.fail_streak);
    for (int guard = 0; c.predict_ok == 0 && guard < 1000; guard++) {   /* a Predict left to succeed */
        hpt_phase_next(&c, 0.95f, NULL, NULL);
        hpt_phase_step_done(&c);
    }
    CHECK(c.fail_streak == 0 && c.predict_ok == 1, "success resets the streak (%d)", c.fail_streak);
    n = full_lengths(&c, 40, 1, lens, 16);
    CHECK(n >= 2 && lens[0] == 2 && lens[1] == 4, "after a success: %d, %d", lens[0], lens[1]);
    collect(&c);
}

/* Always confident; the driver rejects each Predict after `fail_after`
 * steps, or at its last step (fail_after 0: as late as possible). Checks the
 * budget invariant at every Predict start. */
static void run_useless(hpt_phase_ctl *c, int steps, int fail_after) {
    for (int i = 0; i < steps; i++) {
        hpt_phase before = c->phase;
        hpt_phase p = hpt_phase_next(c, 1.0f, NULL, NULL);
        if (p == HPT_PHASE_PREDICT && before != HPT_PHASE_PREDICT)
            CHECK(c->waste <= (double)c->cfg.waste_budget * c->steps_total + 1e-9,
                  "attempt at step %d with waste %g over budget", c->steps_total, c->waste);
        hpt_phase_step_done(c);
        if (p == HPT_PHASE_PREDICT && c->steps_in_phase == (fail_after ? fail_after : c->phase_len))
            hpt_phase_end_predict(c, 0, "useless");
    }
}

/* The promise behind the gates: a predictor that never works costs little.
 * Default config, every Predict rejected, each Predict step charged as a
 * full step (the default charge: the worst case for a driver whose Predict
 * steps are cheaper, and whose rollback precedes Correct). */
static void test_useless_predictor(void) {
    hpt_phase_config cfg;
    hpt_phase_config_default(&cfg);
    int lens[] = {2000, 20000, 100000};
    for (int k = 0; k < 3; k++) {
        for (int late = 0; late < 2; late++) {
            hpt_phase_ctl c;
            hpt_phase_init(&c, &cfg);
            run_useless(&c, lens[k], late ? 0 : 1);
            int pred = c.steps[HPT_PHASE_PREDICT];
            /* the budget, plus the one attempt that may start just under it */
            CHECK(pred <= cfg.waste_budget * c.steps_total + (late ? cfg.max_predict_steps : 1),
                  "%d steps, %s rejection: %d predict steps", lens[k], late ? "late" : "early", pred);
            CHECK((double)pred / c.steps_total <= (k == 0 && late ? 0.02 : 0.011), "%d steps, %s rejection: %.2f%% "
                  "(%d attempts)", lens[k], late ? "late" : "early", 100.0 * pred / c.steps_total, c.predict_started);
            /* even counting every Correct step as lost, long runs stay under 2% */
            if (k > 0)
                CHECK((double)(pred + c.steps[HPT_PHASE_CORRECT]) / c.steps_total < 0.02, "%d steps, %s: %.2f%% with "
                      "correct", lens[k], late ? "late" : "early", 100.0 * (pred + c.steps[HPT_PHASE_CORRECT]) / c.steps_total);
            CHECK(c.predict_ok == 0 && c.predict_failed == c.predict_started && c.waste == pred, "waste accounting");
            collect(&c);
        }
    }
}

/* The budget in detail: after a failure, Full lasts until the waste fits;
 * the driver may restate a failure's cost; a success clears the waste;
 * budget 0 ends Predict after one failure. */
static void test_budget(void) {
    hpt_phase_config cfg = small_cfg();
    cfg.waste_budget = 0.05f;
    hpt_phase_ctl c;
    const char *why;
    to_full_end(&c, &cfg);                       /* 5 steps run */
    hpt_phase_next(&c, 1.0f, NULL, NULL);        /* predict 6 */
    run_quiet(&c, 4, 1.0f, "predict");
    hpt_phase_end_predict(&c, 0, "off");
    CHECK(c.waste == 4.0, "waste %g", c.waste);
    hpt_phase_next(&c, 1.0f, NULL, NULL);        /* correct */
    hpt_phase_step_done(&c);
    CHECK(c.waste == 4.0 && c.steps_total == 10, "correct steps are not charged: %g", c.waste);
    hpt_phase p = hpt_phase_next(&c, 1.0f, NULL, &why);
    /* 4 wasted steps fit 5% of 80 steps: 70 more */
    CHECK(p == HPT_PHASE_FULL && c.phase_len == 70, "full %d, want 70", c.phase_len);
    CHECK(has(why, "predict phase failed (1 in a row); full for 70 steps; predict waste 4.0 steps is over the 5.0% "
              "budget of 10 steps run"), "why: %s", why);
    hpt_phase_step_done(&c);
    run_quiet(&c, 69, 1.0f, "budget full");
    p = hpt_phase_next(&c, 1.0f, NULL, NULL);
    CHECK(p == HPT_PHASE_PREDICT && c.steps_total == 80, "retry at step %d", c.steps_total);
    /* the driver states the real cost: 6 Predict steps that cost 1.5 full steps */
    run_quiet(&c, 6, 1.0f, "predict");
    hpt_phase_end_predict(&c, 0, "off again");
    CHECK(c.waste == 10.0, "default charge: %g", c.waste);
    hpt_phase_charge(&c, 1.5);
    hpt_phase_charge(&c, 2.0);                   /* restated: replaces, does not add */
    CHECK(c.waste == 6.0, "charged: %g", c.waste);
    hpt_phase_next(&c, 1.0f, NULL, NULL);
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 1.0f, NULL, &why);   /* 87 steps; 6 / 0.05 = 120: 33 more; backoff 2 x 2 = 4 */
    CHECK(p == HPT_PHASE_FULL && c.phase_len == 33, "full %d after charge, want 33 (%s)", c.phase_len, why);
    CHECK(has(why, "backing off after 2 failed predict phases (next try in 33 steps); predict waste 6.0"), "why: %s", why);
    hpt_phase_step_done(&c);
    run_quiet(&c, 32, 1.0f, "budget full");
    p = hpt_phase_next(&c, 1.0f, NULL, NULL);
    CHECK(p == HPT_PHASE_PREDICT, "retry");
    run_quiet(&c, 6, 1.0f, "predict");
    hpt_phase_next(&c, 1.0f, NULL, NULL);
    hpt_phase_step_done(&c);
    p = hpt_phase_next(&c, 1.0f, NULL, NULL);
    CHECK(p == HPT_PHASE_PREDICT && c.predict_ok == 1 && c.waste == 0.0 && c.fail_streak == 0, "a success clears the waste");
    collect(&c);

    cfg.waste_budget = 0.0f;
    hpt_phase_init(&c, &cfg);
    run_useless(&c, 5000, 1);
    CHECK(c.predict_started == 1 && c.steps[HPT_PHASE_FULL] > 4900, "budget 0: %d attempts", c.predict_started);
    collect(&c);
}

/* ---------------------------------------------------------------- predict disabled */

static void test_disabled(void) {
    hpt_phase_config cfg;
    hpt_phase_config_default(&cfg);
    cfg.confidence_threshold = 1.5f;
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    int bad = 0, asked = 0, logged = 0;
    for (int i = 0; i < 10000; i++) {
        asked += hpt_phase_wants_confidence(&c);
        const char *why;
        int h = -1;
        hpt_phase p = hpt_phase_next(&c, 1.0f, &h, &why);
        bad += (i < cfg.warmup_steps ? p != HPT_PHASE_WARMUP : p != HPT_PHASE_FULL) || h != 0;
        if (why) {
            logged++;
            CHECK(i == cfg.warmup_steps && has(why, "predict disabled (confidence threshold 1.50 > 1)"), "why: %s", why);
        }
        hpt_phase_step_done(&c);
    }
    CHECK(bad == 0, "%d steps left warmup/full", bad);
    CHECK(asked == 0 && logged == 1 && c.transitions == 1, "asked %d, logged %d", asked, logged);
    CHECK(c.steps[HPT_PHASE_FULL] == 10000 - cfg.warmup_steps && c.predict_started == 0, "all full");
    /* a forced Full still works (the driver may roll back a plain run) */
    hpt_phase_force_full(&c, 5, "loss is inf");
    CHECK(hpt_phase_next(&c, 1.0f, NULL, NULL) == HPT_PHASE_FULL, "still full");
    collect(&c);
}

/* A predictor that lacks its history waits: with threshold 0
 * every confidence passes, so only the wait keeps Predict off; a Full or
 * Correct phase at its end goes on as if unsure, logging the wait; once the
 * wait lifts, the next decision enters Predict. */
static void test_wait(void) {
    hpt_phase_config cfg = small_cfg();
    cfg.confidence_threshold = 0.0f;
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    const char *wait = "the shrink predictor holds 0 of the 6 snapshots it needs";
    int predicted = 0, waits = 0;
    for (int i = 0; i < 40; i++) {
        const char *why;
        int h = -1;
        hpt_phase p = hpt_phase_next_wait(&c, 1.0f, wait, &h, &why);
        predicted += p == HPT_PHASE_PREDICT || h != 0;
        if (why && has(why, "predict waits: the shrink predictor holds 0 of the 6")) waits++;
        hpt_phase_step_done(&c);
    }
    CHECK(predicted == 0 && c.predict_started == 0, "Predict while waiting (%d steps)", predicted);
    /* warmup 3, then a Full phase of 2 steps ends every 2 steps: 18 ends in 40 steps */
    CHECK(waits == 18 && c.phase == HPT_PHASE_FULL, "%d waits logged, phase %s", waits, hpt_phase_name(c.phase));
    /* the wait lifts: the next Full end enters Predict at confidence 0 */
    run_quiet(&c, c.phase_len - c.steps_in_phase, 0.0f, "full after the wait");
    const char *why;
    CHECK(hpt_phase_next_wait(&c, 0.0f, NULL, NULL, &why) == HPT_PHASE_PREDICT, "no Predict once ready: %s", why);
    CHECK(has(why, "confidence 0.00 >= 0.00"), "why: %s", why);
    /* through Predict and Correct; a wait at Correct's end goes to Full */
    for (int i = 0; i < 20; i++) {
        hpt_phase_step_done(&c);
        if (c.phase == HPT_PHASE_CORRECT && c.steps_in_phase >= c.phase_len) break;
        hpt_phase_next_wait(&c, 0.0f, NULL, NULL, NULL);
    }
    CHECK(hpt_phase_next_wait(&c, 1.0f, wait, NULL, &why) == HPT_PHASE_FULL && has(why, "correct done; predict waits"),
          "Correct's end while waiting: %s, %s", hpt_phase_name(c.phase), why);
    collect(&c);
}

/* ---------------------------------------------------------------- consistency */

/* hpt_phase_wants_confidence is exact: when it says no, the confidence
 * cannot change what hpt_phase_next does; when it says yes, it does. */
static void test_wants_confidence(void) {
    hpt_phase_config cfg = small_cfg();
    hpt_phase_ctl c;
    hpt_phase_init(&c, &cfg);
    int yes = 0;
    for (int i = 0; i < 600; i++) {
        if (i % 37 == 5 && c.pred_open) hpt_phase_end_predict(&c, i % 2, "scripted");
        if (i % 53 == 7) hpt_phase_force_full(&c, i % 5, "scripted");
        int wants = hpt_phase_wants_confidence(&c);
        hpt_phase_ctl lo = c, hi = c;
        hpt_phase_next(&lo, 0.0f, NULL, NULL);
        hpt_phase_next(&hi, 1.0f, NULL, NULL);
        int differ = lo.phase != hi.phase || lo.phase_len != hi.phase_len || strcmp(lo.why, hi.why);
        CHECK(wants == differ, "step %d (%s): wants %d, differ %d", i, hpt_phase_name(c.phase), wants, differ);
        yes += wants;
        float conf = (i / 7) % 3 ? 0.9f : 0.2f;
        hpt_phase_next(&c, conf, NULL, NULL);
        hpt_phase_step_done(&c);
    }
    CHECK(yes > 20, "asked only %d times", yes);
    collect(&c);
}

/* Plain data: a byte copy taken mid-run continues exactly like the original. */
static void test_copy(void) {
    hpt_phase_config cfg = small_cfg();
    hpt_phase_ctl a, b;
    hpt_phase_init(&a, &cfg);
    hpt_phase_init(&b, &cfg);
    CHECK(!memcmp(&a, &b, sizeof a), "init is deterministic to the byte");
    for (int i = 0; i < 50; i++) { hpt_phase_next(&a, 0.7f + 0.01f * (i % 20), NULL, NULL); hpt_phase_step_done(&a); }
    unsigned char saved[sizeof a];
    memcpy(saved, &a, sizeof a);
    memcpy(&b, saved, sizeof b);
    for (int i = 0; i < 200; i++) {
        float conf = 0.5f + 0.025f * (i % 20);
        if (i == 77 && a.pred_open) { hpt_phase_end_predict(&a, 0, "x"); hpt_phase_end_predict(&b, 0, "x"); }
        hpt_phase pa = hpt_phase_next(&a, conf, NULL, NULL), pb = hpt_phase_next(&b, conf, NULL, NULL);
        CHECK(pa == pb, "step %d", i);
        hpt_phase_step_done(&a);
        hpt_phase_step_done(&b);
    }
    CHECK(!memcmp(&a, &b, sizeof a), "copies diverged");
}

/* ---------------------------------------------------------------- checkpoints */

/* hpt_phase_save into buf (cap bytes); returns the length written. */
static size_t save_bytes(const hpt_phase_ctl *c, unsigned char *buf, size_t cap) {
    hpt_writer w = test_writer();
    if (w.f) hpt_phase_save(c, &w);
    return test_writer_take(&w, buf, cap);
}

static hpt_status load_bytes(hpt_phase_ctl *c, const unsigned char *buf, size_t n) {
    return TEST_LOAD_ALL(hpt_phase_load, c, buf, n);
}

/* One step of a driver that keeps the API's preconditions, as hybrid.c
 * does: a verdict only on an open outcome, a charge only after a failure. */
static void driven_step(hpt_phase_ctl *c, int i) {
    float conf = (i / 7) % 3 ? 0.9f : 0.2f;
    hpt_phase p = hpt_phase_next(c, conf, NULL, NULL);
    hpt_phase_step_done(c);
    if (p == HPT_PHASE_PREDICT && c->pred_open && i % 3 != 1) {
        hpt_phase_end_predict(c, i % 2, "scripted");
        if (i % 2 == 0) hpt_phase_charge(c, 3.5);
    }
    if (i % 29 == 7) hpt_phase_force_full(c, i % 5, "scripted");
}

/* Saved at every step of a scripted run (pending events included), loaded
 * into a fresh controller: the two go on identically and save the same
 * bytes; and the load refuses every damaged field a transition relies on. */
static void test_checkpoint(void) {
    hpt_phase_config cfg = small_cfg();
    enum { CAP = 4096 };
    static unsigned char buf[CAP], buf2[CAP];
    CHECK(hpt_phase_state_bytes() < CAP, "state size %zu", hpt_phase_state_bytes());
    hpt_phase_ctl a;
    hpt_phase_init(&a, &cfg);
    int rounds_ok = 1;
    for (int i = 0; i < 300; i++) {
        size_t n = save_bytes(&a, buf, CAP);
        hpt_phase_ctl b;
        hpt_phase_init(&b, &cfg);
        if (n != hpt_phase_state_bytes() || load_bytes(&b, buf, n) != HPT_OK) {
            CHECK(0, "step %d: %zu bytes (want %zu), load: %s", i, n, hpt_phase_state_bytes(), hpt_errmsg());
            return;
        }
        hpt_phase_ctl a2 = a;
        for (int j = i; j < i + 40; j++) { driven_step(&a2, j); driven_step(&b, j); }
        size_t n1 = save_bytes(&a2, buf, CAP), n2 = save_bytes(&b, buf2, CAP);
        rounds_ok &= n1 == n2 && !memcmp(buf, buf2, n1) && a2.phase == b.phase && !strcmp(a2.why, b.why);
        driven_step(&a, i);
    }
    CHECK(rounds_ok, "a loaded controller went on differently from the one saved");
    CHECK(a.predict_started > 5 && a.predict_failed > 0 && a.forced_full > 0, "the script ran every event");

    /* damaged fields: refused with a reason, the target left as it was */
    size_t n = save_bytes(&a, buf, CAP);
    struct { int at; int32_t v; const char *what; } bad[] = {
        {0, 7, "phase out of range"}, {0, -1, "phase out of range"}, {4 * 2, 0, "phase length"},
        {4 * 4, 1000, "consecutive"}, {4 * 6, 2, "flag"}, {4 * 12, 3, "verdict"}, {4 * 13, 99, "last rule"},
        {4 * 13, -2, "last rule"}, {4 * 14, -5, "counter"}, {4 * 3, 2000000000, "counter"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(buf2, buf, n);
        memcpy(buf2 + bad[i].at, &bad[i].v, 4);
        hpt_phase_ctl b;
        hpt_phase_init(&b, &cfg);
        hpt_phase_ctl before = b;
        hpt_status st = load_bytes(&b, buf2, n);
        CHECK(st == HPT_ERR_FORMAT && strstr(hpt_errmsg(), bad[i].what) && !memcmp(&b, &before, sizeof b),
              "field at %d = %d: status %d, '%s' (want '%s')", bad[i].at, bad[i].v, st, hpt_errmsg(), bad[i].what);
    }
    hpt_phase_ctl b;
    hpt_phase_init(&b, &cfg);
    memcpy(buf2, buf, n);
    memset(buf2 + n - 200, 'x', 200);   /* ev_verdict_why without its NUL */
    CHECK(load_bytes(&b, buf2, n) == HPT_ERR_FORMAT && strstr(hpt_errmsg(), "unterminated"), "%s", hpt_errmsg());
    CHECK(load_bytes(&b, buf, n - 1) == HPT_ERR_FORMAT && strstr(hpt_errmsg(), "truncated"), "%s", hpt_errmsg());
    int32_t rows = 5;
    memcpy(buf2, buf, n);
    memcpy(buf2 + 4 * 26 + 16, &rows, 4);
    CHECK(load_bytes(&b, buf2, n) == HPT_ERR_FORMAT && strstr(hpt_errmsg(), "rules"), "%s", hpt_errmsg());

    /* random damage: whatever loads must run without tripping an assert
     * (an abort here fails the test program) */
    hpt_rng r;
    hpt_rng_seed(&r, 77);
    int loaded = 0;
    for (int t = 0; t < 3000; t++) {
        memcpy(buf2, buf, n);
        int flips = 1 + (int)hpt_rng_below(&r, 4);
        for (int f = 0; f < flips; f++) {
            size_t at = hpt_rng_below(&r, 4 * 26 + 16 + 4 + 4 * 18);   /* the numbers, not the reasons */
            if (hpt_rng_below(&r, 2)) buf2[at] ^= (unsigned char)(1u << hpt_rng_below(&r, 8));
            else buf2[at] = (unsigned char)hpt_rng_below(&r, 256);
        }
        hpt_phase_init(&b, &cfg);
        if (load_bytes(&b, buf2, n) != HPT_OK) continue;
        loaded++;
        for (int j = 0; j < 60; j++) driven_step(&b, j);
    }
    CHECK(loaded > 100, "only %d damaged states loaded", loaded);
}

/* Every row of the table fired in the scenarios above. */
static void test_table_covered(void) {
    int n;
    const hpt_phase_rule *r = hpt_phase_rules(&n);
    CHECK(n > 0 && n <= HPT_PHASE_MAX_RULES, "%d rules", n);
    for (int i = 0; i < n; i++) {
        CHECK(g_hits[i] > 0, "rule %d (%s -> %s: %s) never fired", i, hpt_phase_name(r[i].from),
              hpt_phase_name(r[i].to), r[i].when);
        CHECK(r[i].when && *r[i].when, "rule %d undocumented", i);
        /* Predict is entered only from Full or Correct; Warmup never again */
        CHECK(r[i].to != HPT_PHASE_WARMUP || r[i].from == HPT_PHASE_WARMUP, "rule %d re-enters warmup", i);
        CHECK(r[i].to != HPT_PHASE_CORRECT || r[i].from != HPT_PHASE_FULL, "rule %d: full -> correct", i);
    }
    for (int i = n; i < HPT_PHASE_MAX_RULES; i++) CHECK(g_hits[i] == 0, "hits past the table");
}

/* The early stop of a Predict phase, rule by rule, at its boundaries. */
static void test_predict_stop(void) {
    const float nan = NAN;
    /* on track: fell by more than half of 4 real steps (4 x 0.01), inside the forecast */
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.97f, 4, 0.01f, -0.02f, 0.01f) == HPT_STOP_NONE, "on track stops");
    /* rose, or stayed level, or NaN */
    CHECK(hpt_phase_predict_stop(2.0f, 1.95f, 1.96f, 8, 0.01f, nan, nan) == HPT_STOP_ROSE, "a rise goes on");
    CHECK(hpt_phase_predict_stop(2.0f, 1.95f, 1.95f, 8, 0.01f, nan, nan) == HPT_STOP_ROSE, "level goes on");
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, nan, 4, nan, nan, nan) == HPT_STOP_ROSE, "NaN goes on");
    /* fell, but by less than half of what 4 real steps buy (0.019 < 0.02) */
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.981f, 4, 0.01f, nan, nan) == HPT_STOP_BEHIND, "behind goes on");
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.979f, 4, 0.01f, nan, nan) == HPT_STOP_NONE, "just ahead stops");
    /* unknown progress: only the forecast can stop a falling loss */
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.999f, 4, nan, nan, nan) == HPT_STOP_NONE, "no evidence stops");
    /* above the interval: forecast -0.10 in log loss with std 0.02, so the
     * bound is log 2 - 0.06; 1.9 (log drop 0.051) is above it, 1.87 inside */
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.90f, 4, nan, -0.10f, 0.02f) == HPT_STOP_FORECAST, "above the forecast");
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.87f, 4, nan, -0.10f, 0.02f) == HPT_STOP_NONE, "inside the forecast");
    /* far below the interval is a better jump, not a reason to stop */
    CHECK(hpt_phase_predict_stop(2.0f, 2.0f, 1.50f, 4, nan, -0.10f, 0.02f) == HPT_STOP_NONE, "below the forecast");
    /* the rules are checked in order: a rise wins over the others */
    CHECK(hpt_phase_predict_stop(2.0f, 1.9f, 1.95f, 4, 0.01f, -0.10f, 0.02f) == HPT_STOP_ROSE, "order");
    CHECK(!strcmp(hpt_predict_stop_name(HPT_STOP_FORECAST), "above the forecast interval"), "name");
}

int main(void) {
    test_config();
    test_predict_stop();
    test_cycle();
    test_horizon();
    test_events();
    test_cap();
    test_backoff();
    test_useless_predictor();
    test_budget();
    test_disabled();
    test_wait();
    test_wants_confidence();
    test_copy();
    test_checkpoint();
    test_table_covered();
    return TEST_REPORT("test_phase");
}
