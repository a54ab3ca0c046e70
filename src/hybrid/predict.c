/*
 * predict.c — the default predictor table, the codes of every predictor
 * name, the calls that dispatch through a predictor's row, and the ring of
 * parameter snapshots they share. See predict.h.
 */
#include "predict.h"
#include "extension.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The default table: the driver's own predictors, one file each
 * (pred_<id>.c defines hpt_pred_<id>). An extension brings its own rows
 * (extension.h: the phased design's four). */
#define HPT_PREDICTORS(X) X(outer)

#define DECLARE_(id) extern const hpt_pred_ops hpt_pred_##id;
HPT_PREDICTORS(DECLARE_)
#define ROW_(id) &hpt_pred_##id,
static const hpt_pred_ops *const table[] = {HPT_PREDICTORS(ROW_)};
#define NPRED ((int)(sizeof table / sizeof table[0]))

/* The settings table's --predictor row: every predictor name, in the order
 * of the codes checkpoints store (HYBR), whether this build runs it or not. */
static const hpt_setting *codes(void) {
    const hpt_setting *s = hpt_setting_find("--predictor");
    HPT_ASSERT(s);
    return s;
}

int hpt_pred_count(void) {
    int n = 0;
    while (hpt_setting_name(codes(), n)) n++;
    return n;
}

int hpt_pred_parse(const char *name) {
    for (int i = 0; name && hpt_setting_name(codes(), i); i++)
        if (!strcmp(name, hpt_setting_name(codes(), i))) return i;
    return -1;
}

const char *hpt_pred_name(int i) { return i >= 0 && i < hpt_pred_count() ? hpt_setting_name(codes(), i) : NULL; }

void hpt_pred_list(char *buf, size_t cap) {
    size_t at = 0;
    const int n = hpt_pred_count();
    buf[0] = 0;
    for (int i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i == 0 ? "" : i + 1 < n ? ", " : " or ", hpt_pred_name(i));
}

const hpt_pred_ops *hpt_pred_find(const char *name) {
    for (int i = 0; name && i < NPRED; i++)
        if (!strcmp(name, table[i]->name)) return table[i];
    return hpt_hyb_ext_predictor(name);
}

hpt_status hpt_pred_init(hpt_predictor *p, int index, const hpt_model *m, int ring_c, int ring_s) {
    memset(p, 0, sizeof *p);
    const char *name = hpt_pred_name(index);
    HPT_ASSERT(name);
    p->ops = hpt_pred_find(name);
    if (!p->ops)
        return hpt_fail(HPT_ERR_ARG, "--predictor %s is not in this build of hpt (built without the design that "
                        "runs it: make PHASED=0 leaves out the phased predictors)", name);
    p->index = index;
    p->m = m;
    p->n = m->nparams;
    for (int i = 0; i < HPT_MAX_TENSORS; i++) p->tensor_gate[i] = p->tensor_scale[i] = 1.0f;
    /* a history is snapshots in the ring: a row that asks for one keeps a ring */
    HPT_ASSERT(p->ops->min_history >= 0 && (p->ops->min_history == 0 || p->ops->ring_c > 0));
    if (p->ops->ring_c > 0) {
        ring_c = ring_c > 0 ? ring_c : p->ops->ring_c;
        ring_s = ring_s > 0 ? ring_s : p->ops->ring_s;
        if (ring_c < 3 || ring_c > HPT_PRED_MAX_RING || ring_s < 1)
            return hpt_fail(HPT_ERR_ARG, "%s predictor needs 3..%d snapshots, >= 1 step apart", p->ops->name,
                            HPT_PRED_MAX_RING);
        p->ring_c = ring_c;
        p->ring_s = ring_s;
        p->min_history = p->ops->min_history < ring_c ? p->ops->min_history : ring_c;
        p->arena = m->dev->alloc(m->dev, (size_t)(ring_c + 1) * p->n);
        if (!p->arena) return HPT_ERR_NOMEM;
        p->ring = p->arena;
        p->slope = p->arena + (size_t)ring_c * p->n;
        p->arena_bytes = (size_t)(ring_c + 1) * p->n * sizeof(float);
    }
    return p->ops->init ? p->ops->init(p) : HPT_OK;
}

void hpt_pred_free(hpt_predictor *p) {
    if (p->ops && p->ops->free) p->ops->free(p);
    if (p->arena) p->m->dev->free(p->m->dev, p->arena);
    p->arena = NULL;
}

void hpt_pred_observe(hpt_predictor *p, const float *params, int updates) {
    if (p->ops->observe) p->ops->observe(p, params, updates);
}

int hpt_pred_ready(const hpt_predictor *p) { return p->ring_count >= p->min_history; }

void hpt_pred_wait_reason(const hpt_predictor *p, char *buf, size_t cap) {
    snprintf(buf, cap, "the %s predictor holds %d of the %d snapshots it needs (one every %d real steps)",
             p->ops->name, p->ring_count, p->min_history, p->ring_s);
}

void hpt_pred_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t) {
    /* its begin reads min_history snapshots: fewer is a driver that did not wait */
    HPT_ASSERT(hpt_pred_ready(p));
    if (p->ops->begin) p->ops->begin(p, mom1, mom2, o, t);
}

void hpt_pred_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                    const hpt_adamw *o, int t, float lr, int k, float scale) {
    HPT_ASSERT(p->ops->apply);   /* not an outer row: the driver takes the outer step itself */
    p->ops->apply(p, params, mom1, mom2, o, t, lr, k, scale);
}
