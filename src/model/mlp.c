/*
 * mlp.c — the multi-layer perceptron classifier: n_hidden x (Linear, ReLU),
 * then Linear to the logits, softmax cross-entropy (mean over the batch).
 *
 * Memory: parameters/gradients in the model's two arenas (model.c), one
 * activation arena carved by the size table below for the reserved batch B.
 * The input batch is copied in (the caller's buffer may change before the
 * backward pass). ReLU runs in place on each hidden layer's output, and the
 * backward pass masks its gradient in place, so a layer keeps one buffer; the
 * backward pass ping-pongs between two hidden-sized gradient buffers, and the
 * logits buffer becomes probabilities and then dlogits in place.
 */
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(int) == sizeof(float), "int buffers are carved from the float arena");

/* Activation arena, one X-macro line per buffer; sizes use B (reserved), NI
 * (inputs), SH (sum of hidden widths), MH (widest hidden layer), K (classes). */
#define MLP_ACTS(X)                                                                           \
    X(x,       (size_t)B * NI, F32)     /* (B,NI) copy of the input */                        \
    X(h,       (size_t)B * SH, F32)     /* layer l: (B,hidden[l]) at B*hoff[l], after ReLU */ \
    X(logits,  (size_t)B * K, F32)      /* (B,K) -> probs -> dlogits */                       \
    X(losses,  (size_t)B, F32)                                                                \
    X(targets, (size_t)B, F32)          /* int: copy of the targets */                        \
    X(d0,      (size_t)B * MH, F32)     /* backward ping-pong */                              \
    X(d1,      (size_t)B * MH, F32)

typedef struct mlp_acts { MLP_ACTS(HPT_ACT_FIELD) } mlp_acts;

typedef struct mlp {
    hpt_mlp_config cfg;
    int nl;                              /* linear layers = n_hidden + 1 */
    int din[HPT_MLP_MAX_HIDDEN + 1];     /* layer l: din[l] -> dout[l] */
    int dout[HPT_MLP_MAX_HIDDEN + 1];
    size_t hoff[HPT_MLP_MAX_HIDDEN];     /* offset of hidden layer l in h, per sample */
    int B;                               /* reserved */
    int cur_B;                           /* last forward */
    float *act_arena;
    mlp_acts a;
} mlp;

static void mlp_free_impl(void *impl) {
    mlp *g = impl;
    if (!g) return;
    hpt_arena_free(g->act_arena);
    free(g);
}

static double mlp_train_flops(const hpt_model *m, int B, int T) {
    /* 6 FLOPs per multiply-accumulate per sample (2 forward, 4 backward) */
    const mlp *g = m->impl;
    double macs = 0.0;
    for (int l = 0; l < g->nl; l++) macs += (double)g->din[l] * g->dout[l];
    return 6.0 * macs * B * T;
}

static float *hidden_buf(const mlp *g, int l) { return g->a.h + (size_t)g->B * g->hoff[l]; }

static hpt_status mlp_forward(hpt_model *m, const hpt_batch *batch, float *loss) {
    mlp *g = m->impl;
    const int B = batch->B, K = g->cfg.n_classes, nh = g->cfg.n_hidden;
    if (!batch->x) return hpt_fail(HPT_ERR_ARG, "mlp: batch has no features (x)");
    if (batch->targets && hpt_check_classes("mlp", batch->targets, B, K) != HPT_OK) return HPT_ERR_ARG;
    g->cur_B = B;
    mlp_acts *a = &g->a;
    memcpy(a->x, batch->x, (size_t)B * g->cfg.n_in * sizeof(float));
    const float *in = a->x;
    for (int l = 0; l <= nh; l++) {
        const float *w = hpt_tensor_ptr(m->params, m, 2 * l), *bias = hpt_tensor_ptr(m->params, m, 2 * l + 1);
        if (l < nh) {
            float *h = hidden_buf(g, l);
            matmul_forward(h, in, w, bias, B, g->din[l], g->dout[l]);
            relu_forward(h, h, (size_t)B * g->dout[l]);
            in = h;
        } else {
            matmul_forward(a->logits, in, w, bias, B, g->din[l], K);
        }
    }
    m->logits = a->logits; m->n_out = K; m->out_row = K;
    if (batch->targets) hpt_classifier_loss(a->losses, a->logits, a->targets, batch->targets, B, K, loss);
    return HPT_OK;
}

