/*
 * gpt2.c — the GPT-2 family: token + position embeddings, L pre-LayerNorm
 * blocks (causal multi-head attention, 4x GELU MLP), final LayerNorm, LM head
 * tied to the token embedding.
 *
 * Memory: parameters/gradients in the model's two arenas (model.c), and one
 * activation arena carved by the size table below, reserved for (B, T) at
 * init. The backward pass reuses six scratch buffers across layers instead of
 * keeping a gradient for every activation (llm.c keeps a full mirror), which
 * halves activation memory. The logits buffer is turned into probabilities
 * and then into dlogits in place. Activations are the device's element
 * (hpt_act: a float, or a bf16 on the GPU under --precision bf16), so they
 * are addressed in bytes (act_at); where they are narrower than floats the
 * GEMMs read a copy of the weights in that type, which each forward
 * rounds from the fp32 parameters (the optimizer's master weights).
 */
#include "family.h"
#include "../base/prof.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parameter tensors, in arena order: name, ndim, shape, weight decay. */
enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B,
       FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB, NUM_PARAM_TENSORS };

/* Activation arena, one X-macro line per buffer (family.h): name, size in
 * elements, kind (ACT: the device's activation element, hpt_act: a float,
 * or a bf16 on the GPU under --precision bf16; F32: a float everywhere).
 * Sizes use L, B, T, C, NH, Vp, S (the kernels' scratch), A (the attention
 * state of one layer: hpt_dev_nn's attention_state_floats, (B,NH,T,T)
 * softmax rows on the CPU, (B,NH,T) log-sum-exps on the CUDA row's flash
 * attention) and W (the GEMMs' weight copy: 0 where activations are floats,
 * since the GEMMs then read the parameters themselves). */
#define GPT2_ACTS(X)                                                               \
    X(encoded,   (size_t)B * T * C, ACT)         /* (B,T,C) */                     \
    X(ln1,       (size_t)L * B * T * C, ACT)     /* (L,B,T,C) */                   \
    X(ln1_mean,  (size_t)L * B * T, F32)         /* (L,B,T) */                     \
    X(ln1_rstd,  (size_t)L * B * T, F32)                                           \
    X(qkv,       (size_t)L * B * T * 3 * C, ACT) /* (L,B,T,3C) */                  \
    X(atty,      (size_t)L * B * T * C, ACT)     /* (L,B,T,C) */                   \
    X(att,       (size_t)L * A, F32)             /* (L, A) */                      \
    X(residual2, (size_t)L * B * T * C, ACT)                                       \
    X(ln2,       (size_t)L * B * T * C, ACT)                                       \
    X(ln2_mean,  (size_t)L * B * T, F32)                                           \
    X(ln2_rstd,  (size_t)L * B * T, F32)                                           \
    X(fch,       (size_t)L * B * T * 4 * C, ACT) /* (L,B,T,4C) */                  \
    X(fch_gelu,  (size_t)L * B * T * 4 * C, ACT)                                   \
    X(residual3, (size_t)L * B * T * C, ACT)                                       \
    X(lnf,       (size_t)B * T * C, ACT)                                           \
    X(lnf_mean,  (size_t)B * T, F32)                                               \
    X(lnf_rstd,  (size_t)B * T, F32)                                               \
    X(logits,    (size_t)B * T * Vp, ACT)  /* (B,T,Vp) -> probs -> dlogits */      \
    X(losses,    (size_t)B * T, F32)                                               \
    X(proj,      (size_t)B * T * C, ACT)         /* forward scratch */             \
    /* backward scratch, reused by every layer */                                  \
    X(dresid,    (size_t)B * T * C, ACT)                                           \
    X(dln,       (size_t)B * T * C, ACT)                                           \
    X(datty,     (size_t)B * T * C, ACT)                                           \
    X(dqkv,      (size_t)B * T * 3 * C, ACT)                                       \
    X(dfch,      (size_t)B * T * 4 * C, ACT)                                       \
    X(dfch_gelu, (size_t)B * T * 4 * C, ACT)                                       \
    /* the batch's token ids and targets (ints) in the device's memory */          \
    X(tok,       (size_t)B * T, F32)                                               \
    X(tgt,       (size_t)B * T, F32)                                               \
    X(scratch,   S, F32)                  /* the device's kernels' (hpt_dev_nn) */ \
    X(wcopy,     W, ACT)                  /* the GEMMs' weights, gemm_weights order */

