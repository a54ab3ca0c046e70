/*
 * hybrid_internal.h — the hybrid driver's state, shared by the files of
 * src/hybrid/ that make up the driver:
 *   hybrid.c         the step hook: real steps, the outer path, rollback
 *   hybrid_config.c  hpt_hybrid_config: defaults, checks, its HYBR encoding
 *   hybrid_state.c   the HYBR checkpoint section (save, load, round trip)
 *   hybrid_report.c  the metrics.jsonl and summary.json members, the start-of-run line
 * An extension (extension.h: the phased design) never includes it: it is
 * handed the driver's services instead. Nothing outside src/hybrid/
 * includes it (but tests/test_settings.c, for the config encoding).
 */
#ifndef HPT_HYBRID_INTERNAL_H
#define HPT_HYBRID_INTERNAL_H

#include "../train/outer.h"
#include "../train/trainer.h"
#include "divergence.h"
#include "extension.h"
#include "hybr_walk.h"
#include "phase_kind.h"
#include "predict.h"
#include "snapshot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The last real steps' training losses: the outer check's reference, and
 * (their least-squares slope) the progress a real step buys, which a
 * phased jump must match. */
#define LOSS_RING 64

/* What the driver has done, for summary.json (and checkpoints): extension.h. */
typedef hpt_hyb_counts hybrid_counts;

/* The outer path's own state (--predictor outer; hybrid.c): the outer
 * step (the trainer layer's, outer.h: anchor, momentum and their arena) and
 * the guard's counters around it. */
typedef struct hybrid_outer {
    hpt_outer step;             /* arena NULL off the outer path */
    int anchor_updates;         /* the update count at the anchor */
    int check_left;             /* real steps left in the current jump's check (0: none) */
    int check_n;                /* real losses seen in it */
    int applied, kept, rolled_back;   /* jumps */
    double check_sum;           /* of those losses */
    double ref_mean, ref_sd;    /* of the last 16 losses before the jump */
    double jump_s;              /* this call's jump time (not saved) */
} hybrid_outer;

typedef struct hybrid {
    /* what it runs on and with */
    hpt_hybrid_config cfg;
    hpt_trainer *tr;
    hpt_model *m;
    size_t n;                /* parameters */

    /* its parts */
    hpt_div div;
    hpt_predictor pred;
    hpt_snapshot snap;       /* the one copy of (params, m, v; schedule-free's z, x, sums) */
    /* an extension (extension.h): the controller of a predictor the
     * default table does not have, or the outer path's dynamics gate; NULL
     * (and ext_ctx NULL) otherwise */
    const hpt_hyb_ext *ext;
    void *ext_ctx;
    hpt_hyb_ext_role ext_role;
    hpt_hyb_services svc;    /* what it was handed */
    size_t arena_bytes;      /* every hybrid arena: snapshot, buffers, predictor, dynamics */

    /* the driver's own state */
    float scale;             /* global predicted-step scale; halves on rollback */
    float loss_ring[LOSS_RING];
    int loss_n, loss_head;
    double real_step_s;      /* EMA of a real step's time: the unit a failed phase is charged in */

    /* phases.jsonl */
    FILE *phases_log;
    char phases_path[4200];
    uint64_t phases_bytes;   /* its length in a checkpoint being loaded */
    hpt_log_fn log;          /* the run's log (warnings on resume); may be NULL */
    void *log_ctx;

    hybrid_counts cnt;
    hybrid_outer out;
} hybrid;

/* The predictor's memory: its arena, or on the outer path the outer step's
 * anchor and momentum (summary.json's "predictor"). */
static inline size_t hpt_hyb_pred_bytes(const hybrid *h) { return h->pred.arena_bytes + hpt_outer_bytes(&h->out.step); }

