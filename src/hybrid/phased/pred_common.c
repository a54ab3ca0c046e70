/*
 * pred_common.c — what the phased controller's predictors share: the ring
 * of parameter snapshots, the slope step and the AdamW-direction step. See
 * pred_common.h.
 */
#include "pred_common.h"

#include <math.h>
#include <string.h>

void hpt_pred_ring_observe(hpt_predictor *p, const float *params, int updates) {
    if (updates % p->ring_s) return;
    memcpy(p->ring + (size_t)p->ring_head * p->n, params, p->n * sizeof(float));
    p->ring_head = (p->ring_head + 1) % p->ring_c;
    if (p->ring_count < p->ring_c) p->ring_count++;
}

void hpt_pred_ring_oldest_first(const hpt_predictor *p, const float *snap[HPT_PRED_MAX_RING]) {
    for (int j = 0; j < p->ring_count; j++) snap[j] = p->ring + (size_t)((p->ring_head + j) % p->ring_c) * p->n;
}

void hpt_pred_apply_slope(hpt_predictor *p, float *params, float scale, const float *gate) {
    for (int ti = 0; ti < p->m->ntensors; ti++) {
        const hpt_tensor_info *tt = &p->m->tensors[ti];
        float s = scale * p->tensor_scale[ti] * (gate ? gate[ti] : 1.0f);
        if (s == 0.0f) continue;
        float *pp = params + tt->offset;
        const float *sl = p->slope + tt->offset;
        #pragma omp parallel for simd
        for (size_t i = 0; i < tt->numel; i++) pp[i] += s * sl[i];
    }
}

void hpt_pred_apply_adamw(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                          const hpt_adamw *o, int t, float lr, float scale, float decay_m, const float *gate) {
    const hpt_adamw_bc bc = hpt_adamw_bias(o->beta1, o->beta2, t);
    const float bc2_sqrt = sqrtf(bc.bc2);
    for (int ti = 0; ti < p->m->ntensors; ti++) {
        const hpt_tensor_info *tt = &p->m->tensors[ti];
        float g = (gate ? gate[ti] : 1.0f) * p->tensor_scale[ti];
        if (g == 0.0f) continue;
        float step = scale * g * lr * decay_m / bc.bc1;
        float wd = tt->decay ? scale * g * lr * o->weight_decay : 0.0f;
        float *pp = params + tt->offset;
        const float *m1 = mom1 + tt->offset, *m2 = mom2 + tt->offset;
        #pragma omp parallel for simd
        for (size_t i = 0; i < tt->numel; i++)
            pp[i] -= wd * pp[i] + step * m1[i] / (sqrtf(m2[i]) / bc2_sqrt + o->eps);
    }
}