typedef struct gpt2_acts { GPT2_ACTS(HPT_ACT_FIELD) } gpt2_acts;

_Static_assert(sizeof(int) == sizeof(float), "token ids share the float arena's slices");

/* The weight matrices the GEMMs read, in the order of their copy (wcopy):
 * the tied embedding (the LM head) and each block's four. */
static const int gemm_weights[] = {WTE, QKVW, ATTPROJW, FCW, FCPROJW};
enum { N_GEMM_WEIGHTS = sizeof gemm_weights / sizeof gemm_weights[0] };

typedef struct gpt2 {
    hpt_gpt2_config cfg;
    int Vp;
    int B, T;             /* reserved */
    int cur_B, cur_T;     /* last forward */
    const hpt_device *dev;
    const hpt_dev_nn *nn; /* dev's kernels */
    size_t act_elem;      /* bytes of one hpt_act, fixed at init (nn->act_bytes then) */
    float *act_arena;     /* the device's memory */
    gpt2_acts a;
    size_t wcopy_at[NUM_PARAM_TENSORS];   /* each GEMM weight's offset in wcopy (elements) */
    float *host_losses;   /* (B,T): the last forward's losses, downloaded for their mean */
} gpt2;

/* elements of the GEMMs' weight copy: every GEMM weight matrix, where the
 * activations are narrower than the parameters (0 where they are floats) */
static size_t wcopy_elems(int Vp, int L, int C, size_t act_elem) {
    return act_elem < sizeof(float) ? (size_t)Vp * C + (size_t)12 * L * C * C : 0;
}

/* activation p advanced by i elements (const or not: the caller's) */
static hpt_act *act_at(const gpt2 *g, const hpt_act *p, size_t i) {
    return (hpt_act *)((char *)p + i * g->act_elem);
}

/* Layer l's matrix of weight tensor t as the GEMMs read it: the parameters
 * themselves where activations are floats, else its copy in wcopy (written
 * by the forward, refresh_weight_copy). */
static const hpt_act *gemm_weight(const gpt2 *g, const hpt_model *m, int t, int l) {
    const size_t per_layer = t == WTE ? 0 : m->tensors[t].numel / (size_t)g->cfg.n_layer;
    if (g->a.wcopy && g->act_elem < sizeof(float))
        return act_at(g, g->a.wcopy, g->wcopy_at[t] + (size_t)l * per_layer);
    return (const hpt_act *)(hpt_tensor_ptr(m->params, m, t) + (size_t)l * per_layer);
}

/* Under narrow activations, the GEMMs' weights rounded into wcopy: once per
 * forward (the parameters change only between a backward and the next
 * forward), a sweep of the weights that costs about what reading them does. */
static void refresh_weight_copy(const gpt2 *g, const hpt_model *m) {
    if (g->act_elem == sizeof(float)) return;
    for (int i = 0; i < N_GEMM_WEIGHTS; i++) {
        const int t = gemm_weights[i];
        HPT_PROF(HPT_PROF_WEIGHT_CAST, 0,
                 g->nn->act_from_floats(g->dev, act_at(g, g->a.wcopy, g->wcopy_at[t]), hpt_tensor_ptr(m->params, m, t),
                                        m->tensors[t].numel));
    }
}

/* a.tok and a.tgt as the ints they hold */
static int *tok_ids(const gpt2 *g) { return (int *)g->a.tok; }
static int *tgt_ids(const gpt2 *g) { return (int *)g->a.tgt; }

int hpt_gpt2_padded_vocab(int V) {
    /* GPT-2's 50257 -> 50304 (multiple of 128, as llm.c); small vocabularies
     * only to a multiple of 8, so char-level heads are not doubled. */
    int m = V >= 4096 ? 128 : 8;
    return (V + m - 1) / m * m;
}

