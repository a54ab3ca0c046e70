/*
 * hybrid_config.c — hpt_hybrid_config: its defaults and checks and its
 * fixed-width encoding in the HYBR section, from the settings table's hybrid
 * rows (src/train/settings.h, read through hpt_settings), and the
 * divergence monitor's sub-config (an extension cuts out its own).
 */
#include "../train/settings.h"
#include "hybrid_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- the hybrid rows */

/* every hybrid row is one word of HYBR's config: a new row is a new HYBR
 * layout (raise HYBR_CFG_WORDS and HYBR_VERSION, hybrid_internal.h) */
#define ONE_ROW(...) +1
_Static_assert(0 HPT_HYBRID_SETTINGS(ONE_ROW) == HYBR_CFG_WORDS, "hybrid rows != HYBR config words");

static const hpt_setting *hybrid_rows(int *n) {
    const hpt_setting *rows = hpt_settings(HPT_SET_HYBRID, n);
    HPT_ASSERT(*n == HYBR_CFG_WORDS);
    return rows;
}

/* The predictor a config names runs in this build (its row: the default
 * table's or an extension's), and --outer-gate dynamics has the extension
 * that offers the gate; else the reason, naming the flag. */
static hpt_status check_built(const hpt_hybrid_config *c) {
    if (c->predictor && !hpt_pred_find(c->predictor))
        return hpt_fail(HPT_ERR_ARG, "--predictor %s is the phased design's, which this build of hpt leaves out "
                        "(built with make PHASED=0): use --predictor outer, or a build with it", c->predictor);
    if (c->outer_gate && !hpt_hyb_ext_gate())
        return hpt_fail(HPT_ERR_ARG, "--outer-gate dynamics reads the phased design's learned dynamics, which this "
                        "build of hpt leaves out (built with make PHASED=0): use --outer-gate none, or a build "
                        "with it");
    return HPT_OK;
}

/* ---------------------------------------------------------------- the config */

/* The table's defaults, which are the phase controller's and the
 * divergence monitor's (tests/test_settings.c checks they agree). */
void hpt_hybrid_config_default(hpt_hybrid_config *c) {
    memset(c, 0, sizeof *c);
#define X(f, flag, T, lo, hi, fl, d, m, h) c->f = d;
    HPT_HYBRID_SETTINGS(X)
#undef X
}

void hpt_hyb_to_div_config(const hpt_hybrid_config *c, hpt_div_config *dc) {
    hpt_div_config_default(dc);
    dc->window = c->div_window;
    dc->loss_z_warn = c->div_loss_z;
    if (dc->loss_z_crit < dc->loss_z_warn) dc->loss_z_crit = 2.0f * dc->loss_z_warn;
    dc->grad_explode = c->div_grad_explode;
    dc->grad_vanish = c->div_grad_vanish;
}

/* Each value against its row of the table, then what the extensions (the
 * phased design's phase machine) and the divergence monitor check across
 * values, then that this build runs what it asks for. */
hpt_status hpt_hybrid_config_check(const hpt_hybrid_config *c) {
    int n;
    const hpt_setting *rows = hybrid_rows(&n);
    HPT_TRY(hpt_settings_check(rows, n, c));
    hpt_div_config dc;
    hpt_hyb_to_div_config(c, &dc);
    HPT_TRY(hpt_hyb_ext_config_check(c));
    HPT_TRY(hpt_div_config_check(&dc));
    return check_built(c);
}

hpt_status hpt_hybrid_config_check_sf(const hpt_hybrid_config *c, int schedule_free) {
    if (!schedule_free) return HPT_OK;
    if (c->predictor && strcmp(c->predictor, "outer"))   /* the one outer predictor (predict.h) */
        return hpt_fail(HPT_ERR_ARG, "--predictor %s does not work with --optimizer schedule-free (the phased "
                        "predictors coast, stale-adam, linear and shrink read AdamW's moments, which schedule-free "
                        "does not keep): use --predictor outer or --optimizer adamw", c->predictor);
    if (c->outer_moments == 1)
        return hpt_fail(HPT_ERR_ARG, "--outer-moments reset does not apply with --optimizer schedule-free (it has no "
                        "first moment to reset)");
    return HPT_OK;
}

/* Under Muon the hybrid is the outer step alone: the snapshot holds Muon's
 * momentum where it keeps AdamW's first moment (the optimizer state lives in
 * m and v either way), so the guard restores it; the phased predictors and
 * the learned dynamics read m and v as AdamW's, which on the hidden matrices
 * they are not. */
hpt_status hpt_hybrid_config_check_muon(const hpt_hybrid_config *c, int muon) {
    if (!muon) return HPT_OK;
    if (c->predictor && strcmp(c->predictor, "outer"))
        return hpt_fail(HPT_ERR_ARG, "--predictor %s does not work with --optimizer muon (the phased predictors read "
                        "AdamW's moments, which hold Muon's momentum on the hidden matrices): use --predictor outer",
                        c->predictor);
    if (c->outer_gate)
        return hpt_fail(HPT_ERR_ARG, "--outer-gate dynamics does not work with --optimizer muon (its encoder reads "
                        "AdamW's moments, which hold Muon's momentum on the hidden matrices)");
    return HPT_OK;
}

/* The HYBR config words: the table's hybrid rows in order, one word each. */
void hpt_hyb_encode_cfg(const hpt_hybrid_config *c, unsigned char *out) {
    int n;
    const hpt_setting *rows = hybrid_rows(&n);
    size_t bytes = hpt_settings_encode(rows, n, c, 1, 1, out, HYBR_CFG_BYTES);
    HPT_ASSERT(bytes == HYBR_CFG_BYTES);
}

int hpt_hyb_decode_cfg(const unsigned char *in, hpt_hybrid_config *c) {
    hpt_cursor k = {in, HYBR_CFG_BYTES, 0};
    int n;
    const hpt_setting *rows = hybrid_rows(&n);
    hpt_hybrid_config_default(c);
    return hpt_settings_decode(rows, n, c, 1, 1, &k, NULL, 0) && k.pos == k.n &&
           hpt_hybrid_config_check(c) == HPT_OK;
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
    if (v < HYBR_VERSION_OLDEST)
        return hpt_fail(HPT_ERR_FORMAT, "'%s': HYBR version %u was written by an older hpt whose hybrid state this "
                        "one cannot continue (version %u %s); start the hybrid run again", ckpt_path, v,
                        v + 1, v < 2   ? "samples the update statistics"
                                     : v < 3 ? "also records the controller's own time"
                                     : v < 4 ? "saves the phase controller and divergence monitor field by field"
                                     : v < 5 ? "stores the outer predictor's settings and state"
                                             : "stores the outer predictor's moment, adapt and gate settings");
    if (!hpt_hyb_decode_cfg(state + 4, hc)) {
        char why[768];  /* copied: hpt_fail writes the buffer hpt_errmsg() points to */
        snprintf(why, sizeof why, "%s", hpt_errmsg());
        return hpt_fail(HPT_ERR_FORMAT, "'%s': bad hybrid config in HYBR: %s", ckpt_path, why);
    }
    return HPT_OK;
}
