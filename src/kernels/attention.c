/*
 * attention.c — causal multi-head self-attention over a packed qkv tensor.
 *
 * Loops rather than GEMMs: at the sequence lengths hpt trains (T <= 1024,
 * head size 32-64) attention is a few percent of the FLOPs, and one (b, h)
 * pair per task gives every thread exclusive ownership of its outputs,
 * including the dk/dv rows that many queries contribute to.
 */
#include "kernels.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

void attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH) {
    const int C3 = 3 * C, hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = inp + (size_t)b * T * C3 + h * hs;
            float *arow0 = att + ((size_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * C3;
                float *arow = arow0 + (size_t)t * T;
                float mx = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = base + (size_t)t2 * C3 + C;
                    float s = 0.0f;
                    #pragma omp simd reduction(+:s)
                    for (int i = 0; i < hs; i++) s += q[i] * k[i];
                    s *= scale;
                    arow[t2] = s;
                    if (s > mx) mx = s;
                }
                float sum = 0.0f;
                #pragma omp simd reduction(+:sum)
                for (int t2 = 0; t2 <= t; t2++) { arow[t2] = hpt_expf(arow[t2] - mx); sum += arow[t2]; }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) arow[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) arow[t2] = 0.0f;

                float *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = base + (size_t)t2 * C3 + 2 * C;
                    float a = arow[t2];
                    #pragma omp simd
                    for (int i = 0; i < hs; i++) o[i] += a * v[i];
                }
            }
        }
}

void attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                        int B, int T, int C, int NH) {
    const int C3 = 3 * C, hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = inp + (size_t)b * T * C3 + h * hs;
            float *dbase = dinp + (size_t)b * T * C3 + h * hs;
            const float *arow0 = att + ((size_t)b * NH + h) * T * T;
            float datt[T];  /* one row of d(att); T <= block_size, on the stack */
            for (int t = 0; t < T; t++) {
                const float *arow = arow0 + (size_t)t * T;
                const float *dO = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = base + (size_t)t * C3;
                float *dq = dbase + (size_t)t * C3;
                /* out = sum att * v  ->  datt, dv */
                float dot = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = base + (size_t)t2 * C3 + 2 * C;
                    float *dv = dbase + (size_t)t2 * C3 + 2 * C;
                    float s = 0.0f, a = arow[t2];
                    #pragma omp simd reduction(+:s)
                    for (int i = 0; i < hs; i++) { s += dO[i] * v[i]; }
                    #pragma omp simd
                    for (int i = 0; i < hs; i++) dv[i] += a * dO[i];
                    datt[t2] = s;
                    dot += s * a;
                }
                /* softmax backward, then the scaled q.k product */
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = base + (size_t)t2 * C3 + C;
                    float *dk = dbase + (size_t)t2 * C3 + C;
                    float dpre = arow[t2] * (datt[t2] - dot) * scale;
                    #pragma omp simd
                    for (int i = 0; i < hs; i++) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
                }
            }
        }
}
