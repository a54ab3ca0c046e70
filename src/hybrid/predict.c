/*
 * predict.c — see predict.h.
 */
#include "predict.h"

#include <math.h>
#include <string.h>

int hpt_pred_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "coast")) return HPT_PRED_COAST;
    if (!strcmp(name, "stale-adam")) return HPT_PRED_STALE_ADAM;
    if (!strcmp(name, "linear")) return HPT_PRED_LINEAR;
    if (!strcmp(name, "shrink")) return HPT_PRED_SHRINK;
    return -1;
}

const char *hpt_pred_name(hpt_pred_kind k) {
    static const char *names[] = {"coast", "stale-adam", "linear", "shrink"};
    return (unsigned)k < 4 ? names[k] : "?";
}

hpt_status hpt_pred_init(hpt_predictor *p, hpt_pred_kind kind, const hpt_model *m, int ring_c, int ring_s) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->m = m;
    p->n = m->nparams;
    p->snr_lo = 0.2f;
    p->snr_hi = 0.5f;
    for (int i = 0; i < HPT_MAX_TENSORS; i++) p->tensor_gate[i] = p->tensor_scale[i] = 1.0f;
    /* a random walk's straightness is 1/(c-1): the gate opens above twice that */
    p->straight_lo = ring_c > 1 ? 2.0f / (float)(ring_c - 1) : 1.0f;
    p->straight_hi = 0.5f * (1.0f + p->straight_lo);
    if (kind == HPT_PRED_LINEAR || kind == HPT_PRED_SHRINK) {
        if (ring_c < 3 || ring_c > HPT_PRED_MAX_RING || ring_s < 1)
            return hpt_fail(HPT_ERR_ARG, "%s predictor needs 3..%d snapshots, >= 1 step apart", hpt_pred_name(kind),
                            HPT_PRED_MAX_RING);
        p->ring_c = ring_c;
        p->ring_s = ring_s;
        p->arena = hpt_arena_alloc((size_t)(ring_c + 1) * p->n);
        if (!p->arena) return HPT_ERR_NOMEM;
        p->ring = p->arena;
        p->slope = p->arena + (size_t)ring_c * p->n;
        p->arena_bytes = (size_t)(ring_c + 1) * p->n * sizeof(float);
    }
    return HPT_OK;
}

void hpt_pred_free(hpt_predictor *p) {
    hpt_arena_free(p->arena);
    p->arena = NULL;
}

void hpt_pred_observe(hpt_predictor *p, const float *params, int updates) {
    if ((p->kind != HPT_PRED_LINEAR && p->kind != HPT_PRED_SHRINK) || updates % p->ring_s) return;
    memcpy(p->ring + (size_t)p->ring_head * p->n, params, p->n * sizeof(float));
    p->ring_head = (p->ring_head + 1) % p->ring_c;
    if (p->ring_count < p->ring_c) p->ring_count++;
}

int hpt_pred_ready(const hpt_predictor *p) {
    return (p->kind != HPT_PRED_LINEAR && p->kind != HPT_PRED_SHRINK) || p->ring_count == p->ring_c;
}

/* shrink: the per-step slope of one tensor's parameters, each shrunk by
 * its own significance, and the tensor's straightness gate (predict.h).
 * One pass: per parameter a least-squares line over the c snapshots
 * (oldest first), its residual variance, and the positive-part shrinkage
 * max(0, 1 - tau / t^2) of the slope by its t statistic; per tensor the
 * summed squared hops and the squared net displacement. */
static float shrink_tensor(hpt_predictor *p, const float *const *snap, size_t off, size_t numel) {
    const int c = p->ring_count;
    const float tau = 4.0f;  /* t = 2: a slope twice its standard error keeps 3/4 of itself */
    float x[HPT_PRED_MAX_RING], sxx = 0.0f;
    for (int j = 0; j < c; j++) { x[j] = (float)j - 0.5f * (float)(c - 1); sxx += x[j] * x[j]; }
    const float inv_s = 1.0f / (float)p->ring_s;
    double hops = 0.0, net = 0.0;
    #pragma omp parallel for reduction(+:hops, net)
    for (size_t k = off; k < off + numel; k++) {
        float mu = 0.0f, sxy = 0.0f;
        for (int j = 0; j < c; j++) { mu += snap[j][k]; sxy += x[j] * snap[j][k]; }
        mu /= (float)c;
        float b = sxy / sxx, rss = 0.0f;
        for (int j = 0; j < c; j++) {
            float r = snap[j][k] - mu - b * x[j];
            rss += r * r;
            if (j) { float h = snap[j][k] - snap[j - 1][k]; hops += (double)h * h; }
        }
        float d = snap[c - 1][k] - snap[0][k];
        net += (double)d * d;
        /* t^2 = b^2 sxx (c - 2) / rss; an exact line (rss 0) keeps its slope */
        float t2 = rss > 0.0f ? b * b * sxx * (float)(c - 2) / rss : INFINITY;
        float f = t2 > tau ? 1.0f - tau / t2 : 0.0f;
        p->slope[k] = f * b * inv_s;
    }
    double straight = hops > 0.0 ? net / ((c - 1) * hops) : 0.0;
    float w = (float)((straight - p->straight_lo) / (p->straight_hi - p->straight_lo));
    return w < 0.0f ? 0.0f : w > 1.0f ? 1.0f : w;
}

