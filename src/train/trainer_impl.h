/*
 * trainer_impl.h — the trainer's insides, private to src/train/ (trainer.c,
 * checkpoint.c) and its white-box tests. The layer above (src/hybrid/) sees
 * the trainer only through trainer.h's functions.
 */
#ifndef HPT_TRAINER_IMPL_H
#define HPT_TRAINER_IMPL_H

#include "../base/comm.h"
#include "outer.h"
#include "task.h"
#include "trainer.h"

struct hpt_trainer {
    hpt_train_config cfg;
    char data_path[4096], out_dir[4096], task_name[32], model_name[32];  /* owned copies of cfg's strings */
    char init_path[4096];
    hpt_task *task_;
    hpt_device *dev;               /* the run's device, opened by hpt_trainer_init: the model's */
    hpt_model *model;
    float *opt_arena;      /* AdamW m then v, each (nparams) */
    float *m, *v;
    float *ema;            /* (nparams) averaged weights when cfg.ema_decay > 0, else NULL */
    /* --optimizer schedule-free (else NULL): its iterate z and average x,
     * each (nparams), in opt_arena after v (m is unused, kept zero); the
     * params hold the gradient point y. sf: its rate bookkeeping. */
    float *sf_z, *sf_x;
    hpt_sf_state sf;
    /* --optimizer muon (else NULL): the Newton-Schulz scratch on the host
     * (hpt_muon_scratch_floats); its momentum lives in m (optim.h) */
    float *muon_scratch;
    float final_ema_val;
    /* the step counter (completed steps, real or predicted: the schedule
     * position) and the AdamW updates behind the moments: the trainer's
     * own, moved by hpt_trainer_step and, for the layer above, only through
     * hpt_trainer_advance and hpt_trainer_restore_moments (trainer.h); the
     * step counter never moves backwards */
    int step;
    int updates;
    double train_s, eval_s, tokens;
    int lock_fd;           /* the run directory's advisory lock (-1: not held) */
    size_t rss_warn, rss_limit;   /* runtime memory thresholds in bytes (0: off), not part of the run's config */
    int rss_warned;
    /* the run loop's own state, kept here so that checkpoints carry it */
    float final_val, best_val, final_acc;
    int next_eval;
    int resumed;           /* 1: state restored from a checkpoint */
    int *keep_steps;       /* (keep_last) scratch for pruning old checkpoints */
    char ckpt_path[4400];  /* last checkpoint saved or resumed from */
    const struct hpt_run_hooks *hooks;   /* the running loop's hooks (NULL outside a run) */
    uint32_t resume_mode;  /* TCFG mode of the checkpoint resumed from (1: hybrid) */
    unsigned char *resume_state;  /* its HYBR payload (owned), for hooks->load_state */
    size_t resume_state_n;
    int64_t metrics_bytes; /* metrics.jsonl's length when the checkpoint was saved (LOGS; -1: unknown) */
    /* data parallelism (comm.h): the group, this process's rank in it and
     * its size; rank 0 alone writes the run directory. An optimizer step is
     * micro = grad_accum x ranks micro-batches, drawn by every rank in the
     * order one process with --grad-accum micro would draw them; rank r
     * trains micro-steps r*grad_accum .. r*grad_accum + grad_accum - 1. */
    hpt_comm *comm;
    int rank, ranks, micro;
    /* (micro > 1) the step's gradient sum (the device's memory, with
     * micro + 1 floats after it for the all-reduce); slots, on the host: one
     * per micro-step for its loss and one for a stop request (summed across
     * ranks in the same all-reduce as the gradients); NULL when micro == 1 */
    float *grad_sum, *slots;
    /* a device with memory of its own (mem_info): its free bytes before the
     * model was built, the least seen since (after init and every step) and
     * its size; what the driver says this run holds is free0 - min_free */
    size_t dev_free0, dev_min_free, dev_total;
    int stop_seen;         /* a rank asked to stop (the last all-reduce's flag) */
    /* local-step mode (cfg.sync_interval H > 0, docs/distributed.md): each
     * rank steps alone on its own micro-batches and AdamW moments; after
     * every H-th step (and the last) the ranks average their displacement
     * since the anchor and take the outer Nesterov step (outer.h; its
     * arena is NULL when the mode is off). Its anchor and momentum are
     * equal on every rank;
     * share is the micro-batches whose mean is this rank's gradient (micro
     * when the step's gradients are all-reduced, grad_accum when not). */
    hpt_outer outer;
    int share;
};

/* Local-step mode: 1 after a step that synchronised the ranks (every H-th,
 * and the last): the only steps at which the ranks' parameters are equal,
 * evaluations run and checkpoints are saved. Always 1 otherwise. */
static inline int hpt_trainer_synced(const hpt_trainer *tr) {
    int H = tr->cfg.sync_interval;
    return H <= 0 || tr->step % H == 0 || tr->step == tr->cfg.max_iters;
}

/* HPT_OK on every rank when st is HPT_OK on every rank; else the failing
 * rank keeps its own status and message, and the others fail with rank
 * 0's status and a message pointing at the failing rank's (a collective). */
hpt_status hpt_trainer_agree(hpt_comm *comm, hpt_status st);

/* Every rank's parameters equal rank 0's (a CRC-32 compared across the
 * ranks, a collective), else HPT_ERR_NUMERIC naming the first that differs. */
hpt_status hpt_trainer_check_ranks(const hpt_trainer *tr);

/* 1: this process writes the run directory (rank 0, or no group). */
static inline int hpt_trainer_writer(const hpt_trainer *tr) { return tr->rank == 0; }

/* Writes DIR/checkpoints/ckpt-<step>.bin atomically and deletes all but the
 * keep_last newest (checkpoint.c). */
hpt_status hpt_trainer_save_checkpoint(hpt_trainer *tr);

/* One formatted line through log (nothing when log is NULL): trainer.c and
 * checkpoint.c report through it. */
void hpt_logf(hpt_log_fn log, void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* HPT_TRAINER_IMPL_H */
