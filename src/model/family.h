/*
 * family.h — what the model families (gpt2.c, mlp.c, cnn.c) share inside
 * src/model/: a new model with its family's state, the activation arena
 * carved from an X-macro size table, the classifier head's loss, and the
 * classifiers' weight initialisers.
 */
#ifndef HPT_FAMILY_H
#define HPT_FAMILY_H

#include "../kernels/kernels.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- new model */

/* A family's new model: a zeroed hpt_model with the family's ops, whose impl
 * is a zeroed block of impl_size bytes. Returns the impl; NULL (and *m NULL,
 * after hpt_fail naming the family) when out of memory. */
static inline void *hpt_family_new(hpt_model **m, size_t impl_size, const hpt_model_ops *ops,
                                   const char *family) {
    *m = calloc(1, sizeof **m);
    void *impl = calloc(1, impl_size);
    if (!*m || !impl) {
        free(*m);
        free(impl);
        *m = NULL;
        hpt_fail(HPT_ERR_NOMEM, "%s: out of memory", family);
        return NULL;
    }
    (*m)->ops = ops;
    (*m)->impl = impl;
    return impl;
}

/* ---------------------------------------------------- activation arena */

/* A family lists its activation buffers once, as an X-macro of
 * X(name, size, kind) lines, e.g.
 *     #define MY_ACTS(X)  X(h, (size_t)B * H, ACT)  X(losses, (size_t)B, F32)
 * declares the struct of pointers with
 *     typedef struct my_acts { MY_ACTS(HPT_ACT_FIELD) } my_acts;
 * and carves the arena at init with
 *     HPT_CARVE_ACTS(m, g->act_arena, my_acts, &g->a, MY_ACTS);
 * which sets every pointer of g->a, in table order, the arena (NULL when
 * out of memory; from m->dev's allocator, freed by its free) and
 * m->act_bytes. size counts elements of the kind: F32 a float (also an
 * int's slot), ACT the device's activation element (hpt_act, act_bytes of
 * m->dev's kernels: a float, or 2 bytes under bf16 storage on the GPU), for
 * the buffers handed to hpt_dev_nn's kernels as activations. The sizes are
 * evaluated there, so they name the init's locals (B, T, C, ...). The
 * struct, the size table and the pointer list cannot drift apart. */
#define HPT_KIND_F32 float
#define HPT_KIND_ACT hpt_act
#define HPT_ACT_FIELD(name, size, kind) HPT_KIND_##kind *name;
/* an element count as whole floats of the arena (the slices stay float-aligned) */
#define HPT_KIND_FLOATS_F32(n, act_bytes) (n)
#define HPT_KIND_FLOATS_ACT(n, act_bytes) (((n) * (act_bytes) + sizeof(float) - 1) / sizeof(float))
#define HPT_ACT_FLOATS(name, size, kind) HPT_KIND_FLOATS_##kind((size), hpt_act_elem_),
#define HPT_ACT_SET_(name, size, kind) hpt_acts_->name = (HPT_KIND_##kind *)hpt_slots_[hpt_i_++];
#define HPT_CARVE_ACTS(m, arena, acts_type, acts, ACTS) do {                       \
    acts_type *hpt_acts_ = (acts);                                                 \
    const size_t hpt_act_elem_ = hpt_family_act_elem(m);                           \
    (void)hpt_act_elem_;   /* unused by a table of F32 buffers alone */            \
    const size_t hpt_sizes_[] = {ACTS(HPT_ACT_FLOATS)};                            \
    enum { hpt_n_ = sizeof hpt_sizes_ / sizeof hpt_sizes_[0] };                    \
    float *hpt_slots_[hpt_n_], **hpt_ptrs_[hpt_n_];                                \
    for (int hpt_k_ = 0; hpt_k_ < hpt_n_; hpt_k_++) hpt_ptrs_[hpt_k_] = &hpt_slots_[hpt_k_]; \
    const size_t hpt_total_ = hpt_arena_layout(hpt_sizes_, hpt_n_);                \
    (arena) = (m)->dev->alloc((m)->dev, hpt_total_);                               \
    if (arena) hpt_arena_point((arena), hpt_sizes_, hpt_n_, hpt_ptrs_);            \
    (m)->act_bytes = hpt_total_ * sizeof(float);                                   \
    if (arena) {                                                                   \
        int hpt_i_ = 0;                                                            \
        ACTS(HPT_ACT_SET_)                                                         \
    }                                                                              \
} while (0)

/* bytes of one ACT element on m's device (a float where the device runs no
 * GPT-2 kernels) */
static inline size_t hpt_family_act_elem(const hpt_model *m) {
    return m->dev->nn ? m->dev->nn->act_bytes(m->dev) : sizeof(float);
}

/* ------------------------------------------------------------- losses */

/* The mean of n per-position losses, summed serially in double so the
 * result does not depend on the thread count. */
static inline float hpt_mean_loss(const float *losses, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += losses[i];
    return (float)(s / (double)n);
}

/* A classifier's targets must be classes: [0, K). family names the model in
 * the message. */
static inline hpt_status hpt_check_classes(const char *family, const int *targets, int B, int K) {
    for (int i = 0; i < B; i++)
        if (targets[i] < 0 || targets[i] >= K)
            return hpt_fail(HPT_ERR_ARG, "%s: target %d out of range [0,%d)", family, targets[i], K);
    return HPT_OK;
}

/* A classifier's loss over logits (B,K): copies the targets into the
 * activation arena (int, for the backward pass: the caller's buffer may
 * change before it), turns the logits into probabilities in place and
 * stores the mean cross-entropy in *loss (when loss is not NULL). */
static inline void hpt_classifier_loss(float *losses, float *logits, float *targets_copy,
                                       const int *targets, int B, int K, float *loss) {
    int *tg = (int *)targets_copy;
    memcpy(tg, targets, (size_t)B * sizeof(int));
    softmax_xent_forward(losses, logits, tg, B, K, K);
    float mean = hpt_mean_loss(losses, (size_t)B);
    if (loss) *loss = mean;
}

/* ------------------------------------------------------ initialisation */

/* He normal, std sqrt(2 / fan_in): the classifiers' layers feeding a ReLU. */
static inline void hpt_init_he_normal(float *w, size_t n, int fan_in, hpt_rng *rng) {
    float std = sqrtf(2.0f / (float)fan_in);
    for (size_t k = 0; k < n; k++) w[k] = std * hpt_rng_normal(rng);
}

/* PyTorch's Linear default, uniform in +-1/sqrt(fan_in): the classifiers'
 * output layer. */
static inline void hpt_init_linear_uniform(float *w, size_t n, int fan_in, hpt_rng *rng) {
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t k = 0; k < n; k++) w[k] = bound * (2.0f * hpt_rng_uniform(rng) - 1.0f);
}

#endif /* HPT_FAMILY_H */
