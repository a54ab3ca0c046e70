/*
 * device.h — where a model's flat arenas live, the GPT-2 family's kernels
 * on them, and the arena-level operations the trainer, the optimizers and
 * the hybrid do on them.
 *
 * The GPT-2 family's forward and backward call its kernels through a row's
 * nn table, and everything else that sweeps a parameter-sized buffer (the
 * optimizer updates, the weight average, the hybrid's snapshots and outer
 * step, the gradient norm) through the row's operations, so that a GPU
 * backend is a row and a file (src/cuda/device_cuda.cu, opened as a plugin
 * by device_cuda_load.c). The code above asks a row what it offers (its
 * host_memory flag, its operations), and names a row only for what runs
 * on the CPU alone (the MLP and CNN, Muon's step). The CPU row calls the
 * kernels of src/kernels: the same bits as before the table existed; the
 * guard row (device_guard.c) the same kernels on memory the host may not
 * touch.
 *
 * Pointers passed to a row's operations are that row's memory (from its
 * alloc); upload/download are the only ones that take host memory. Every
 * reduction has a fixed order (the same bits for any thread count), and each
 * row documents where its bits differ from the CPU row's.
 */
#ifndef HPT_DEVICE_H
#define HPT_DEVICE_H

#include "../base/base.h"

#include <stddef.h>

/* One AdamW update over n values (torch.optim.AdamW's arithmetic, kernels.h's
 * adamw_update_scaled): the gradient times gscale (the clipping factor, 1 for
 * none), t the 1-based step. */
typedef struct hpt_dev_adamw {
    float gscale, lr, beta1, beta2, eps, weight_decay;
    int t;
} hpt_dev_adamw;

/* One schedule-free AdamW update (optim.h's hpt_sf_update_scaled): as above
 * plus c, the averaging coefficient of this step. */
typedef struct hpt_dev_sf {
    float gscale, lr, beta1, beta2, eps, weight_decay, c;
    int t;
} hpt_dev_sf;

/* An activation element in a row's memory: a float on every row, except
 * the CUDA row under --precision bf16, where it is a bf16 (2 bytes: fp32's
 * top half, rounded to nearest even). An incomplete type, so that code above
 * the rows cannot read one or index it as a float by mistake: the model
 * addresses activations in bytes (act_bytes) and hands them to the row's
 * kernels, which know the type. */
typedef struct hpt_act hpt_act;


/* The GPT-2 family's kernels on one row's memory: each is the kernel of the
 * same name in src/kernels/kernels.h (read its contract there). `first`:
 * the gradient is written as if onto zeros instead of accumulated; the
 * backward kernels without the flag always write (dinp, dqkv, GELU's dinp,
 * the scratch gradients of gpt2.c). scratch: nn_scratch floats of this
 * row's memory, for rows whose reductions need one between launches (the
 * CPU row needs none); `wide` is the LM head's: a buffer of 3 N x C floats
 * the CPU row splits the vocabulary-long inner dimension into
 * (matmul_backward_dinp_first_kblocks), NULL for every other GEMM.
 * Token ids are ints in this row's memory (upload_ints puts them there).
 *
 * Types: activations, their gradients, the logits and the GEMMs' weight
 * operands are hpt_act (act_bytes each); parameters, their gradients, the
 * layernorms' mean and rstd, the losses, the attention state and scratch
 * are floats on every row. So under bf16 storage the GEMMs read their
 * weights from a copy in the activation type: act_from_floats writes it
 * (the model does, once per forward, where act_bytes < 4; where act_bytes
 * is 4 the model passes the parameters themselves), and the parameter and
 * optimizer arithmetic stays fp32 (master weights).
 *
 * Attention: `att` is the row's attention state, what its attention_forward
 * keeps for its attention_backward: attention_state_floats(B, T, C, NH)
 * floats per layer (the model's size table reserves L of them). On the CPU
 * and guard rows it is kernels.h's att, the softmax rows (B,NH,T,T); on the
 * CUDA row, by default, each softmax row's log-sum-exp (B,NH,T), for a
 * flash-style attention that recomputes the probabilities in its backward
 * (kernels_cuda.h). The backward also gets the forward's output `out`
 * (B,T,C): the flash backward reads it (rowsum(dout * out) per head), the
 * CPU row ignores it. */
