/*
 * snapshot.h — the one preallocated copy of the training state that a
 * rollback returns to: parameters and both AdamW moments, taken before each
 * Predict phase. It is the only copy of the parameter arena hpt ever makes.
 */
#ifndef HPT_SNAPSHOT_H
#define HPT_SNAPSHOT_H

#include "../base/base.h"

typedef struct hpt_snapshot {
    size_t n;                 /* floats per array */
    float *arena;             /* (3, n): params, m, v */
    int valid;                /* holds a state that may be restored */
    int step;                 /* the trainer's step counter when taken */
    int updates;              /* its AdamW update count (-1: unknown, restored from an older checkpoint) */
} hpt_snapshot;

hpt_status hpt_snapshot_init(hpt_snapshot *s, size_t n);
void hpt_snapshot_free(hpt_snapshot *s);
void hpt_snapshot_take(hpt_snapshot *s, const float *params, const float *m, const float *v, int step, int updates);
/* Byte-for-byte restore of the parameters; the snapshot stays valid. The
 * moments go back through their owner (hpt_trainer_set_moments) from the
 * views below. */
void hpt_snapshot_restore_params(const hpt_snapshot *s, float *params);
static inline const float *hpt_snapshot_params(const hpt_snapshot *s) { return s->arena; }
static inline const float *hpt_snapshot_moment1(const hpt_snapshot *s) { return s->arena + s->n; }
static inline const float *hpt_snapshot_moment2(const hpt_snapshot *s) { return s->arena + 2 * s->n; }

#endif /* HPT_SNAPSHOT_H */
