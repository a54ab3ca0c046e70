/*
 * phase_kind.h — the kinds of step a hybrid run reports (metrics.jsonl's
 * "phase", phases.jsonl, summary.json's per-phase counts). The outer path
 * uses four of them: warmup, full, correct (a real step while a jump is
 * under check) and predict (a jump). The phased controller
 * (phased/phase.h) decides between them step by step.
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

#endif /* HPT_PHASE_KIND_H */
