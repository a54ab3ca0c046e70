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

/* Clips m->grads to global norm grad_clip (if > 0), then updates m->params
 * with moments mom1/mom2 (each nparams floats). t is the 1-based step.
 * *grad_norm receives the norm before clipping. Fails on a non-finite norm. */
hpt_status hpt_optim_step(hpt_model *m, float *mom1, float *mom2, const hpt_adamw *opt, int t, float *grad_norm);

#endif /* HPT_OPTIM_H */