typedef struct hpt_dev_nn {
    size_t (*scratch_floats)(const hpt_device *d, int B, int T, int C, int NH, int V, int Vp);
    size_t (*attention_state_floats)(const hpt_device *d, int B, int T, int C, int NH);
    /* bytes of one hpt_act under the precision set now (4, or 2) */
    size_t (*act_bytes)(const hpt_device *d);
    void (*upload_ints)(const hpt_device *d, int *dst, const int *host, size_t n);
    /* dst (n activations) = src (n floats of this row's memory), rounded */
    void (*act_from_floats)(const hpt_device *d, hpt_act *dst, const float *src, size_t n);
    /* host (n floats) = src (n activations of this row's memory) */
    void (*download_acts)(const hpt_device *d, float *host, const hpt_act *src, size_t n);
    void (*encoder_forward)(const hpt_device *d, hpt_act *out, const int *tok, const float *wte, const float *wpe,
                            int B, int T, int C);
    void (*encoder_backward)(const hpt_device *d, float *dwte, float *dwpe, const hpt_act *dout, const int *tok,
                             int B, int T, int C,
                             int V, float *scratch);
    void (*layernorm_forward)(const hpt_device *d, hpt_act *out, float *mean, float *rstd, const hpt_act *inp,
                              const float *w,
                              const float *b, int N, int C);
    void (*layernorm_backward)(const hpt_device *d, hpt_act *dinp, float *dw, float *db, const hpt_act *dout,
                               const hpt_act *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C, int first,
                               float *scratch);
    void (*matmul_forward)(const hpt_device *d, hpt_act *out, const hpt_act *inp, const hpt_act *w, const float *b,
                           int N, int C,
                           int OC);
    void (*matmul_backward_dinp)(const hpt_device *d, hpt_act *dinp, const hpt_act *dout, const hpt_act *w, int N,
                                 int C, int OC,
                                 hpt_act *wide);
    void (*matmul_backward_dweight)(const hpt_device *d, float *dw, float *db, const hpt_act *dout,
                                    const hpt_act *inp, int N, int C,
                                    int OC, int first, float *scratch);
    void (*attention_forward)(const hpt_device *d, hpt_act *out, float *att, const hpt_act *qkv, int B, int T, int C,
                              int NH);
    void (*attention_backward)(const hpt_device *d, hpt_act *dqkv, const hpt_act *dout, const hpt_act *qkv,
                               const hpt_act *out,
                               const float *att, int B, int T, int C, int NH, float *scratch);
    void (*gelu_forward)(const hpt_device *d, hpt_act *out, const hpt_act *inp, size_t n);
    void (*gelu_backward)(const hpt_device *d, hpt_act *dinp, const hpt_act *inp, const hpt_act *dout, size_t n);
    void (*residual_forward)(const hpt_device *d, hpt_act *out, const hpt_act *a, const hpt_act *b, size_t n);
    void (*xent_forward)(const hpt_device *d, float *losses, hpt_act *logits, const int *targets, int N, int V, int Vp);
    void (*xent_backward)(const hpt_device *d, hpt_act *probs, const int *targets, float dloss, int N, int V, int Vp);
} hpt_dev_nn;

/* A device: a row of the table (its operations) opened with settings
 * (hpt_device_open), which it keeps with whatever the row needs of its own
 * for them (the CUDA row: its cuBLAS handle at the precision, and its
 * first-failure record; the guard row: its mappings). So two models on two
 * instances of one row, at two precisions, do not meet. The operations that
 * give out or take back memory, account for it, depend on the settings or
 * report the instance's failures take the instance (d); the sweeps over
 * memory an instance gave out take its pointers alone.
 *
 * hpt_device_cpu is both the CPU's row and an instance of it (fp32, no
 * state): the default where a caller names no device (NULL). */
struct hpt_device {
    const char *name;        /* --device's value: "cpu", "cuda" */
    const char *summary;     /* one line for --help */
    /* NULL when this process can use the device, else why not (built
     * without it, no device found, ...), said in full to the user */
    const char *(*unavailable)(void);
    /* 1: the row's memory is the host's (the CPU row), so that code which
     * hands it to a host library in place (MPI's all-reduce) may; 0: only
     * this row's operations touch it */
    int host_memory;

    /* memory: n floats; NULL when it cannot be had */
    float *(*alloc)(const hpt_device *d, size_t n);
    void (*free)(const hpt_device *d, float *p);
    void (*upload)(float *dst, const float *host, size_t n);
    void (*download)(float *host, const float *src, size_t n);
    void (*copy)(float *dst, const float *src, size_t n);

    /* elementwise */
    void (*fill)(float *x, float v, size_t n);
    void (*swap)(float *a, float *b, size_t n);
    void (*scale)(float *x, float s, size_t n);               /* x *= s */
    void (*axpy)(float *y, float a, const float *x, size_t n);  /* y += a x */
    void (*lerp)(float *e, float a, float b, const float *x, size_t n);   /* e = a e + b x */

