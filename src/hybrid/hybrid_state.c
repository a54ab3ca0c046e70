/*
 * hybrid_state.c — the hybrid driver's whole state in the HYBR checkpoint
 * section (layout in hybrid_internal.h and docs/format.md): the driver's
 * blocks, and an extension's (extension.h) at their places, walked by the
 * extension itself, only where the run has one; a version-6 checkpoint's
 * extra blocks skipped; and the round trip the tests use.
 */
#include "hybrid_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef hpt_hyb_walker walker;

/* Whether the layout being read holds every block for every predictor
 * (version 6), owned by this run or not. */
static int all_blocks(const walker *x) { return x->mode == 2 && x->version < 7; }

static void div_save(const void *o, hpt_writer *w) { hpt_div_save(o, w); }
static hpt_status div_load(void *o, hpt_cursor *k) { return hpt_div_load(o, k); }

/* u32 version, the config, u64 phases.jsonl's length (fsynced first: the
 * checkpoint must not name bytes a crash can still take away). */
static void walk_head(hybrid *h, walker *x) {
    uint32_t version = HYBR_VERSION;
    x->version = HYBR_VERSION;
    unsigned char cfg[HYBR_CFG_BYTES], cfg_now[HYBR_CFG_BYTES];
    hpt_hyb_encode_cfg(&h->cfg, cfg_now);
    memcpy(cfg, cfg_now, sizeof cfg);
    hpt_walk_raw(x, &version, 4);
    if (x->mode == 2) x->version = version;
    if (x->mode == 2 && (version < HYBR_VERSION_OLDEST || version > HYBR_VERSION))
        hpt_walk_fail(x, "version %u, this hpt reads %u to %u", version, HYBR_VERSION_OLDEST, HYBR_VERSION);
    hpt_walk_raw(x, cfg, sizeof cfg);
    if (x->mode == 2 && memcmp(cfg, cfg_now, sizeof cfg)) hpt_walk_fail(x, "its config differs from the run's");
    uint64_t plen = 0;
    if (x->mode == 1 && h->phases_log) {
        /* the file's size, not ftell: an append stream that has not
         * written yet may report 0 */
        struct stat sb;
        if (fflush(h->phases_log) != 0 || fsync(fileno(h->phases_log)) != 0) x->w->err = errno ? errno : EIO;
        if (fstat(fileno(h->phases_log), &sb) == 0) plen = (uint64_t)sb.st_size;
    }
    hpt_walk_raw(x, &plen, 8);
    if (x->mode == 2) h->phases_bytes = plen;
}

/* The blocks a version-6 checkpoint held in every run for what is now an
 * extension's part (the phase controller; the encoder's region and the
 * dynamics model's four; the previous update), skipped by a run without
 * an extension. */
static const int v6_part_blocks[] = {1, 5, 1};
static const char *const v6_part_names[] = {"phase controller", "dynamics model", "previous update"};

/* An extension's blocks at their place in the layout (extension.h). */
static void walk_ext_part(hybrid *h, walker *x, hpt_hyb_ext_part part) {
    if (h->ext) {
        h->ext->walk(h->ext_ctx, part, x);
        return;
    }
    for (int i = 0; all_blocks(x) && i < v6_part_blocks[part]; i++) hpt_walk_skip(x, v6_part_names[part]);
}

static int in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }
static int fin_range(double v, double lo, double hi) { return v >= lo && v <= hi && isfinite(v); }

/* A ring filled from slot 0 on: until it is full, its head is its count. */
static int ring_ok(int count, int head, int cap) {
    return in_range(count, 0, cap) && in_range(head, 0, cap > 0 ? cap - 1 : 0) && (count == cap || head == count);
}

#define COUNT_MAX 1000000000   /* runs are at most 1e8 steps */

/* The predictor's ring counters and the snapshot's valid/step. */
static const char *check_pred_snap(const hybrid *h, const int32_t *iv) {
    if (!ring_ok(iv[0], iv[1], h->pred.ring_c)) return "the predictor's ring count or head is out of range";
    if (!in_range(iv[2], 0, 1) || !in_range(iv[3], 0, hpt_trainer_config(h->tr)->max_iters))
        return "the snapshot's valid flag or step is out of range";
    return NULL;
}

