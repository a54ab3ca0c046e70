/*
 * encoder.c — the training-state encoder (slot table and rules in encoder.h).
 *
 * Each slot has a raw value (a log or a difference of logs) and running
 * statistics; the output is the raw value standardised by them. Missing
 * inputs leave both untouched, so the output of a missing slot is exactly its
 * previous output.
 */
#include "encoder.h"

#include <math.h>
#include <string.h>

static const char *const slot_names[HPT_ENC_NFEAT] = {
    "loss_level", "loss_trend_s", "loss_trend_l", "loss_innov",
    "grad_log", "grad_ratio", "adam_m", "adam_v", "lr", "upd_ratio", "upd_cos",
    "phase_0", "phase_1", "phase_2", "phase_3", "phase_steps",
};

/* Smallest standard deviation each slot is divided by, in raw units: about
 * the smallest change of the quantity that means something. Log-loss
 * differences move by 1e-4..1e-2 per step; logs of scales by 1e-2 (1%) and
 * more; a one-hot slot's std is sqrt(p(1-p)), floored at 0.05 (p ~ 0.25%). */
static const float slot_floor[HPT_ENC_NFEAT] = {
    1e-3f, 1e-4f, 1e-4f, 1e-3f,
    1e-2f, 1e-2f, 1e-2f, 1e-2f, 1e-2f, 1e-2f, 1e-2f,
    0.05f, 0.05f, 0.05f, 0.05f, 0.1f,
};

/* Loss EMA weights (slots 0-3) and the gradient-norm EMA weight (slot 5). */
static const float loss_alpha[3] = {0.3f, 0.1f, 0.03f};
#define GRAD_ALPHA 0.1f

enum { MISC_HAVE_LOSS, MISC_HAVE_GRAD, MISC_STEPS, MISC_N };

hpt_status hpt_encoder_init(hpt_encoder *e, int *n_features) {
    memset(e, 0, sizeof *e);
    size_t sizes[] = {HPT_ENC_NFEAT, HPT_ENC_NFEAT, HPT_ENC_NFEAT, HPT_ENC_NFEAT, 4, MISC_N};
    float **ptrs[] = {&e->raw, &e->mean, &e->var, &e->count, &e->ema, &e->misc};
    e->arena = hpt_arena_carve(sizes, 6, ptrs, &e->arena_floats);
    if (!e->arena) return hpt_fail(HPT_ERR_NOMEM, "encoder: out of memory");
    if (n_features) *n_features = HPT_ENC_NFEAT;
    return HPT_OK;
}

void hpt_encoder_free(hpt_encoder *e) {
    if (!e) return;
    hpt_arena_free(e->arena);
    memset(e, 0, sizeof *e);
}

const char *hpt_encoder_slot_name(int i) {
    return i >= 0 && i < HPT_ENC_NFEAT ? slot_names[i] : NULL;
}

int hpt_encoder_regions(const hpt_encoder *e, hpt_region *out) {
    out[0] = (hpt_region){"encoder", e->arena, e->arena_floats * sizeof(float)};
    return 1;
}

float hpt_encoder_level(const hpt_encoder *e) {
    return e->misc[MISC_HAVE_LOSS] > 0 ? e->ema[1] : NAN;
}

/* Folds raw value v into slot i's statistics (West's weighted update: with
 * weight 1/n it is the exact running mean and population variance). */
static void observe(hpt_encoder *e, int i, float v) {
    e->raw[i] = v;
    if (e->count[i] < HPT_ENC_NORM_WINDOW) e->count[i] += 1.0f;
    float a = 1.0f / e->count[i];
    float d = v - e->mean[i];
    e->mean[i] += a * d;
    e->var[i] = (1.0f - a) * (e->var[i] + a * d * d);
}

static float normalise(const hpt_encoder *e, int i, float v) {
    if (e->count[i] == 0) return 0.0f;   /* never observed: no information */
    float sd = sqrtf(e->var[i]);
    if (sd < slot_floor[i]) sd = slot_floor[i];
    float z = (v - e->mean[i]) / sd;
    return z > HPT_ENC_CLIP ? HPT_ENC_CLIP : z < -HPT_ENC_CLIP ? -HPT_ENC_CLIP : z;
}

/* log(v) for a positive finite scale, NaN (missing) otherwise. */
static float log_pos(float v) { return isfinite(v) && v > 0.0f ? logf(v) : NAN; }

/* Raw loss slots 0-3 from the three EMAs and the current log loss. */
static void loss_slots(const float *ema, float l, float *raw4) {
    raw4[0] = ema[1];
    raw4[1] = ema[0] - ema[1];
    raw4[2] = ema[1] - ema[2];
    raw4[3] = l - ema[0];
}

static void ema_loss(float *ema, float have, float l) {
    for (int k = 0; k < 3; k++) ema[k] = have > 0 ? ema[k] + loss_alpha[k] * (l - ema[k]) : l;
}

/* Each input updates only its own slots, and only when present: a missing
 * input leaves raw value and statistics untouched, so its output repeats. */