void hpt_pred_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t) {
    if (p->kind == HPT_PRED_COAST) {
        /* Gate per tensor on the mean gradient signal-to-noise |m^| / sqrt(v^):
         * 1 when every recent gradient points the same way; for zero-mean
         * noise m has variance (1 - beta1) / (1 + beta1) of v's, so the mean
         * is about 0.8 * sqrt(0.1 / 1.9) = 0.18 at beta1 = 0.9. Tensors near
         * the noise level are not extrapolated. */
        float bc1 = 1.0f - powf(o->beta1, (float)t), bc2 = 1.0f - powf(o->beta2, (float)t);
        for (int i = 0; i < p->m->ntensors; i++) {
            const hpt_tensor_info *ti = &p->m->tensors[i];
            double s = 0.0;
            for (size_t k = ti->offset; k < ti->offset + ti->numel; k++)
                s += fabs(mom1[k] / bc1) / (sqrt(mom2[k] / bc2) + o->eps);
            float snr = (float)(s / (double)ti->numel);
            float g = (snr - p->snr_lo) / (p->snr_hi - p->snr_lo);
            p->tensor_gate[i] = g < 0.0f ? 0.0f : g > 1.0f ? 1.0f : g;
        }
    } else if (p->kind == HPT_PRED_SHRINK) {
        const float *snap[HPT_PRED_MAX_RING];
        for (int j = 0; j < p->ring_count; j++)
            snap[j] = p->ring + (size_t)((p->ring_head + j) % p->ring_c) * p->n;  /* oldest first */
        for (int i = 0; i < p->m->ntensors; i++)
            p->tensor_gate[i] = shrink_tensor(p, snap, p->m->tensors[i].offset, p->m->tensors[i].numel);
    } else if (p->kind == HPT_PRED_LINEAR) {
        /* least-squares slope per parameter over the ring, oldest to newest,
         * x in units of real steps */
        int c = p->ring_count;
        double xm = (c - 1) / 2.0, sxx = 0.0;
        for (int j = 0; j < c; j++) sxx += (j - xm) * (j - xm);
        const float *snap[HPT_PRED_MAX_RING];
        for (int j = 0; j < c; j++) snap[j] = p->ring + (size_t)((p->ring_head + j) % p->ring_c) * p->n;
        float inv = (float)(1.0 / (sxx * p->ring_s));
        #pragma omp parallel for
        for (size_t k = 0; k < p->n; k++) {
            float sxy = 0.0f;
            for (int j = 0; j < c; j++) sxy += (float)(j - xm) * snap[j][k];
            p->slope[k] = sxy * inv;
        }
    }
}

void hpt_pred_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                    const hpt_adamw *o, int t, float lr, int k, float scale) {
    if (p->kind == HPT_PRED_LINEAR || p->kind == HPT_PRED_SHRINK) {
        for (int ti = 0; ti < p->m->ntensors; ti++) {
            const hpt_tensor_info *tt = &p->m->tensors[ti];
            float s = scale * p->tensor_scale[ti] * (p->kind == HPT_PRED_SHRINK ? p->tensor_gate[ti] : 1.0f);
            if (s == 0.0f) continue;
            float *pp = params + tt->offset;
            const float *sl = p->slope + tt->offset;
            #pragma omp parallel for simd
            for (size_t i = 0; i < tt->numel; i++) pp[i] += s * sl[i];
        }
        return;
    }
    /* AdamW's update from the stored moments: stale-adam re-applies it as is,
     * coast lets the momentum decay by beta1 per predicted step */
    float bc1 = 1.0f - powf(o->beta1, (float)t);
    float bc2_sqrt = sqrtf(1.0f - powf(o->beta2, (float)t));
    float decay_m = p->kind == HPT_PRED_COAST ? powf(o->beta1, (float)k) : 1.0f;
    for (int ti = 0; ti < p->m->ntensors; ti++) {
        const hpt_tensor_info *tt = &p->m->tensors[ti];
        float gate = (p->kind == HPT_PRED_COAST ? p->tensor_gate[ti] : 1.0f) * p->tensor_scale[ti];
        if (gate == 0.0f) continue;
        float step = scale * gate * lr * decay_m / bc1;
        float wd = tt->decay ? scale * gate * lr * o->weight_decay : 0.0f;
        float *pp = params + tt->offset;
        const float *m1 = mom1 + tt->offset, *m2 = mom2 + tt->offset;
        #pragma omp parallel for simd
        for (size_t i = 0; i < tt->numel; i++)
            pp[i] -= wd * pp[i] + step * m1[i] / (sqrtf(m2[i]) / bc2_sqrt + o->eps);
    }
}