    /* reductions, in double, fixed order */
    double (*sumsq)(const float *x, size_t n);
    double (*dot)(const float *a, const float *b, size_t n);

    /* optimizers */
    void (*adamw)(float *params, const float *grads, float *m, float *v, size_t n, const hpt_dev_adamw *a);
    void (*sf_adamw)(float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a);
    /* optim.h's hpt_outer_step (DiLoCo's outer Nesterov step) */
    void (*outer_step)(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b);
    /* optim.h's hpt_sf_outer_step (the outer step under schedule-free AdamW) */
    void (*sf_outer_step)(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b);

    /* the GPT-2 family's kernels; NULL in a row that runs no model */
    const hpt_dev_nn *nn;
    /* bytes of this instance's memory free now and in all; NULL where the
     * row has no limit of its own (the CPU: the host's, hpt_mem_check) */
    void (*mem_info)(const hpt_device *d, size_t *free_bytes, size_t *total_bytes);
    /* waits for every operation issued so far and reports the first one
     * that failed since the instance was opened (HPT_OK, or the reason) */
    hpt_status (*sync)(const hpt_device *d);

    /* Opening and closing an instance: d is a copy of the row with its
     * settings filled in; open checks them (a precision the row has not is
     * refused with the reason) and makes d->state; close frees it. */
    hpt_status (*open)(hpt_device *d);
    void (*close)(hpt_device *d);
    /* The row that does the work, where this one only finds it (libhpt's
     * CUDA row: the plugin's own row, asked after unavailable said yes);
     * NULL: this row. */
    const hpt_device *(*row)(void);

    /* the instance's, set by hpt_device_open (zero in the table's rows but
     * the CPU's, which is its own instance at fp32) */
    const char *precision;   /* --precision: "fp32", or a name the row has ("tf32", "bf16") */
    size_t mem_limit;        /* --vram-limit in bytes; 0: none (hpt_device_check_plan) */
    void *state;             /* the row's own, from open */
};

/* Instances: hpt.h's hpt_device_open and hpt_device_close (NULL and
 * hpt_device_cpu: a no-op). */

/* The operations over a row's memory, as lists, for a row that wraps
 * another row's operations one by one (device_guard.c around the CPU
 * row's): V(name, params, args) for those that return nothing, R(type, name, params, args) for those that do. The
 * fields above are the contract; a wrapper generated from a list that
 * drifted from them does not compile. */
#define HPT_DEV_DATA_OPS(V, R)                                                                          \
    V(upload, (float *dst, const float *host, size_t n), (dst, host, n))                                \
    V(download, (float *host, const float *src, size_t n), (host, src, n))                              \
    V(copy, (float *dst, const float *src, size_t n), (dst, src, n))                                    \
    V(fill, (float *x, float v, size_t n), (x, v, n))                                                   \
    V(swap, (float *a, float *b, size_t n), (a, b, n))                                                  \
    V(scale, (float *x, float s, size_t n), (x, s, n))                                                  \
    V(axpy, (float *y, float a, const float *x, size_t n), (y, a, x, n))                                \
    V(lerp, (float *e, float a, float b, const float *x, size_t n), (e, a, b, x, n))                    \
    R(double, sumsq, (const float *x, size_t n), (x, n))                                                \
    R(double, dot, (const float *a, const float *b, size_t n), (a, b, n))                               \
    V(adamw, (float *p, const float *g, float *m, float *v, size_t n, const hpt_dev_adamw *a),          \
      (p, g, m, v, n, a))                                                                               \
    V(sf_adamw, (float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a), \
      (y, g, z, x, v, n, a))                                                                            \
    V(outer_step, (float *th, float *an, float *u, const float *d, size_t n, float mu, float a, float b), \
      (th, an, u, d, n, mu, a, b))                                                                      \
    V(sf_outer_step, (float *x, float *z, float *y, float *an, float *u, size_t n, float mu, float a,    \
                      float b), (x, z, y, an, u, n, mu, a, b))