static void gpt2_free_impl(void *impl) {
    gpt2 *g = impl;
    if (!g) return;
    if (g->act_arena) g->dev->free(g->dev, g->act_arena);
    free(g->host_losses);
    free(g);
}

static double gpt2_train_flops(const hpt_model *m, int B, int T) {
    /* 6 FLOPs per parameter-token for the matmuls (the LM head counted once
     * through the tied wte, the position table not at all), plus attention's
     * 12*L*C*T per token without causal discount: the nanoGPT/PaLM convention
     * of docs/references.md section 2.1. */
    const gpt2 *g = m->impl;
    const hpt_gpt2_config *c = &g->cfg;
    double N = (double)m->nparams - (double)m->tensors[WPE].numel;
    return (double)B * T * (6.0 * N + 12.0 * c->n_layer * c->n_embd * (double)T);
}

/* ---------------------------------------------------------------- profiled kernel calls
 * Every kernel call of the step goes through HPT_PROF (src/base/prof.h):
 * free when profiling is off, per-kernel seconds and FLOPs when on. */

static double gemm_flops(int N, int C, int OC) { return 2.0 * N * C * OC; }

/* causal attention's q.k and att.v products: T(T+1)/2 pairs per (b, head),
 * 2 hs FLOPs each for both; the backward does twice that. The model's
 * FLOPs: a flash-style backward (the CUDA row's) also recomputes q.k and
 * dout.v, which is not counted. */
static double attn_fwd_flops(int B, int T, int C) { return 2.0 * B * C * (double)T * (T + 1); }

static void linear_forward(const gpt2 *g, int slot, hpt_act *out, const hpt_act *inp, const hpt_act *w,
                           const float *b, int N, int C, int OC) {
    HPT_PROF(slot, gemm_flops(N, C, OC), g->nn->matmul_forward(g->dev, out, inp, w, b, N, C, OC));
}

/* = matmul_backward (dinp half, then dweight half), each half in its own
 * slot. dinp is always a scratch buffer written here first (no zeroing
 * sweep before it); dw and db are written (first) or accumulated onto. */
static void linear_backward(const gpt2 *g, int slot_dx, int slot_dw, hpt_act *dinp, float *dw, float *db,
                            const hpt_act *dout, const hpt_act *inp, const hpt_act *w, int N, int C, int OC,
                            int first) {
    HPT_PROF(slot_dx, gemm_flops(N, C, OC), g->nn->matmul_backward_dinp(g->dev, dinp, dout, w, N, C, OC, NULL));
    HPT_PROF(slot_dw, gemm_flops(N, C, OC),
             g->nn->matmul_backward_dweight(g->dev, dw, db, dout, inp, N, C, OC, first, g->a.scratch));
}

static void ln_backward(const gpt2 *g, hpt_act *dinp, float *dw, float *db, const hpt_act *dout,
                        const hpt_act *inp, const float *w, const float *mean, const float *rstd, int N, int C,
                        int first) {
    HPT_PROF(HPT_PROF_LN_BWD, (double)HPT_FLOPS_LN_BWD * N * C,
             g->nn->layernorm_backward(g->dev, dinp, dw, db, dout, inp, w, mean, rstd, N, C, first, g->a.scratch));
}

static void zero_scratch(const gpt2 *g, hpt_act *p, size_t n) {
    /* all-zero bits are a zero in every activation type */
    HPT_PROF(HPT_PROF_BWD_MEMSET, 0, g->dev->fill((float *)p, 0.0f, (n * g->act_elem + 3) / sizeof(float)));
}

/* One layer's slices of the per-layer activations, which are (L, B, T, ...)
 * with the batch's B and T, so smaller batches pack densely at the front.
 * resid is the block's input (the embeddings, or the previous block's). */
typedef struct layer_acts {
    hpt_act *resid, *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *att;
} layer_acts;

