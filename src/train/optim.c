/*
 * optim.c — see optim.h.
 */
#include "optim.h"
#include "../kernels/kernels.h"
#include "../base/prof.h"

#include <math.h>

/* The global gradient norm (*grad_norm) and the factor that clips it to
 * o->grad_clip (torch.nn.utils.clip_grad_norm_; 1 where no clipping). */
static hpt_status clip_coef(hpt_model *m, const hpt_adamw *o, int t, float *grad_norm, float *coef) {
    double ss;
    HPT_PROF(HPT_PROF_GRAD_NORM, 2.0 * m->nparams, ss = m->dev->sumsq(m->grads, m->nparams));
    float norm = (float)sqrt(ss);
    if (grad_norm) *grad_norm = norm;
    *coef = 1.0f;
    if (!isfinite(norm))
        return hpt_fail(HPT_ERR_NUMERIC, "gradient norm is %f at step %d; try a lower --lr", norm, t);
    if (o->grad_clip > 0.0f) {
        /* coefficient clamped to 1 */
        float c = o->grad_clip / (norm + 1e-6f);
        if (c < 1.0f) *coef = c;
    }
    return HPT_OK;
}

hpt_status hpt_optim_step(hpt_model *m, float *mom1, float *mom2, const hpt_adamw *o, int t, float *grad_norm) {
    /* the clipping scale rides in the AdamW sweep (adamw_update_scaled): no
     * sweep over the gradients, which stay unclipped */
    float coef;
    HPT_TRY(clip_coef(m, o, t, grad_norm, &coef));
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor_info *ti = &m->tensors[i];
        const hpt_dev_adamw a = {.gscale = coef, .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                                 .weight_decay = ti->decay ? o->weight_decay : 0.0f, .t = t};
        HPT_PROF(HPT_PROF_ADAMW, 0,
                 m->dev->adamw(m->params + ti->offset, m->grads + ti->offset, mom1 + ti->offset, mom2 + ti->offset,
                               ti->numel, &a));
    }
    return HPT_OK;
}

size_t hpt_muon_scratch_floats(const hpt_model *m) {
    size_t f = 0;
    for (int i = 0; i < m->ntensors; i++) {
        int count, rows, cols;
        if (!hpt_muon_matrix(m, i, &count, &rows, &cols)) continue;
        /* the update U beside the iteration's own scratch */
        size_t need = (size_t)rows * cols + newton_schulz_scratch_floats(rows, cols);
        if (need > f) f = need;
    }
    return f;
}

/* Muon's momentum over n values: buf and the Nesterov update u, with the
 * gradient g * gscale, in torch.Tensor.lerp's two forms (weight < 0.5:
 * start + w (end - start), else end - (end - start)(1 - w)), so that the
 * reference's roundings carry over. */
static void muon_momentum(float *buf, float *u, const float *g, size_t n, float gscale, float mom) {
    const float w = 1.0f - mom;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float b = w < 0.5f ? buf[i] + w * (gi - buf[i]) : gi - (gi - buf[i]) * (1.0f - w);
        buf[i] = b;
        u[i] = mom >= 0.5f ? b - (b - gi) * w : gi + mom * (b - gi);
    }
}

/* p = p dec - adj u: the decoupled decay, then the orthogonalised step */
static void muon_apply(float *p, const float *u, size_t n, float dec, float adj) {
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) p[i] = p[i] * dec - adj * u[i];
}

/* One hidden matrix (rows x cols at p, g, buf): Muon's update, as optim.h
 * says. u: rows x cols of scratch, ns: the iteration's. */
