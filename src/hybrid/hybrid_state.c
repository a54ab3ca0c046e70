/*
 * hybrid_state.c — the hybrid driver's whole state in the HYBR checkpoint
 * section (layout in hybrid_internal.h and docs/format.md), and the round
 * trip the tests use.
 */
#include "hybrid_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mode 0 counts, 1 writes to w, 2 reads from k (*bad set on a mismatch). */
typedef struct walker { int mode; uint64_t n; hpt_writer *w; hpt_cursor k; int bad; } walker;

static void w_raw(walker *x, void *p, size_t n) {
    if (x->mode == 0) x->n += n;
    else if (x->mode == 1) hpt_w_bytes(x->w, p, n);
    else if (!x->bad && !hpt_cur_bytes(&x->k, p, n)) x->bad = 1;
}
/* A block: u64 length, then the bytes; on read the length must match. */
static void w_block(walker *x, void *p, size_t n) {
    uint64_t len = n;
    if (x->mode == 2) {
        if (x->bad || !hpt_cur_u64(&x->k, &len) || len != n) { x->bad = 1; return; }
        w_raw(x, p, n);
        return;
    }
    w_raw(x, &len, 8);
    w_raw(x, p, n);
}

static void walk_state(hybrid *h, walker *x) {
    uint32_t version = HYBR_VERSION;
    unsigned char cfg[HYBR_CFG_BYTES], cfg_now[HYBR_CFG_BYTES];
    hpt_hyb_encode_cfg(&h->cfg, cfg_now);
    memcpy(cfg, cfg_now, sizeof cfg);
    w_raw(x, &version, 4);
    if (x->mode == 2 && version != HYBR_VERSION) x->bad = 1;
    w_raw(x, cfg, sizeof cfg);
    if (x->mode == 2 && memcmp(cfg, cfg_now, sizeof cfg)) x->bad = 1;
    uint64_t plen = 0;
    if (x->mode == 1 && h->phases_log) {
        /* the file's size, not ftell: an append stream that has not
         * written yet may report 0 */
        struct stat sb;
        fflush(h->phases_log);
        if (fstat(fileno(h->phases_log), &sb) == 0) plen = (uint64_t)sb.st_size;
    }
    w_raw(x, &plen, 8);
    if (x->mode == 2) h->phases_bytes = plen;

    w_block(x, &h->ph, sizeof h->ph);
    w_block(x, &h->div, sizeof h->div);
    hpt_region r[8];
    int nr = hpt_encoder_regions(&h->enc, r);
    for (int i = 0; i < nr; i++) w_block(x, r[i].ptr, r[i].bytes);
    nr = hpt_dyn_regions(&h->dyn, r);
    for (int i = 0; i < nr; i++) w_block(x, r[i].ptr, r[i].bytes);

    int32_t iv[4] = {h->pred.ring_count, h->pred.ring_head, h->snap.valid, h->snap.step};
    w_block(x, iv, sizeof iv);
    w_block(x, h->pred.tensor_gate, sizeof h->pred.tensor_gate);
    w_block(x, h->pred.tensor_scale, sizeof h->pred.tensor_scale);
    w_block(x, h->pred.arena, h->pred.arena ? h->pred.arena_bytes : 0);
    w_block(x, h->snap.arena, 3 * h->snap.n * sizeof(float));

    /* the driver's own scalars */
    int32_t dv[16] = {h->have_prev_upd, h->loss_n, h->loss_head, h->cnt.backward_passes, h->cnt.probe_passes,
                      h->cnt.rollbacks, h->cnt.div_rollbacks, h->cnt.phases_accepted, h->cnt.phases_rejected,
                      h->cnt.predicted_steps_kept, h->cnt.predicted_steps_lost};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) dv[11 + i] = h->cnt.phase_count_steps[i];
    w_block(x, dv, sizeof dv);
    float fv[3] = {h->next_pred_loss, h->scale, h->accept_ema};
    w_block(x, fv, sizeof fv);
    double gv[3 + HPT_PHASE_COUNT] = {h->real_step_s, h->cnt.alpha_sum};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) gv[2 + i] = h->cnt.phase_s[i];
    gv[2 + HPT_PHASE_COUNT] = h->cnt.ctrl_s;
    w_block(x, gv, sizeof gv);
    w_block(x, h->loss_ring, sizeof h->loss_ring);
    w_block(x, h->prev_upd, h->ns * sizeof(float));

    if (x->mode != 2 || x->bad) return;
    if (x->k.pos != x->k.n || iv[0] < 0 || iv[0] > h->pred.ring_c || iv[1] < 0 ||
        iv[1] >= (h->pred.ring_c > 0 ? h->pred.ring_c : 1) || dv[1] < 0 || dv[1] > LOSS_RING || dv[2] < 0 ||
        dv[2] >= LOSS_RING) {
        x->bad = 1;
        return;
    }
    h->pred.ring_count = iv[0]; h->pred.ring_head = iv[1]; h->snap.valid = iv[2]; h->snap.step = iv[3];
    h->have_prev_upd = dv[0]; h->loss_n = dv[1]; h->loss_head = dv[2]; h->cnt.backward_passes = dv[3];
    h->cnt.probe_passes = dv[4]; h->cnt.rollbacks = dv[5]; h->cnt.div_rollbacks = dv[6]; h->cnt.phases_accepted = dv[7];
    h->cnt.phases_rejected = dv[8]; h->cnt.predicted_steps_kept = dv[9]; h->cnt.predicted_steps_lost = dv[10];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_count_steps[i] = dv[11 + i];
    h->next_pred_loss = fv[0]; h->scale = fv[1]; h->accept_ema = fv[2];
    h->real_step_s = gv[0]; h->cnt.alpha_sum = gv[1];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_s[i] = gv[2 + i];
    h->cnt.ctrl_s = gv[2 + HPT_PHASE_COUNT];
}

