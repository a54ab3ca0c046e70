/*
 * trainer.h — the trainer's insides, for the layer above it (hybrid/).
 *
 * The hybrid controller drives the same trainer through these primitives: a
 * real step, a forward-only probe, the AdamW moments and the schedule, and a
 * run loop whose per-step function and summary can be replaced. Nothing
 * here knows about phases or predictors: dependencies point upwards only.
 */
#ifndef HPT_TRAINER_INTERNAL_H
#define HPT_TRAINER_INTERNAL_H

#include "optim.h"
#include "task.h"

struct hpt_trainer {
    hpt_train_config cfg;
    char data_path[4096], out_dir[4096], task_name[32], model_name[32];  /* owned copies of cfg's strings */
    hpt_task *task_;
    hpt_model *model;
    float *opt_arena;      /* AdamW m then v, each (nparams) */
    float *m, *v;
    float *ema;            /* (nparams) averaged weights when cfg.ema_decay > 0, else NULL */
    float final_ema_val;
    int step;              /* completed steps (real or predicted): the schedule position */
    int updates;           /* AdamW updates applied (real steps) */
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
};

/* Writes DIR/checkpoints/ckpt-<step>.bin atomically and deletes all but the
 * keep_last newest (checkpoint.c). */
hpt_status hpt_trainer_save_checkpoint(hpt_trainer *tr);

/* The AdamW settings of step `it` (0-based), learning rate from the schedule. */
hpt_adamw hpt_trainer_adamw(const hpt_trainer *tr, int it);

/* Forward-only mean loss of a batch: no gradient, no state change except
 * the model's activation buffers. */
hpt_status hpt_trainer_probe(hpt_trainer *tr, const hpt_batch *b, float *loss);

/* Replaceable parts of the run loop. step fills info like hpt_trainer_step;
 * summary writes extra members into summary.json (each as `  "key": value,\n`);
 * log_config adds lines to the start-of-run log. Any may be NULL. */
typedef struct hpt_run_hooks {
    hpt_status (*step)(void *hctx, hpt_trainer *tr, hpt_step_info *info);
    void (*summary)(void *hctx, FILE *f);
    void (*log_config)(void *hctx, hpt_log_fn log, void *ctx);
    /* The layer above's own state in checkpoints (section HYBR, TCFG mode 1):
     * state_bytes the exact payload length, save_state writes exactly that
     * many bytes, load_state restores from a resumed checkpoint's payload
     * (called once, before the first step of a resumed run). All or none. */
    uint64_t (*state_bytes)(void *hctx);
    void (*save_state)(void *hctx, hpt_writer *w);
    hpt_status (*load_state)(void *hctx, const unsigned char *p, size_t n);
    void *hctx;
} hpt_run_hooks;

hpt_status hpt_trainer_run_hooks(hpt_trainer *tr, const hpt_run_hooks *hooks,
                                 hpt_log_fn log, hpt_step_fn on_step, void *ctx);

/* Tests (hybrid.c): builds the hybrid driver of a resumed hybrid trainer,
 * loads its checkpoint's HYBR payload and saves it again into *out
 * (malloc'd, *out_n bytes): equal to the payload byte for byte. */
hpt_status hpt_hybrid_state_roundtrip(hpt_trainer *tr, unsigned char **out, size_t *out_n);

#endif /* HPT_TRAINER_INTERNAL_H */
