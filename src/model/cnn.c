/*
 * cnn.c — the convolutional classifier:
 *   conv3x3 (in_c -> c1, same padding) -> ReLU -> maxpool 2x2
 *   conv3x3 (c1 -> c2)                 -> ReLU -> maxpool 2x2
 *   flatten (c2 * H2 * W2, NCHW order, as torch's flatten) -> Linear (hidden)
 *   -> ReLU -> Linear (n_classes) -> softmax cross-entropy, mean over the batch.
 * H1 = in_h / 2, H2 = H1 / 2 (integer halvings, as torch's max_pool2d).
 *
 * Memory: parameters/gradients in the model's two arenas (model.c), one
 * activation arena carved by the size table below for the reserved batch B.
 * Each convolution keeps its im2col matrix for the whole batch (conv.c), so
 * the backward pass needs no input copy and no second im2col; conv2's is
 * reused as its input-gradient scratch. ReLU runs in place and its backward
 * masks in place, so a layer keeps one buffer. The logits buffer becomes
 * probabilities and then dlogits in place.
 */
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(int) == sizeof(float), "int buffers are carved from the float arena");

enum { CONV1W, CONV1B, CONV2W, CONV2B, FC1W, FC1B, FC2W, FC2B, NUM_PARAM_TENSORS };
enum { KS = 3, PAD = 1 };  /* 3x3 kernels, "same" padding */

/* Activation arena, one X-macro line per buffer. Sizes use B (reserved), C0
 * (input channels), S0 = H0*W0, S1 = H1*W1, F = c2*H2*W2 (flattened), c1, c2,
 * HD (hidden), K (classes). */
#define CNN_ACTS(X)                                                                  \
    X(cols1,   (size_t)B * C0 * KS * KS * S0, F32)  /* (B, C0*9, S0) im2col of x */  \
    X(a1,      (size_t)B * c1 * S0, F32)            /* (B,c1,H0,W0) relu(conv1) */   \
    X(p1,      (size_t)B * c1 * S1, F32)            /* (B,c1,H1,W1) pooled */        \
    X(idx1,    (size_t)B * c1 * S1, F32)            /* int: argmax in a1 plane */    \
    X(cols2,   (size_t)B * c1 * KS * KS * S1, F32)  /* (B, c1*9, S1) im2col of p1 */ \
    X(a2,      (size_t)B * c2 * S1, F32)            /* (B,c2,H1,W1) relu(conv2) */   \
    X(p2,      (size_t)B * F, F32)                  /* (B,c2,H2,W2) = (B,F) */       \
    X(idx2,    (size_t)B * F, F32)                  /* int */                        \
    X(h,       (size_t)B * HD, F32)                 /* (B,HD) relu(fc1) */           \
    X(logits,  (size_t)B * K, F32)                  /* (B,K) -> probs -> dlogits */  \
    X(losses,  (size_t)B, F32)                                                       \
    X(targets, (size_t)B, F32)                      /* int: copy of the targets */   \
    /* backward */                                                                   \
    X(dh,      (size_t)B * HD, F32)                                                  \
    X(dp2,     (size_t)B * F, F32)                                                   \
    X(da2,     (size_t)B * c2 * S1, F32)                                             \
    X(dp1,     (size_t)B * c1 * S1, F32)                                             \
    X(da1,     (size_t)B * c1 * S0, F32)

typedef struct cnn_acts { CNN_ACTS(HPT_ACT_FIELD) } cnn_acts;

typedef struct cnn {
    hpt_cnn_config cfg;
    int H0, W0, H1, W1, H2, W2, F;
    int B;          /* reserved */
    int cur_B;      /* last forward */
    float *act_arena;
    cnn_acts a;
} cnn;

static void cnn_free_impl(void *impl) {
    cnn *g = impl;
    if (!g) return;
    hpt_arena_free(g->act_arena);
    free(g);
}

