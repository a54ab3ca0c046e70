/*
 * device_cpu.c — the CPU row of the device table: host memory (64-byte
 * aligned, zeroed, from the arena allocator) and src/kernels/sweep.c's
 * kernels, OpenMP-parallel. The reference every other row is tested against.
 */
#include "device.h"
#include "../kernels/kernels.h"

#include <string.h>

/* the instance: the CPU row keeps nothing of its own */
#define SELF const hpt_device *self __attribute__((unused))

static const char *cpu_unavailable(void) { return NULL; }

static float *cpu_alloc(SELF, size_t n) { return hpt_arena_alloc(n); }
static void cpu_free(SELF, float *p) { hpt_arena_free(p); }
/* host and device memory are one here: the three copies are memcpy */
static void cpu_copy(float *dst, const float *src, size_t n) {
    if (n) memcpy(dst, src, n * sizeof(float));
}

static void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, const hpt_dev_adamw *a) {
    adamw_update_scaled(params, grads, m, v, n, a->gscale, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                        a->t);
}

static void cpu_sf_adamw(float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a) {
    sf_adamw_update_scaled(y, g, z, x, v, n, a->gscale, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->c,
                           a->t);
}

/* ---- the GPT-2 family's kernels: kernels.h's, scratch unused. An hpt_act
 * is a float here (act_bytes 4): the wrappers below only name the pointers
 * as the kernels' floats. */

#define F(p) ((float *)(p))
#define CF(p) ((const float *)(p))

static size_t cpu_scratch_floats(SELF, int B, int T, int C, int NH, int V, int Vp) {
    (void)B; (void)T; (void)C; (void)NH; (void)V; (void)Vp;
    return 0;
}

/* kernels.h's att: the softmax rows, (B,NH,T,T) */
static size_t cpu_attention_state_floats(SELF, int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * T;
}

static size_t cpu_act_bytes(SELF) { return sizeof(float); }

static void cpu_upload_ints(SELF, int *dst, const int *host, size_t n) {
    if (n) memcpy(dst, host, n * sizeof(int));
}

static void cpu_act_from_floats(SELF, hpt_act *dst, const float *src, size_t n) { cpu_copy(F(dst), src, n); }
static void cpu_download_acts(SELF, float *host, const hpt_act *src, size_t n) { cpu_copy(host, CF(src), n); }

static void cpu_encoder_forward(SELF, hpt_act *out, const int *tok, const float *wte, const float *wpe, int B, int T,
                                int C) {
    encoder_forward(F(out), tok, wte, wpe, B, T, C);
}

static void cpu_encoder_backward(SELF, float *dwte, float *dwpe, const hpt_act *dout, const int *tok, int B, int T,
                                 int C, int V, float *scratch) {
    (void)V; (void)scratch;
    encoder_backward(dwte, dwpe, CF(dout), tok, B, T, C);
}

static void cpu_layernorm_forward(SELF, hpt_act *out, float *mean, float *rstd, const hpt_act *inp, const float *w,
                                  const float *b, int N, int C) {
    layernorm_forward(F(out), mean, rstd, CF(inp), w, b, N, C);
}

static void cpu_layernorm_backward(SELF, hpt_act *dinp, float *dw, float *db, const hpt_act *dout, const hpt_act *inp,
                                   const float *w, const float *mean, const float *rstd, int N, int C, int first,
                                   float *scratch) {
    (void)scratch;
    if (first) layernorm_backward_first(F(dinp), dw, db, CF(dout), CF(inp), w, mean, rstd, N, C);
    else layernorm_backward(F(dinp), dw, db, CF(dout), CF(inp), w, mean, rstd, N, C);
}

static void cpu_matmul_forward(SELF, hpt_act *out, const hpt_act *inp, const hpt_act *w, const float *b, int N, int C,
                               int OC) {
    matmul_forward(F(out), CF(inp), CF(w), b, N, C, OC);
}

static void cpu_matmul_backward_dinp(SELF, hpt_act *dinp, const hpt_act *dout, const hpt_act *w, int N, int C, int OC,
                                     hpt_act *wide) {
    if (wide) matmul_backward_dinp_first_kblocks(F(dinp), CF(dout), CF(w), N, C, OC, F(wide));
    else matmul_backward_dinp_first(F(dinp), CF(dout), CF(w), N, C, OC);
}