/* The driver's own scalars: flags, ring positions, counters, clocks. */
static const char *check_driver(const int32_t *dv, const float *fv, const double *gv) {
    if (!in_range(dv[0], 0, 1)) return "have_prev_upd is neither 0 nor 1";
    if (!ring_ok(dv[1], dv[2], LOSS_RING)) return "the loss ring's count or head is out of range";
    for (int i = 3; i < 11 + HPT_PHASE_COUNT; i++)
        if (!in_range(dv[i], 0, COUNT_MAX)) return "a pass, phase or step counter is out of range";
    if (!fin_range(fv[1], 0.0, 1.0) || !fin_range(fv[2], 0.0, 1.0))
        return "the predicted-step scale or the acceptance EMA is outside [0, 1]";
    for (int i = 0; i < 3 + HPT_PHASE_COUNT; i++)
        if (!fin_range(gv[i], 0.0, 1e300)) return "a time or the alpha sum is not a finite non-negative number";
    return NULL;
}

/* The outer path's state (hybrid_outer; zeros for the other predictors),
 * field by field, checked before it is taken. */
static void walk_outer(hybrid *h, walker *x) {
    hybrid_outer *o = &h->out;
    int32_t ov[6] = {o->anchor_updates, o->check_left, o->check_n, o->applied, o->kept, o->rolled_back};
    double gv[3] = {o->check_sum, o->ref_mean, o->ref_sd};
    hpt_walk_block(x, "outer counters", ov, sizeof ov);
    hpt_walk_block(x, "outer floats", gv, sizeof gv);
    if (x->mode != 2 || x->why[0]) return;
    const char *why = NULL;
    if (!in_range(ov[0], 0, hpt_trainer_updates(h->tr))) why = "the outer anchor's update count is out of range";
    else if (!in_range(ov[1], 0, h->cfg.outer_check) || !in_range(ov[2], 0, h->cfg.outer_check) ||
             (ov[1] > 0 ? ov[1] + ov[2] != h->cfg.outer_check : ov[2] != 0))
        why = "the outer check's position is out of range";
    else if (!in_range(ov[3], 0, COUNT_MAX) || !in_range(ov[4], 0, ov[3]) || !in_range(ov[5], 0, ov[3] - ov[4]))
        why = "the outer jump counters are out of range";
    else if (!isfinite(gv[0]) || !isfinite(gv[1]) || !fin_range(gv[2], 0.0, 1e300))
        why = "the outer check's sums are not finite";
    else if (ov[1] > 0 && !h->snap.valid) why = "an outer check is under way without a snapshot";
    if (why) { hpt_walk_fail(x, "%s", why); return; }
    o->anchor_updates = ov[0]; o->check_left = ov[1]; o->check_n = ov[2];
    o->applied = ov[3]; o->kept = ov[4]; o->rolled_back = ov[5];
    o->check_sum = gv[0]; o->ref_mean = gv[1]; o->ref_sd = gv[2];
}

/* Under schedule-free (only: the trainer's config says so), the snapshot's
 * rate sums (f64 lr_max, weight_sum), checked before they are taken. */
static void walk_snap_sf(hybrid *h, walker *x) {
    if (!h->snap.sf) return;
    double sv[2] = {h->snap.sf_sums.lr_max, h->snap.sf_sums.weight_sum};
    hpt_walk_block(x, "snapshot schedule-free sums", sv, sizeof sv);
    if (x->mode != 2 || x->why[0]) return;
    if (!fin_range(sv[0], 0.0, 1e300) || !fin_range(sv[1], 0.0, 1e300)) {
        hpt_walk_fail(x, "the snapshot's schedule-free rate sums are not finite non-negative numbers");
        return;
    }
    h->snap.sf_sums = (hpt_sf_state){.lr_max = sv[0], .weight_sum = sv[1]};
}

