/*
 * optim.h — the optimizer step on a model's flat arenas: global-norm
 * clipping, then AdamW per tensor (weight decay only where the tensor table
 * says decay). Shared by the trainer and the PyTorch reference test, so the
 * test checks the very code that trains.
 */
#ifndef HPT_OPTIM_H
#define HPT_OPTIM_H

#include "../model/model.h"

typedef struct hpt_adamw {
    float lr, beta1, beta2, eps, weight_decay, grad_clip;
} hpt_adamw;

/* AdamW's bias corrections after t >= 1 updates: bc1 = 1 - beta1^t divides
 * the first moment, bc2 = 1 - beta2^t the second. In float with powf, as
 * torch.optim.AdamW computes them; every user of the moments outside the
 * update itself (predictors, the hybrid's statistics, the dynamics model's
 * own AdamW) takes them from here. The update kernel (adamw_update, below
 * this layer in src/kernels/nn.c) computes the same two expressions. */
typedef struct hpt_adamw_bc { float bc1, bc2; } hpt_adamw_bc;
hpt_adamw_bc hpt_adamw_bias(float beta1, float beta2, int64_t t);

/* Clips m->grads to global norm grad_clip (if > 0), then updates m->params
 * with moments mom1/mom2 (each nparams floats). t is the 1-based step.
 * *grad_norm receives the norm before clipping. Fails on a non-finite norm. */
hpt_status hpt_optim_step(hpt_model *m, float *mom1, float *mom2, const hpt_adamw *opt, int t, float *grad_norm);

#endif /* HPT_OPTIM_H */
