/*
 * predict.h — predicted weight updates, written in place into a model's
 * parameter arena. No model copy is ever made: a predicted step is one pass
 * over the flat arena, driven by the tensor table.
 *
 * A predictor is a row (hpt_pred_ops, like the models' hpt_model_ops) and
 * one file. The default table (predict.c) holds the driver's own:
 *   outer       pred_outer.c       the default: the outer Nesterov step (its
 *                                  arithmetic and state: src/train/outer.h, the
 *                                  step local-step training takes) on the
 *                                  displacement since an anchor (DiLoCo's
 *                                  outer optimizer with one replica;
 *                                  Lookahead): an "outer" predictor, checked
 *                                  by the next real steps' losses instead of
 *                                  probes (the driver's outer path, hybrid.c)
 * An extension (extension.h) brings rows of its own, which its controller
 * runs: the phased design (phased/) the four that its probes and line
 * search verify (coast, stale-adam, linear, shrink; phased/pred_*.c). Every
 * name has a code, its index in the settings table's --predictor row
 * (src/train/settings.h), which checkpoints store (HYBR): names are only
 * ever appended there. A new predictor is one file defining its
 * hpt_pred_ops (with the history it needs, min_history: a controller waits
 * for it), one row in its table and its name appended to --predictor's.
 */
#ifndef HPT_PREDICT_H
#define HPT_PREDICT_H

#include "../model/model.h"
#include "../train/optim.h"

#define HPT_PRED_MAX_RING 16

typedef struct hpt_predictor hpt_predictor;

/* One predictor. Every function pointer but apply may be NULL; an outer
 * row has none (the driver takes the outer step itself, outer.h). */
typedef struct hpt_pred_ops {
    const char *name;            /* its --predictor value */
    /* 1: an outer predictor: a jump every H real steps, no confidence gate,
     * no probes, checked by the next real steps' losses (hybrid.c) */
    int outer;
    /* the ring of parameter snapshots it fits (0: keeps none): ring_c of
     * them, one every ring_s real steps, unless hpt_pred_init overrides */
    int ring_c, ring_s;
    /* the history it needs: snapshots in the ring before its begin may run
     * (0: it reads only the moments). The controller waits in Full until
     * the ring holds them, whatever the confidence threshold (a Predict
     * phase with threshold 0 once began on an empty ring, and predicted from
     * no history).
     * At most ring_c; a ring made smaller by hpt_pred_init lowers it to
     * ring_c. */
    int min_history;
    /* after the common init: the predictor's own thresholds */
    hpt_status (*init)(hpt_predictor *p);
    /* after every real step (the updates-th AdamW update) */
    void (*observe)(hpt_predictor *p, const float *params, int updates);
    /* prepares a Predict phase from the moments and the last real step's
     * AdamW settings and update count t */
    void (*begin)(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *o, int t);
    /* predicted step k (1-based within the phase) in place, scaled by
     * scale: params += scale * delta_k. lr is this step's scheduled rate. */
    void (*apply)(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                  const hpt_adamw *o, int t, float lr, int k, float scale);
    /* frees what init allocated beyond the common arena */
    void (*free)(hpt_predictor *p);
} hpt_pred_ops;

/* The code of a --predictor name (its index in the settings row, which
 * checkpoints store), or -1; a code this build may not run (hpt_pred_find). */
int hpt_pred_parse(const char *name);
/* The name of code i, or NULL when there is no such code. */
const char *hpt_pred_name(int i);
int hpt_pred_count(void);
/* "coast, stale-adam, linear, shrink or outer" (every name, in code
 * order), for messages. */
void hpt_pred_list(char *buf, size_t cap);
/* The row that runs a name: the default table's, else an extension's;
 * NULL when this build has none. */
const hpt_pred_ops *hpt_pred_find(const char *name);

struct hpt_predictor {
    const hpt_pred_ops *ops;
    int index;                   /* its code (hpt_pred_parse) */
    size_t n;                    /* parameters */
    const hpt_model *m;          /* for the tensor table */
    float snr_lo, snr_hi;        /* coast gate: scale 0 below lo, 1 above hi */
    float tensor_gate[HPT_MAX_TENSORS];   /* last computed per-tensor gate in [0, 1] (coast, shrink; the outer step's with --outer-adapt agree) */
    float straight_lo, straight_hi;      /* shrink gate: 0 at or below lo, 1 at or above hi */
    float tensor_scale[HPT_MAX_TENSORS];  /* per-tensor scale from the dynamics model, set by the phased controller (1: none; the outer path leaves it) */
    /* the ring (ops->ring_c > 0): c parameter snapshots, one every s real steps */
    float *ring;                 /* (c, n) */
    int ring_c, ring_s, ring_count, ring_head;
    int min_history;             /* ops->min_history, at most ring_c */
    float *slope;                /* (n) per-step slope of the last fit */
    float *arena;                /* owns ring and slope */
    size_t arena_bytes;
};

/* The predictor of code `index` for model m (HPT_ERR_ARG naming it when
 * this build has no row for it); ring_c, ring_s > 0 override the row's ring
 * geometry (tests), 0 keeps it. */
hpt_status hpt_pred_init(hpt_predictor *p, int index, const hpt_model *m, int ring_c, int ring_s);
void hpt_pred_free(hpt_predictor *p);
void hpt_pred_observe(hpt_predictor *p, const float *params, int updates);
/* Whether the ring holds the history the predictor needs (min_history
 * snapshots): the controller enters no Predict phase before. */
int hpt_pred_ready(const hpt_predictor *p);
/* Why it is not ready, for phases.jsonl: "the shrink predictor holds 2 of
 * the 6 snapshots it needs (one every 20 real steps)". */
void hpt_pred_wait_reason(const hpt_predictor *p, char *buf, size_t cap);
/* Asserts hpt_pred_ready: a driver that skipped the wait is a bug. */
void hpt_pred_begin(hpt_predictor *p, const float *mom1, const float *mom2, const hpt_adamw *opt, int t);
void hpt_pred_apply(hpt_predictor *p, float *params, const float *mom1, const float *mom2,
                    const hpt_adamw *opt, int t, float lr, int k, float scale);

#endif /* HPT_PREDICT_H */