/* The predictor, the snapshot and the driver's own state, with an
 * extension's scalars that the layout keeps here (have_prev_upd,
 * next_pred_loss, accept_ema: 0, NaN and 1 where there is none). */
static void walk_driver(hybrid *h, walker *x) {
    hpt_hyb_ext_words ew = {0, NAN, 1.0f};
    if (h->ext && h->ext->get_words) h->ext->get_words(h->ext_ctx, &ew);
    int32_t iv[4] = {h->pred.ring_count, h->pred.ring_head, h->snap.valid, h->snap.step};
    hpt_walk_block(x, "predictor/snapshot counters", iv, sizeof iv);
    hpt_walk_block(x, "tensor gates", h->pred.tensor_gate, sizeof h->pred.tensor_gate);
    hpt_walk_block(x, "tensor scales", h->pred.tensor_scale, sizeof h->pred.tensor_scale);
    /* both arenas are the model's device memory; on the outer path the
     * predictor's block holds the outer step's (anchor, then momentum), as
     * it held the outer predictor's own arena before */
    float *pa = h->out.step.arena ? h->out.step.arena : h->pred.arena;
    hpt_walk_dev_block(x, "predictor arena", h->m, pa, hpt_hyb_pred_bytes(h) / sizeof(float));
    hpt_walk_dev_block(x, "snapshot arena", h->m, h->snap.arena, hpt_snapshot_floats(&h->snap));
    walk_snap_sf(h, x);

    int32_t dv[16] = {ew.have_prev_upd, h->loss_n, h->loss_head, h->cnt.backward_passes, h->cnt.probe_passes,
                      h->cnt.rollbacks, h->cnt.div_rollbacks, h->cnt.phases_accepted, h->cnt.phases_rejected,
                      h->cnt.predicted_steps_kept, h->cnt.predicted_steps_lost};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) dv[11 + i] = h->cnt.phase_count_steps[i];
    dv[15] = h->snap.valid ? h->snap.updates + 1 : 0;  /* the snapshot's update count + 1 (0: unknown) */
    hpt_walk_block(x, "driver counters", dv, sizeof dv);
    float fv[3] = {ew.next_pred_loss, h->scale, ew.accept_ema};
    hpt_walk_block(x, "driver floats", fv, sizeof fv);
    double gv[3 + HPT_PHASE_COUNT] = {h->real_step_s, h->cnt.alpha_sum};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) gv[2 + i] = h->cnt.phase_s[i];
    gv[2 + HPT_PHASE_COUNT] = h->cnt.ctrl_s;
    hpt_walk_block(x, "driver times", gv, sizeof gv);
    hpt_walk_block(x, "loss ring", h->loss_ring, sizeof h->loss_ring);
    walk_ext_part(h, x, HPT_EXT_PART_TAIL);
    int32_t snap_valid = h->snap.valid;
    if (x->mode == 2) h->snap.valid = iv[2] == 1;  /* what walk_outer checks against; set for good below */
    walk_outer(h, x);
    if (x->mode == 2) h->snap.valid = snap_valid;

    if (x->mode != 2 || x->why[0]) return;
    const char *why = check_pred_snap(h, iv);
    if (!why) why = check_driver(dv, fv, gv);
    /* written as 0 by hpt before the snapshot kept its update count: unknown */
    if (!why && (dv[15] < 0 || dv[15] - 1 > hpt_trainer_updates(h->tr)))
        why = "the snapshot's update count is out of range";
    if (!why && x->k.pos != x->k.n) why = "bytes to spare after the last block";
    if (why) { hpt_walk_fail(x, "%s", why); return; }
    h->pred.ring_count = iv[0]; h->pred.ring_head = iv[1]; h->snap.valid = iv[2]; h->snap.step = iv[3];
    h->snap.updates = dv[15] - 1;
    h->loss_n = dv[1]; h->loss_head = dv[2]; h->cnt.backward_passes = dv[3];
    h->cnt.probe_passes = dv[4]; h->cnt.rollbacks = dv[5]; h->cnt.div_rollbacks = dv[6]; h->cnt.phases_accepted = dv[7];
    h->cnt.phases_rejected = dv[8]; h->cnt.predicted_steps_kept = dv[9]; h->cnt.predicted_steps_lost = dv[10];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_count_steps[i] = dv[11 + i];
    h->scale = fv[1];
    ew = (hpt_hyb_ext_words){dv[0], fv[0], fv[2]};
    if (h->ext && h->ext->set_words) h->ext->set_words(h->ext_ctx, &ew);
    h->real_step_s = gv[0]; h->cnt.alpha_sum = gv[1];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_s[i] = gv[2 + i];
    h->cnt.ctrl_s = gv[2 + HPT_PHASE_COUNT];
}