#define HPT_DEV_NN_OPS(V, R)                                                                            \
    R(size_t, scratch_floats, (const hpt_device *d, int B, int T, int C, int NH, int V, int Vp), (d, B, T, C, NH, V, Vp))       \
    R(size_t, attention_state_floats, (const hpt_device *d, int B, int T, int C, int NH), (d, B, T, C, NH))                     \
    R(size_t, act_bytes, (const hpt_device *d), (d))                                                                    \
    V(upload_ints, (const hpt_device *d, int *dst, const int *host, size_t n), (d, dst, host, n))                               \
    V(act_from_floats, (const hpt_device *d, hpt_act *dst, const float *src, size_t n), (d, dst, src, n))                       \
    V(download_acts, (const hpt_device *d, float *host, const hpt_act *src, size_t n), (d, host, src, n))                       \
    V(encoder_forward, (const hpt_device *d, hpt_act *out, const int *tok, const float *wte, const float *wpe, int B, int T,  \
                        int C), (d, out, tok, wte, wpe, B, T, C))                                          \
    V(encoder_backward, (const hpt_device *d, float *dwte, float *dwpe, const hpt_act *dout, const int *tok, int B, int T,    \
                         int C, int V, float *scratch), (d, dwte, dwpe, dout, tok, B, T, C, V, scratch))   \
    V(layernorm_forward, (const hpt_device *d, hpt_act *out, float *mean, float *rstd, const hpt_act *inp, const float *w,    \
                          const float *b, int N, int C), (d, out, mean, rstd, inp, w, b, N, C))            \
    V(layernorm_backward, (const hpt_device *d, hpt_act *dinp, float *dw, float *db, const hpt_act *dout,                    \
                           const hpt_act *inp, const float *w, const float *mean, const float *rstd,     \
                           int N, int C, int first, float *scratch),                                    \
      (d, dinp, dw, db, dout, inp, w, mean, rstd, N, C, first, scratch))                                   \
    V(matmul_forward, (const hpt_device *d, hpt_act *out, const hpt_act *inp, const hpt_act *w, const float *b, int N,        \
                       int C, int OC), (d, out, inp, w, b, N, C, OC))                                      \
    V(matmul_backward_dinp, (const hpt_device *d, hpt_act *dinp, const hpt_act *dout, const hpt_act *w, int N, int C,         \
                             int OC, hpt_act *wide), (d, dinp, dout, w, N, C, OC, wide))                   \
    V(matmul_backward_dweight, (const hpt_device *d, float *dw, float *db, const hpt_act *dout, const hpt_act *inp, int N,    \
                                int C, int OC, int first, float *scratch),                              \
      (d, dw, db, dout, inp, N, C, OC, first, scratch))                                                    \
    V(attention_forward, (const hpt_device *d, hpt_act *out, float *att, const hpt_act *qkv, int B, int T, int C, int NH),   \
      (d, out, att, qkv, B, T, C, NH))                                                                     \
    V(attention_backward, (const hpt_device *d, hpt_act *dqkv, const hpt_act *dout, const hpt_act *qkv, const hpt_act *out,  \
                           const float *att, int B, int T, int C, int NH, float *scratch),              \
      (d, dqkv, dout, qkv, out, att, B, T, C, NH, scratch))                                                \
    V(gelu_forward, (const hpt_device *d, hpt_act *out, const hpt_act *inp, size_t n), (d, out, inp, n))                        \
    V(gelu_backward, (const hpt_device *d, hpt_act *dinp, const hpt_act *inp, const hpt_act *dout, size_t n),                \
      (d, dinp, inp, dout, n))                                                                             \
    V(residual_forward, (const hpt_device *d, hpt_act *out, const hpt_act *a, const hpt_act *b, size_t n), (d, out, a, b, n))   \
    V(xent_forward, (const hpt_device *d, float *losses, hpt_act *logits, const int *targets, int N, int V, int Vp),         \
      (d, losses, logits, targets, N, V, Vp))                                                              \
    V(xent_backward, (const hpt_device *d, hpt_act *probs, const int *targets, float dloss, int N, int V, int Vp),           \
      (d, probs, targets, dloss, N, V, Vp))

/* The memory ledger on a device with memory of its own (mem_info): a plan
 * of `need` bytes (detail: what they are, for the message) is refused,
 * with the figures and before anything is allocated, when it is more than
 * the device has free or than its mem_limit (--vram-limit)
 * allows. A row without mem_info (the host's memory) passes: the host's
 * own check (hpt_mem_check) is the caller's. */
hpt_status hpt_device_check_plan(const hpt_device *d, size_t need, const char *detail);

/* The table, in order, for --help and the tests: NULL past the last row. */
const hpt_device *hpt_device_at(int i);

/* the CPU row's open (fp32 alone), which the guard row shares */
hpt_status hpt_device_cpu_open(hpt_device *d);

/* The rows, each defined in its own file. */
extern const hpt_device hpt_device_cpu;
extern const hpt_device hpt_device_guard;
extern const hpt_device hpt_device_cuda;

static inline const hpt_device *hpt_device_or_cpu(const hpt_device *dev) { return dev ? dev : &hpt_device_cpu; }

#endif /* HPT_DEVICE_H */