static void cpu_matmul_backward_dweight(SELF, float *dw, float *db, const hpt_act *dout, const hpt_act *inp, int N,
                                        int C, int OC, int first, float *scratch) {
    (void)scratch;
    if (first) matmul_backward_dweight_first(dw, db, CF(dout), CF(inp), N, C, OC);
    else matmul_backward_dweight(dw, db, CF(dout), CF(inp), N, C, OC);
}

static void cpu_attention_forward(SELF, hpt_act *out, float *att, const hpt_act *qkv, int B, int T, int C, int NH) {
    attention_forward(F(out), att, CF(qkv), B, T, C, NH);
}

static void cpu_attention_backward(SELF, hpt_act *dqkv, const hpt_act *dout, const hpt_act *qkv, const hpt_act *out,
                                   const float *att, int B, int T, int C, int NH, float *scratch) {
    (void)out; (void)scratch;   /* the probabilities are in att */
    attention_backward_first(F(dqkv), CF(dout), CF(qkv), att, B, T, C, NH);
}

static void cpu_gelu_forward(SELF, hpt_act *out, const hpt_act *inp, size_t n) { gelu_forward(F(out), CF(inp), n); }

static void cpu_gelu_backward(SELF, hpt_act *dinp, const hpt_act *inp, const hpt_act *dout, size_t n) {
    gelu_backward_first(F(dinp), CF(inp), CF(dout), n);
}

static void cpu_residual_forward(SELF, hpt_act *out, const hpt_act *a, const hpt_act *b, size_t n) {
    residual_forward(F(out), CF(a), CF(b), n);
}

static void cpu_xent_forward(SELF, float *losses, hpt_act *logits, const int *targets, int N, int V, int Vp) {
    softmax_xent_forward(losses, F(logits), targets, N, V, Vp);
}

static void cpu_xent_backward(SELF, hpt_act *probs, const int *targets, float dloss, int N, int V, int Vp) {
    softmax_xent_backward(F(probs), targets, dloss, N, V, Vp);
}

static const hpt_dev_nn cpu_nn = {
    .scratch_floats = cpu_scratch_floats,
    .attention_state_floats = cpu_attention_state_floats,
    .act_bytes = cpu_act_bytes,
    .upload_ints = cpu_upload_ints,
    .act_from_floats = cpu_act_from_floats,
    .download_acts = cpu_download_acts,
    .encoder_forward = cpu_encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward_dinp = cpu_matmul_backward_dinp,
    .matmul_backward_dweight = cpu_matmul_backward_dweight,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .residual_forward = cpu_residual_forward,
    .xent_forward = cpu_xent_forward,
    .xent_backward = cpu_xent_backward,
};

static hpt_status cpu_sync(SELF) { return HPT_OK; }

/* fp32 alone; shared with the guard row, whose arithmetic is this row's */
hpt_status hpt_device_cpu_open(hpt_device *d) {
    if (!strcmp(d->precision, "fp32")) { d->precision = "fp32"; return HPT_OK; }
    return hpt_fail(HPT_ERR_ARG, "--precision %s: the CPU computes in fp32 only (tf32 and bf16 are a GPU's: "
                    "--device cuda)", d->precision);
}

const hpt_device hpt_device_cpu = {
    .name = "cpu",
    .summary = "the host's cores (OpenMP, OpenBLAS): the default",
    .unavailable = cpu_unavailable,
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .fill = fill_value,
    .swap = swap_inplace,
    .scale = scale_inplace,
    .axpy = axpy_inplace,
    .lerp = lerp_inplace,
    .sumsq = sumsq,
    .dot = dot_product,
    .adamw = cpu_adamw,
    .sf_adamw = cpu_sf_adamw,
    .outer_step = outer_step,
    .sf_outer_step = sf_outer_step,
    .nn = &cpu_nn,
    .sync = cpu_sync,
    .open = hpt_device_cpu_open,
    .precision = "fp32",
};
