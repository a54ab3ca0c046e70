/*
 * pred_common.h — what the phased controller's four predictors share (coast,
 * stale-adam, linear, shrink; predict.h has the table and their struct):
 * the ring of parameter snapshots, the slope step and the AdamW-direction
 * step. Defined in pred_common.c.
 */
#ifndef HPT_PRED_COMMON_H
#define HPT_PRED_COMMON_H

#include "../predict.h"

/* The ring's observe: a snapshot every ring_s updates. */
void hpt_pred_ring_observe(hpt_predictor *p, const float *params, int updates);
/* The ring's snapshots, oldest first (ring_count of them). */
void hpt_pred_ring_oldest_first(const hpt_predictor *p, const float *snap[HPT_PRED_MAX_RING]);
/* params += scale * tensor_scale * gate * slope per tensor (gate NULL: 1). */
void hpt_pred_apply_slope(hpt_predictor *p, float *params, float scale, const float *gate);
/* The AdamW step from the stored moments, its momentum scaled by decay_m,
 * per tensor by tensor_scale * gate (gate NULL: 1). */
void hpt_pred_apply_adamw(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                          const hpt_adamw *o, int t, float lr, float scale, float decay_m, const float *gate);

#endif /* HPT_PRED_COMMON_H */
