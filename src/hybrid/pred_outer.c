/*
 * pred_outer.c — the outer predictor's row: --predictor outer, the
 * default. It holds no arithmetic and no state of its own: its step is the
 * trainer layer's outer Nesterov step (src/train/outer.h, the one local-step
 * training takes), which the hybrid's outer path applies every H real steps
 * and guards (hybrid.c: snapshot, the check over the next real losses,
 * rollback, scale back-off). The row gives the name its index in
 * checkpoints (HYBR) and the flag that sends the driver down that path.
 */
#include "predict.h"

const hpt_pred_ops hpt_pred_outer = {
    .name = "outer", .outer = 1,
};
