/*
 * pred_outer.c — the outer-momentum step: DiLoCo's outer optimizer with a
 * single replica (Douillard et al. 2023; Charles et al. 2025, arXiv
 * 2503.09799), of the Lookahead family (Zhang et al. 2019). Every H real
 * steps the displacement since the anchor, D = theta - anchor, is a
 * pseudo-gradient and gets an outer Nesterov step, in place:
 *     u      <- mu * u + D
 *     theta' =  anchor + eta * (D + mu * u)
 * computed as theta' = theta + s * ((eta - 1) * D + eta * mu * u), which is
 * the same for s = 1 and leaves theta bit for bit where the real steps put
 * it when eta = 1 and mu = 0 (the departure is exactly 0). s is the
 * driver's scale (apply's `scale`): the backoff after rollbacks times, with
 * --outer-follow-lr, lr(t) / the peak lr. The new interval's anchor is
 * theta'. No backward pass, no probe: the driver checks the jump against the
 * next real steps' training losses (hybrid.c, outer_check).
 *
 * --outer-adapt agree gates each tensor's departure by g = max(0, cos(D,
 * u_before)), the agreement between this interval's displacement and the
 * momentum of the intervals before: a tensor still moving the way it has
 * been moving is extrapolated, one that turned (or is oscillating) is left
 * where its real steps put it. The first jump after a reset has u = 0, so
 * g = 0 there: it only fills the momentum.
 *
 * Under --optimizer schedule-free (p->sf_x set) the displacement is the
 * average x's and the departure moves x, z and y alike
 * (hpt_sf_outer_step, through the device table; docs/hybrid.md says why);
 * the gate, when asked for, is x's.
 */
#include "predict.h"

#include <math.h>
#include <string.h>

static hpt_status outer_init(hpt_predictor *p) {
    p->arena = p->m->dev->alloc(p->m->dev, 2 * p->n);   /* the model's device: anchor and u sit beside its weights */
    if (!p->arena) return HPT_ERR_NOMEM;
    p->arena_bytes = 2 * p->n * sizeof(float);
    p->anchor = p->arena;
    p->outer_u = p->arena + p->n;
    p->outer_lr = 1.0f;
    return HPT_OK;
}

/* cos(D, u) of one tensor, clipped to [0, 1], in double and serially so the
 * gate has the same bits for any thread count (resume must be bit-exact). */
static float agreement(const float *th, const float *an, const float *u, size_t n) {
    double du = 0.0, dd = 0.0, uu = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)th[i] - an[i];
        du += d * u[i];
        dd += d * d;
        uu += (double)u[i] * u[i];
    }
    if (!(dd > 0.0 && uu > 0.0)) return 0.0f;
    double c = du / sqrt(dd * uu);
    return c > 1.0 ? 1.0f : c > 0.0 ? (float)c : 0.0f;
}

/* The jump under schedule-free on the values from k, n of them, at a, b. */
static void sf_jump(hpt_predictor *p, float *y, size_t k, size_t n, float a, float b) {
    p->m->dev->sf_outer_step(p->sf_x + k, p->sf_z + k, y + k, p->anchor + k, p->outer_u + k, n, p->outer_mom, a, b);
}

/* The jump with --outer-adapt agree: tensor by tensor, each at its gate. */
static void outer_apply_agree(hpt_predictor *p, float *params, float a, float b) {
    const float mu = p->outer_mom;
    for (int ti = 0; ti < p->m->ntensors; ti++) {
        const hpt_tensor_info *t = &p->m->tensors[ti];
        if (p->sf_x) {   /* x's displacement and gate; the kernel moves x, z and y */
            const float g = agreement(p->sf_x + t->offset, p->anchor + t->offset, p->outer_u + t->offset, t->numel);
            p->tensor_gate[ti] = g;
            sf_jump(p, params, t->offset, t->numel, g * a, g * b);
            continue;
        }
        float *th = params + t->offset, *an = p->anchor + t->offset, *u = p->outer_u + t->offset;
        const size_t n = t->numel;
        const float g = agreement(th, an, u, n), at = g * a, bt = g * b;
        p->tensor_gate[ti] = g;
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) {
            float d = th[i] - an[i];
            u[i] = mu * u[i] + d;
            if (g > 0.0f) th[i] += at * d + bt * u[i];
            an[i] = th[i];
        }
    }
}

/* The jump (k is always 1: one jump per Predict phase). */
static void outer_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                        const hpt_adamw *o, int t, float lr, int k, float scale) {
    const float mu = p->outer_mom, a = scale * (p->outer_lr - 1.0f), b = scale * p->outer_lr * mu;
    if (p->outer_adapt) {
        outer_apply_agree(p, params, a, b);
        return;
    }
    if (p->sf_x) {
        sf_jump(p, params, 0, p->n, a, b);
        return;
    }
    /* the plain step: the kernel local-step training shares, on the model's device */
    p->m->dev->outer_step(params, p->anchor, p->outer_u, NULL, p->n, mu, a, b);
}

void hpt_pred_outer_reset(hpt_predictor *p, const float *params) {
    if (!p->ops->outer) return;
    p->m->dev->copy(p->anchor, p->sf_x ? p->sf_x : params, p->n);
    p->m->dev->fill(p->outer_u, 0.0f, p->n);
}

const hpt_pred_ops hpt_pred_outer = {
    .name = "outer", .outer = 1, .init = outer_init, .apply = outer_apply,
};
