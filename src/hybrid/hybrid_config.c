/*
 * hybrid_config.c — hpt_hybrid_config: its defaults (from the phase
 * controller's and the divergence monitor's), its checks, the sub-configs
 * it is cut into, and its fixed-width encoding in the HYBR section.
 */
#include "hybrid_internal.h"

#include <string.h>

void hpt_hybrid_config_default(hpt_hybrid_config *c) {
    memset(c, 0, sizeof *c);
    hpt_phase_config pc;
    hpt_phase_config_default(&pc);
    c->warmup_steps = pc.warmup_steps;
    c->full_steps = pc.full_steps;
    c->min_predict_steps = pc.min_predict_steps;
    c->max_predict_steps = pc.max_predict_steps;
    c->correct_steps = pc.correct_steps;
    c->max_consecutive_predict = pc.max_consecutive_predict;
    c->confidence_threshold = pc.confidence_threshold;
    c->backoff_after = pc.backoff_after;
    c->max_backoff = pc.max_backoff;
    c->waste_budget = pc.waste_budget;
    c->predictor = "coast";
    c->correction_interval = 4;
    c->probe_batches = 2;
    c->whole_phase = 0;
    c->count_cost = 1;  /* reproducible by default: no wall clock in decisions */
    c->ensemble = 3; c->hidden = 32; c->bptt = 16;
    hpt_div_config dc;
    hpt_div_config_default(&dc);
    c->div_window = dc.window;
    c->div_loss_z = dc.loss_z_warn;
    c->div_grad_explode = dc.grad_explode;
    c->div_grad_vanish = dc.grad_vanish;
}

void hpt_hyb_to_phase_config(const hpt_hybrid_config *c, hpt_phase_config *pc) {
    hpt_phase_config_default(pc);
    pc->warmup_steps = c->warmup_steps;
    pc->full_steps = c->full_steps;
    pc->min_predict_steps = c->min_predict_steps;
    pc->max_predict_steps = c->max_predict_steps;
    pc->correct_steps = c->correct_steps;
    pc->max_consecutive_predict = c->max_consecutive_predict;
    pc->confidence_threshold = c->confidence_threshold;
    pc->backoff_after = c->backoff_after;
    pc->max_backoff = c->max_backoff;
    pc->waste_budget = c->waste_budget;
}

void hpt_hyb_to_div_config(const hpt_hybrid_config *c, hpt_div_config *dc) {
    hpt_div_config_default(dc);
    dc->window = c->div_window;
    dc->loss_z_warn = c->div_loss_z;
    if (dc->loss_z_crit < dc->loss_z_warn) dc->loss_z_crit = 2.0f * dc->loss_z_warn;
    dc->grad_explode = c->div_grad_explode;
    dc->grad_vanish = c->div_grad_vanish;
}

hpt_status hpt_hybrid_config_check(const hpt_hybrid_config *c) {
    hpt_phase_config pc;
    hpt_div_config dc;
    hpt_hyb_to_phase_config(c, &pc);
    hpt_hyb_to_div_config(c, &dc);
    HPT_TRY(hpt_phase_config_check(&pc));
    HPT_TRY(hpt_div_config_check(&dc));
    if (hpt_pred_parse(c->predictor) < 0) {
        char names[256];
        hpt_pred_list(names, sizeof names);
        return hpt_fail(HPT_ERR_ARG, "--predictor must be %s (got '%s')", names, c->predictor ? c->predictor : "");
    }
    if (c->correction_interval < 1 || c->correction_interval > 100000)
        return hpt_fail(HPT_ERR_ARG, "--correction-interval must be in [1, 100000] (got %d)", c->correction_interval);
    if (c->probe_batches < 1 || c->probe_batches > 64)
        return hpt_fail(HPT_ERR_ARG, "--probe-batches must be in [1, 64] (got %d)", c->probe_batches);
    if (c->ensemble < 1 || c->ensemble > 16) return hpt_fail(HPT_ERR_ARG, "--ensemble must be in [1, 16] (got %d)", c->ensemble);
    if (c->hidden < 2 || c->hidden > 1024) return hpt_fail(HPT_ERR_ARG, "--hidden must be in [2, 1024] (got %d)", c->hidden);
    if (c->bptt < 1 || c->bptt > 256) return hpt_fail(HPT_ERR_ARG, "--bptt must be in [1, 256] (got %d)", c->bptt);
    if (c->count_cost != 0 && c->count_cost != 1) return hpt_fail(HPT_ERR_ARG, "count_cost must be 0 or 1 (got %d)", c->count_cost);
    return HPT_OK;
}