static hpt_status mlp_backward(hpt_model *m, float loss_scale) {
    mlp *g = m->impl;
    const int B = g->cur_B, K = g->cfg.n_classes, nh = g->cfg.n_hidden;
    mlp_acts *a = &g->a;
    softmax_xent_backward(a->logits, (const int *)a->targets, loss_scale / (float)B, B, K, K);
    float *dcur = a->logits, *spare[2] = {a->d0, a->d1};
    for (int l = nh; l >= 0; l--) {
        const float *in = l == 0 ? a->x : hidden_buf(g, l - 1);
        float *dnext = NULL;
        if (l > 0) {
            dnext = spare[l & 1];
            memset(dnext, 0, (size_t)B * g->din[l] * sizeof(float));
        }
        matmul_backward(dnext, hpt_tensor_ptr(m->grads, m, 2 * l), hpt_tensor_ptr(m->grads, m, 2 * l + 1),
                        dcur, in, hpt_tensor_ptr(m->params, m, 2 * l), B, g->din[l], g->dout[l]);
        if (l > 0) relu_backward_inplace(dnext, in, (size_t)B * g->din[l]);
        dcur = dnext;
    }
    return HPT_OK;
}

static const hpt_model_ops mlp_ops = {
    .forward = mlp_forward,
    .backward = mlp_backward,
    .train_flops = mlp_train_flops,
    .free_impl = mlp_free_impl,
};

void hpt_mlp_config_default(hpt_mlp_config *c) {
    *c = (hpt_mlp_config){.n_in = 784, .n_hidden = 2, .hidden = {256, 128}, .n_classes = 10};
}

