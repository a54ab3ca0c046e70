/*
 * kernels_cuda.h — the GPT-2 training kernels on an NVIDIA GPU, fp32 (and
 * bf16 twins of those that touch activations, below): each
 * mirrors the CPU kernel of the same name in src/kernels/kernels.h (read its
 * contract there: shapes, "backward accumulates", the *_first twins that
 * write what they would have accumulated onto zeros).
 *
 * A C header: no CUDA type appears in it, so plain C (the model, the tests)
 * includes it without the toolkit's headers. Every float/int pointer is
 * device memory. Every kernel runs on the default stream, in call order;
 * nothing here synchronises with the host except kernels_cuda_sync.
 *
 * Determinism: no float atomics anywhere. Every sum has one fixed order that
 * depends on the shape alone, so two runs on the same GPU, toolkit and
 * shapes give the same bits (cuBLAS promises this for its GEMMs on one
 * architecture with one SM count). Where that order is the CPU kernel's, the
 * bits are the CPU's as well (nvcc -fmad=false, IEEE division and sqrt):
 *   equal to the CPU bit for bit: encoder forward/backward, residual
 *     forward/backward, GELU forward/backward (hpt_expf/hpt_tanhf ported
 *     operation for operation), softmax_xent_backward, and attention's
 *     backward given the same att (dot16 and ascending-position orders);
 *   within rounding (a reduction in another order, see each kernel):
 *     layernorm, matmul (cuBLAS), softmax_xent_forward, attention forward,
 *     and the flash attention's forward and backward.
 *
 * Errors: kernels return nothing (as on the CPU). A launch or cuBLAS failure
 * is recorded, the first one sticks, and kernels_cuda_sync() reports it
 * (with the asynchronous ones) as -1 and a message from kernels_cuda_error().
 * One host thread drives these kernels.
 *
 * Scratch: the kernels that reduce in two passes or need a per-row value
 * across launches take a scratch buffer from the caller (so it is in the
 * model's memory plan, not allocated behind it); its size comes from the
 * kernel's *_scratch function. Nothing here calls cudaMalloc, apart from
 * cuBLAS's own workspace inside kernels_cuda_init.
 */
#ifndef HPT_KERNELS_CUDA_H
#define HPT_KERNELS_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bf16 activations
 *
 * Under --precision bf16 the activations are bf16 in memory (fp32's top 16
 * bits: the same exponent range, 8 bits of mantissa), and the kernels that
 * read or write them have _bf16_ twins below: the same contract and
 * arithmetic (fp32 inside: an element is widened exactly on load, rounded
 * to nearest even on store), with the activation arguments of this type.
 * Parameters, their gradients, mean/rstd, losses, lse and scratch stay
 * fp32 in every twin: what llm.c and PyTorch's autocast keep in fp32 too
 * (master weights, optimizer state). kc_bf16_of and kc_bf16_float convert
 * on the host, with the device's rounding (NaN stays NaN). */
typedef struct kc_bf16 {
    unsigned short bits;
} kc_bf16;

static inline kc_bf16 kc_bf16_of(float x) {
    union { float f; unsigned int u; } v;
    v.f = x;
    kc_bf16 h;
    if ((v.u & 0x7fffffffu) > 0x7f800000u) h.bits = 0x7fff;   /* NaN: the device's canonical one */
    else h.bits = (unsigned short)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
    return h;
}

static inline float kc_bf16_float(kc_bf16 h) {
    union { float f; unsigned int u; } v;
    v.u = (unsigned int)h.bits << 16;
    return v.f;
}

/* ---- setup and errors
 *
 * Everything below acts on the context bound now: a cuBLAS handle at a math
 * mode and a first-failure record. One default context serves a program
 * that binds none (the kernel tests); a device instance makes its own
 * (kernels_cuda_ctx_new) and binds it at each of its calls, so that two
 * instances at two precisions keep theirs. One host thread drives them. */
typedef struct kc_ctx kc_ctx;
/* a context with no handle yet (kernels_cuda_init makes it once bound);
 * NULL when out of memory */
kc_ctx *kernels_cuda_ctx_new(void);
void kernels_cuda_ctx_free(kc_ctx *c);   /* its handle too; NULL: a no-op */
/* binds c (NULL: the default context); returns the one bound before */
kc_ctx *kernels_cuda_use(kc_ctx *c);

/* Creates the cuBLAS handle on the current device: math mode
 * CUBLAS_DEFAULT_MATH with an fp32 compute type, which never uses TF32
 * (TF32 needs CUBLAS_TF32_TENSOR_OP_MATH, kernels_cuda_set_gemm_math). 0 on
 * success, -1 with kernels_cuda_error() saying why (no device, no driver). */