static double cnn_macs(const cnn *g) {
    const hpt_cnn_config *c = &g->cfg;
    return (double)c->c1 * c->in_c * KS * KS * g->H0 * g->W0 +
           (double)c->c2 * c->c1 * KS * KS * g->H1 * g->W1 +
           (double)g->F * c->hidden + (double)c->hidden * c->n_classes;
}

static double cnn_train_flops(const hpt_model *m, int B, int T) {
    /* 6 FLOPs per multiply-accumulate per sample (2 forward, 4 backward;
     * conv1's input gradient is not computed but counted, as usual) */
    return 6.0 * cnn_macs(m->impl) * B * T;
}

static hpt_status cnn_forward(hpt_model *m, const hpt_batch *batch, float *loss) {
    cnn *g = m->impl;
    const hpt_cnn_config *c = &g->cfg;
    const int B = batch->B, K = c->n_classes;
    if (!batch->x) return hpt_fail(HPT_ERR_ARG, "cnn: batch has no images (x)");
    if (batch->targets && hpt_check_classes("cnn", batch->targets, B, K) != HPT_OK) return HPT_ERR_ARG;
    g->cur_B = B;
    cnn_acts *a = &g->a;
    float *P[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) P[i] = hpt_tensor_ptr(m->params, m, i);

    conv2d_forward(a->a1, a->cols1, batch->x, P[CONV1W], P[CONV1B], B, c->in_c, g->H0, g->W0, c->c1, KS, PAD);
    relu_forward(a->a1, a->a1, (size_t)B * c->c1 * g->H0 * g->W0);
    maxpool2_forward(a->p1, (int *)a->idx1, a->a1, B, c->c1, g->H0, g->W0);
    conv2d_forward(a->a2, a->cols2, a->p1, P[CONV2W], P[CONV2B], B, c->c1, g->H1, g->W1, c->c2, KS, PAD);
    relu_forward(a->a2, a->a2, (size_t)B * c->c2 * g->H1 * g->W1);
    maxpool2_forward(a->p2, (int *)a->idx2, a->a2, B, c->c2, g->H1, g->W1);
    matmul_forward(a->h, a->p2, P[FC1W], P[FC1B], B, g->F, c->hidden);
    relu_forward(a->h, a->h, (size_t)B * c->hidden);
    matmul_forward(a->logits, a->h, P[FC2W], P[FC2B], B, c->hidden, K);

    m->logits = a->logits; m->n_out = K; m->out_row = K;
    if (batch->targets) hpt_classifier_loss(a->losses, a->logits, a->targets, batch->targets, B, K, loss);
    return HPT_OK;
}

static hpt_status cnn_backward(hpt_model *m, float loss_scale) {
    cnn *g = m->impl;
    const hpt_cnn_config *c = &g->cfg;
    const int B = g->cur_B, K = c->n_classes, HD = c->hidden;
    const size_t S0 = (size_t)g->H0 * g->W0, S1 = (size_t)g->H1 * g->W1;
    cnn_acts *a = &g->a;
    float *P[NUM_PARAM_TENSORS], *G[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        P[i] = hpt_tensor_ptr(m->params, m, i);
        G[i] = hpt_tensor_ptr(m->grads, m, i);
    }
    softmax_xent_backward(a->logits, (const int *)a->targets, loss_scale / (float)B, B, K, K);
    memset(a->dh, 0, (size_t)B * HD * sizeof(float));
    matmul_backward(a->dh, G[FC2W], G[FC2B], a->logits, a->h, P[FC2W], B, HD, K);
    relu_backward_inplace(a->dh, a->h, (size_t)B * HD);
    memset(a->dp2, 0, (size_t)B * g->F * sizeof(float));
    matmul_backward(a->dp2, G[FC1W], G[FC1B], a->dh, a->p2, P[FC1W], B, g->F, HD);
    memset(a->da2, 0, (size_t)B * c->c2 * S1 * sizeof(float));
    maxpool2_backward(a->da2, a->dp2, (const int *)a->idx2, B, c->c2, g->H1, g->W1);
    relu_backward_inplace(a->da2, a->a2, (size_t)B * c->c2 * S1);
    memset(a->dp1, 0, (size_t)B * c->c1 * S1 * sizeof(float));
    /* cols2 doubles as the dcols scratch: it is consumed here */
    conv2d_backward(a->dp1, G[CONV2W], G[CONV2B], a->cols2, a->da2, a->cols2, P[CONV2W],
                    B, c->c1, g->H1, g->W1, c->c2, KS, PAD);
    memset(a->da1, 0, (size_t)B * c->c1 * S0 * sizeof(float));
    maxpool2_backward(a->da1, a->dp1, (const int *)a->idx1, B, c->c1, g->H0, g->W0);
    relu_backward_inplace(a->da1, a->a1, (size_t)B * c->c1 * S0);
    conv2d_backward(NULL, G[CONV1W], G[CONV1B], NULL, a->da1, a->cols1, P[CONV1W],
                    B, c->in_c, g->H0, g->W0, c->c1, KS, PAD);
    return HPT_OK;
}

