/*
 * snapshot.c — see snapshot.h. Copies, not arithmetic (the device's copy:
 * memcpy on the CPU): a restore must give back the very bits, NaN payloads
 * and signed zeros included.
 */
#include "snapshot.h"

#include <string.h>

hpt_status hpt_snapshot_init(hpt_snapshot *s, size_t n, int sf, const hpt_device *dev) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->sf = sf != 0;
    s->dev = dev;
    s->arena = dev->alloc(dev, hpt_snapshot_floats(s));
    return s->arena ? HPT_OK : HPT_ERR_NOMEM;
}

void hpt_snapshot_free(hpt_snapshot *s) {
    if (s->arena) s->dev->free(s->dev, s->arena);
    s->arena = NULL;
    s->valid = 0;
}

void hpt_snapshot_take(hpt_snapshot *s, const float *params, const float *m, const float *v, int step, int updates) {
    s->dev->copy(s->arena, params, s->n);
    s->dev->copy(s->arena + s->n, m, s->n);
    s->dev->copy(s->arena + 2 * s->n, v, s->n);
    s->valid = 1;
    s->step = step;
    s->updates = updates;
}

void hpt_snapshot_take_sf(hpt_snapshot *s, const float *z, const float *x, hpt_sf_state sums) {
    HPT_ASSERT(s->sf && s->valid);
    s->dev->copy(s->arena + 3 * s->n, z, s->n);
    s->dev->copy(s->arena + 4 * s->n, x, s->n);
    s->sf_sums = sums;
}

void hpt_snapshot_restore_params(const hpt_snapshot *s, float *params) {
    HPT_ASSERT(s->valid);
    s->dev->copy(params, s->arena, s->n);
}
