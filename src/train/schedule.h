/*
 * schedule.h — the learning-rate schedules' helpers for the trainer
 * (schedule.c; hpt_lr_at and hpt_schedule_name are public, in hpt.h).
 */
#ifndef HPT_SCHEDULE_H
#define HPT_SCHEDULE_H

#include "../base/base.h"

#include <cJSON.h>
#include <stddef.h>

/* Points c->schedule and c->cooldown at the tables' own names (a config
 * checked by hpt_train_config_check may point into the caller's strings). */
void hpt_schedule_intern(hpt_train_config *c);
/* "cosine", or "wsd, sqrt cooldown over the last 0.2 of the steps" for the
 * resolved-config line; returns snprintf's count. */
int hpt_schedule_describe(const hpt_train_config *c, char *buf, size_t n);
/* summary.json's "schedule" (and for wsd "decay_frac" and "cooldown"). */
void hpt_schedule_summary(const hpt_train_config *c, cJSON *o);

#endif /* HPT_SCHEDULE_H */