static const hpt_model_ops cnn_ops = {
    .forward = cnn_forward,
    .backward = cnn_backward,
    .train_flops = cnn_train_flops,
    .free_impl = cnn_free_impl,
};

void hpt_cnn_config_default(hpt_cnn_config *c) {
    *c = (hpt_cnn_config){.in_c = 1, .in_h = 28, .in_w = 28, .c1 = 32, .c2 = 64, .hidden = 128, .n_classes = 10};
}

hpt_status hpt_cnn_init(hpt_model **out, const hpt_cnn_config *cfg, int B, uint64_t seed) {
    *out = NULL;
    const hpt_cnn_config *c = cfg;
    if (c->in_c < 1 || c->in_c > 64) return hpt_fail(HPT_ERR_ARG, "cnn: in_c %d out of range [1, 64]", c->in_c);
    if (c->in_h < 4 || c->in_h > 1024 || c->in_w < 4 || c->in_w > 1024)
        return hpt_fail(HPT_ERR_ARG, "cnn: input %dx%d out of range [4, 1024]", c->in_h, c->in_w);
    if (c->c1 < 1 || c->c1 > 4096 || c->c2 < 1 || c->c2 > 4096)
        return hpt_fail(HPT_ERR_ARG, "cnn: channels c1 %d, c2 %d out of range [1, 4096]", c->c1, c->c2);
    if (c->hidden < 1 || c->hidden > (1 << 20))
        return hpt_fail(HPT_ERR_ARG, "cnn: hidden %d out of range [1, 2^20]", c->hidden);
    if (c->n_classes < 2 || c->n_classes > (1 << 20))
        return hpt_fail(HPT_ERR_ARG, "cnn: n_classes %d out of range [2, 2^20]", c->n_classes);
    if (B < 1 || B > (1 << 20)) return hpt_fail(HPT_ERR_ARG, "cnn: batch %d out of range [1, 2^20]", B);
    /* one image's im2col must be addressable with int strides (cblas) */
    if ((double)c->c1 * KS * KS * c->in_h * c->in_w / 4 > 2e9 || (double)c->in_c * KS * KS * c->in_h * c->in_w > 2e9)
        return hpt_fail(HPT_ERR_ARG, "cnn: layers too large");

    hpt_model *m;
    cnn *g = hpt_family_new(&m, sizeof *g, &cnn_ops, "cnn");
    if (!g) return HPT_ERR_NOMEM;
    g->cfg = *c;
    g->B = B;
    g->H0 = c->in_h; g->W0 = c->in_w;
    g->H1 = g->H0 / 2; g->W1 = g->W0 / 2;
    g->H2 = g->H1 / 2; g->W2 = g->W1 / 2;
    g->F = c->c2 * g->H2 * g->W2;
    m->max_B = B; m->max_T = 1;
    m->in_dim = c->in_c * c->in_h * c->in_w;   /* NCHW rows, at most 64 x 1024 x 1024 */

    const int C0 = c->in_c, c1 = c->c1, c2 = c->c2, HD = c->hidden, K = c->n_classes, F = g->F;
    const size_t S0 = (size_t)g->H0 * g->W0, S1 = (size_t)g->H1 * g->W1;
    const hpt_tensor_spec specs[NUM_PARAM_TENSORS] = {
        {"conv1w", 4, {c1, C0, KS, KS}, 1, 1}, {"conv1b", 1, {c1}, 0, 0},
        {"conv2w", 4, {c2, c1, KS, KS}, 1, 1}, {"conv2b", 1, {c2}, 0, 0},
        {"fc1w", 2, {HD, F}, 1, 1},            {"fc1b", 1, {HD}, 0, 0},
        {"fc2w", 2, {K, HD}, 1, 0},            {"fc2b", 1, {K}, 0, 0},
    };
    hpt_status st = hpt_model_alloc_params(m, specs, NUM_PARAM_TENSORS);
    if (st != HPT_OK) { hpt_model_free(m); return st; }

    HPT_CARVE_ACTS(m, g->act_arena, cnn_acts, &g->a, CNN_ACTS);
    if (!g->act_arena) { hpt_model_free(m); return HPT_ERR_NOMEM; }

    /* He normal (std sqrt(2 / fan_in)) for the layers feeding a ReLU,
     * PyTorch's Linear default (uniform +-1/sqrt(fan_in)) for the output
     * layer, biases 0. */
    hpt_rng rng;
    hpt_rng_seed(&rng, seed);
    const int fan_in[NUM_PARAM_TENSORS] = {C0 * KS * KS, 0, c1 * KS * KS, 0, F, 0, HD, 0};
    for (int i = CONV1W; i <= FC2W; i += 2) {
        float *w = hpt_tensor_ptr(m->params, m, i);
        size_t n = m->tensors[i].numel;
        if (i != FC2W) hpt_init_he_normal(w, n, fan_in[i], &rng);
        else hpt_init_linear_uniform(w, n, fan_in[i], &rng);
    }

    /* state-file config words: family, in_c, in_h, in_w, c1, c2, hidden, n_classes */
    m->conf[0] = HPT_FAMILY_CNN;
    m->conf[1] = (uint32_t)C0; m->conf[2] = (uint32_t)c->in_h; m->conf[3] = (uint32_t)c->in_w;
    m->conf[4] = (uint32_t)c1; m->conf[5] = (uint32_t)c2; m->conf[6] = (uint32_t)HD;
    m->conf[7] = (uint32_t)K;
    m->nconf = 8;
    snprintf(m->desc, sizeof m->desc, "cnn %dx%dx%d c%d-c%d-h%d-%d (B %d)", C0, c->in_h, c->in_w, c1, c2, HD, K, B);
    *out = m;
    return HPT_OK;
}

/* The activation arena's length in floats, from the same table (CNN_ACTS)
 * and slice rounding as hpt_cnn_init, without allocating (see
 * hpt_model_check_memory). Valid for configs within init's limits. */
size_t hpt_cnn_act_floats(const hpt_cnn_config *cfg, int B) {
    const size_t C0 = (size_t)cfg->in_c, c1 = (size_t)cfg->c1, c2 = (size_t)cfg->c2;
    const size_t HD = (size_t)cfg->hidden, K = (size_t)cfg->n_classes;
    const size_t H1 = (size_t)cfg->in_h / 2, W1 = (size_t)cfg->in_w / 2;
    const size_t S0 = (size_t)cfg->in_h * cfg->in_w, S1 = H1 * W1, F = c2 * (H1 / 2) * (W1 / 2);
    size_t total = 0;
#define X(name, size, kind) total += ((size) + 15) / 16 * 16;   /* every kind F32 here */
    CNN_ACTS(X)
#undef X
    return total;
}
