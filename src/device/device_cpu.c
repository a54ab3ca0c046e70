/*
 * device_cpu.c — the CPU row of the device table: host memory (64-byte
 * aligned, zeroed, from the arena allocator) and src/kernels/sweep.c's
 * kernels, OpenMP-parallel. The reference every other row is tested against.
 */
#include "device.h"
#include "../kernels/kernels.h"

#include <string.h>

static const char *cpu_unavailable(void) { return NULL; }

static float *cpu_alloc(size_t n) { return hpt_arena_alloc(n); }
static void cpu_free(float *p) { hpt_arena_free(p); }
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

/* ---- the GPT-2 family's kernels: kernels.h's, scratch unused */

static size_t cpu_scratch_floats(int B, int T, int C, int NH, int V, int Vp) {
    (void)B; (void)T; (void)C; (void)NH; (void)V; (void)Vp;
    return 0;
}

/* kernels.h's att: the softmax rows, (B,NH,T,T) */
static size_t cpu_attention_state_floats(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * T;
}

static void cpu_upload_ints(int *dst, const int *host, size_t n) {
    if (n) memcpy(dst, host, n * sizeof(int));
}

static void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tok, int B, int T, int C,
                                 int V, float *scratch) {
    (void)V; (void)scratch;
    encoder_backward(dwte, dwpe, dout, tok, B, T, C);
}

static void cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                   const float *w, const float *mean, const float *rstd, int N, int C, int first,
                                   float *scratch) {
    (void)scratch;
    if (first) layernorm_backward_first(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    else layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

static void cpu_matmul_backward_dinp(float *dinp, const float *dout, const float *w, int N, int C, int OC,
                                     float *wide) {
    if (wide) matmul_backward_dinp_first_kblocks(dinp, dout, w, N, C, OC, wide);
    else matmul_backward_dinp_first(dinp, dout, w, N, C, OC);
}

static void cpu_matmul_backward_dweight(float *dw, float *db, const float *dout, const float *inp, int N, int C,
                                        int OC, int first, float *scratch) {
    (void)scratch;
    if (first) matmul_backward_dweight_first(dw, db, dout, inp, N, C, OC);
    else matmul_backward_dweight(dw, db, dout, inp, N, C, OC);
}

static void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                                   const float *att, int B, int T, int C, int NH, float *scratch) {
    (void)out; (void)scratch;   /* the probabilities are in att */
    attention_backward_first(dqkv, dout, qkv, att, B, T, C, NH);
}

static const hpt_dev_nn cpu_nn = {
    .scratch_floats = cpu_scratch_floats,
    .attention_state_floats = cpu_attention_state_floats,
    .upload_ints = cpu_upload_ints,
    .encoder_forward = encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .matmul_forward = matmul_forward,
    .matmul_backward_dinp = cpu_matmul_backward_dinp,
    .matmul_backward_dweight = cpu_matmul_backward_dweight,
    .attention_forward = attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward_first,
    .residual_forward = residual_forward,
    .xent_forward = softmax_xent_forward,
    .xent_backward = softmax_xent_backward,
};

static hpt_status cpu_sync(void) { return HPT_OK; }

static hpt_status cpu_set_precision(const char *name) {
    if (!name || !strcmp(name, "fp32")) return HPT_OK;
    return hpt_fail(HPT_ERR_ARG, "--precision %s: the CPU computes in fp32 only (tf32 and bf16 are a GPU's: "
                    "--device cuda)", name);
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
    .set_precision = cpu_set_precision,
    .sync = cpu_sync,
};