hpt_status hpt_mlp_init(hpt_model **out, const hpt_mlp_config *cfg, int B, uint64_t seed) {
    *out = NULL;
    const int NI = cfg->n_in, K = cfg->n_classes, nh = cfg->n_hidden;
    if (NI < 1 || NI > (1 << 24)) return hpt_fail(HPT_ERR_ARG, "mlp: n_in %d out of range [1, 2^24]", NI);
    if (K < 2 || K > (1 << 20)) return hpt_fail(HPT_ERR_ARG, "mlp: n_classes %d out of range [2, 2^20]", K);
    if (nh < 0 || nh > HPT_MLP_MAX_HIDDEN)
        return hpt_fail(HPT_ERR_ARG, "mlp: n_hidden %d out of range [0, %d]", nh, HPT_MLP_MAX_HIDDEN);
    for (int l = 0; l < nh; l++)
        if (cfg->hidden[l] < 1 || cfg->hidden[l] > (1 << 20))
            return hpt_fail(HPT_ERR_ARG, "mlp: hidden layer %d width %d out of range [1, 2^20]", l + 1, cfg->hidden[l]);
    if (B < 1 || B > (1 << 20)) return hpt_fail(HPT_ERR_ARG, "mlp: batch %d out of range [1, 2^20]", B);

    hpt_model *m;
    mlp *g = hpt_family_new(&m, sizeof *g, &mlp_ops, "mlp");
    if (!g) return HPT_ERR_NOMEM;
    g->cfg = *cfg;
    for (int l = nh; l < HPT_MLP_MAX_HIDDEN; l++) g->cfg.hidden[l] = 0;
    g->nl = nh + 1;
    g->B = B;
    m->max_B = B; m->max_T = 1;
    m->in_dim = NI;
    size_t SH = 0, MH = 0;
    for (int l = 0; l <= nh; l++) {
        g->din[l] = l == 0 ? NI : cfg->hidden[l - 1];
        g->dout[l] = l == nh ? K : cfg->hidden[l];
        if (l < nh) {
            g->hoff[l] = SH;
            SH += (size_t)cfg->hidden[l];
            if ((size_t)cfg->hidden[l] > MH) MH = (size_t)cfg->hidden[l];
        }
    }

    /* tensor table: fc<l>w (out, in), fc<l>b (out) */
    static const char *const names[2 * (HPT_MLP_MAX_HIDDEN + 1)] = {
        "fc1w", "fc1b", "fc2w", "fc2b", "fc3w", "fc3b", "fc4w", "fc4b", "fc5w", "fc5b"};
    hpt_tensor_spec specs[2 * (HPT_MLP_MAX_HIDDEN + 1)];
    for (int l = 0; l <= nh; l++) {
        /* every layer's weights but the output head's are hidden matrices */
        specs[2 * l] = (hpt_tensor_spec){names[2 * l], 2, {g->dout[l], g->din[l]}, 1, l < nh};
        specs[2 * l + 1] = (hpt_tensor_spec){names[2 * l + 1], 1, {g->dout[l]}, 0, 0};
    }
    hpt_status st = hpt_model_alloc_params(m, specs, 2 * g->nl);
    if (st != HPT_OK) { hpt_model_free(m); return st; }

    HPT_CARVE_ACTS(m, g->act_arena, mlp_acts, &g->a, MLP_ACTS);
    if (!g->act_arena) { hpt_model_free(m); return HPT_ERR_NOMEM; }

    /* He normal for layers feeding a ReLU, PyTorch's Linear default
     * (uniform +-1/sqrt(fan_in)) for the output layer, biases 0. */
    hpt_rng rng;
    hpt_rng_seed(&rng, seed);
    for (int l = 0; l <= nh; l++) {
        float *w = hpt_tensor_ptr(m->params, m, 2 * l);
        size_t n = m->tensors[2 * l].numel;
        if (l < nh) hpt_init_he_normal(w, n, g->din[l], &rng);
        else hpt_init_linear_uniform(w, n, g->din[l], &rng);
    }

    /* state-file config words: family, n_in, n_classes, n_hidden, hidden[0..3] */
    m->conf[0] = HPT_FAMILY_MLP;
    m->conf[1] = (uint32_t)NI; m->conf[2] = (uint32_t)K; m->conf[3] = (uint32_t)nh;
    for (int l = 0; l < HPT_MLP_MAX_HIDDEN; l++) m->conf[4 + l] = (uint32_t)g->cfg.hidden[l];
    m->nconf = 4 + HPT_MLP_MAX_HIDDEN;

    int len = snprintf(m->desc, sizeof m->desc, "mlp %d", NI);
    for (int l = 0; l < nh && len < (int)sizeof m->desc; l++)
        len += snprintf(m->desc + len, sizeof m->desc - len, "-%d", cfg->hidden[l]);
    if (len < (int)sizeof m->desc) snprintf(m->desc + len, sizeof m->desc - len, "-%d (B %d)", K, B);
    *out = m;
    return HPT_OK;
}

/* The activation arena's length in floats, from the same table (MLP_ACTS)
 * and slice rounding as hpt_mlp_init, without allocating (see
 * hpt_model_check_memory). Valid for configs within init's limits. */
size_t hpt_mlp_act_floats(const hpt_mlp_config *cfg, int B) {
    const size_t NI = (size_t)cfg->n_in, K = (size_t)cfg->n_classes;
    size_t SH = 0, MH = 0, total = 0;
    for (int l = 0; l < cfg->n_hidden && l < HPT_MLP_MAX_HIDDEN; l++) {
        SH += (size_t)cfg->hidden[l];
        if ((size_t)cfg->hidden[l] > MH) MH = (size_t)cfg->hidden[l];
    }
#define X(name, size, kind) total += ((size) + 15) / 16 * 16;   /* every kind F32 here */
    MLP_ACTS(X)
#undef X
    return total;
}
