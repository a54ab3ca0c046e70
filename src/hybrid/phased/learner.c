/*
 * learner.c — the learned dynamics, trained on every real step: the update
 * statistics at the sampled parameters, the encoder, the GRU ensemble. See
 * learner.h.
 */
#include "learner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The k-th sampled parameter of tensor t: one per stride block, at a
 * position hashed from k (deterministic; never past the tensor's end). */
static inline size_t sample_at(const hpt_learner *l, const hpt_tensor_info *t, int ti, size_t k) {
    size_t S = l->s_stride[ti], j = (size_t)((k * 2654435761u) % S), i = k * S + j;
    return t->offset + (i < t->numel ? i : t->numel - 1);
}

/* Before a real step: remember theta and the AdamW-direction prediction of
 * this step's update from the current moments (the step the predictors would
 * take), at the sampled parameters, to score it against the real update
 * afterwards. */
void hpt_learner_before(hpt_learner *l) {
    hpt_trainer *tr = l->tr;
    const float *p = l->m->params, *m1 = hpt_trainer_moment1(tr), *m2 = hpt_trainer_moment2(tr);
    const int updates = hpt_trainer_updates(tr);
    if (updates == 0) {
        for (int ti = 0; ti < l->m->ntensors; ti++)
            for (size_t k = 0; k < l->s_cnt[ti]; k++)
                l->theta_before[l->s_off[ti] + k] = p[sample_at(l, &l->m->tensors[ti], ti, k)];
        return;
    }
    hpt_adamw o = hpt_trainer_adamw(tr, hpt_trainer_steps(tr));
    hpt_adamw_bc bc = hpt_adamw_bias(o.beta1, o.beta2, updates);
    float bc1 = bc.bc1, bc2s = sqrtf(bc.bc2);
    for (int ti = 0; ti < l->m->ntensors; ti++) {
        const hpt_tensor_info *t = &l->m->tensors[ti];
        float wd = t->decay ? o.weight_decay : 0.0f;
        for (size_t k = 0; k < l->s_cnt[ti]; k++) {
            size_t i = sample_at(l, t, ti, k), s = l->s_off[ti] + k;
            l->theta_before[s] = p[i];
            l->dpred[s] = -o.lr * (wd * p[i] + (m1[i] / bc1) / (sqrtf(m2[i]) / bc2s + o.eps));
        }
    }
}

/* After a real step: the encoder's inputs and the dynamics model's targets,
 * then one online training step of the model and a 1-step forecast for the
 * next step's predicted_loss. */
hpt_status hpt_learner_after(hpt_learner *l, const hpt_step_info *info, hpt_phase ph, int steps_in_phase) {
    hpt_trainer *tr = l->tr;
    const float *p = l->m->params;
    double upd2 = 0.0, th2 = 0.0, dotprev = 0.0, prev2 = 0.0, mabs = 0.0, vs = 0.0;
    /* one pass per tensor over its sampled parameters, serially: a few
     * thousand per tensor, and the same bits for any thread count (the sums
     * steer the controller, so they must be reproducible) */
    enum { NQ = 8 };
    const float *m1 = hpt_trainer_moment1(tr), *m2 = hpt_trainer_moment2(tr);
    float *prev = l->prev_upd;
    int have_prev = l->have_prev_upd;
    for (int ti = 0; ti < l->m->ntensors; ti++) {
        const hpt_tensor_info *t = &l->m->tensors[ti];
        double q[NQ] = {0};
        for (size_t k = 0; k < l->s_cnt[ti]; k++) {
            size_t i = sample_at(l, t, ti, k), s = l->s_off[ti] + k;
            double u = (double)p[i] - l->theta_before[s], tb = l->theta_before[s], dp = l->dpred[s];
            q[0] += u * u;
            q[1] += tb * tb;
            q[2] += u * dp;
            q[3] += dp * dp;
            if (have_prev) { q[4] += u * prev[s]; q[5] += (double)prev[s] * prev[s]; }
            prev[s] = (float)u;
            q[6] += fabs(m1[i]);
            q[7] += sqrt(m2[i]);
        }
        upd2 += q[0]; th2 += q[1]; dotprev += q[4]; prev2 += q[5]; mabs += q[6]; vs += q[7];
        if (ti < l->K) l->y[1 + ti] = hpt_trainer_updates(tr) > 1 && q[3] > 0.0 ? (float)(q[2] / q[3]) : NAN;
    }
    hpt_enc_input in = {
        .loss = info->train_loss, .grad_norm = info->grad_norm, .lr = info->lr,
        .m_abs_mean = (float)(mabs / l->ns), .v_sqrt_mean = (float)(vs / l->ns),
        .update_ratio = th2 > 0.0 ? (float)sqrt(upd2 / th2) : NAN,
        .update_cos = l->have_prev_upd && prev2 > 0.0 && upd2 > 0.0 ? (float)(dotprev / sqrt(prev2 * upd2)) : NAN,
        .phase = (int)ph, .steps_in_phase = steps_in_phase};
    l->have_prev_upd = 1;
    HPT_TRY(hpt_encoder_update(&l->enc, &in, l->feat));
    l->y[0] = info->train_loss > 0.0f ? logf(info->train_loss) : NAN;
    HPT_TRY(hpt_dyn_observe(&l->dyn, l->feat, l->y));
    float lr1 = hpt_trainer_lr(tr, hpt_trainer_steps(tr));
    HPT_TRY(hpt_dyn_forecast(&l->dyn, 1, &lr1, l->fc_mean, l->fc_std, NULL));
    l->next_pred_loss = expf(l->fc_mean[0]);
    return HPT_OK;
}

/* The dynamics model's confidence in its loss forecast at the longest
 * horizon (from its members' disagreement and its realised errors at that
 * horizon), capped (the phased controller's cap is its acceptance history
 * of verified jumps). Only the loss column: the per-tensor scale columns
 * are noisy by nature and only scale the step (clipped); they do not gate
 * it. */
float hpt_learner_confidence(hpt_learner *l, int max_steps, float cap) {
    int H = max_steps < l->dyn.HM ? max_steps : l->dyn.HM;
    float lr[FC_MAX];
    for (int j = 0; j < H && j < FC_MAX; j++) lr[j] = hpt_trainer_lr(l->tr, hpt_trainer_steps(l->tr) + j);
    if (hpt_dyn_forecast(&l->dyn, H, lr, l->fc_mean, l->fc_std, NULL) != HPT_OK) return 0.0f;
    float dc = hpt_dyn_confidence(&l->dyn, H, 0);
    return dc < cap ? dc : cap;
}

/* The encoder, then the GRU ensemble over its features. */
static hpt_status init_dynamics(hpt_learner *l, const hpt_hybrid_config *hc) {
    HPT_TRY(hpt_encoder_init(&l->enc, &l->nfeat));
    hpt_dyn_config dc;
    hpt_dyn_config_default(&dc, l->nfeat, l->K);
    dc.ensemble = hc->ensemble;
    dc.hidden = hc->hidden;
    dc.bptt = hc->bptt;
    if (dc.max_horizon < hc->max_predict_steps) dc.max_horizon = hc->max_predict_steps > FC_MAX ? FC_MAX : hc->max_predict_steps;
    dc.seed = hpt_trainer_config(l->tr)->seed ^ 0xD1A6u;
    return hpt_dyn_init(&l->dyn, &dc, &l->enc);
}

/* Which parameters of each tensor the update statistics sample. */
static void layout_samples(hpt_learner *l) {
    l->ns = 0;
    for (int ti = 0; ti < l->m->ntensors; ti++) {
        size_t numel = l->m->tensors[ti].numel;
        l->s_stride[ti] = (numel + SAMPLE_MAX - 1) / SAMPLE_MAX;
        l->s_cnt[ti] = (numel + l->s_stride[ti] - 1) / l->s_stride[ti];
        l->s_off[ti] = l->ns;
        l->ns += l->s_cnt[ti];
    }
}

/* The buffers: one arena carved by LEARNER_BUFS. */
static hpt_status carve_buffers(hpt_learner *l) {
#define X(type, name, size) size,
    size_t sizes[] = {LEARNER_BUFS(X)};
#undef X
    enum { NB = sizeof sizes / sizeof sizes[0] };
    float *slice[NB], **ptrs[NB];
    for (int i = 0; i < NB; i++) ptrs[i] = &slice[i];
    size_t total;
    l->buf_arena = hpt_arena_carve(sizes, NB, ptrs, &total);
    if (!l->buf_arena) return hpt_fail(HPT_ERR_NOMEM, "hybrid: out of memory for the learned dynamics' buffers");
    l->buf_bytes = total * sizeof(float);
    int i = 0;
#define X(type, name, size) l->name = (type *)slice[i++];
    LEARNER_BUFS(X)
#undef X
    return HPT_OK;
}

hpt_status hpt_learner_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hpt_learner **out) {
    *out = NULL;
    hpt_learner *l = calloc(1, sizeof *l);
    if (!l) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    l->tr = tr;
    l->m = hpt_trainer_model(tr);
    l->K = l->m->ntensors;
    l->next_pred_loss = NAN;
    hpt_status st = init_dynamics(l, hc);
    if (st == HPT_OK) {
        layout_samples(l);
        st = carve_buffers(l);
    }
    if (st != HPT_OK) { hpt_learner_free(l); return st; }
    *out = l;
    return HPT_OK;
}

size_t hpt_learner_dyn_bytes(const hpt_learner *l) {
    return (l->dyn.params_n + l->dyn.grads_n + l->dyn.adam_n + l->dyn.state_n + l->dyn.scratch_n) * sizeof(float);
}

void hpt_learner_free(hpt_learner *l) {
    if (!l) return;
    hpt_dyn_free(&l->dyn);
    hpt_encoder_free(&l->enc);
    hpt_arena_free(l->buf_arena);
    free(l);
}
