/*
 * rundir.c — a run directory read back: metrics.jsonl as columns, the
 * figures of summary.json, the progress of a run still writing. Parsed with
 * cJSON, so any valid JSON the trainer writes (escaped strings, reordered
 * keys, null for NaN) reads back; a line that does not parse (the torn last
 * line of a killed run) is skipped, as a reader of a log being written must.
 * The newest checkpoint is found in checkpoint.c, which names the files.
 */
#include "hpt.h"
#include "../base/base.h"    /* hpt_read_file, hpt_fail */

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number member of an object; NaN if absent, null or not a number. */
static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* ---------------------------------------------------------------- metrics */

static hpt_status metrics_reserve(hpt_run_metrics *m, int cap) {
    double **cols[7] = {&m->step, &m->time_s, &m->train_loss, &m->val_loss, &m->ema_val_loss, &m->val_accuracy,
                        &m->updates};
    for (int j = 0; j < 7; j++) {
        double *p = realloc(*cols[j], (size_t)cap * sizeof(double));
        if (!p) return hpt_fail(HPT_ERR_NOMEM, "out of memory reading metrics (%d lines)", cap);
        *cols[j] = p;
    }
    unsigned char *p = realloc(m->predict, (size_t)cap);
    if (!p) return hpt_fail(HPT_ERR_NOMEM, "out of memory reading metrics (%d lines)", cap);
    m->predict = p;
    return HPT_OK;
}

/* One line's columns, if it is an object with a finite step. */
static void metrics_add(hpt_run_metrics *m, const cJSON *o) {
    double step = num(o, "step");
    if (!isfinite(step)) return;
    int i = m->n++;
    m->step[i] = step;
    m->time_s[i] = num(o, "time_s");
    m->train_loss[i] = num(o, "train_loss");
    m->val_loss[i] = num(o, "val_loss");
    m->ema_val_loss[i] = num(o, "ema_val_loss");
    m->val_accuracy[i] = num(o, "val_accuracy");
    const char *phase = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "phase"));
    m->predict[i] = phase && (!strcmp(phase, "predict") || !strcmp(phase, "jump"));   /* the outer path's jump */
    double bw = num(o, "backward"), before = i ? m->updates[i - 1] : 0;
    m->updates[i] = before + (isfinite(bw) ? bw : step - (i ? m->step[i - 1] : 0));
}

static hpt_status metrics_parse(hpt_run_metrics *m, char *text) {
    int lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    HPT_TRY(metrics_reserve(m, lines));
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
        if (cJSON_IsObject(o)) metrics_add(m, o);
        cJSON_Delete(o);
    }
    return HPT_OK;
}

/* ---------------------------------------------------------------- summary */

static void summary_parse(hpt_run_summary *s, const char *text) {
    cJSON *o = cJSON_Parse(text);
    s->present = cJSON_IsObject(o);
#define HPT_RUN_SUMMARY_READ_(name) s->name = num(o, #name);
    HPT_RUN_SUMMARY_FIELDS(HPT_RUN_SUMMARY_READ_)
#undef HPT_RUN_SUMMARY_READ_
    static const char *const phases[4] = {"warmup", "full", "predict", "correct"};
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(o, "phase_steps");
    for (int k = 0; k < 4; k++) s->phase_steps[k] = num(ps, phases[k]);
    const cJSON *oj = cJSON_GetObjectItemCaseSensitive(o, "outer_jumps");
    s->outer_jumps[0] = num(oj, "kept");
    s->outer_jumps[1] = num(oj, "rolled_back");
    cJSON_Delete(o);
}

/* ---------------------------------------------------------------- the directory */

hpt_status hpt_rundir_open(hpt_rundir *r, const char *dir) {
    memset(r, 0, sizeof *r);
    char path[4200];
    unsigned char *text;
    size_t n;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (hpt_read_file(path, &text, &n) != HPT_OK)
        return hpt_fail(HPT_ERR_IO, "cannot read '%s' (is '%s' a run directory of hpt train?)", path, dir);
    hpt_status st = metrics_parse(&r->metrics, (char *)text);
    free(text);
    if (st != HPT_OK) { hpt_rundir_free(r); return st; }
    /* no summary (a run in progress) or a partial one: not present */
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (hpt_read_file(path, &text, &n) == HPT_OK) {
        summary_parse(&r->summary, (const char *)text);
        free(text);
    }
    return HPT_OK;
}

void hpt_rundir_free(hpt_rundir *r) {
    hpt_run_metrics *m = &r->metrics;
    free(m->step); free(m->time_s); free(m->train_loss); free(m->val_loss); free(m->ema_val_loss);
    free(m->val_accuracy); free(m->predict); free(m->updates);
    memset(r, 0, sizeof *r);
}

int hpt_rundir_last_step(const char *dir) {
    char path[4200], buf[8192];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    /* the tail is enough: a line is a few hundred bytes */
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    size_t n = fseek(f, from, SEEK_SET) == 0 ? fread(buf, 1, sizeof buf - 1, f) : 0;
    fclose(f);
    buf[n] = 0;
    /* the last line that parses, from the end (the very last may be torn) */
    int step = 0;
    for (char *end = buf + n; end > buf && !step;) {
        *end = 0;
        char *line = end;
        while (line > buf && line[-1] != '\n') line--;
        cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
        double s = num(o, "step");
        cJSON_Delete(o);
        if (isfinite(s)) step = (int)s;
        end = line > buf ? line - 1 : buf;
    }
    return step;
}