int kernels_cuda_init(void);
void kernels_cuda_shutdown(void);
/* The GEMMs' arithmetic, for --precision, and the flash attention's (its
 * q.k, p.v and backward products run on TF32 tensor cores in both
 * tensor-core modes, below). The fp32 kernels' data is fp32 in every mode
 * (the bf16 twins' GEMMs take bf16 data: bf16 tensor cores whatever the
 * mode). KC_FP32 (the default): FFMA, the CPU's products within rounding.
 * KC_TF32: TF32 tensor cores (10-bit mantissas in the products, fp32 sums).
 * KC_BF16: bf16 tensor cores (inputs rounded to bf16 inside the GEMM, 7-bit
 * mantissas, fp32 sums and outputs). The tensor-core modes need compute
 * capability 8.0 or newer. 0, or -1 as above (an older GPU: the reason). */
enum { KC_FP32 = 0, KC_TF32 = 1, KC_BF16 = 2 };
int kernels_cuda_set_gemm_math(int mode);
/* Waits for every kernel launched so far; 0, or -1 when a launch, a cuBLAS
 * call or a kernel failed since kernels_cuda_init (the first failure is kept:
 * kernels_cuda_error). */
int kernels_cuda_sync(void);
/* The first failure's message ("" when none). */
const char *kernels_cuda_error(void);

/* ---- linear layers (cuBLAS sgemm on the row-major layouts of kernels.h) */

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC) [bias may be NULL] */
void matmul_forward_cuda(float *out, const float *inp, const float *weight, const float *bias,
                         int N, int C, int OC);
/* dinp (N,C) += dout (N,OC) . weight (OC,C); _first: dinp = dout . weight
 * (beta 0: dinp is not read, NaN there does not leak). */
void matmul_backward_dinp_cuda(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void matmul_backward_dinp_first_cuda(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
/* dweight (OC,C) += dout^T . inp; dbias (OC) += sum over rows of dout
 * (dbias may be NULL, then scratch may be NULL too); _first writes both.
 * The bias sum is two passes in fixed order: per-chunk column sums of 64
 * rows into scratch, then the chunks added in order. */
void matmul_backward_dweight_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                  int N, int C, int OC, float *scratch);
void matmul_backward_dweight_first_cuda(float *dweight, float *dbias, const float *dout, const float *inp,
                                        int N, int C, int OC, float *scratch);
/* the dinp half (if dinp), then the dweight half, as matmul_backward */
void matmul_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, int N, int C, int OC, float *scratch);
/* floats of scratch matmul_backward_dweight*_cuda need for a bias */
size_t matmul_backward_cuda_scratch(int N, int OC);

/* bf16 twins: out, inp, weight bf16 (the weight a bf16 copy of the fp32
 * parameters, floats_to_bf16_cuda), bias fp32 (rounded to bf16 as it seeds
 * out, as autocast does); dweight and dbias fp32. cuBLAS: bf16 tensor cores
 * with fp32 sums (CUBLAS_COMPUTE_32F), C rounded to its type at the end. */
void matmul_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *weight, const float *bias,
                              int N, int C, int OC);
void matmul_backward_dinp_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *dout, const kc_bf16 *weight,
                                          int N, int C, int OC);
void matmul_backward_dweight_bf16_cuda(float *dweight, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp,
                                       int N, int C, int OC, float *scratch);
void matmul_backward_dweight_first_bf16_cuda(float *dweight, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp,
                                             int N, int C, int OC, float *scratch);
/* dst (n) = src (n floats) rounded to bf16: the GEMMs' weight copies */
void floats_to_bf16_cuda(kc_bf16 *dst, const float *src, size_t n);

/* ---- embeddings */

/* out (B,T,C) = wte[inp[b,t]] + wpe[t]; inp (B,T) token ids in [0, V) */
void encoder_forward_cuda(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C);
/* dwte (V,C) and dwpe (T,C) += scatter of dout (B,T,C). Each vocabulary row
 * that occurs is owned by the first position holding it, which adds every
 * position's row for that token in ascending position order (the CPU's
 * order, so the CPU's bits); ownership comes from an integer atomicMin
 * (whose result does not depend on timing) into scratch, V ints. */
void encoder_backward_cuda(float *dwte, float *dwpe, const float *dout, const int *inp,
                           int B, int T, int C, int V, int *scratch);
void encoder_forward_bf16_cuda(kc_bf16 *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                               int C);
void encoder_backward_bf16_cuda(float *dwte, float *dwpe, const kc_bf16 *dout, const int *inp, int B, int T, int C,
                                int V, int *scratch);
/* ints of scratch encoder_backward_cuda needs */
size_t encoder_backward_cuda_scratch(int V);

/* ---- layernorm */

/* Per row of inp (N,C): out = (x - mean) * rstd * weight + bias; mean,
 * rstd (N). One block per row; the row sums in a fixed tree order. */
void layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C);
/* dinp += ...; dweight, dbias += ... (_first: dweight, dbias written, dinp
 * still accumulated, as on the CPU). dweight/dbias in two fixed-order
 * passes (chunks of 64 rows into scratch, then the chunks in order). */
void layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C, float *scratch);
void layernorm_backward_first_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                                   const float *inp, const float *weight, const float *mean,
                                   const float *rstd, int N, int C, float *scratch);
void layernorm_forward_bf16_cuda(kc_bf16 *out, float *mean, float *rstd, const kc_bf16 *inp, const float *weight,
                                 const float *bias, int N, int C);
void layernorm_backward_bf16_cuda(kc_bf16 *dinp, float *dweight, float *dbias, const kc_bf16 *dout,
                                  const kc_bf16 *inp, const float *weight, const float *mean, const float *rstd,
                                  int N, int C, float *scratch);
void layernorm_backward_first_bf16_cuda(kc_bf16 *dinp, float *dweight, float *dbias, const kc_bf16 *dout,
                                        const kc_bf16 *inp, const float *weight, const float *mean,
                                        const float *rstd, int N, int C, float *scratch);
/* floats of scratch layernorm_backward*_cuda need */
size_t layernorm_backward_cuda_scratch(int N, int C);

/* ---- elementwise */

/* GELU, tanh approximation, over n: the CPU's arithmetic operation for
 * operation (the same bits). */
void gelu_forward_cuda(float *out, const float *inp, size_t n);
void gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n);
void gelu_backward_first_cuda(float *dinp, const float *inp, const float *dout, size_t n);
/* out = a + b; backward: da += dout, db += dout. */
void residual_forward_cuda(float *out, const float *a, const float *b, size_t n);
void residual_backward_cuda(float *da, float *db, const float *dout, size_t n);
void gelu_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *inp, size_t n);
void gelu_backward_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *inp, const kc_bf16 *dout, size_t n);
void residual_forward_bf16_cuda(kc_bf16 *out, const kc_bf16 *a, const kc_bf16 *b, size_t n);

/* ---- attention */

/* Two attentions. The flash-style one below (attention_*_flash_cuda) keeps
 * one float per softmax row and is the CUDA row's default; these two
 * materialise att, as the CPU kernels do, and stay as the flash kernels'
 * reference in the tests and for HPT_CUDA_ATTENTION=materialise (and head
 * sizes past ATTENTION_FLASH_CUDA_MAX_HS) in the CUDA row.
 *
 * Causal multi-head self-attention over the packed qkv inp (B,T,3C) into
 * out (B,T,C), att (B,NH,T,T) the softmax rows (zeros above the diagonal),
 * as attention_forward. It materialises att in device memory like the CPU
 * kernel (B*NH*T*T floats per layer: 805 MB at B16 T1024 NH12). */
void attention_forward_cuda(float *out, float *att, const float *inp, int B, int T, int C, int NH);
/* dinp (B,T,3C) += the gradient of q, k, v given dout (B,T,C) (_first:
 * written). scratch: B*NH*T floats, each softmax row's sum(datt * att),
 * computed once by the row pass and read by the column pass. The column
 * pass keeps two length-T coefficient rows in shared memory, hs + 64 (hs+1)
 * + 2T floats per block, opting in past 47 KiB (Hopper allows 227 KiB: T up
 * to about 27000 at hs 64); a shape past the GPU's limit is refused through
 * kernels_cuda_error. */
void attention_backward_cuda(float *dinp, const float *dout, const float *inp, const float *att,
                             int B, int T, int C, int NH, float *scratch);
void attention_backward_first_cuda(float *dinp, const float *dout, const float *inp, const float *att,
                                   int B, int T, int C, int NH, float *scratch);
/* floats of scratch attention_backward*_cuda need */
size_t attention_backward_cuda_scratch(int B, int T, int NH);

