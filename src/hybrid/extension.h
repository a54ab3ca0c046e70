/*
 * extension.h — the hybrid driver's hook for a controller of its own kind
 * (the phased design, src/hybrid/phased/, is the one row): what a row
 * provides (hpt_hyb_ext) and the driver's services it is handed
 * (hpt_hyb_services). The driver knows an extension only through this
 * table and these calls: it never names a row's functions, and a row never
 * reaches into the driver's state, so a build without a row's sources
 * (make PHASED=0) links and runs the rest.
 *
 * An extension serves --predictor names the default predictor table
 * (predict.c) does not have: each is a row of the extension's own predictor
 * list, run by its controller (the step hook), and it may also offer its
 * learned dynamics as a gate for the outer path (--outer-gate dynamics).
 */
#ifndef HPT_HYBRID_EXTENSION_H
#define HPT_HYBRID_EXTENSION_H

#include "../train/trainer.h"
#include "phase_kind.h"
#include "predict.h"

#include <stdint.h>

/* The driver, opaque to an extension. */
typedef struct hybrid hpt_hyb_host;

/* What the driver counts for summary.json (and checkpoints). The probe,
 * phase and alpha counters are a controller's (0 on the outer path); an
 * extension adds to them through the services' pointer. */
typedef struct hpt_hyb_counts {
    int backward_passes;        /* the model's backward calls on real steps */
    int probe_passes;           /* forward-only probe batches */
    int rollbacks;              /* Predict phases rolled back (= phases_rejected) */
    int div_rollbacks;          /* snapshots restored by rollback: a divergence, a non-finite step, a failed outer check */
    int phases_accepted, phases_rejected;
    int predicted_steps_kept, predicted_steps_lost;
    int phase_count_steps[HPT_PHASE_COUNT];   /* steps per phase (a kept jump: its advance) */
    double phase_s[HPT_PHASE_COUNT];          /* time per phase */
    double ctrl_s;              /* controller time on real steps beyond the trainer's step */
    double alpha_sum;           /* of the kept jumps' line-search alphas */
} hpt_hyb_counts;

/* The driver's services, handed to an extension when it is created: its
 * trainer, config, predictor and counters, and the calls it may make. */
typedef struct hpt_hyb_services {
    hpt_hyb_host *host;
    hpt_trainer *tr;
    const hpt_hybrid_config *cfg;
    hpt_predictor *pred;        /* the selected predictor (the driver keeps its ring in checkpoints) */
    hpt_hyb_counts *cnt;
    /* one real step and what the driver learns from it (the loss ring, the
     * predictor's observation, the extension's after_real_step, the
     * divergence guard); ph its phase, conf the confidence reported with it */
    hpt_status (*real_step)(hpt_hyb_host *h, hpt_step_info *info, hpt_phase ph, float conf);
    /* the driver's one snapshot: taken, restored (the step counter does not
     * move), and its parameters */
    void (*take_snapshot)(hpt_hyb_host *h);
    void (*restore_snapshot)(hpt_hyb_host *h);
    const float *(*snapshot_params)(const hpt_hyb_host *h);
    /* a line of phases.jsonl: the step, the phase entered, why */
    void (*log_transition)(hpt_hyb_host *h, hpt_phase to, const char *why);
    /* loss decrease per real step over the driver's loss ring, >= 0; NaN before 16 losses */
    float (*progress)(const hpt_hyb_host *h);
    /* the predicted-step scale (halves on each rollback) */
    float (*scale)(const hpt_hyb_host *h);
    /* EMA of a real step's time in seconds (0 before the first) */
    double (*real_step_s)(const hpt_hyb_host *h);
} hpt_hyb_services;

/* How the driver uses an extension it creates. */
typedef enum hpt_hyb_ext_role {
    HPT_EXT_CONTROLLER,         /* it runs every step (its predictor is selected) */
    HPT_EXT_GATE                /* the outer path runs; it only learns and gates jumps (--outer-gate dynamics) */
} hpt_hyb_ext_role;