static layer_acts layer_slices(const gpt2 *g, int l, int B, int T, size_t A) {
    const gpt2_acts *a = &g->a;
    const size_t BT = (size_t)B * T, BTC = BT * g->cfg.n_embd;
    layer_acts s;
    s.resid = l == 0 ? a->encoded : act_at(g, a->residual3, (size_t)(l - 1) * BTC);
    s.ln1 = act_at(g, a->ln1, l * BTC);
    s.qkv = act_at(g, a->qkv, l * BTC * 3);
    s.atty = act_at(g, a->atty, l * BTC);
    s.res2 = act_at(g, a->residual2, l * BTC);
    s.ln2 = act_at(g, a->ln2, l * BTC);
    s.fch = act_at(g, a->fch, l * BTC * 4);
    s.fch_gelu = act_at(g, a->fch_gelu, l * BTC * 4);
    s.res3 = act_at(g, a->residual3, l * BTC);
    s.ln1_mean = a->ln1_mean + l * BT; s.ln1_rstd = a->ln1_rstd + l * BT;
    s.ln2_mean = a->ln2_mean + l * BT; s.ln2_rstd = a->ln2_rstd + l * BT;
    s.att = a->att + l * A;
    return s;
}

/* ---------------------------------------------------------------- forward */

static hpt_status gpt2_forward(hpt_model *m, const hpt_batch *batch, float *loss) {
    gpt2 *g = m->impl;
    const int B = batch->B, T = batch->T, C = g->cfg.n_embd, NH = g->cfg.n_head;
    const int L = g->cfg.n_layer, V = g->cfg.vocab_size, Vp = g->Vp;
    const size_t BTC = (size_t)B * T * C;
    if (!batch->tokens) return hpt_fail(HPT_ERR_ARG, "gpt2: batch has no tokens");
    for (size_t i = 0; i < (size_t)B * T; i++) {
        if (batch->tokens[i] < 0 || batch->tokens[i] >= V)
            return hpt_fail(HPT_ERR_ARG, "gpt2: token %d out of range [0,%d)", batch->tokens[i], V);
        if (batch->targets && (batch->targets[i] < 0 || batch->targets[i] >= V))
            return hpt_fail(HPT_ERR_ARG, "gpt2: target %d out of range [0,%d)", batch->targets[i], V);
    }
    g->cur_B = B; g->cur_T = T;
    gpt2_acts *a = &g->a;
    const hpt_dev_nn *nn = g->nn;
    const size_t A = nn->attention_state_floats(g->dev, B, T, C, NH);   /* one layer's attention state: (L, A) */
    nn->upload_ints(g->dev, tok_ids(g), batch->tokens, (size_t)B * T);
    if (batch->targets) nn->upload_ints(g->dev, tgt_ids(g), batch->targets, (size_t)B * T);
    float *P[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) P[i] = hpt_tensor_ptr(m->params, m, i);
    refresh_weight_copy(g, m);

    HPT_PROF(HPT_PROF_EMBED_FWD, 0, nn->encoder_forward(g->dev, a->encoded, tok_ids(g), P[WTE], P[WPE], B, T, C));
    for (int l = 0; l < L; l++) {
        const layer_acts s = layer_slices(g, l, B, T, A);
        HPT_PROF(HPT_PROF_LN_FWD, (double)HPT_FLOPS_LN_FWD * BTC,
                 nn->layernorm_forward(g->dev, s.ln1, s.ln1_mean, s.ln1_rstd, s.resid, P[LN1W] + l * C, P[LN1B] + l * C,
                                       B * T, C));
        linear_forward(g, HPT_PROF_QKV_FWD, s.qkv, s.ln1, gemm_weight(g, m, QKVW, l), P[QKVB] + l * 3 * C,
                       B * T, C, 3 * C);
        HPT_PROF(HPT_PROF_ATTN_FWD, attn_fwd_flops(B, T, C), nn->attention_forward(g->dev, s.atty, s.att, s.qkv, B, T,
                 C, NH));
        linear_forward(g, HPT_PROF_ATTPROJ_FWD, a->proj, s.atty, gemm_weight(g, m, ATTPROJW, l), P[ATTPROJB] + l * C,
                       B * T, C, C);
        HPT_PROF(HPT_PROF_RESID_FWD, 0, nn->residual_forward(g->dev, s.res2, s.resid, a->proj, BTC));
        HPT_PROF(HPT_PROF_LN_FWD, (double)HPT_FLOPS_LN_FWD * BTC,
                 nn->layernorm_forward(g->dev, s.ln2, s.ln2_mean, s.ln2_rstd, s.res2, P[LN2W] + l * C, P[LN2B] + l * C,
                                       B * T, C));
        linear_forward(g, HPT_PROF_FC_FWD, s.fch, s.ln2, gemm_weight(g, m, FCW, l), P[FCB] + l * 4 * C,
                       B * T, C, 4 * C);
        HPT_PROF(HPT_PROF_GELU_FWD, (double)HPT_FLOPS_GELU_FWD * BTC * 4, nn->gelu_forward(g->dev, s.fch_gelu, s.fch,
                 BTC * 4));
        linear_forward(g, HPT_PROF_FCPROJ_FWD, a->proj, s.fch_gelu, gemm_weight(g, m, FCPROJW, l),
                       P[FCPROJB] + l * C, B * T, 4 * C, C);
        HPT_PROF(HPT_PROF_RESID_FWD, 0, nn->residual_forward(g->dev, s.res3, s.res2, a->proj, BTC));
    }
    HPT_PROF(HPT_PROF_LN_FWD, (double)HPT_FLOPS_LN_FWD * BTC,
             nn->layernorm_forward(g->dev, a->lnf, a->lnf_mean, a->lnf_rstd, act_at(g, a->residual3, (L - 1) * BTC),
                                   P[LNFW],
                                   P[LNFB], B * T, C));
    linear_forward(g, HPT_PROF_LMHEAD_FWD, a->logits, a->lnf, gemm_weight(g, m, WTE, 0), NULL, B * T, C, Vp);

    m->logits = (const float *)a->logits; m->logit_bytes = g->act_elem; m->n_out = V; m->out_row = Vp;
    if (batch->targets) {
        HPT_PROF(HPT_PROF_XENT_FWD, (double)HPT_FLOPS_XENT_FWD * B * T * V,
                 nn->xent_forward(g->dev, a->losses, a->logits, tgt_ids(g), B * T, V, Vp));
        g->dev->download(g->host_losses, a->losses, (size_t)B * T);
        float mean = hpt_mean_loss(g->host_losses, (size_t)B * T);
        if (loss) *loss = mean;
    }
    return g->dev->sync(g->dev);   /* a kernel's failure on a device that runs ahead of the host */
}