/* ---- attention, flash-style (written without a GPU at hand: it has not
 * run on one yet; tests/cuda/test_cuda_kernels.c checks it against the CPU)
 *
 * The same attention without the T x T probabilities in memory. The forward
 * walks the keys in tiles of 64 with an online softmax (a running max and
 * sum per row, the output rescaled as the max grows) and keeps, per softmax
 * row, lse = max + log(sum of exp(score - max)) over its keys: lse (B,NH,T),
 * B*NH*T floats (attention_flash_cuda_state) where att is B*NH*T*T. The
 * backward recomputes each probability as exp(score - lse) from q, k and
 * lse, and the softmax backward's row dot sum(datt * att) as
 * D = dout_h . out_h per row (so it takes the forward's out), into scratch.
 * Under KC_FP32 fp32 throughout (no tensor cores); exp is the CPU's
 * hpt_expf. Under KC_TF32 and KC_BF16 (kernels_cuda_set_gemm_math) the
 * kernels' tensor-core twins run instead: the same tiles, softmax and
 * orders, with each tile's two products (scores, and p v, dpre k, p^T dout,
 * dpre^T q) on TF32 tensor cores (wmma m16n16k8, inputs rounded to TF32,
 * fp32 sums) through shared memory: within about 1e-3 of the CPU's, and
 * deterministic as the fp32 kernels are (TF32 rather than bf16 under
 * KC_BF16: the inputs are fp32 in shared memory either way, and TF32 keeps
 * 3 more bits).
 *
 * Head sizes C/NH from 1 to ATTENTION_FLASH_CUDA_MAX_HS (128); a larger one
 * is refused through kernels_cuda_error. Any T (tiles past T are padded
 * with zeros). Shared memory per block, opted into past 48 KiB: forward
 * 66 KiB at hs 64 (114 KiB at 128), backward dq 82 KiB (146 KiB), dk/dv
 * 99 KiB (163 KiB: an A100's limit exactly; Hopper's is 227 KiB); the
 * tensor-core twins, with the head padded to 16-channel groups and a
 * product tile: forward 85 KiB (149 KiB at 128), dq and dk/dv 119 KiB
 * (199 KiB: past an A100's, refused there through kernels_cuda_error).
 *
 * Determinism: no atomics. dq is owned by a block per query tile that walks
 * the key tiles in order; dk and dv by a block per key tile that walks the
 * query tiles in order (two kernels); every sum has one order fixed by the
 * shape. Within rounding of the CPU kernels, not bit-equal: the scores are
 * one ascending chain over the channels (not dot16), the softmax is
 * rescaled tile by tile, D comes from out. */
enum { ATTENTION_FLASH_CUDA_MAX_HS = 128 };
/* 0: the fp32 kernels in every math mode (to measure the tensor-core
 * twins against them); 1, the default: the twins under KC_TF32 and KC_BF16 */
void attention_flash_cuda_tensor_cores(int on);
/* out (B,T,C) as attention_forward_cuda's; lse (B,NH,T) written */
void attention_forward_flash_cuda(float *out, float *lse, const float *inp, int B, int T, int C, int NH);
/* dinp (B,T,3C) += the gradient of q, k, v (_first: written; dinp is not
 * read) given dout (B,T,C), the forward's inp, out and lse. scratch:
 * attention_flash_cuda_scratch floats (D). */
void attention_backward_flash_cuda(float *dinp, const float *dout, const float *inp, const float *out,
                                   const float *lse, int B, int T, int C, int NH, float *scratch);
void attention_backward_flash_first_cuda(float *dinp, const float *dout, const float *inp, const float *out,
                                         const float *lse, int B, int T, int C, int NH, float *scratch);
/* floats of lse, and of scratch attention_backward_flash*_cuda need */
/* bf16 twins: inp (qkv), out, dout and dinp bf16; lse and scratch fp32. The
 * tiles are widened to fp32 in shared memory, so the arithmetic is the fp32
 * kernels' (or their tensor-core twins') on bf16-exact inputs. The T x T
 * kernels above have no bf16 twin. */
void attention_forward_flash_bf16_cuda(kc_bf16 *out, float *lse, const kc_bf16 *inp, int B, int T, int C, int NH);
void attention_backward_flash_first_bf16_cuda(kc_bf16 *dinp, const kc_bf16 *dout, const kc_bf16 *inp,
                                              const kc_bf16 *out, const float *lse, int B, int T, int C, int NH,
                                              float *scratch);
size_t attention_flash_cuda_state(int B, int T, int NH);
size_t attention_flash_cuda_scratch(int B, int T, int NH);

/* ---- loss */

/* Softmax cross-entropy over rows of logits (N,Vp), the first V real: in
 * place, logits become probabilities (padding 0); losses (N) = -log
 * p[target]. One block per row; max and sum in a fixed tree order. */
void softmax_xent_forward_cuda(float *losses, float *logits, const int *targets, int N, int V, int Vp);
/* In place: probs become (p - onehot(target)) * dloss (padding 0). */
void softmax_xent_backward_cuda(float *probs, const int *targets, float dloss, int N, int V, int Vp);
/* bf16 twins: logits in bf16, losses fp32 (computed in fp32 from the bf16
 * logits); each probability rounded twice (the exp, then the exp / sum),
 * each dlogit once more */
void softmax_xent_forward_bf16_cuda(float *losses, kc_bf16 *logits, const int *targets, int N, int V, int Vp);
void softmax_xent_backward_bf16_cuda(kc_bf16 *probs, const int *targets, float dloss, int N, int V, int Vp);

#ifdef __cplusplus
}
#endif

#endif /* HPT_KERNELS_CUDA_H */