/* ---------------------------------------------------------------- checkpoints
 * The HYBR section (docs/format.md): everything the next step reads, as
 * fixed-width fields. One walker serves the three uses (count, write, read),
 * so the layout cannot drift between them (hybrid_state.c):
 *   u32 version, the config (HYBR_CFG_BYTES), u64 phases.jsonl length, then
 *   blocks (u64 length + bytes):
 *     [phased] the phase controller, field by field (hpt_phase_save)
 *     the divergence monitor, field by field (hpt_div_save)
 *     [learned dynamics] the encoder region, the 4 dynamics regions
 *     the predictor's ring counters and the snapshot's valid and step, the
 *     predictor's gates, scales and arena, the snapshot's arena (with
 *     schedule-free's z and x), [schedule-free] the snapshot's rate sums,
 *     the driver's counters, floats and times, the loss ring
 *     [learned dynamics] the previous update at the sampled parameters
 *     the outer state (hybrid_outer, field by field; zeros off the outer path)
 *   [phased]: only with a phased predictor; [learned dynamics]: with a
 *   phased predictor or --outer-gate dynamics (both follow from the config,
 *   which the reader checks first). The bracketed blocks and the driver
 *   arrays' three scalars of theirs (have_prev_upd, next_pred_loss,
 *   accept_ema) are the phased design's: its extension row walks and sets
 *   them at these places (extension.h's parts and words), which keeps the
 *   layout of the checkpoints written before it became an extension; [schedule-free]: only under
 *   --optimizer schedule-free (the trainer's config, TCFG). A read checks every block length, every
 *   index, count, flag and enum before the run continues.
 * version 7 writes the bracketed blocks only where they exist; version 6
 * wrote all of them for every predictor (the outer path's phase controller
 * and dynamics model were created, never used unless --outer-gate
 * dynamics): still read, the blocks this run has no owner for skipped
 * after their length. Version 6 added three outer config rows
 * (--outer-moments, --outer-adapt, --outer-gate); version 5 the outer
 * predictor: its five config rows and the outer state block; version 4
 * saved the phase controller and the divergence monitor field by field
 * instead of as host-layout structs; version 3 the controller's own time on
 * real steps (controller_overhead_s); version 2 made prev_upd the sampled
 * parameters' update (ns floats), not every parameter's. Versions before
 * HYBR_VERSION_OLDEST are refused with that reason. */
#define HYBR_VERSION 7u
#define HYBR_VERSION_OLDEST 6u
#define HYBR_CFG_WORDS 30
#define HYBR_CFG_BYTES (4 * HYBR_CFG_WORDS)

/* hybrid_config.c */
void hpt_hyb_to_div_config(const hpt_hybrid_config *c, hpt_div_config *dc);
void hpt_hyb_encode_cfg(const hpt_hybrid_config *c, unsigned char *out);   /* HYBR_CFG_BYTES */
int hpt_hyb_decode_cfg(const unsigned char *in, hpt_hybrid_config *c);     /* 0: invalid */

/* hybrid.c: the driver for tr, every buffer allocated (*out NULL on failure) */
hpt_status hpt_hyb_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hybrid **out);
void hpt_hyb_free(hybrid *h);
/* hybrid.c: an extension's buffers, dynamics and encoder arenas, in bytes (0 without one) */
void hpt_hyb_ext_bytes(const hybrid *h, size_t *buffers, size_t *dynamics, size_t *encoder);
void hpt_hyb_log_transition(hybrid *h, hpt_phase to, const char *why);

/* hybrid_state.c: the run hooks for the HYBR section */
uint64_t hpt_hyb_state_bytes(void *hctx);
void hpt_hyb_save_state(void *hctx, hpt_writer *w);
hpt_status hpt_hyb_load_state(void *hctx, const unsigned char *p, size_t n);

/* hybrid_report.c: the run hooks for metrics.jsonl, summary.json and the config log */
void hpt_hyb_metrics(void *hctx, const hpt_step_info *info, cJSON *line);
void hpt_hyb_summary(void *hctx, cJSON *summary);
void hpt_hyb_log_config(void *hctx, hpt_log_fn log, void *ctx);

#endif /* HPT_HYBRID_INTERNAL_H */
