/*
 * hpt_rundir.h — a run directory read back: what
 * `hpt train --out DIR` leaves there (metrics.jsonl, summary.json, the
 * newest checkpoint).
 * Included by hpt.h (which it needs: include either).
 */
#include "hpt.h"  /* first, outside the guard: hpt.h includes this header at its end */
#ifndef HPT_INCLUDE_RUNDIR_H
#define HPT_INCLUDE_RUNDIR_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- run directories */

/* What `hpt train --out DIR` leaves in DIR, read back (src/report/rundir.c):
 * DIR/metrics.jsonl as columns, DIR/summary.json's figures, the newest
 * checkpoint. hpt compare, hpt plot and the tests read runs through these
 * only, so the file formats are known in one place (the writer's, trainer.c). */
typedef struct hpt_run_metrics {
    int n;                   /* lines with a step (a torn or foreign line is skipped) */
    double *step, *time_s;   /* time_s: the training clock */
    double *train_loss, *val_loss, *ema_val_loss, *val_accuracy;  /* NaN where a line lacks it */
    unsigned char *predict;  /* 1: the line ends a hybrid Predict phase or is an outer jump */
    /* optimizer updates up to the line: its "backward" (hybrid lines, 1 for
     * a real step, 0 for a Predict phase) summed, or, on a line without one
     * (plain training), its step's advance over the line before */
    double *updates;
} hpt_run_metrics;

/* summary.json's numbers, NaN where absent or null (one row per field). */
#define HPT_RUN_SUMMARY_FIELDS(X) \
    X(steps) X(final_val_loss) X(final_ema_val_loss) X(best_val_loss) X(train_s) X(wall_s) \
    X(optimizer_updates) X(model_backward_calls) X(probe_passes) X(peak_rss_bytes) \
    X(predictor_overhead_s) X(controller_overhead_s)
typedef struct hpt_run_summary {
    int present;             /* 0: no summary.json yet (a run in progress or stopped) */
#define HPT_RUN_SUMMARY_FIELD_(name) double name;
    HPT_RUN_SUMMARY_FIELDS(HPT_RUN_SUMMARY_FIELD_)
#undef HPT_RUN_SUMMARY_FIELD_
    double phase_steps[4];   /* hybrid steps in warmup, full, predict, correct; NaN without the hybrid */
    double outer_jumps[2];   /* the outer predictor's jumps kept, rolled back; NaN without it */
} hpt_run_summary;

typedef struct hpt_rundir {
    hpt_run_metrics metrics;
    hpt_run_summary summary;
} hpt_rundir;

/* Reads DIR/metrics.jsonl (required: HPT_ERR_IO naming it) and
 * DIR/summary.json (optional: summary.present). Free with hpt_rundir_free. */
hpt_status hpt_rundir_open(hpt_rundir *r, const char *dir);
void hpt_rundir_free(hpt_rundir *r);
/* The step of the last complete line of DIR/metrics.jsonl, read from its
 * tail (cheap enough to poll a growing file); 0 if none. */
int hpt_rundir_last_step(const char *dir);
/* The newest checkpoint file DIR/checkpoints/ckpt-<step>.bin: its step, its
 * path in path[cap]; -1 if there is none (src/train/checkpoint.c, which
 * names them). */
int hpt_rundir_newest_checkpoint(const char *dir, char *path, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* HPT_INCLUDE_RUNDIR_H */
