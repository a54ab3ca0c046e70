/*
 * optim.c — see optim.h.
 */
#include "optim.h"
#include "../kernels/kernels.h"

#include <math.h>

hpt_status hpt_optim_step(hpt_model *m, float *mom1, float *mom2, const hpt_adamw *o, int t, float *grad_norm) {
    float norm = (float)sqrt(sumsq(m->grads, m->nparams));
    if (grad_norm) *grad_norm = norm;
    if (!isfinite(norm))
        return hpt_fail(HPT_ERR_NUMERIC, "gradient norm is %f at step %d; try a lower --lr", norm, t);
    if (o->grad_clip > 0.0f) {
        /* torch.nn.utils.clip_grad_norm_: coefficient clamped to 1 */
        float coef = o->grad_clip / (norm + 1e-6f);
        if (coef < 1.0f) scale_inplace(m->grads, coef, m->nparams);
    }
    for (int i = 0; i < m->ntensors; i++) {
        const hpt_tensor_info *ti = &m->tensors[i];
        adamw_update(m->params + ti->offset, m->grads + ti->offset, mom1 + ti->offset, mom2 + ti->offset,
                     ti->numel, o->lr, o->beta1, o->beta2, o->eps, ti->decay ? o->weight_decay : 0.0f, t);
    }
    return HPT_OK;
}

hpt_adamw_bc hpt_adamw_bias(float beta1, float beta2, int64_t t) {
    return (hpt_adamw_bc){.bc1 = 1.0f - powf(beta1, (float)t), .bc2 = 1.0f - powf(beta2, (float)t)};
}
