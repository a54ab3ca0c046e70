/*
 * hybr_walk.c — the HYBR section's walker: count, write or read with the
 * same calls. See hybr_walk.h.
 */
#include "hybr_walk.h"

#include <stdarg.h>
#include <stdio.h>

void hpt_walk_fail(hpt_hyb_walker *x, const char *fmt, ...) {
    if (x->why[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why, sizeof x->why, fmt, ap);
    va_end(ap);
}

void hpt_walk_raw(hpt_hyb_walker *x, void *p, size_t n) {
    if (n == 0) return;   /* an empty block (the coast predictor's arena): p may be NULL */
    if (x->mode == 0) x->n += n;
    else if (x->mode == 1) hpt_w_bytes(x->w, p, n);
    else if (!x->why[0] && !hpt_cur_bytes(&x->k, p, n)) hpt_walk_fail(x, "truncated");
}

void hpt_walk_block(hpt_hyb_walker *x, const char *what, void *p, size_t n) {
    uint64_t len = n;
    if (x->mode == 2) {
        if (x->why[0]) return;
        if (!hpt_cur_u64(&x->k, &len) || len != n) {
            hpt_walk_fail(x, "the %s block holds %llu bytes, this run's holds %zu", what, (unsigned long long)len, n);
            return;
        }
        hpt_walk_raw(x, p, n);
        return;
    }
    hpt_walk_raw(x, &len, 8);
    hpt_walk_raw(x, p, n);
}

void hpt_walk_dev_block(hpt_hyb_walker *x, const char *what, const hpt_model *m, float *p, size_t nfloats) {
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
        hpt_walk_fail(x, "the %s block holds %llu bytes, this run's holds %zu", what, (unsigned long long)len, n);
        return;
    }
    if (x->k.n - x->k.pos < n) { hpt_walk_fail(x, "truncated"); return; }
    if (n) m->dev->upload(p, (const float *)(x->k.p + x->k.pos), nfloats);
    x->k.pos += n;
}

void hpt_walk_skip(hpt_hyb_walker *x, const char *what) {
    uint64_t len;
    if (x->why[0]) return;
    if (!hpt_cur_u64(&x->k, &len) || x->k.n - x->k.pos < len) {
        hpt_walk_fail(x, "the %s block is truncated", what);
        return;
    }
    x->k.pos += (size_t)len;
}

void hpt_walk_fields_block(hpt_hyb_walker *x, const hpt_walk_fields *f, void *obj) {
    uint64_t len = f->bytes;
    if (x->mode == 0) { x->n += 8 + len; return; }
    if (x->mode == 1) { hpt_w_u64(x->w, len); f->save(obj, x->w); return; }
    if (x->why[0]) return;
    if (!hpt_cur_u64(&x->k, &len) || len != f->bytes || x->k.n - x->k.pos < len) {
        hpt_walk_fail(x, "the %s block holds %llu bytes, this run's holds %zu", f->what, (unsigned long long)len,
                      f->bytes);
        return;
    }
    hpt_cursor sub = {x->k.p + x->k.pos, (size_t)len, 0};
    if (f->load(obj, &sub) != HPT_OK) hpt_walk_fail(x, "%s", hpt_errmsg());
    else if (sub.pos != sub.n) hpt_walk_fail(x, "the %s block has %zu bytes to spare", f->what, sub.n - sub.pos);
    x->k.pos += (size_t)len;
}
