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

/* Updates m->params with the gradient m->grads clipped to global norm
 * grad_clip (if > 0) and moments mom1/mom2 (each nparams floats). t is the
 * 1-based step. *grad_norm receives the norm before clipping. m->grads is
 * left unclipped (the scale is applied inside the update's one sweep).
 * Fails on a non-finite norm. */
hpt_status hpt_optim_step(hpt_model *m, float *mom1, float *mom2, const hpt_adamw *opt, int t, float *grad_norm);

/* ---------------------------------------------------------------- Muon
 * Muon (Keller Jordan et al. 2024, "Muon: An optimizer for hidden layers in
 * neural networks"; torch.optim.Muon since PyTorch 2.9) on the model's
 * hidden matrices (hpt_muon_matrix), AdamW on every other tensor. For each
 * hidden matrix G (rows x cols, the gradient times the clipping scale):
 *   B <- B + (1 - mu) (G - B)         (torch's lerp: momentum mu)
 *   U  = G + mu (B - G)                (Nesterov)
 *   O  = newton_schulz(U, ns_steps, 3.4445, -4.7750, 2.0315, eps 1e-7)
 *   W <- W (1 - lr wd) - lr s O
 * with s = max(1, rows/cols)^0.5 (rms 0: Keller Jordan's) or
 * 0.2 sqrt(max(rows, cols)) (rms 1: Moonlight's, AdamW's update RMS). B
 * lives in AdamW's m arena at the matrix's offsets (so the checkpoint's
 * ADAM section holds it); v stays 0 there. tools/ref/muon_ref.py is the
 * PyTorch reference (tests/test_muon.c). */
typedef struct hpt_muon {
    float lr;        /* Muon's rate this step (the AdamW tensors take hpt_adamw's lr) */
    float momentum;
    int ns_steps;
    int rms;         /* 1: Moonlight's RMS matching scale */
} hpt_muon;

#define HPT_MUON_NS_A 3.4445f
#define HPT_MUON_NS_B (-4.7750f)
#define HPT_MUON_NS_C 2.0315f
#define HPT_MUON_EPS 1e-7f

/* The scratch hpt_muon_step needs for m's largest hidden matrix, in
 * floats (0: m has none); equals hpt_model_conf_muon_floats of m's config. */
size_t hpt_muon_scratch_floats(const hpt_model *m);
/* hpt_optim_step's Muon twin: clips, then Muon on the hidden matrices and
 * AdamW (o, its lr) on the rest. scratch: hpt_muon_scratch_floats(m)
 * floats of host memory; m's arenas, mom1 and mom2 must be host memory too
 * (the CPU row). */
hpt_status hpt_muon_step(hpt_model *m, float *mom1, float *mom2, float *scratch, const hpt_adamw *o,
                         const hpt_muon *mu, int t, float *grad_norm);

/* ---------------------------------------------------------------- schedule-free AdamW
 * Defazio et al. 2024, "The Road Less Scheduled" (arXiv 2405.15682), as
 * facebookresearch/schedule_free's AdamWScheduleFree (r = 0, weight_lr_power
 * = 2, no first moment): with the SGD-like iterate z, the average x and the
 * gradient point y = (1 - beta1) z + beta1 x (the model's params),
 *   v <- beta2 v + (1 - beta2) g^2,   u = g / (sqrt(v / bc2) + eps) + wd y
 *   z <- z - lr u,   x <- (1 - c) x + c z,   y <- (1 - beta1) z + beta1 x
 * where c = lr_max^2 / sum over the updates so far of lr_max^2, lr_max the
 * largest rate yet (the warmup's: a constant rate gives c = 1/t, the plain
 * average). z and x are stored explicitly (the reference keeps y and z and
 * recovers x), so that evaluation at x is exact and resume bit for bit. */
typedef struct hpt_sf_state { double lr_max, weight_sum; } hpt_sf_state;

/* The averaging coefficient c of the update at rate lr; advances s. */
float hpt_sf_coef(hpt_sf_state *s, float lr);
/* One element-wise update of n values (y, z, x, v as above); t: 1-based. */
void hpt_sf_update(float *y, const float *g, float *z, float *x, float *v, size_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, float c, int t);
/* The same with the gradient g * gscale (clipping inside the sweep). */
void hpt_sf_update_scaled(float *y, const float *g, float *z, float *x, float *v, size_t n, float gscale, float lr,
                          float beta1, float beta2, float eps, float weight_decay, float c, int t);
/* hpt_optim_step's schedule-free twin: clips the gradient (m->grads left unclipped), then updates
 * m->params (y), z, x and v (each nparams floats), weight decay per the
 * tensor table. o->lr is this step's rate; beta1 is the interpolation's. */
hpt_status hpt_sf_step(hpt_model *m, float *z, float *x, float *v, hpt_sf_state *s, const hpt_adamw *o, int t,
                       float *grad_norm);

/* ---------------------------------------------------------------- the outer Nesterov step
 * DiLoCo's outer optimizer (Douillard et al. 2023, arXiv 2311.08105) on n
 * values, in place: with the displacement D since the anchor,
 *     u      <- mu * u + D
 *     theta' =  anchor + eta * (D + mu * u)
 * given as a = s (eta - 1), b = s eta mu (s: the caller's scale, 1 for the
 * plain step), and theta' becomes the new anchor. The kernel of outer.c's
 * step (which holds the anchor and u); its two cases:
 *   d NULL: D = theta - anchor, this process's own displacement (the
 *     hybrid's jump, local-step mode in one process); computed
 *     as theta' = theta + a D + b u, so that a = b = 0 leaves theta bit for
 *     bit (even a -0.0f);
 *   d given: D is the ranks' mean displacement (local-step mode under
 *     mpirun), and theta' = (anchor + D) + a D + b u from values every rank
 *     holds alike, so that the ranks end equal. */
void hpt_outer_step(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b);

/* The same step under schedule-free AdamW (docs/hybrid.md says why): the
 * displacement is the average's, D = x - anchor, and its departure
 *     delta = a D + b u   (after u <- mu u + D)
 * moves the average x, the base sequence z and the gradient point y alike,
 * so that z - x and y - x (schedule-free's own state) are kept; x' is the
 * new anchor. a = b = 0 leaves x, z and y bit for bit (u and the anchor
 * still move). The displacement of x with anchor and u gives x' the bits
 * hpt_outer_step would give it. */
void hpt_sf_outer_step(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b);

#endif /* HPT_OPTIM_H */
