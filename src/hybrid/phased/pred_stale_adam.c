/*
 * pred_stale_adam.c — a control: the last AdamW update re-applied unchanged
 * every predicted step (the probe's "stale AdamW"), from the stored moments.
 */
#include "pred_common.h"

static void stale_adam_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                             const hpt_adamw *o, int t, float lr, int k, float scale) {
    hpt_pred_apply_adamw(p, params, mom1, mom2, o, t, lr, scale, 1.0f, NULL);
}

const hpt_pred_ops hpt_pred_stale_adam = {.name = "stale-adam", .apply = stale_adam_apply};