void hpt_hyb_encode_cfg(const hpt_hybrid_config *c, unsigned char *out) {
    uint32_t w[HYBR_CFG_WORDS];
    int k = 0;
#define I_(x) w[k++] = (uint32_t)(int32_t)(x)
#define F_(x) do { float f_ = (x); memcpy(&w[k++], &f_, 4); } while (0)
    I_(c->warmup_steps); I_(c->full_steps); I_(c->min_predict_steps); I_(c->max_predict_steps);
    I_(c->correct_steps); I_(c->max_consecutive_predict); F_(c->confidence_threshold);
    I_(c->backoff_after); I_(c->max_backoff); F_(c->waste_budget);
    I_(hpt_pred_parse(c->predictor)); I_(c->correction_interval); I_(c->probe_batches); I_(c->whole_phase);
    I_(c->ensemble); I_(c->hidden); I_(c->bptt);
    I_(c->div_window); F_(c->div_loss_z); F_(c->div_grad_explode); F_(c->div_grad_vanish);
    I_(c->count_cost);
    HPT_ASSERT(k == HYBR_CFG_WORDS);
    memcpy(out, w, sizeof w);
}

int hpt_hyb_decode_cfg(const unsigned char *in, hpt_hybrid_config *c) {
    uint32_t w[HYBR_CFG_WORDS];
    memcpy(w, in, sizeof w);
    int k = 0;
    hpt_hybrid_config_default(c);
#define GI_(x) x = (int32_t)w[k++]
#define GF_(x) memcpy(&(x), &w[k++], 4)
    GI_(c->warmup_steps); GI_(c->full_steps); GI_(c->min_predict_steps); GI_(c->max_predict_steps);
    GI_(c->correct_steps); GI_(c->max_consecutive_predict); GF_(c->confidence_threshold);
    GI_(c->backoff_after); GI_(c->max_backoff); GF_(c->waste_budget);
    int kind; GI_(kind);
    GI_(c->correction_interval); GI_(c->probe_batches); GI_(c->whole_phase);
    GI_(c->ensemble); GI_(c->hidden); GI_(c->bptt);
    GI_(c->div_window); GF_(c->div_loss_z); GF_(c->div_grad_explode); GF_(c->div_grad_vanish);
    GI_(c->count_cost);
#undef I_
#undef F_
#undef GI_
#undef GF_
    c->predictor = hpt_pred_name(kind);  /* the predictor table's row */
    if (!c->predictor) return 0;
    return hpt_hybrid_config_check(c) == HPT_OK;
}

hpt_status hpt_hybrid_config_resumed(const hpt_trainer *tr, hpt_hybrid_config *hc) {
    uint32_t v = 0;
    size_t n_state;
    const unsigned char *state = hpt_trainer_resume_state(tr, &n_state);
    const char *ckpt_path = hpt_trainer_checkpoint(tr);
    if (!state || n_state < 4 + HYBR_CFG_BYTES)
        return hpt_fail(HPT_ERR_FORMAT, "'%s': no hybrid state (HYBR) to resume from", ckpt_path);
    memcpy(&v, state, 4);
    if (v > HYBR_VERSION)
        return hpt_fail(HPT_ERR_FORMAT, "'%s': HYBR version %u, this hpt reads %u (upgrade hpt)", ckpt_path, v,
                        HYBR_VERSION);
    if (v != HYBR_VERSION)
        return hpt_fail(HPT_ERR_FORMAT, "'%s': HYBR version %u was written by an older hpt whose hybrid state this "
                        "one cannot continue (version %u %s); start the hybrid run again", ckpt_path, v,
                        HYBR_VERSION, v < 2 ? "samples the update statistics" : "also records the controller's own time");
    if (!hpt_hyb_decode_cfg(state + 4, hc))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': bad hybrid config in HYBR: %s", ckpt_path, hpt_errmsg());
    return HPT_OK;
}