/* ---------------------------------------------------------------- backward */

/* first: the gradient arena's contents are ignored, every gradient is
 * written as if onto zeros (hpt_model_backward_fresh): dW GEMMs with beta 0,
 * layernorm and bias sums written, the position table zeroed (the one
 * gradient written only in part, at rows < T). Otherwise every gradient is
 * accumulated onto. Either way the scratch gradients are written first. */
static hpt_status gpt2_backward_impl(hpt_model *m, float loss_scale, int first) {
    gpt2 *g = m->impl;
    const int B = g->cur_B, T = g->cur_T, C = g->cfg.n_embd, NH = g->cfg.n_head;
    const int L = g->cfg.n_layer, V = g->cfg.vocab_size, Vp = g->Vp;
    const size_t BTC = (size_t)B * T * C;
    gpt2_acts *a = &g->a;
    const hpt_dev_nn *nn = g->nn;
    const size_t A = nn->attention_state_floats(g->dev, B, T, C, NH);   /* one layer's attention state */
    float *P[NUM_PARAM_TENSORS], *G[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        P[i] = hpt_tensor_ptr(m->params, m, i);
        G[i] = hpt_tensor_ptr(m->grads, m, i);
    }
    /* The loss is the mean over B*T positions, scaled for accumulation. */
    HPT_PROF(HPT_PROF_XENT_BWD, 0,
             nn->xent_backward(g->dev, a->logits, tgt_ids(g), loss_scale / ((float)B * T), B * T, V, Vp));
    /* the LM head: dx from Vp-long rows, its inner dimension split into
     * blocks (dfch, free until the first layer, holds 3 of their products) */
    HPT_PROF(HPT_PROF_LMHEAD_DX, gemm_flops(B * T, C, Vp),
             nn->matmul_backward_dinp(g->dev, a->dln, a->logits, gemm_weight(g, m, WTE, 0), B * T, C, Vp, a->dfch));
    HPT_PROF(HPT_PROF_LMHEAD_DW, gemm_flops(B * T, C, Vp),
             nn->matmul_backward_dweight(g->dev, G[WTE], NULL, a->logits, a->lnf, B * T, C, Vp, first, a->scratch));
    zero_scratch(g, a->dresid, BTC);
    ln_backward(g, a->dresid, G[LNFW], G[LNFB], a->dln, act_at(g, a->residual3, (L - 1) * BTC), P[LNFW], a->lnf_mean,
                a->lnf_rstd, B * T, C, first);

    /* dresid holds d(residual stream) between blocks; each block adds its
     * branch's contribution to it, walking the layers backwards. */
    for (int l = L - 1; l >= 0; l--) {
        const layer_acts s = layer_slices(g, l, B, T, A);

        /* MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
        linear_backward(g, HPT_PROF_FCPROJ_DX, HPT_PROF_FCPROJ_DW, a->dfch_gelu, G[FCPROJW] + (size_t)l * 4 * C * C,
                        G[FCPROJB] + l * C, a->dresid, s.fch_gelu, gemm_weight(g, m, FCPROJW, l), B * T, 4 * C, C,
                        first);
        HPT_PROF(HPT_PROF_GELU_BWD, (double)HPT_FLOPS_GELU_BWD * BTC * 4,
                 nn->gelu_backward(g->dev, a->dfch, s.fch, a->dfch_gelu, BTC * 4));
        linear_backward(g, HPT_PROF_FC_DX, HPT_PROF_FC_DW, a->dln, G[FCW] + (size_t)l * 4 * C * C, G[FCB] + l * 4 * C,
                        a->dfch, s.ln2, gemm_weight(g, m, FCW, l), B * T, C, 4 * C, first);
        ln_backward(g, a->dresid, G[LN2W] + l * C, G[LN2B] + l * C, a->dln, s.res2, P[LN2W] + l * C, s.ln2_mean,
                    s.ln2_rstd, B * T, C, first);

        /* attention branch: res2 = resid + attproj(attn(qkv(ln1(resid)))) */
        linear_backward(g, HPT_PROF_ATTPROJ_DX, HPT_PROF_ATTPROJ_DW, a->datty, G[ATTPROJW] + (size_t)l * C * C,
                        G[ATTPROJB] + l * C, a->dresid, s.atty, gemm_weight(g, m, ATTPROJW, l), B * T, C, C, first);
        HPT_PROF(HPT_PROF_ATTN_BWD, 2.0 * attn_fwd_flops(B, T, C),
                 nn->attention_backward(g->dev, a->dqkv, a->datty, s.qkv, s.atty, s.att, B, T, C, NH, a->scratch));
        linear_backward(g, HPT_PROF_QKV_DX, HPT_PROF_QKV_DW, a->dln, G[QKVW] + (size_t)l * 3 * C * C,
                        G[QKVB] + l * 3 * C, a->dqkv, s.ln1, gemm_weight(g, m, QKVW, l), B * T, C, 3 * C, first);
        ln_backward(g, a->dresid, G[LN1W] + l * C, G[LN1B] + l * C, a->dln, s.resid, P[LN1W] + l * C, s.ln1_mean,
                    s.ln1_rstd, B * T, C, first);
    }
    if (first) HPT_PROF(HPT_PROF_ZERO_GRAD, 0, g->dev->fill(G[WPE], 0.0f, m->tensors[WPE].numel));
    HPT_PROF(HPT_PROF_EMBED_BWD, 0, nn->encoder_backward(g->dev, G[WTE], G[WPE], a->dresid, tok_ids(g), B, T, C, V,
             a->scratch));
    return g->dev->sync(g->dev);
}

