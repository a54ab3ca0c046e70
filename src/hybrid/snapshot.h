/*
 * snapshot.h — the hybrid's one preallocated copy of the training state
 * that a rollback returns to: parameters and both AdamW moments, taken
 * before each jump (the outer step's, or a phased Predict phase), and under
 * schedule-free AdamW its base sequence z, its average x and rate sums too
 * (the parameters are its gradient point y, the second moment its v). Other
 * parts keep their own copies of the parameters (the outer step's anchor,
 * an EMA, the phased predictors' rings); this one is the rollback's.
 */
#ifndef HPT_SNAPSHOT_H
#define HPT_SNAPSHOT_H

#include "../base/base.h"
#include "../device/device.h"
#include "../train/optim.h"

typedef struct hpt_snapshot {
    size_t n;                 /* floats per array */
    const hpt_device *dev;    /* the model's: the arena is its memory */
    float *arena;             /* (3, n): params, m, v; (5, n) with schedule-free's z, x after them */
    int sf;                   /* 1: holds schedule-free's z, x and sums */
    hpt_sf_state sf_sums;     /* its rate sums when taken */
    int valid;                /* holds a state that may be restored */
    int step;                 /* the trainer's step counter when taken */
    int updates;              /* its AdamW update count (-1: unknown, restored from an older checkpoint) */
} hpt_snapshot;

/* sf 1: room for schedule-free's z and x too; the arena in dev's memory
 * (the model's: every array copied in and out is its memory too) */
hpt_status hpt_snapshot_init(hpt_snapshot *s, size_t n, int sf, const hpt_device *dev);
void hpt_snapshot_free(hpt_snapshot *s);
void hpt_snapshot_take(hpt_snapshot *s, const float *params, const float *m, const float *v, int step, int updates);
/* After hpt_snapshot_take, in a snapshot made with sf: z, x and the sums. */
void hpt_snapshot_take_sf(hpt_snapshot *s, const float *z, const float *x, hpt_sf_state sums);
/* The arena's floats: 3 n, or 5 n with schedule-free's. */
static inline size_t hpt_snapshot_floats(const hpt_snapshot *s) { return (size_t)(s->sf ? 5 : 3) * s->n; }
/* Byte-for-byte restore of the parameters; the snapshot stays valid. The
 * moments go back through their owner (hpt_trainer_set_moments) from the
 * views below. */
void hpt_snapshot_restore_params(const hpt_snapshot *s, float *params);
static inline const float *hpt_snapshot_params(const hpt_snapshot *s) { return s->arena; }
static inline const float *hpt_snapshot_moment1(const hpt_snapshot *s) { return s->arena + s->n; }
static inline const float *hpt_snapshot_moment2(const hpt_snapshot *s) { return s->arena + 2 * s->n; }
static inline const float *hpt_snapshot_sf_z(const hpt_snapshot *s) { return s->arena + 3 * s->n; }
static inline const float *hpt_snapshot_sf_x(const hpt_snapshot *s) { return s->arena + 4 * s->n; }

#endif /* HPT_SNAPSHOT_H */
