/*
 * prof.h — per-kernel wall-clock accounting for one training step, off by
 * default. Call sites wrap a kernel call in HPT_PROF(slot, flops, call); when
 * profiling is off that costs one load and one predictable branch per kernel
 * call (a few hundred per GPT-2 step), no clock reads. bench_step --profile
 * turns it on and reads the slots after every step.
 *
 * The slots are one table (HPT_PROF_SLOTS): GEMMs per layer family and
 * direction (fwd: out = x W^T, dx: dinp = dout W, dw: dW = dout^T x plus the
 * bias sums), the other kernels of the GPT-2 step, and the optimizer's
 * sweeps. Seconds and FLOPs add up over calls since the last reset. Not
 * thread-safe: time only from the thread that calls the kernels (kernels
 * fork their own OpenMP teams inside).
 */
#ifndef HPT_PROF_H
#define HPT_PROF_H

#define HPT_PROF_SLOTS(X)                                   \
    X(WEIGHT_CAST, "weights to bf16 (GEMM copies)")          \
    X(EMBED_FWD,   "embedding fwd")                         \
    X(LN_FWD,      "layernorm fwd")                         \
    X(QKV_FWD,     "gemm qkv fwd")                          \
    X(ATTN_FWD,    "attention fwd")                         \
    X(ATTPROJ_FWD, "gemm attn-proj fwd")                    \
    X(RESID_FWD,   "residual add fwd")                      \
    X(FC_FWD,      "gemm fc fwd")                           \
    X(GELU_FWD,    "gelu fwd")                              \
    X(FCPROJ_FWD,  "gemm fc-proj fwd")                      \
    X(LMHEAD_FWD,  "gemm lm-head fwd")                      \
    X(XENT_FWD,    "softmax+xent fwd")                      \
    X(XENT_BWD,    "softmax+xent bwd")                      \
    X(LMHEAD_DX,   "gemm lm-head dx")                       \
    X(LMHEAD_DW,   "gemm lm-head dw")                       \
    X(FCPROJ_DX,   "gemm fc-proj dx")                       \
    X(FCPROJ_DW,   "gemm fc-proj dw+db")                    \
    X(GELU_BWD,    "gelu bwd")                              \
    X(FC_DX,       "gemm fc dx")                            \
    X(FC_DW,       "gemm fc dw+db")                         \
    X(LN_BWD,      "layernorm bwd")                         \
    X(ATTPROJ_DX,  "gemm attn-proj dx")                     \
    X(ATTPROJ_DW,  "gemm attn-proj dw+db")                  \
    X(ATTN_BWD,    "attention bwd")                         \
    X(QKV_DX,      "gemm qkv dx")                           \
    X(QKV_DW,      "gemm qkv dw+db")                        \
    X(EMBED_BWD,   "embedding bwd")                         \
    X(BWD_MEMSET,  "bwd scratch memset")                    \
    X(ZERO_GRAD,   "zero_grad")                             \
    X(GRAD_NORM,   "grad norm")                             \
    X(ADAMW,       "adamw (+ clip scale)")                  \
    X(MUON,        "muon momentum + update")                \
    X(MUON_NS,     "muon newton-schulz gemms")

#define HPT_PROF_ENUM_(id, name) HPT_PROF_##id,
enum { HPT_PROF_SLOTS(HPT_PROF_ENUM_) HPT_PROF_NSLOTS };
#undef HPT_PROF_ENUM_

typedef struct hpt_prof_slot {
    double seconds;   /* wall clock inside the slot's calls */
    double flops;     /* the FLOPs those calls did (0 where not counted) */
    long calls;
} hpt_prof_slot;

extern int hpt_prof_on;   /* read at every call site: keep it a plain int */
/* Called before and after each profiled call when set: a device whose
 * kernels run asynchronously (the CUDA row) waits for them there, so a
 * slot's time is its kernels' and not their launches'. NULL (the CPU's
 * kernels return when done) by default; whoever enables profiling on such
 * a device sets it (bench_step --device). */
extern void (*hpt_prof_sync)(void);
extern hpt_prof_slot hpt_prof_acc[HPT_PROF_NSLOTS];

void hpt_prof_enable(int on);
void hpt_prof_reset(void);
const char *hpt_prof_name(int slot);
/* 1 for the GEMM slots (the sgemm-rate comparison applies to them). */
int hpt_prof_is_gemm(int slot);
double hpt_prof_clock(void);   /* hpt_now, here so call sites need only this header */

static inline void hpt_prof_add_(int slot, double t0, double flops) {
    hpt_prof_acc[slot].seconds += hpt_prof_clock() - t0;
    hpt_prof_acc[slot].flops += flops;
    hpt_prof_acc[slot].calls++;
}

/* Runs `call` (a statement), timing it into slot (an HPT_PROF_* value)
 * when profiling is on. `flops` is evaluated only then. */
#define HPT_PROF(slot, flops, call)                                      \
    do {                                                                \
        if (__builtin_expect(hpt_prof_on, 0)) {                         \
            if (hpt_prof_sync) hpt_prof_sync();                         \
            double hpt_prof_t0_ = hpt_prof_clock();                     \
            call;                                                       \
            if (hpt_prof_sync) hpt_prof_sync();                         \
            hpt_prof_add_((slot), hpt_prof_t0_, (double)(flops)); \
        } else {                                                        \
            call;                                                       \
        }                                                               \
    } while (0)

#endif /* HPT_PROF_H */