static hpt_status gpt2_backward(hpt_model *m, float loss_scale) { return gpt2_backward_impl(m, loss_scale, 0); }
static hpt_status gpt2_backward_first(hpt_model *m, float loss_scale) { return gpt2_backward_impl(m, loss_scale, 1); }

/* ---------------------------------------------------------------- init */

static const hpt_model_ops gpt2_ops = {
    .forward = gpt2_forward,
    .backward = gpt2_backward,
    .backward_first = gpt2_backward_first,
    .train_flops = gpt2_train_flops,
    .free_impl = gpt2_free_impl,
};

/* The model of hpt_gpt2_init, or (params_only) its parameter arena alone,
 * zeroed: no gradients, no activations (B and T unused). */
static hpt_status gpt2_new(hpt_model **out, const hpt_gpt2_config *cfg, int B, int T, uint64_t seed,
                           int params_only, const hpt_device *dev) {
    *out = NULL;
    const int V = cfg->vocab_size, maxT = cfg->block_size, L = cfg->n_layer;
    const int NH = cfg->n_head, C = cfg->n_embd;
    if (V < 2 || V > (1 << 24)) return hpt_fail(HPT_ERR_ARG, "vocab_size %d out of range [2, 2^24]", V);
    if (maxT < 1 || maxT > 8192) return hpt_fail(HPT_ERR_ARG, "block_size %d out of range [1, 8192]", maxT);
    if (L < 1 || L > 256) return hpt_fail(HPT_ERR_ARG, "n_layer %d out of range [1, 256]", L);
    if (NH < 1 || C < 1 || C % NH != 0)
        return hpt_fail(HPT_ERR_ARG, "n_embd %d must be a positive multiple of n_head %d", C, NH);
    if (C > 16384) return hpt_fail(HPT_ERR_ARG, "n_embd %d too large", C);
    if (!params_only && (B < 1 || T < 1 || T > maxT))
        return hpt_fail(HPT_ERR_ARG, "batch %dx%d invalid for block_size %d", B, T, maxT);
    if (params_only) B = T = 0;  /* forward refuses every batch */
    const int Vp = hpt_gpt2_padded_vocab(V);

    hpt_model *m;
    gpt2 *g = hpt_family_new(&m, sizeof *g, &gpt2_ops, "gpt2");
    if (!g) return HPT_ERR_NOMEM;
    g->cfg = *cfg; g->Vp = Vp; g->B = B; g->T = T;
    g->dev = dev; g->nn = dev->nn;
    m->dev = dev;
    m->max_B = B; m->max_T = T;

    const hpt_tensor_spec specs[NUM_PARAM_TENSORS] = {
        {"wte", 2, {Vp, C}, 1, 0},          {"wpe", 2, {maxT, C}, 1, 0},
        {"ln1w", 2, {L, C}, 0, 0},          {"ln1b", 2, {L, C}, 0, 0},
        {"qkvw", 3, {L, 3 * C, C}, 1, 1},   {"qkvb", 2, {L, 3 * C}, 0, 0},
        {"attprojw", 3, {L, C, C}, 1, 1},   {"attprojb", 2, {L, C}, 0, 0},
        {"ln2w", 2, {L, C}, 0, 0},          {"ln2b", 2, {L, C}, 0, 0},
        {"fcw", 3, {L, 4 * C, C}, 1, 1},    {"fcb", 2, {L, 4 * C}, 0, 0},
        {"fcprojw", 3, {L, C, 4 * C}, 1, 1}, {"fcprojb", 2, {L, C}, 0, 0},
        {"lnfw", 1, {C}, 0, 0},             {"lnfb", 1, {C}, 0, 0},
    };
    m->params_only = params_only;
    hpt_status st = hpt_model_alloc_params(m, specs, NUM_PARAM_TENSORS);
    if (st != HPT_OK) { hpt_model_free(m); return st; }
    m->conf[0] = HPT_FAMILY_GPT2;
    m->conf[1] = (uint32_t)V; m->conf[2] = (uint32_t)maxT; m->conf[3] = (uint32_t)L;
    m->conf[4] = (uint32_t)NH; m->conf[5] = (uint32_t)C;
    m->nconf = 6;
    snprintf(m->desc, sizeof m->desc, "gpt2 L%d H%d C%d V%d (Vp %d) block %d", L, NH, C, V, Vp, maxT);
    if (params_only) { *out = m; return HPT_OK; }  /* the caller fills the zeroed arena */

    const size_t S = g->nn->scratch_floats(g->dev, B, T, C, NH, V, Vp);
    const size_t A = g->nn->attention_state_floats(g->dev, B, T, C, NH);
    g->act_elem = g->nn->act_bytes(g->dev);
    const size_t W = wcopy_elems(Vp, L, C, g->act_elem);
    size_t at = 0;
    for (int i = 0; i < N_GEMM_WEIGHTS; i++) {
        g->wcopy_at[gemm_weights[i]] = at;
        at += m->tensors[gemm_weights[i]].numel;
    }
    HPT_ASSERT(!W || at == W);   /* wcopy_elems counts the same matrices */
    HPT_CARVE_ACTS(m, g->act_arena, gpt2_acts, &g->a, GPT2_ACTS);
    g->host_losses = malloc((size_t)B * T * sizeof(float));
    if (!g->act_arena || !g->host_losses) {
        hpt_model_free(m);
        return hpt_fail(HPT_ERR_NOMEM, "gpt2: cannot allocate the activations (%s)", dev->name);
    }

    /* GPT-2 init: N(0, 0.02) for matrices and embeddings, residual
     * projections scaled by 1/sqrt(2L), biases 0, LayerNorm gains 1. The
     * padded vocabulary rows stay 0 forever (their gradient is 0). */
    float *host = hpt_arena_alloc(m->nparams);   /* drawn here, then uploaded to the device */
    if (!host) { hpt_model_free(m); return HPT_ERR_NOMEM; }
    hpt_rng rng;
    hpt_rng_seed(&rng, seed);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        float *p = hpt_tensor_ptr(host, m, i);
        size_t n = m->tensors[i].numel;
        if (i == LN1W || i == LN2W || i == LNFW) {
            for (size_t k = 0; k < n; k++) p[k] = 1.0f;
        } else if (m->tensors[i].decay) {
            float std = 0.02f;
            if (i == ATTPROJW || i == FCPROJW) std /= sqrtf(2.0f * L);
            if (i == WTE) n = (size_t)V * C;
            for (size_t k = 0; k < n; k++) p[k] = std * hpt_rng_normal(&rng);
        }
    }
    dev->upload(m->params, host, m->nparams);
    hpt_arena_free(host);
    *out = m;
    return HPT_OK;
}

