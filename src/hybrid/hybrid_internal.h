/*
 * hybrid_internal.h — the hybrid driver's state, shared by the files of
 * src/hybrid/ that make up the driver:
 *   hybrid.c         the step hook: real steps, Predict phases, rollback
 *   hybrid_config.c  hpt_hybrid_config: defaults, checks, its HYBR encoding
 *   hybrid_state.c   the HYBR checkpoint section (save, load, round trip)
 *   hybrid_report.c  the metrics.jsonl and summary.json members, the start-of-run line
 * Nothing outside src/hybrid/ includes it.
 */
#ifndef HPT_HYBRID_INTERNAL_H
#define HPT_HYBRID_INTERNAL_H

#include "../train/trainer.h"
#include "divergence.h"
#include "dynamics.h"
#include "encoder.h"
#include "phase.h"
#include "predict.h"
#include "snapshot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The encoder's update statistics are estimated on a fixed sample of each
 * tensor's parameters (at most SAMPLE_MAX, one per stride block at a hashed
 * position, so no layout aliasing): full passes over every parameter cost a
 * 10M-parameter model 16% of its step time. */
#define SAMPLE_MAX 1024
/* The dynamics model forecasts at most FC_MAX steps ahead. */
#define FC_MAX 64
/* The last real steps' training losses: their least-squares slope is the
 * progress a real step buys, which a jump must match. */
#define LOSS_RING 64

/* The driver's buffers, carved from one zeroed arena by this size table (as
 * gpt2.c carves its activations): type, name, elements (4 bytes each).
 *   dir           (n) the line-search direction
 *   theta_before  (ns) the sampled parameters before a real step
 *   dpred         (ns) the AdamW-direction prediction of that step's update
 *   prev_upd      (ns) the previous real update at the sampled parameters
 *   fc_mean/std   (FC_MAX, 1+K) the dynamics model's forecast: log loss, then
 *                 each tensor's step scale
 *   pB            (P) rows of each probe batch, copied out of the task
 *   ptok, ptgt    (P, maxB * T) its tokens and targets
 *   px            (P, maxB * xdim) its images (0 floats for text) */
/* Sized 0 on the outer path: the line search's direction and the probe
 * batches belong to the phase controller's Predict phases only (at 124M
 * the direction alone is 0.5 GB). */
#define PHASE_ONLY(h, size) ((h)->pred.ops->outer ? (size_t)0 : (size_t)(size))
#define HYBRID_BUFS(X)                                   \
    X(float, dir,          PHASE_ONLY(h, h->n))          \
    X(float, theta_before, h->ns)                        \
    X(float, dpred,        h->ns)                        \
    X(float, prev_upd,     h->ns)                        \
    X(float, fc_mean,      (size_t)FC_MAX * (1 + h->K))  \
    X(float, fc_std,       (size_t)FC_MAX * (1 + h->K))  \
    X(int,   pB,           PHASE_ONLY(h, h->P))          \
    X(int,   ptok,         PHASE_ONLY(h, (size_t)h->P * h->maxB * h->T)) \
    X(int,   ptgt,         PHASE_ONLY(h, (size_t)h->P * h->maxB * h->T)) \
    X(float, px,           PHASE_ONLY(h, (size_t)h->P * h->maxB * h->xdim))

/* What the driver has done, for summary.json (and checkpoints). */
typedef struct hybrid_counts {
    int backward_passes;        /* the model's backward calls on real steps */
    int probe_passes;           /* forward-only probe batches */
    int rollbacks;              /* Predict phases rolled back (= phases_rejected) */
    int div_rollbacks;          /* snapshots restored after a divergence or a non-finite step */
    int phases_accepted, phases_rejected;
    int predicted_steps_kept, predicted_steps_lost;
    int phase_count_steps[HPT_PHASE_COUNT];   /* steps per phase (a kept jump: its advance) */
    double phase_s[HPT_PHASE_COUNT];          /* time per phase */
    double ctrl_s;              /* controller time on real steps beyond the trainer's step */
    double alpha_sum;           /* of the kept jumps' line-search alphas */
} hybrid_counts;

/* The outer path's own state (--predictor outer; hybrid.c): the anchor and
 * the momentum buffer are the predictor's arena. */
