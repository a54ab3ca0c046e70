/*
 * kernels.h — the numerical kernels: plain functions over float*, shapes
 * beside every pointer (llm.c style).
 *
 * Rules every kernel follows:
 *   - outputs first, then const inputs, then dimensions;
 *   - forward kernels overwrite their outputs;
 *   - backward kernels ACCUMULATE (+=) into every gradient they produce, so a
 *     gradient can collect contributions from several paths; the caller zeroes;
 *     their *_first twins write what they would have accumulated onto zeros
 *     (0 + the sum, the same bits), for a model's first write to a gradient
 *     without a zeroing sweep before it;
 *   - OpenMP loops split by output index, so each thread owns its writes: no
 *     atomics, no cross-thread float reductions, and the result is the same
 *     for any thread count (bit-exact resume depends on it);
 *   - GEMMs go through cblas_sgemm, called outside any parallel region; a
 *     naive *_ref twin is the test oracle.
 * Dimension letters: N rows (= B*T), C in-channels, OC out-channels, B batch,
 * T time, NH heads, V vocab, Vp padded vocab.
 */
#ifndef HPT_KERNELS_H
#define HPT_KERNELS_H

#include <stddef.h>

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC) [bias may be NULL] */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC);
/* dinp (N,C) += dout . weight; dweight (OC,C) += dout^T . inp; dbias (OC) += sum_n dout.
 * dinp or dbias may be NULL (not needed). */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC);
/* matmul_backward's two halves, for callers that time them apart:
 * dinp += dout . weight; dweight += dout^T . inp and dbias += sum_n dout
 * (dbias may be NULL). matmul_backward = dinp half, then dweight half. */
void matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void matmul_backward_dweight(float *dweight, float *dbias, const float *dout, const float *inp,
                             int N, int C, int OC);
/* dinp = dout . weight; dweight = dout^T . inp and dbias = sum_n dout. */
void matmul_backward_dinp_first(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void matmul_backward_dweight_first(float *dweight, float *dbias, const float *dout, const float *inp,
                                   int N, int C, int OC);
/* matmul_backward_dinp_first, but where OC is so long that every row or
 * column block would repack a large operand (a vocabulary-wide LM head), OC
 * is split into about 4 fixed blocks whose products are added in block
 * order: other bits than matmul_backward_dinp_first there (the same for any
 * thread count). scratch: 3 N x C floats, overwritten. */
void matmul_backward_dinp_first_kblocks(float *dinp, const float *dout, const float *weight, int N, int C, int OC,
                                        float *scratch);
void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC);
void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);

/* out (B,T,C) = wte[inp[b,t]] + wpe[t]; inp (B,T) token ids in [0, V). */
void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
                     int B, int T, int C);
/* dwte (V,C) and dwpe (T,C) += scatter of dout (B,T,C). */
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                      int B, int T, int C);

/* Per row of inp (N,C): out = (x - mean) * rstd * weight + bias; mean, rstd (N). */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);
/* dweight and dbias written, dinp still accumulated (the residual stream's
 * gradient collects both branches). */
void layernorm_backward_first(float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C);

/* FLOP-equivalents per element of the elementwise kernels, for the profile's
 * rates (each kernel's GFLOP/s): the float operations the code does,
 * counted from it. hpt_expf 25 (2 clamps, the reduction 7, the degree-5
 * polynomial 10 and its finish 4, the scale, the NaN select), hpt_tanhf 31;
 * GELU forward 39 (u 5, tanh, the product 3), backward 50 (u 5, tanh,
 * gelu' 12, times dout and the accumulate 2); layernorm forward 8 (mean 1,
 * variance 3, normalise and affine 4) and backward 14; softmax with its
 * cross-entropy 29 (max 1, exp of x - max 26, sum 1, scale 1). */
enum {
    HPT_FLOPS_GELU_FWD = 39, HPT_FLOPS_GELU_BWD = 50,
    HPT_FLOPS_LN_FWD = 8, HPT_FLOPS_LN_BWD = 14, HPT_FLOPS_XENT_FWD = 29
};

/* GELU, tanh approximation (GPT-2's), elementwise over n. */
void gelu_forward(float *out, const float *inp, size_t n);
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void gelu_backward_first(float *dinp, const float *inp, const float *dout, size_t n);

/* ReLU elementwise (classifiers). */
void relu_forward(float *out, const float *inp, size_t n);
void relu_backward(float *dinp, const float *inp, const float *dout, size_t n);
/* d *= (out > 0), in place: ReLU's backward over a gradient buffer that
 * holds d(out) and becomes d(inp), out being the ReLU's output (an exception
 * to the accumulate rule: the classifiers keep one buffer per layer). */
void relu_backward_inplace(float *d, const float *out, size_t n);

/* out = a + b; backward: da += dout, db += dout. */
void residual_forward(float *out, const float *a, const float *b, size_t n);
void residual_backward(float *da, float *db, const float *dout, size_t n);

/* Causal multi-head self-attention.
 * inp (B,T,3C) holds q,k,v side by side, head h at offset h*hs inside each.
 * out (B,T,C); att (B,NH,T,T) keeps the softmax rows (zeros above the diagonal)
 * for the backward pass. */
void attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH);
/* dinp (B,T,3C) += gradient of q,k,v given dout (B,T,C). */
void attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                        int B, int T, int C, int NH);
void attention_backward_first(float *dinp, const float *dout, const float *inp, const float *att,
                              int B, int T, int C, int NH);