static void muon_matrix(float *p, const float *g, float *buf, float *u, float *ns, int rows, int cols, float gscale,
                        float wd, const hpt_muon *mu) {
    const size_t n = (size_t)rows * cols;
    HPT_PROF(HPT_PROF_MUON, 0, muon_momentum(buf, u, g, n, gscale, mu->momentum));
    const double s = rows < cols ? rows : cols, l = rows < cols ? cols : rows;
    HPT_PROF(HPT_PROF_MUON_NS, mu->ns_steps * (4.0 * s * s * l + 2.0 * s * s * s),
             newton_schulz(u, u, rows, cols, mu->ns_steps, HPT_MUON_NS_A, HPT_MUON_NS_B, HPT_MUON_NS_C, HPT_MUON_EPS,
                           ns));
    /* the scale in double, as the reference's Python computes it */
    const float adj = mu->rms ? (float)((double)mu->lr * (0.2 * sqrt(l)))
                              : (float)((double)mu->lr * sqrt(fmax(1.0, (double)rows / cols)));
    HPT_PROF(HPT_PROF_MUON, 0, muon_apply(p, u, n, 1.0f - mu->lr * wd, adj));
}

hpt_status hpt_muon_step(hpt_model *m, float *mom1, float *mom2, float *scratch, const hpt_adamw *o,
                         const hpt_muon *mu, int t, float *grad_norm) {
    float coef;   /* the clipping scale rides in the sweeps, as in hpt_optim_step */
    HPT_TRY(clip_coef(m, o, t, grad_norm, &coef));
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor_info *ti = &m->tensors[i];
        const float wd = ti->decay ? o->weight_decay : 0.0f;
        int count, rows, cols;
        if (hpt_muon_matrix(m, i, &count, &rows, &cols)) {
            const size_t mn = (size_t)rows * cols;
            for (int k = 0; k < count; k++) {
                const size_t at = ti->offset + (size_t)k * mn;
                muon_matrix(m->params + at, m->grads + at, mom1 + at, scratch, scratch + mn, rows, cols, coef, wd, mu);
            }
            continue;
        }
        const hpt_dev_adamw a = {.gscale = coef, .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                                 .weight_decay = wd, .t = t};
        HPT_PROF(HPT_PROF_ADAMW, 0,
                 m->dev->adamw(m->params + ti->offset, m->grads + ti->offset, mom1 + ti->offset, mom2 + ti->offset,
                               ti->numel, &a));
    }
    return HPT_OK;
}

hpt_adamw_bc hpt_adamw_bias(float beta1, float beta2, int64_t t) {
    return (hpt_adamw_bc){.bc1 = 1.0f - powf(beta1, (float)t), .bc2 = 1.0f - powf(beta2, (float)t)};
}

float hpt_sf_coef(hpt_sf_state *s, float lr) {
    if (lr > s->lr_max) s->lr_max = lr;
    double w = s->lr_max * s->lr_max;
    s->weight_sum += w;
    return s->weight_sum > 0 ? (float)(w / s->weight_sum) : 0.0f;
}

void hpt_sf_update(float *y, const float *g, float *z, float *x, float *v, size_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, float c, int t) {
    hpt_sf_update_scaled(y, g, z, x, v, n, 1.0f, lr, beta1, beta2, eps, weight_decay, c, t);
}

void hpt_sf_update_scaled(float *y, const float *g, float *z, float *x, float *v, size_t n, float gscale, float lr,
                          float beta1, float beta2, float eps, float weight_decay, float c, int t) {
    sf_adamw_update_scaled(y, g, z, x, v, n, gscale, lr, beta1, beta2, eps, weight_decay, c, t);
}

hpt_status hpt_sf_step(hpt_model *m, float *z, float *x, float *v, hpt_sf_state *s, const hpt_adamw *o, int t,
                       float *grad_norm) {
    float coef;   /* the clipping scale rides in the update's sweep, as in hpt_optim_step */
    HPT_TRY(clip_coef(m, o, t, grad_norm, &coef));
    float c = hpt_sf_coef(s, o->lr);
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor_info *ti = &m->tensors[i];
        size_t k = ti->offset;
        const hpt_dev_sf a = {.gscale = coef, .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                              .weight_decay = ti->decay ? o->weight_decay : 0.0f, .c = c, .t = t};
        m->dev->sf_adamw(m->params + k, m->grads + k, z + k, x + k, v + k, ti->numel, &a);
    }
    return HPT_OK;
}

void hpt_outer_step(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b) {
    outer_step(theta, anchor, u, d, n, mu, a, b);
}

void hpt_sf_outer_step(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b) {
    sf_outer_step(x, z, y, anchor, u, n, mu, a, b);
}