static void walk_state(hybrid *h, walker *x) {
    hpt_walk_fields dv = {"divergence monitor", hpt_div_state_bytes(&h->div), div_save, div_load};
    walk_head(h, x);
    walk_ext_part(h, x, HPT_EXT_PART_CONTROL);
    hpt_walk_fields_block(x, &dv, &h->div);
    walk_ext_part(h, x, HPT_EXT_PART_MODELS);
    walk_driver(h, x);
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

static void say(hybrid *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(hybrid *h, const char *fmt, ...) {
    if (!h->log) return;
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    h->log(h->log_ctx, line);
}

/* Length of the whole lines in the first n bytes of path (a torn last line
 * is not kept); 0 when it cannot be read. */
static uint64_t whole_lines(const char *path, uint64_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t keep = 0, at = 0;
    int c;
    while (at < n && (c = fgetc(f)) != EOF) {
        at++;
        if (c == '\n') keep = at;
    }
    fclose(f);
    return keep;
}

/* phases.jsonl back to what it held at the checkpoint. The log is a record,
 * not state: one that is missing or shorter (lost in a crash before it was
 * fsynced, or cut by hand) costs its missing lines, never the run; what is
 * there is kept up to its last whole line, and the run says so. */
static hpt_status restore_phases_log(hybrid *h) {
    struct stat sb;
    uint64_t want = h->phases_bytes, keep = want;
    if (stat(h->phases_path, &sb) != 0) {
        keep = 0;
        if (want > 0)   /* (a checkpoint from before the first phase line loses nothing) */
            say(h, "warning    '%s' is missing (the checkpoint recorded %llu bytes): a new one is started; the "
                "phase lines before step %d are lost", h->phases_path, (unsigned long long)want,
                hpt_trainer_steps(h->tr));
    } else if ((uint64_t)sb.st_size < want) {
        keep = whole_lines(h->phases_path, (uint64_t)sb.st_size);
        say(h, "warning    '%s' holds %llu bytes, the checkpoint recorded %llu: its %llu bytes of whole lines are "
            "kept and the run goes on; phase lines before step %d are missing from it", h->phases_path,
            (unsigned long long)sb.st_size, (unsigned long long)want, (unsigned long long)keep,
            hpt_trainer_steps(h->tr));
    }
    h->phases_log = fopen(h->phases_path, "a");
    if (!h->phases_log) return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", h->phases_path, strerror(errno));
    if (ftruncate(fileno(h->phases_log), (off_t)keep) != 0)
        return hpt_fail(HPT_ERR_IO, "cannot truncate '%s': %s", h->phases_path, strerror(errno));
    return HPT_OK;
}

hpt_status hpt_hyb_load_state(void *hctx, const unsigned char *p, size_t n) {
    hybrid *h = hctx;
    walker x = {.mode = 2, .k = {p, n, 0}};
    walk_state(h, &x);
    if (x.why[0])
        return hpt_fail(HPT_ERR_FORMAT, "'%s': the hybrid state (HYBR) cannot be continued: %s",
                        hpt_trainer_checkpoint(h->tr), x.why);
    return hpt_trainer_writes(h->tr) ? restore_phases_log(h) : HPT_OK;  /* rank 0 writes the run's files */
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
