/*
 * snapshot.c — see snapshot.h. memcpy, not arithmetic: a restore must give
 * back the very bits, NaN payloads and signed zeros included.
 */
#include "snapshot.h"

#include <string.h>

hpt_status hpt_snapshot_init(hpt_snapshot *s, size_t n, int sf) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->sf = sf != 0;
    s->arena = hpt_arena_alloc(hpt_snapshot_floats(s));
    return s->arena ? HPT_OK : HPT_ERR_NOMEM;
}

void hpt_snapshot_free(hpt_snapshot *s) {
    hpt_arena_free(s->arena);
    s->arena = NULL;
    s->valid = 0;
}

void hpt_snapshot_take(hpt_snapshot *s, const float *params, const float *m, const float *v, int step, int updates) {
    memcpy(s->arena, params, s->n * sizeof(float));
    memcpy(s->arena + s->n, m, s->n * sizeof(float));
    memcpy(s->arena + 2 * s->n, v, s->n * sizeof(float));
    s->valid = 1;
    s->step = step;
    s->updates = updates;
}

void hpt_snapshot_take_sf(hpt_snapshot *s, const float *z, const float *x, hpt_sf_state sums) {
    HPT_ASSERT(s->sf && s->valid);
    memcpy(s->arena + 3 * s->n, z, s->n * sizeof(float));
    memcpy(s->arena + 4 * s->n, x, s->n * sizeof(float));
    s->sf_sums = sums;
}

void hpt_snapshot_restore_params(const hpt_snapshot *s, float *params) {
    HPT_ASSERT(s->valid);
    memcpy(params, s->arena, s->n * sizeof(float));
}