typedef struct hybrid_outer {
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
    int K;                   /* tensors */
    int P, maxB, T, xdim;    /* probe batches, and the task's batch shape */

    /* its parts */
    hpt_phase_ctl ph;
    hpt_div div;
    hpt_predictor pred;
    hpt_snapshot snap;       /* the one copy of (params, m, v) */
    /* the learned dynamics: encoder -> GRU ensemble, trained on every real
     * step; its targets per tensor are the optimal scale of the AdamW-direction
     * prediction, <real update, predicted update> / |predicted update|^2 */
    hpt_encoder enc;
    hpt_dyn dyn;
    int nfeat;
    float feat[64], y[1 + HPT_MAX_TENSORS];

    /* the sampled parameters: per tensor, the first sample's index, the count, the stride */
    size_t ns;
    size_t s_off[HPT_MAX_TENSORS], s_cnt[HPT_MAX_TENSORS], s_stride[HPT_MAX_TENSORS];

    /* the buffers (HYBRID_BUFS), one arena */
#define X(type, name, size) type *name;
    HYBRID_BUFS(X)
#undef X
    float *buf_arena;
    size_t buf_bytes;
    size_t arena_bytes;      /* every hybrid arena: snapshot, buffers, predictor, dynamics */

    /* the controller's own state */
    int have_prev_upd;
    float next_pred_loss;    /* 1-step forecast issued after the last real step */
    float scale;             /* global predicted-step scale; halves on divergence */
    float loss_ring[LOSS_RING];
    int loss_n, loss_head;
    float accept_ema;        /* acceptance history in [0, 1] */
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

/* ---------------------------------------------------------------- checkpoints
 * The HYBR section (docs/format.md): everything the next step reads, as
 * fixed-width fields. One walker serves the three uses (count, write, read),
 * so the layout cannot drift between them:
 *   u32 version, the config (HYBR_CFG_BYTES), u64 phases.jsonl length, then
 *   blocks (u64 length + bytes): the phase controller and the divergence
 *   monitor field by field (hpt_phase_save, hpt_div_save), the encoder
 *   region, the 4 dynamics regions, the predictor's ring counters and the
 *   snapshot's valid and step, the predictor's gates, scales and arena, the
 *   snapshot's arena, the driver's counters, floats, times and loss ring,
 *   prev_upd, the outer state (v5). A read checks every block length, every index, count, flag
 *   and enum (hybrid_state.c) before the run continues. */
/* version 6 adds three outer config rows (--outer-moments, --outer-adapt,
 * --outer-gate). version 5 adds the outer predictor: its five config rows and the outer
 * state block (hybrid_outer, field by field) after the previous update.
 * version 2: prev_upd holds the sampled parameters' update (ns floats), not
 * every parameter's; version 3 adds the controller's own time on real steps
 * (controller_overhead_s); version 4 saves the phase controller and the
 * divergence monitor field by field instead of as host-layout structs.
 * Older versions are refused with that reason. */
#define HYBR_VERSION 6u
#define HYBR_CFG_WORDS 30
#define HYBR_CFG_BYTES (4 * HYBR_CFG_WORDS)

/* hybrid_config.c */
void hpt_hyb_to_phase_config(const hpt_hybrid_config *c, hpt_phase_config *pc);
void hpt_hyb_to_div_config(const hpt_hybrid_config *c, hpt_div_config *dc);
void hpt_hyb_encode_cfg(const hpt_hybrid_config *c, unsigned char *out);   /* HYBR_CFG_BYTES */
int hpt_hyb_decode_cfg(const unsigned char *in, hpt_hybrid_config *c);     /* 0: invalid */

/* hybrid.c: the driver for tr, every buffer allocated (*out NULL on failure) */
hpt_status hpt_hyb_new(hpt_trainer *tr, const hpt_hybrid_config *hc, hybrid **out);
void hpt_hyb_free(hybrid *h);

/* hybrid_state.c: the run hooks for the HYBR section */
uint64_t hpt_hyb_state_bytes(void *hctx);
void hpt_hyb_save_state(void *hctx, hpt_writer *w);
hpt_status hpt_hyb_load_state(void *hctx, const unsigned char *p, size_t n);

/* hybrid_report.c: the run hooks for metrics.jsonl, summary.json and the config log */
void hpt_hyb_metrics(void *hctx, const hpt_step_info *info, cJSON *line);
void hpt_hyb_summary(void *hctx, cJSON *summary);
void hpt_hyb_log_config(void *hctx, hpt_log_fn log, void *ctx);

#endif /* HPT_HYBRID_INTERNAL_H */