/* Its scalars that the HYBR layout keeps among the driver's (version 6 and
 * 7 put them there; an extension without them leaves the defaults: 0, NaN, 1). */
typedef struct hpt_hyb_ext_words {
    int32_t have_prev_upd;
    float next_pred_loss;
    float accept_ema;
} hpt_hyb_ext_words;

/* Its blocks of the HYBR section, at their places in the layout
 * (hybrid_internal.h): each walked through hybr_walk.h. */
typedef enum hpt_hyb_ext_part {
    HPT_EXT_PART_CONTROL,       /* after the config: the phase controller */
    HPT_EXT_PART_MODELS,        /* after the divergence monitor: the learned dynamics */
    HPT_EXT_PART_TAIL           /* after the loss ring: the previous update at the sampled parameters */
} hpt_hyb_ext_part;

struct hpt_hyb_walker;

/* A row: one extension. Every function but create, free and walk may be
 * NULL where the extension has nothing to say. */
typedef struct hpt_hyb_ext {
    const char *name;
    /* the --predictor rows it runs, NULL-terminated (names from the
     * settings table's --predictor row: their index is the checkpoint code) */
    const hpt_pred_ops *const *predictors;
    /* its config's checks across values (its rows' ranges are the settings table's) */
    hpt_status (*config_check)(const hpt_hybrid_config *c);
    hpt_status (*create)(const hpt_hyb_services *svc, hpt_hyb_ext_role role, void **out);
    void (*free)(void *ctx);
    /* the step hook (HPT_EXT_CONTROLLER): a real step through svc->real_step
     * or a step of its own; t0 is when the call began (its time is training time) */
    hpt_status (*step)(void *ctx, hpt_step_info *info, double t0);
    /* around every real step: before the trainer's; after it, with the
     * step's phase (what it forecast for this step's loss in *predicted, NaN: none) */
    void (*before_real_step)(void *ctx);
    hpt_status (*after_real_step)(void *ctx, const hpt_step_info *info, hpt_phase ph, float *predicted);
    /* the driver rolled back to its snapshot or saw a critical divergence */
    void (*held)(void *ctx, const char *why);
    /* HPT_EXT_GATE: confidence that a jump pays now, in [0, 1] */
    float (*gate_confidence)(void *ctx);
    /* bytes of its buffers, its dynamics model's and its encoder's arenas */
    void (*bytes)(void *ctx, size_t *buffers, size_t *dynamics, size_t *encoder);
    /* its members of summary.json ("transitions" and what it learned) */
    void (*summary)(void *ctx, cJSON *o);
    /* the start-of-run line (HPT_EXT_CONTROLLER); state_mib, snapshot_mib: the driver's figures */
    void (*log_config)(void *ctx, hpt_log_fn log, void *lctx, double state_mib, double snapshot_mib);
    /* its HYBR blocks and scalars */
    void (*walk)(void *ctx, hpt_hyb_ext_part part, struct hpt_hyb_walker *x);
    void (*get_words)(void *ctx, hpt_hyb_ext_words *w);
    void (*set_words)(void *ctx, const hpt_hyb_ext_words *w);
} hpt_hyb_ext;

/* extension.c: the table of extensions this build has. */
/* The extension that runs --predictor name, or NULL (the default table's or unknown). */
const hpt_hyb_ext *hpt_hyb_ext_for_predictor(const char *name);
/* The extension that offers the outer path's dynamics gate, or NULL. */
const hpt_hyb_ext *hpt_hyb_ext_gate(void);
/* The predictor row named name among the extensions', or NULL. */
const hpt_pred_ops *hpt_hyb_ext_predictor(const char *name);
/* Every extension's checks across the config's values (HPT_OK without any). */
hpt_status hpt_hyb_ext_config_check(const hpt_hybrid_config *c);

/* The phased design's row: phased/phased_ext.c, or NULL in a build without
 * it (phased_none.c). */
extern const hpt_hyb_ext *const hpt_hyb_ext_phased_row;

#endif /* HPT_HYBRID_EXTENSION_H */
