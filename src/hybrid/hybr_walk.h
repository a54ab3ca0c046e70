/*
 * hybr_walk.h — the walker over the HYBR checkpoint section: one walk of
 * the same calls counts its bytes, writes it or reads it back, so the
 * layout cannot drift between the three. The driver's blocks
 * (hybrid_state.c) and an extension's (extension.h's walk) go through it.
 */
#ifndef HPT_HYBR_WALK_H
#define HPT_HYBR_WALK_H

#include "../base/base.h"
#include "../model/model.h"

#include <stdint.h>

/* mode 0 counts, 1 writes to w, 2 reads from k; on read, why holds the
 * first problem (the rest of the walk is skipped) and version the layout
 * being read (the current one when counting or writing). */
typedef struct hpt_hyb_walker {
    int mode;
    uint64_t n;
    hpt_writer *w;
    hpt_cursor k;
    uint32_t version;
    char why[400];
} hpt_hyb_walker;

/* 1 while reading with no problem found yet: the time to check what was read. */
static inline int hpt_walk_reading(const hpt_hyb_walker *x) { return x->mode == 2 && !x->why[0]; }
/* The first problem on read (later ones are dropped). */
void hpt_walk_fail(hpt_hyb_walker *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes at p, without a length. */
void hpt_walk_raw(hpt_hyb_walker *x, void *p, size_t n);
/* A block: u64 length, then the bytes; on read the length must match. */
void hpt_walk_block(hpt_hyb_walker *x, const char *what, void *p, size_t n);
/* hpt_walk_block over floats in the model's device memory: written through
 * download, read through upload, in the same bytes. */
void hpt_walk_dev_block(hpt_hyb_walker *x, const char *what, const hpt_model *m, float *p, size_t nfloats);
/* A block of an older checkpoint this run has no owner for: its length,
 * then past its bytes. Only on read. */
void hpt_walk_skip(hpt_hyb_walker *x, const char *what);
/* A block written field by field by its module's save, read back and
 * checked by its load. */
typedef struct hpt_walk_fields {
    const char *what;
    size_t bytes;
    void (*save)(const void *obj, hpt_writer *w);
    hpt_status (*load)(void *obj, hpt_cursor *k);
} hpt_walk_fields;
void hpt_walk_fields_block(hpt_hyb_walker *x, const hpt_walk_fields *f, void *obj);

#endif /* HPT_HYBR_WALK_H */
