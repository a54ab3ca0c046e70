/*
 * pred_linear.c — a control: a per-parameter least-squares line through the
 * last c parameter snapshots (one every s real steps), extrapolated. The
 * probe's control; 4 snapshots 5 steps apart.
 */
#include "pred_common.h"

/* The least-squares slope per parameter over the ring, oldest to newest, x
 * in units of real steps. */
static void linear_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t) {
    int c = p->ring_count;
    double xm = (c - 1) / 2.0, sxx = 0.0;
    for (int j = 0; j < c; j++) sxx += (j - xm) * (j - xm);
    const float *snap[HPT_PRED_MAX_RING];
    hpt_pred_ring_oldest_first(p, snap);
    float inv = (float)(1.0 / (sxx * p->ring_s));
    #pragma omp parallel for
    for (size_t k = 0; k < p->n; k++) {
        float sxy = 0.0f;
        for (int j = 0; j < c; j++) sxy += (float)(j - xm) * snap[j][k];
        p->slope[k] = sxy * inv;
    }
}

static void linear_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                         const hpt_adamw *o, int t, float lr, int k, float scale) {
    hpt_pred_apply_slope(p, params, scale, NULL);
}

/* min_history is the whole window: a line through fewer snapshots is
 * another control (and through one, sxx = 0, its slope is NaN) */
const hpt_pred_ops hpt_pred_linear = {
    .name = "linear", .ring_c = 4, .ring_s = 5, .min_history = 4, .observe = hpt_pred_ring_observe,
    .begin = linear_begin, .apply = linear_apply,
};