/* Per-(query, key) loops in the same summation orders (attention.c's top):
 * the test oracle, equal to the two above bit for bit. */
void attention_forward_ref(float *out, float *att, const float *inp, int B, int T, int C, int NH);
void attention_backward_ref(float *dinp, const float *dout, const float *inp, const float *att,
                            int B, int T, int C, int NH);

/* Softmax cross-entropy over rows of logits (N,Vp), of which the first V are
 * real classes. In place: logits become probabilities (padded entries 0).
 * losses (N) = -log p[target]. */
void softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V, int Vp);
/* In place: probs become dlogits = (p - onehot(target)) * dloss. */
void softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp);

/* ---- sweeps over whole arenas (sweep.c): the device table's CPU row */

/* One AdamW step over n elements (PyTorch's AdamW: decoupled decay).
 * t is the 1-based step count used for bias correction. */
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int t);

/* adamw_update with the gradient grads * gscale, in one sweep (clipping
 * folded into the update: no pass over the gradients, which are left as
 * they are). params, m and v get the bits of scale_inplace(grads, gscale)
 * followed by adamw_update. */
void adamw_update_scaled(float *params, const float *grads, float *m, float *v, size_t n, float gscale,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int t);

/* Schedule-free AdamW over n elements (optim.h's hpt_sf_update_scaled says
 * the formula): y the gradient point, z, x the iterates, v the second
 * moment, the gradient g * gscale, c this step's averaging coefficient. */
void sf_adamw_update_scaled(float *y, const float *g, float *z, float *x, float *v, size_t n, float gscale, float lr,
                            float beta1, float beta2, float eps, float weight_decay, float c, int t);

/* Muon's orthogonalisation (optim.h's hpt_muon_step): out (rows, cols) =
 * the Newton-Schulz iteration's approximation of U V^T for g = U S V^T, g
 * normalised by its Frobenius norm + eps, then `steps` times
 * X <- a X + (b A + c A A) X with A = X X^T, on the short side (g^T where
 * rows > cols). scratch: newton_schulz_scratch_floats(rows, cols) floats.
 * out and g may be the same buffer. */
size_t newton_schulz_scratch_floats(int rows, int cols);
void newton_schulz(float *out, const float *g, int rows, int cols, int steps, float a, float b, float c, float eps,
                   float *scratch);

/* DiLoCo's outer Nesterov step (optim.h's hpt_outer_step says how). */
void outer_step(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b);
/* The outer step under schedule-free AdamW (optim.h's hpt_sf_outer_step says how). */
void sf_outer_step(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b);

/* Sum of squares and dot product in double, split into a fixed number of
 * chunks combined in order: thread-count independent; sumsq(x) is
 * dot_product(x, x) bit for bit. */
double sumsq(const float *x, size_t n);
double dot_product(const float *a, const float *b, size_t n);
/* x *= s;  y += a x;  e = a e + b x;  p <-> q;  x = v */
void scale_inplace(float *x, float s, size_t n);
void axpy_inplace(float *y, float a, const float *x, size_t n);
void lerp_inplace(float *e, float a, float b, const float *x, size_t n);
void swap_inplace(float *p, float *q, size_t n);
void fill_value(float *x, float v, size_t n);

/* ---- convolution and pooling (conv.c) */

/* 2-D convolution, stride 1, zero padding P, NCHW. inp (B,C,H,W) ->
 * out (B,OC,OH,OW) with OH = H + 2P - K + 1, OW = W + 2P - K + 1 (P = (K-1)/2
 * keeps the size: "same"). weight (OC, C*K*K) (= PyTorch's (OC,C,K,K)),
 * bias (OC) or NULL. cols (B, C*K*K, OH*OW) receives every image's im2col and
 * must be kept for the backward pass. */
void conv2d_forward(float *out, float *cols, const float *inp, const float *weight, const float *bias,
                    int B, int C, int H, int W, int OC, int K, int P);
/* dweight (OC, C*K*K) += sum_b dout_b . cols_b^T; dbias (OC) += sums of dout
 * (B,OC,OH,OW) (dbias may be NULL); dinp (B,C,H,W) += col2im(weight^T . dout_b)
 * (dinp may be NULL: first layer). dcols (B, C*K*K, OH*OW) is scratch for
 * the input gradient and may be cols itself (cols is fully read first; it is
 * then overwritten); unused when dinp is NULL. */
void conv2d_backward(float *dinp, float *dweight, float *dbias, float *dcols, const float *dout,
                     const float *cols, const float *weight,
                     int B, int C, int H, int W, int OC, int K, int P);
/* Direct-loop twins (test oracle): the same maths without cols. */
void conv2d_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int B, int C, int H, int W, int OC, int K, int P);
void conv2d_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight,
                         int B, int C, int H, int W, int OC, int K, int P);

/* 2x2 max pooling, stride 2: inp (B,C,H,W) -> out (B,C,H/2,W/2) (odd edges
 * dropped, as PyTorch). idx (B,C,H/2,W/2) receives the position of each
 * maximum inside its (H,W) plane (first one on ties; a NaN wins). */
void maxpool2_forward(float *out, int *idx, const float *inp, int B, int C, int H, int W);
/* dinp (B,C,H,W) += dout scattered to the argmax positions in idx. */
void maxpool2_backward(float *dinp, const float *dout, const int *idx, int B, int C, int H, int W);

#endif /* HPT_KERNELS_H */