hpt_status hpt_encoder_update(hpt_encoder *e, const hpt_enc_input *in, float *out) {
    if (in->phase < 0 || in->phase >= HPT_ENC_NPHASES)
        return hpt_fail(HPT_ERR_ARG, "encoder: phase %d out of range [0, %d)", in->phase, HPT_ENC_NPHASES);

    float l = log_pos(in->loss);
    if (!isnan(l)) {
        ema_loss(e->ema, e->misc[MISC_HAVE_LOSS], l);
        e->misc[MISC_HAVE_LOSS] = 1.0f;
        float r[4];
        loss_slots(e->ema, l, r);
        for (int k = 0; k < 4; k++) observe(e, HPT_ENC_LOSS_LEVEL + k, r[k]);
    }
    float g = log_pos(in->grad_norm);
    if (!isnan(g)) {
        /* The ratio is taken against the EMA *before* this step, so a spike
         * shows at full size instead of being diluted by itself. */
        float prev = e->misc[MISC_HAVE_GRAD] > 0 ? e->ema[3] : g;
        observe(e, HPT_ENC_GRAD_LOG, g);
        observe(e, HPT_ENC_GRAD_RATIO, g - prev);
        e->ema[3] = prev + GRAD_ALPHA * (g - prev);
        e->misc[MISC_HAVE_GRAD] = 1.0f;
    }
    float v;
    if (!isnan(v = log_pos(in->m_abs_mean))) observe(e, HPT_ENC_ADAM_M, v);
    if (!isnan(v = log_pos(in->v_sqrt_mean))) observe(e, HPT_ENC_ADAM_V, v);
    if (!isnan(v = log_pos(in->lr))) observe(e, HPT_ENC_LR, v);
    if (!isnan(v = log_pos(in->update_ratio))) observe(e, HPT_ENC_UPD_RATIO, v);
    if (isfinite(in->update_cos))
        observe(e, HPT_ENC_UPD_COS, fmaxf(-1.0f, fminf(1.0f, in->update_cos)));
    /* the one-hot slots are standardised like the others: a phase that is
     * rare gets a large value when it occurs, a never-visited one stays 0 */
    for (int p = 0; p < HPT_ENC_NPHASES; p++) observe(e, HPT_ENC_PHASE0 + p, p == in->phase ? 1.0f : 0.0f);
    int steps = in->steps_in_phase > 0 ? in->steps_in_phase : 0;
    e->misc[MISC_STEPS] = (float)steps;
    observe(e, HPT_ENC_PHASE_STEPS, log1pf((float)steps));

    for (int i = 0; i < HPT_ENC_NFEAT; i++) out[i] = normalise(e, i, e->raw[i]);
    return HPT_OK;
}

/* ---------------------------------------------------------------- rollout */

void hpt_encoder_roll_begin(const hpt_encoder *e, hpt_enc_roll *r) {
    memcpy(r->ema, e->ema, sizeof r->ema);
    r->have_loss = e->misc[MISC_HAVE_LOSS];
    r->steps = e->misc[MISC_STEPS];
}

/* The rollout writes its slots with the statistics frozen (e is const): the
 * dynamics model was trained on features normalised by them, and a forecast
 * must not move them. */
void hpt_encoder_roll_step(const hpt_encoder *e, hpt_enc_roll *r, float log_loss, float lr, float *feat) {
    if (isfinite(log_loss)) {
        ema_loss(r->ema, r->have_loss, log_loss);
        r->have_loss = 1.0f;
        float raw[4];
        loss_slots(r->ema, log_loss, raw);
        for (int k = 0; k < 4; k++) feat[HPT_ENC_LOSS_LEVEL + k] = normalise(e, HPT_ENC_LOSS_LEVEL + k, raw[k]);
    }
    float v = log_pos(lr);
    if (!isnan(v)) feat[HPT_ENC_LR] = normalise(e, HPT_ENC_LR, v);
    r->steps += 1.0f;
    feat[HPT_ENC_PHASE_STEPS] = normalise(e, HPT_ENC_PHASE_STEPS, log1pf(r->steps));
}

float hpt_encoder_roll_level(const hpt_enc_roll *r) { return r->have_loss > 0 ? r->ema[1] : NAN; }

/* Counts and flags of a restored state (a checkpoint's bytes): in range, so
 * that nothing divides by a negative count or reads a flag as a level. */
hpt_status hpt_encoder_check_state(const hpt_encoder *e) {
    for (int i = 0; i < HPT_ENC_NFEAT; i++)
        if (!(e->count[i] >= 0.0f && e->count[i] <= HPT_ENC_NORM_WINDOW) || !(e->var[i] >= 0.0f))
            return hpt_fail(HPT_ERR_FORMAT, "encoder state: slot %d's count or variance is out of range", i);
    float hl = e->misc[MISC_HAVE_LOSS], hg = e->misc[MISC_HAVE_GRAD], st = e->misc[MISC_STEPS];
    if ((hl != 0.0f && hl != 1.0f) || (hg != 0.0f && hg != 1.0f) || !(st >= 0.0f && isfinite(st)))
        return hpt_fail(HPT_ERR_FORMAT, "encoder state: a flag or the step count is out of range");
    return HPT_OK;
}