uint64_t hpt_hyb_state_bytes(void *hctx) {
    walker x = {.mode = 0};
    walk_state(hctx, &x);
    return x.n;
}

void hpt_hyb_save_state(void *hctx, hpt_writer *w) {
    walker x = {.mode = 1, .w = w};
    walk_state(hctx, &x);
}

hpt_status hpt_hyb_load_state(void *hctx, const unsigned char *p, size_t n) {
    hybrid *h = hctx;
    walker x = {.mode = 2, .k = {p, n, 0}};
    walk_state(h, &x);
    if (x.bad)
        return hpt_fail(HPT_ERR_FORMAT, "'%s': the hybrid state (HYBR) does not fit this run",
                        hpt_trainer_checkpoint(h->tr));
    /* phases.jsonl: back to what it held when the checkpoint was written */
    struct stat sb;
    if (stat(h->phases_path, &sb) != 0 || (uint64_t)sb.st_size < h->phases_bytes)
        return hpt_fail(HPT_ERR_IO, "'%s' is missing or shorter than at the checkpoint (%llu bytes)",
                        h->phases_path, (unsigned long long)h->phases_bytes);
    if (truncate(h->phases_path, (off_t)h->phases_bytes) != 0)
        return hpt_fail(HPT_ERR_IO, "cannot truncate '%s': %s", h->phases_path, strerror(errno));
    h->phases_log = fopen(h->phases_path, "a");
    if (!h->phases_log) return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", h->phases_path, strerror(errno));
    return HPT_OK;
}

hpt_status hpt_hybrid_state_roundtrip(hpt_trainer *tr, unsigned char **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    hpt_hybrid_config hc;
    HPT_TRY(hpt_hybrid_config_resumed(tr, &hc));
    hybrid *h;
    HPT_TRY(hpt_hyb_new(tr, &hc, &h));
    size_t n_state;
    const unsigned char *state = hpt_trainer_resume_state(tr, &n_state);
    hpt_status st = hpt_hyb_load_state(h, state, n_state);
    FILE *f = st == HPT_OK ? tmpfile() : NULL;
    if (st == HPT_OK && !f) st = hpt_fail(HPT_ERR_IO, "tmpfile: %s", strerror(errno));
    if (st == HPT_OK) {
        uint64_t n = hpt_hyb_state_bytes(h);
        hpt_writer w = {.f = f};
        hpt_hyb_save_state(h, &w);
        unsigned char *buf = malloc(n ? (size_t)n : 1);
        if (w.err || !buf || fflush(f) != 0 || ftell(f) != (long)n || fseek(f, 0, SEEK_SET) != 0 ||
            (n && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
            free(buf);
            st = hpt_fail(HPT_ERR_IO, "hybrid state round trip: write or read back failed");
        } else {
            *out = buf;
            *out_n = (size_t)n;
        }
    }
    if (f) fclose(f);
    hpt_hyb_free(h);
    return st;
}
