/*
 * hybrid_state.c — the hybrid driver's whole state in the HYBR checkpoint
 * section (layout in hybrid_internal.h and docs/format.md): the driver's
 * blocks, the phased controller's and the learned dynamics' only where the
 * run has them, a version-6 checkpoint's extra blocks skipped; and the round
 * trip the tests use.
 */
#include "hybrid_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mode 0 counts, 1 writes to w, 2 reads from k; on read, why holds the
 * first problem (the rest of the walk is skipped) and version the layout
 * being read (HYBR_VERSION when counting or writing). */
typedef struct walker {
    int mode;
    uint64_t n;
    hpt_writer *w;
    hpt_cursor k;
    uint32_t version;
    char why[400];
} walker;

static void fail(walker *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(walker *x, const char *fmt, ...) {
    if (x->why[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why, sizeof x->why, fmt, ap);
    va_end(ap);
}

static void w_raw(walker *x, void *p, size_t n) {
    if (n == 0) return;   /* an empty block (the coast predictor's arena): p may be NULL */
    if (x->mode == 0) x->n += n;
    else if (x->mode == 1) hpt_w_bytes(x->w, p, n);
    else if (!x->why[0] && !hpt_cur_bytes(&x->k, p, n)) fail(x, "truncated");
}
/* A block: u64 length, then the bytes; on read the length must match. */
static void w_block(walker *x, const char *what, void *p, size_t n) {
    uint64_t len = n;
    if (x->mode == 2) {
        if (x->why[0]) return;
        if (!hpt_cur_u64(&x->k, &len) || len != n) {
            fail(x, "the %s block holds %llu bytes, this run's holds %zu", what, (unsigned long long)len, n);
            return;
        }
        w_raw(x, p, n);
        return;
    }
    w_raw(x, &len, 8);
    w_raw(x, p, n);
}

/* w_block over floats in the model's device memory (the predictor's and
 * the snapshot's arenas): written through download, read through upload, in
 * the same bytes as w_block (the CPU's are memcpy). */
static void w_dev_block(walker *x, const char *what, const hpt_model *m, float *p, size_t nfloats) {
    const size_t n = nfloats * sizeof(float);
    uint64_t len = n;
    if (x->mode == 0) { x->n += 8 + n; return; }
    if (x->mode == 1) {
        hpt_w_bytes(x->w, &len, 8);
        hpt_model_write(x->w, m, p, nfloats);   /* downloaded in pieces, as checkpoints' arrays */
        return;
    }
    if (x->why[0]) return;
    if (!hpt_cur_u64(&x->k, &len) || len != n) {
        fail(x, "the %s block holds %llu bytes, this run's holds %zu", what, (unsigned long long)len, n);
        return;
    }
    if (x->k.n - x->k.pos < n) { fail(x, "truncated"); return; }
    if (n) m->dev->upload(p, (const float *)(x->k.p + x->k.pos), nfloats);
    x->k.pos += n;
}

/* A block of a version-6 checkpoint this run has no owner for (the outer
 * path's phase controller, dynamics model and previous update): its length,
 * then past its bytes. Only on read. */
static void w_skip(walker *x, const char *what) {
    uint64_t len;
    if (x->why[0]) return;
    if (!hpt_cur_u64(&x->k, &len) || x->k.n - x->k.pos < len) {
        fail(x, "the %s block is truncated", what);
        return;
    }
    x->k.pos += (size_t)len;
}

/* Whether the layout being read holds every block for every predictor
 * (version 6), owned by this run or not. */
static int all_blocks(const walker *x) { return x->mode == 2 && x->version < 7; }

/* A block written field by field by its module's save, read back and
 * checked by its load (phase.h, divergence.h). */
typedef struct fields {
    const char *what;
    size_t bytes;
    void (*save)(const void *obj, hpt_writer *w);
    hpt_status (*load)(void *obj, hpt_cursor *k);
} fields;

static void w_fields(walker *x, const fields *f, void *obj) {
    uint64_t len = f->bytes;
    if (x->mode == 0) { x->n += 8 + len; return; }
    if (x->mode == 1) { hpt_w_u64(x->w, len); f->save(obj, x->w); return; }
    if (x->why[0]) return;
    if (!hpt_cur_u64(&x->k, &len) || len != f->bytes || x->k.n - x->k.pos < len) {
        fail(x, "the %s block holds %llu bytes, this run's holds %zu", f->what, (unsigned long long)len, f->bytes);
        return;
    }
    hpt_cursor sub = {x->k.p + x->k.pos, (size_t)len, 0};
    if (f->load(obj, &sub) != HPT_OK) fail(x, "%s", hpt_errmsg());
    else if (sub.pos != sub.n) fail(x, "the %s block has %zu bytes to spare", f->what, sub.n - sub.pos);
    x->k.pos += (size_t)len;
}

static void phase_save(const void *o, hpt_writer *w) { hpt_phase_save(o, w); }
static hpt_status phase_load(void *o, hpt_cursor *k) { return hpt_phase_load(o, k); }
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
    w_raw(x, &version, 4);
    if (x->mode == 2) x->version = version;
    if (x->mode == 2 && (version < HYBR_VERSION_OLDEST || version > HYBR_VERSION))
        fail(x, "version %u, this hpt reads %u to %u", version, HYBR_VERSION_OLDEST, HYBR_VERSION);
    w_raw(x, cfg, sizeof cfg);
    if (x->mode == 2 && memcmp(cfg, cfg_now, sizeof cfg)) fail(x, "its config differs from the run's");
    uint64_t plen = 0;
    if (x->mode == 1 && h->phases_log) {
        /* the file's size, not ftell: an append stream that has not
         * written yet may report 0 */
        struct stat sb;
        if (fflush(h->phases_log) != 0 || fsync(fileno(h->phases_log)) != 0) x->w->err = errno ? errno : EIO;
        if (fstat(fileno(h->phases_log), &sb) == 0) plen = (uint64_t)sb.st_size;
    }
    w_raw(x, &plen, 8);
    if (x->mode == 2) h->phases_bytes = plen;
}

/* The phase controller, field by field: the phased controller's. */
static void walk_phase_ctl(hybrid *h, walker *x) {
    if (!h->phz) {
        if (all_blocks(x)) w_skip(x, "phase controller");
        return;
    }
    fields ph = {"phase controller", hpt_phase_state_bytes(), phase_save, phase_load};
    w_fields(x, &ph, &h->phz->ph);
}

/* The blocks a version-6 checkpoint held for the learned dynamics: the
 * encoder's region and the dynamics model's four. */
#define V6_MODEL_BLOCKS 5

/* The learned dynamics: encoder and dynamics arenas, byte for byte (floats,
 * and the dynamics model's scalars, an explicitly padded struct of fixed
 * width fields), their indices and counters checked after the read. */
static void walk_models(hybrid *h, walker *x) {
    hpt_learner *l = h->learn;
    if (!l) {
        for (int i = 0; all_blocks(x) && i < V6_MODEL_BLOCKS; i++) w_skip(x, "dynamics model");
        return;
    }
    hpt_region r[8];
    int nr = hpt_encoder_regions(&l->enc, r);
    for (int i = 0; i < nr; i++) w_block(x, r[i].name, r[i].ptr, r[i].bytes);
    nr = hpt_dyn_regions(&l->dyn, r);
    for (int i = 0; i < nr; i++) w_block(x, r[i].name, r[i].ptr, r[i].bytes);
    if (x->mode != 2 || x->why[0]) return;
    if (hpt_encoder_check_state(&l->enc) != HPT_OK || hpt_dyn_check_state(&l->dyn) != HPT_OK)
        fail(x, "%s", hpt_errmsg());
}

/* The learned dynamics' previous update at the sampled parameters. */
static void walk_prev_update(hybrid *h, walker *x) {
    if (!h->learn) {
        if (all_blocks(x)) w_skip(x, "previous update");
        return;
    }
    w_block(x, "previous update", h->learn->prev_upd, h->learn->ns * sizeof(float));
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
    w_block(x, "outer counters", ov, sizeof ov);
    w_block(x, "outer floats", gv, sizeof gv);
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
    if (why) { fail(x, "%s", why); return; }
    o->anchor_updates = ov[0]; o->check_left = ov[1]; o->check_n = ov[2];
    o->applied = ov[3]; o->kept = ov[4]; o->rolled_back = ov[5];
    o->check_sum = gv[0]; o->ref_mean = gv[1]; o->ref_sd = gv[2];
}

/* Under schedule-free (only: the trainer's config says so), the snapshot's
 * rate sums (f64 lr_max, weight_sum), checked before they are taken. */
static void walk_snap_sf(hybrid *h, walker *x) {
    if (!h->snap.sf) return;
    double sv[2] = {h->snap.sf_sums.lr_max, h->snap.sf_sums.weight_sum};
    w_block(x, "snapshot schedule-free sums", sv, sizeof sv);
    if (x->mode != 2 || x->why[0]) return;
    if (!fin_range(sv[0], 0.0, 1e300) || !fin_range(sv[1], 0.0, 1e300)) {
        fail(x, "the snapshot's schedule-free rate sums are not finite non-negative numbers");
        return;
    }
    h->snap.sf_sums = (hpt_sf_state){.lr_max = sv[0], .weight_sum = sv[1]};
}

/* The predictor, the snapshot and the driver's own state, with the learned
 * dynamics' and the phased controller's scalars (have_prev_upd,
 * next_pred_loss, accept_ema: 0, NaN and 1 where they do not exist). */
static void walk_driver(hybrid *h, walker *x) {
    hpt_learner *l = h->learn;
    int32_t iv[4] = {h->pred.ring_count, h->pred.ring_head, h->snap.valid, h->snap.step};
    w_block(x, "predictor/snapshot counters", iv, sizeof iv);
    w_block(x, "tensor gates", h->pred.tensor_gate, sizeof h->pred.tensor_gate);
    w_block(x, "tensor scales", h->pred.tensor_scale, sizeof h->pred.tensor_scale);
    /* both arenas are the model's device memory; on the outer path the
     * predictor's block holds the outer step's (anchor, then momentum), as
     * it held the outer predictor's own arena before */
    float *pa = h->out.step.arena ? h->out.step.arena : h->pred.arena;
    w_dev_block(x, "predictor arena", h->m, pa, hpt_hyb_pred_bytes(h) / sizeof(float));
    w_dev_block(x, "snapshot arena", h->m, h->snap.arena, hpt_snapshot_floats(&h->snap));
    walk_snap_sf(h, x);

    int32_t dv[16] = {l ? l->have_prev_upd : 0, h->loss_n, h->loss_head, h->cnt.backward_passes, h->cnt.probe_passes,
                      h->cnt.rollbacks, h->cnt.div_rollbacks, h->cnt.phases_accepted, h->cnt.phases_rejected,
                      h->cnt.predicted_steps_kept, h->cnt.predicted_steps_lost};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) dv[11 + i] = h->cnt.phase_count_steps[i];
    dv[15] = h->snap.valid ? h->snap.updates + 1 : 0;  /* the snapshot's update count + 1 (0: unknown) */
    w_block(x, "driver counters", dv, sizeof dv);
    float fv[3] = {l ? l->next_pred_loss : NAN, h->scale, h->phz ? h->phz->accept_ema : 1.0f};
    w_block(x, "driver floats", fv, sizeof fv);
    double gv[3 + HPT_PHASE_COUNT] = {h->real_step_s, h->cnt.alpha_sum};
    for (int i = 0; i < HPT_PHASE_COUNT; i++) gv[2 + i] = h->cnt.phase_s[i];
    gv[2 + HPT_PHASE_COUNT] = h->cnt.ctrl_s;
    w_block(x, "driver times", gv, sizeof gv);
    w_block(x, "loss ring", h->loss_ring, sizeof h->loss_ring);
    walk_prev_update(h, x);
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
    if (why) { fail(x, "%s", why); return; }
    h->pred.ring_count = iv[0]; h->pred.ring_head = iv[1]; h->snap.valid = iv[2]; h->snap.step = iv[3];
    h->snap.updates = dv[15] - 1;
    if (l) l->have_prev_upd = dv[0];
    h->loss_n = dv[1]; h->loss_head = dv[2]; h->cnt.backward_passes = dv[3];
    h->cnt.probe_passes = dv[4]; h->cnt.rollbacks = dv[5]; h->cnt.div_rollbacks = dv[6]; h->cnt.phases_accepted = dv[7];
    h->cnt.phases_rejected = dv[8]; h->cnt.predicted_steps_kept = dv[9]; h->cnt.predicted_steps_lost = dv[10];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_count_steps[i] = dv[11 + i];
    if (l) l->next_pred_loss = fv[0];
    h->scale = fv[1];
    if (h->phz) h->phz->accept_ema = fv[2];
    h->real_step_s = gv[0]; h->cnt.alpha_sum = gv[1];
    for (int i = 0; i < HPT_PHASE_COUNT; i++) h->cnt.phase_s[i] = gv[2 + i];
    h->cnt.ctrl_s = gv[2 + HPT_PHASE_COUNT];
}

static void walk_state(hybrid *h, walker *x) {
    fields dv = {"divergence monitor", hpt_div_state_bytes(&h->div), div_save, div_load};
    walk_head(h, x);
    walk_phase_ctl(h, x);
    w_fields(x, &dv, &h->div);
    walk_models(h, x);
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
