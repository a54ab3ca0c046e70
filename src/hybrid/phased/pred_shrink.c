/*
 * pred_shrink.c — the per-parameter least-squares line through the last c
 * snapshots (one every s real steps: 6 snapshots 20 steps apart, a longer
 * window than linear's, so that drift can stand out of the step-to-step
 * noise it is meant to filter), each parameter's slope shrunk by its own
 * significance, max(0, 1 - 4 / t^2) with t its t statistic against the
 * fit's residuals, so that parameters that only jitter stay put; and each
 * tensor gated by how straight its path was (the squared net displacement
 * over (c-1) x the summed squared hops: 1 for a drift, 1/(c-1) for a random
 * walk, ~1/(c-1)^2 for noise around a fixed point).
 */
#include "pred_common.h"

#include <math.h>

/* A random walk's straightness is 1/(c-1): the gate opens above twice that. */
static hpt_status shrink_init(hpt_predictor *p) {
    p->straight_lo = p->ring_c > 1 ? 2.0f / (float)(p->ring_c - 1) : 1.0f;
    p->straight_hi = 0.5f * (1.0f + p->straight_lo);
    return HPT_OK;
}

/* The per-step slope of one tensor's parameters, each shrunk by its own
 * significance, and the tensor's straightness gate. One pass: per parameter
 * a least-squares line over the c snapshots (oldest first), its residual
 * variance, and the positive-part shrinkage max(0, 1 - tau / t^2) of the
 * slope by its t statistic; per tensor the summed squared hops and the
 * squared net displacement. */
static float shrink_tensor(hpt_predictor *p, const float *const *snap, size_t off, size_t numel) {
    const int c = p->ring_count;
    const float tau = 4.0f;  /* t = 2: a slope twice its standard error keeps 3/4 of itself */
    float x[HPT_PRED_MAX_RING], sxx = 0.0f;
    for (int j = 0; j < c; j++) { x[j] = (float)j - 0.5f * (float)(c - 1); sxx += x[j] * x[j]; }
    const float inv_s = 1.0f / (float)p->ring_s;
    double hops = 0.0, net = 0.0;
    #pragma omp parallel for reduction(+:hops, net)
    for (size_t k = off; k < off + numel; k++) {
        float mu = 0.0f, sxy = 0.0f;
        for (int j = 0; j < c; j++) { mu += snap[j][k]; sxy += x[j] * snap[j][k]; }
        mu /= (float)c;
        float b = sxy / sxx, rss = 0.0f;
        for (int j = 0; j < c; j++) {
            float r = snap[j][k] - mu - b * x[j];
            rss += r * r;
            if (j) { float h = snap[j][k] - snap[j - 1][k]; hops += (double)h * h; }
        }
        float d = snap[c - 1][k] - snap[0][k];
        net += (double)d * d;
        /* t^2 = b^2 sxx (c - 2) / rss; an exact line (rss 0) keeps its slope */
        float t2 = rss > 0.0f ? b * b * sxx * (float)(c - 2) / rss : INFINITY;
        float f = t2 > tau ? 1.0f - tau / t2 : 0.0f;
        p->slope[k] = f * b * inv_s;
    }
    double straight = hops > 0.0 ? net / ((c - 1) * hops) : 0.0;
    float w = (float)((straight - p->straight_lo) / (p->straight_hi - p->straight_lo));
    return w < 0.0f ? 0.0f : w > 1.0f ? 1.0f : w;
}

static void shrink_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t) {
    const float *snap[HPT_PRED_MAX_RING];
    hpt_pred_ring_oldest_first(p, snap);
    for (int i = 0; i < p->m->ntensors; i++)
        p->tensor_gate[i] = shrink_tensor(p, snap, p->m->tensors[i].offset, p->m->tensors[i].numel);
}

static void shrink_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                         const hpt_adamw *o, int t, float lr, int k, float scale) {
    hpt_pred_apply_slope(p, params, scale, p->tensor_gate);
}

/* min_history is the whole window: the fit and the straightness are of 6
 * snapshots (below 3 the t statistic has no residual to stand on; with none,
 * shrink_tensor would read before the ring) */
const hpt_pred_ops hpt_pred_shrink = {
    .name = "shrink", .ring_c = 6, .ring_s = 20, .min_history = 6, .init = shrink_init,
    .observe = hpt_pred_ring_observe, .begin = shrink_begin, .apply = shrink_apply,
};
