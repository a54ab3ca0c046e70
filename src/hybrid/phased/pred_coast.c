/*
 * pred_coast.c — hpt's own predictor: the AdamW step with the momentum left
 * to decay (m <- beta1 m per predicted step, no new gradient), scaled per
 * tensor by a gate on the tensor's gradient signal-to-noise |m^|/sqrt(v^):
 * tensors whose recent gradients agree move, noisy ones stay. The total
 * displacement over a phase is bounded (geometric), not linear in the horizon.
 */
#include "pred_common.h"

#include <math.h>

static hpt_status coast_init(hpt_predictor *p) {
    p->snr_lo = 0.2f;
    p->snr_hi = 0.5f;
    return HPT_OK;
}

/* Gate per tensor on the mean gradient signal-to-noise |m^| / sqrt(v^): 1
 * when every recent gradient points the same way; for zero-mean noise m has
 * variance (1 - beta1) / (1 + beta1) of v's, so the mean is about
 * 0.8 * sqrt(0.1 / 1.9) = 0.18 at beta1 = 0.9. Tensors near the noise level
 * are not extrapolated. */
static void coast_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t) {
    const hpt_adamw_bc bc = hpt_adamw_bias(o->beta1, o->beta2, t);
    for (int i = 0; i < p->m->ntensors; i++) {
        const hpt_tensor_info *ti = &p->m->tensors[i];
        double s = 0.0;
        for (size_t k = ti->offset; k < ti->offset + ti->numel; k++)
            s += fabs(mom1[k] / bc.bc1) / (sqrt(mom2[k] / bc.bc2) + o->eps);
        float snr = (float)(s / (double)ti->numel);
        float g = (snr - p->snr_lo) / (p->snr_hi - p->snr_lo);
        p->tensor_gate[i] = g < 0.0f ? 0.0f : g > 1.0f ? 1.0f : g;
    }
}

static void coast_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                        const hpt_adamw *o, int t, float lr, int k, float scale) {
    hpt_pred_apply_adamw(p, params, mom1, mom2, o, t, lr, scale, powf(o->beta1, (float)k), p->tensor_gate);
}

const hpt_pred_ops hpt_pred_coast = {
    .name = "coast", .init = coast_init, .begin = coast_begin, .apply = coast_apply,
};
