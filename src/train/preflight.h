/*
 * preflight.h — the checks a training run passes before it allocates its
 * arenas or writes anything (preflight.c): the run directory guard and the
 * memory budget.
 */
#ifndef HPT_PREFLIGHT_H
#define HPT_PREFLIGHT_H

#include "../model/model.h"

/* Before any work: refuses a new run into a directory that holds one
 * (HPT_ERR_ARG, naming what is there and the ways on: --resume, --overwrite)
 * unless mode says to overwrite or continue it, and a directory another hpt
 * holds locked. Reads only. */
hpt_status hpt_rundir_check(const char *dir, hpt_rundir_mode mode);

/* After every check has passed: for HPT_RUNDIR_OVERWRITE, creates DIR,
 * takes its lock (into *lock_fd, which the run then keeps) and removes the
 * old run's files (logs, checkpoints, model, summary, plots) so nothing of
 * it can be mixed into the new one. Other modes: nothing. */
hpt_status hpt_rundir_prepare(const char *dir, hpt_rundir_mode mode, int *lock_fd);

/* Before a task builds its model: the model's arenas (its family's size
 * tables) plus AdamW's moments (and the weight average) against the memory
 * available and --rss-limit, so that a too-large config is refused with the
 * figures instead of being allocated (hpt_model_check_memory). */
hpt_status hpt_train_check_memory(const hpt_train_config *c, const hpt_device *dev, const uint32_t *conf, int nconf,
                                  int B, int T);

#endif /* HPT_PREFLIGHT_H */
