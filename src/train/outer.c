/*
 * outer.c — the outer Nesterov step with its anchor and momentum (outer.h
 * has the arithmetic and its two users). The element-wise kernels are the
 * device table's (outer_step, sf_outer_step) and optim.c's host twin for
 * the ranks' mean.
 */
#include "outer.h"

#include "optim.h"

#include <math.h>
#include <string.h>

hpt_status hpt_outer_init(hpt_outer *o, const hpt_model *m, float lr, float momentum) {
    memset(o, 0, sizeof *o);
    o->m = m;
    o->n = m->nparams;
    o->lr = lr;
    o->momentum = momentum;
    o->arena = m->dev->alloc(m->dev, 2 * o->n);   /* beside the model's weights, on its device */
    if (!o->arena) return HPT_ERR_NOMEM;
    o->anchor = o->arena;
    o->u = o->arena + o->n;
    return HPT_OK;
}

void hpt_outer_free(hpt_outer *o) {
    if (o->arena) o->m->dev->free(o->m->dev, o->arena);
    o->arena = o->anchor = o->u = NULL;
}

size_t hpt_outer_bytes(const hpt_outer *o) { return o->arena ? 2 * o->n * sizeof(float) : 0; }

void hpt_outer_reset(hpt_outer *o, const float *params) {
    o->m->dev->copy(o->anchor, o->sf_x ? o->sf_x : params, o->n);
    o->m->dev->fill(o->u, 0.0f, o->n);
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

/* The step under schedule-free on the values from k, n of them, at a, b. */
static void sf_step(hpt_outer *o, float *y, size_t k, size_t n, float a, float b) {
    o->m->dev->sf_outer_step(o->sf_x + k, o->sf_z + k, y + k, o->anchor + k, o->u + k, n, o->momentum, a, b);
}

/* The step with the agreement gate: tensor by tensor, each at its gate. */
static void apply_agree(hpt_outer *o, float *params, float a, float b, float *gate) {
    const float mu = o->momentum;
    for (int ti = 0; ti < o->m->ntensors; ti++) {
        const hpt_tensor_info *t = &o->m->tensors[ti];
        if (o->sf_x) {   /* x's displacement and gate; the kernel moves x, z and y */
            const float g = agreement(o->sf_x + t->offset, o->anchor + t->offset, o->u + t->offset, t->numel);
            gate[ti] = g;
            sf_step(o, params, t->offset, t->numel, g * a, g * b);
            continue;
        }
        float *th = params + t->offset, *an = o->anchor + t->offset, *u = o->u + t->offset;
        const size_t n = t->numel;
        const float g = agreement(th, an, u, n), at = g * a, bt = g * b;
        gate[ti] = g;
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) {
            float d = th[i] - an[i];
            u[i] = mu * u[i] + d;
            if (g > 0.0f) th[i] += at * d + bt * u[i];
            an[i] = th[i];
        }
    }
}

void hpt_outer_apply(hpt_outer *o, float *params, const float *d, float s, float *gate) {
    const float mu = o->momentum, a = s * (o->lr - 1.0f), b = s * o->lr * mu;
    if (d) {   /* the ranks' mean: host memory, the plain step */
        HPT_ASSERT(!o->adapt && !o->sf_x);
        hpt_outer_step(params, o->anchor, o->u, d, o->n, mu, a, b);
        return;
    }
    if (o->adapt) {
        HPT_ASSERT(gate);
        apply_agree(o, params, a, b, gate);
        return;
    }
    if (o->sf_x) {
        sf_step(o, params, 0, o->n, a, b);
        return;
    }
    o->m->dev->outer_step(params, o->anchor, o->u, NULL, o->n, mu, a, b);
}
