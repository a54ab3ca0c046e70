/*
 * phase_kind.h — the kinds of step a hybrid run reports (metrics.jsonl's
 * "phase", phases.jsonl, summary.json's per-phase counts). The phased
 * controller (phased/phase.h) decides between warmup, full, predict and
 * correct step by step. The outer path has warmup, full, jump (the outer
 * step) and check (a real step while a jump is under check): its jump and
 * check count in predict's and correct's slots (the per-phase counters and
 * times, whose order checkpoints store) and are named as what they are in
 * its logs (hpt_outer_phase_name).
 */
#ifndef HPT_PHASE_KIND_H
#define HPT_PHASE_KIND_H

typedef enum hpt_phase {
    HPT_PHASE_WARMUP,
    HPT_PHASE_FULL,
    HPT_PHASE_PREDICT,
    HPT_PHASE_CORRECT,
    HPT_PHASE_COUNT
} hpt_phase;

/* "warmup", "full", "predict", "correct" ("?" out of range). */
static inline const char *hpt_phase_name(hpt_phase p) {
    static const char *names[HPT_PHASE_COUNT] = {"warmup", "full", "predict", "correct"};
    return p >= 0 && p < HPT_PHASE_COUNT ? names[p] : "?";
}

/* The outer path's kinds: the slots it shares with the phased design. */
#define HPT_PHASE_JUMP HPT_PHASE_PREDICT
#define HPT_PHASE_CHECK HPT_PHASE_CORRECT

/* "warmup", "full", "jump", "check" ("?" out of range). */
static inline const char *hpt_outer_phase_name(hpt_phase p) {
    static const char *names[HPT_PHASE_COUNT] = {"warmup", "full", "jump", "check"};
    return p >= 0 && p < HPT_PHASE_COUNT ? names[p] : "?";
}

#endif /* HPT_PHASE_KIND_H */
