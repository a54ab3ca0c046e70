/*
 * sample.c — drawing a token from a language model's logits: `hpt sample`'s
 * and the Python binding's draw, one function so both give the same text
 * for the same seed.
 */
#include "hpt.h"

#include <math.h>

/* The top k by partial selection (k is small next to V). */
int hpt_sample_token(const float *logits, int V, float temp, int topk, uint64_t *rs, float *probs, int *order) {
    /* V sizes all three buffers; an empty row has no token to draw (the
     * draw below would return order[-1]) */
    if (V < 1 || !logits || !rs || !probs || !order) return -1;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) { probs[i] = logits[i] / temp; order[i] = i; if (probs[i] > mx) mx = probs[i]; }
    /* a NaN or inf logit (weights that are not finite, or overflow) has no
     * distribution to draw from: the loop below would return a constant
     * token, printed as if it were text. -1 lets the caller say why. */
    for (int i = 0; i < V; i++) if (!isfinite(logits[i])) return -1;
    int keep = topk > 0 && topk < V ? topk : V;
    if (keep < V) {
        for (int i = 0; i < keep; i++) {
            int best = i;
            for (int j = i + 1; j < V; j++) if (probs[order[j]] > probs[order[best]]) best = j;
            int tmp = order[i]; order[i] = order[best]; order[best] = tmp;
        }
    }
    double sum = 0.0;
    for (int i = 0; i < keep; i++) sum += exp(probs[order[i]] - mx);
    *rs += 0x9E3779B97F4A7C15ull;
    uint64_t z = *rs;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (z >> 11) / 9007199254740992.0 * sum, acc = 0.0;
    for (int i = 0; i < keep; i++) {
        acc += exp(probs[order[i]] - mx);
        if (u < acc) return order[i];
    }
    return order[keep - 1];
}