hpt_status hpt_gpt2_init(hpt_model **out, const hpt_gpt2_config *cfg, int B, int T, uint64_t seed,
                         const hpt_device *dev) {
    dev = hpt_device_or_cpu(dev);
    HPT_ASSERT(dev->nn);
    return gpt2_new(out, cfg, B, T, seed, 0, dev);
}

hpt_status hpt_gpt2_init_params_only(hpt_model **out, const hpt_gpt2_config *cfg) {
    return gpt2_new(out, cfg, 0, 0, 0, 1, &hpt_device_cpu);
}

/* The activation arena's length in floats, from the same table (GPT2_ACTS)
 * and slice rounding as hpt_gpt2_init, without allocating: the memory check
 * (hpt_model_check_memory) sizes a model with it before building one. Valid
 * for configs within init's limits. */
size_t hpt_gpt2_act_floats(const hpt_gpt2_config *cfg, int B, int T, const hpt_device *dev) {
    dev = hpt_device_or_cpu(dev);
    const size_t L = (size_t)cfg->n_layer, NH = (size_t)cfg->n_head, C = (size_t)cfg->n_embd;
    const size_t Vp = (size_t)hpt_gpt2_padded_vocab(cfg->vocab_size);
    const size_t S = dev->nn->scratch_floats(dev, B, T, (int)C, (int)NH, cfg->vocab_size, (int)Vp);
    const size_t A = dev->nn->attention_state_floats(dev, B, T, (int)C, (int)NH);
    const size_t elem = dev->nn->act_bytes(dev);
    const size_t W = wcopy_elems((int)Vp, (int)L, (int)C, elem);
    size_t total = 0;
#define X(name, size, kind) total += (HPT_KIND_FLOATS_##kind((size), elem) + 15) / 16 * 16;
    GPT2_ACTS(X)
#undef X
    return total;
}
