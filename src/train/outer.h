/*
 * outer.h — the outer Nesterov step with its state: DiLoCo's outer
 * optimizer (Douillard et al. 2023, arXiv 2311.08105; Charles et al. 2025,
 * arXiv 2503.09799), of the Lookahead family (Zhang et al. 2019). One
 * module for its two users:
 *   - local-step training (--sync-interval, trainer.c): after every H-th
 *     step, this process's displacement since the anchor, or the ranks'
 *     mean of theirs (the trainer all-reduces it and passes it in);
 *   - the hybrid's outer path (--predictor outer, src/hybrid/hybrid.c):
 *     every H real steps a jump, which the hybrid then guards (snapshot,
 *     check over the next real losses, rollback, scale back-off).
 * With the displacement D = theta - anchor, in place:
 *     u      <- mu * u + D
 *     theta' =  anchor + eta * (D + mu * u)
 * computed as theta' = theta + s * ((eta - 1) * D + eta * mu * u), which is
 * the same for s = 1 and leaves theta bit for bit where the inner steps put
 * it when eta = 1 and mu = 0. s is the caller's scale (1 for local-step
 * training; the hybrid's back-off, times lr(t) / the peak lr with
 * --outer-follow-lr). theta' is the next interval's anchor.
 *
 * Two variants, the hybrid's (one process):
 *   - adapt (--outer-adapt agree) gates each tensor's departure by
 *     g = max(0, cos(D, u_before)), the agreement between this interval's
 *     displacement and the momentum of the intervals before: a tensor
 *     still moving the way it has been moving is extrapolated, one that
 *     turned is left where its real steps put it. The first step after a
 *     reset has u = 0, so g = 0 there: it only fills the momentum.
 *   - under --optimizer schedule-free (sf_x set) the displacement is the
 *     average x's and the departure moves x, z and y alike
 *     (hpt_sf_outer_step, docs/hybrid.md says why); the gate is x's.
 *
 * State: one arena of 2n floats on the model's device, the anchor then u.
 * Checkpoints store it as that arena (the hybrid's HYBR "predictor arena")
 * or as u alone at a sync, where the weights are the anchor (local-step
 * mode's LSTP block, checkpoint.c).
 */
#ifndef HPT_OUTER_H
#define HPT_OUTER_H

#include "../model/model.h"

typedef struct hpt_outer {
    const hpt_model *m;          /* its device and tensor table */
    size_t n;                    /* parameters */
    float *arena;                /* 2n floats on the model's device: anchor, then u; NULL when off */
    float *anchor, *u;
    float lr, momentum;          /* eta, mu */
    int adapt;                   /* 1: the per-tensor agreement gate */
    float *sf_z, *sf_x;          /* schedule-free's z and x (the trainer's), or NULL */
} hpt_outer;

/* The arena on m's device, rate lr and momentum mu; the anchor is set by
 * hpt_outer_reset. HPT_ERR_NOMEM when the device has no room. */
hpt_status hpt_outer_init(hpt_outer *o, const hpt_model *m, float lr, float momentum);
void hpt_outer_free(hpt_outer *o);
size_t hpt_outer_bytes(const hpt_outer *o);

/* A new interval: anchor = params (schedule-free's x when sf_x is set),
 * momentum 0. */
void hpt_outer_reset(hpt_outer *o, const float *params);

/* The step on params at scale s, in place; the result is the new anchor.
 * d NULL: the displacement is this process's own, params - anchor, on the
 * model's device. d set: the ranks' mean displacement (host memory: ranks
 * > 1 run on a row whose memory is the host's), the plain step only, so
 * that every rank leaves it with equal parameters. gate, with adapt: each
 * tensor's agreement gate is written there (HPT_MAX_TENSORS floats). */
void hpt_outer_apply(hpt_outer *o, float *params, const float *d, float s, float *gate);

#endif /* HPT_OUTER_H */
