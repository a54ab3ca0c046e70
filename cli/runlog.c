/*
 * runlog.c — reading a run's own logs back, and `hpt plot`.
 *
 * The run directory is read by the library (hpt_rundir_open, src/report/
 * rundir.c), as `hpt compare` reads it; `hpt plot DIR` and the end of every
 * `hpt train` turn metrics.jsonl into DIR/loss.{svg,png} (and accuracy.{svg,png} for
 * image tasks), because a curve is read at a glance where 2000 lines of
 * JSON are not.
 */
#include "cli.h"
#include "../src/base/base.h"    /* hpt_read_file, hpt_fail */
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void *cli_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    return q;
}

char *cli_read_text(const char *path) {
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) return NULL;
    char *s = cli_xrealloc(buf, n + 1);
    s[n] = 0;
    return s;
}

/* ---------------------------------------------------------------- plots */

/* A series keeps only its finite points, so that sparse columns (val loss
 * every 250 steps) draw as lines rather than as isolated dots between gaps. */
static int compact(const double *x, const double *y, int n, double *ox, double *oy) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(y[i])) { ox[k] = x[i]; oy[k] = y[i]; k++; }
    return k;
}

static const char *base_name(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    const char *s = dir + n;
    while (s > dir && s[-1] != '/') s--;
    return s;
}

/* The per-step train loss is one batch's: smoothed in place with a
 * bias-corrected EMA whose window is about 2% of the run, so that it shows
 * the trend. */
static void smooth(double *y, int n) {
    double beta = 1.0 - 1.0 / (n / 50.0 > 1.0 ? n / 50.0 : 1.0), m = 0.0, w = 0.0;
    for (int i = 0; i < n; i++) {
        if (isfinite(y[i])) { m = beta * m + (1.0 - beta) * y[i]; w = beta * w + (1.0 - beta); }
        y[i] = w > 0.0 ? m / w : NAN;
    }
}

/* Predict phases, in steps: each from the line before to the phase's own. */
static int predict_bands(const hpt_run_metrics *m, hpt_plot_band *bands) {
    int nb = 0;
    for (int i = 0; i < m->n; i++)
        if (m->predict[i]) bands[nb++] = (hpt_plot_band){i ? m->step[i - 1] : 0.0, m->step[i]};
    return nb;
}

/* DIR/accuracy.{svg,png}, if the run evaluated an accuracy (image tasks). */
static hpt_status plot_accuracy(hpt_plot *p, const char *dir, const hpt_run_metrics *m, double *x, double *y) {
    int k = compact(m->step, m->val_accuracy, m->n, x, y);
    if (k == 0) return HPT_OK;
    for (int i = 0; i < k; i++) y[i] *= 100.0;
    hpt_plot_series a = {.name = "val accuracy", .x = x, .y = y, .n = k};
    char title[256], out[4200];
    snprintf(title, sizeof title, "accuracy: %s", base_name(dir));
    p->title = title; p->ylabel = "val accuracy (%)";
    p->series = &a; p->nseries = 1;
    snprintf(out, sizeof out, "%s/accuracy", dir);
    return hpt_plot_write(p, out);
}

hpt_status cli_plot_run(const char *dir) {
    hpt_rundir r;
    HPT_TRY(hpt_rundir_open(&r, dir));
    hpt_run_metrics *m = &r.metrics;
    if (m->n == 0) {
        hpt_rundir_free(&r);
        return hpt_fail(HPT_ERR_FORMAT, "'%s/metrics.jsonl' holds no steps to plot", dir);
    }
    smooth(m->train_loss, m->n);
    double *x = cli_xrealloc(NULL, (size_t)m->n * 3 * sizeof(double)), *y = cli_xrealloc(NULL, (size_t)m->n * 3 * sizeof(double));
    hpt_plot_band *bands = cli_xrealloc(NULL, (size_t)m->n * sizeof *bands);
    /* each series in its own third of x/y; a column with no value at all
     * (no evaluation, no --ema) is left out of the chart and its legend */
    const double *cols[3] = {m->train_loss, m->val_loss, m->ema_val_loss};
    static const char *const names[3] = {"train loss (smoothed)", "val loss", "val loss, EMA weights"};
    hpt_plot_series s[3];
    int ns = 0, k;
    for (int j = 0; j < 3; j++) {
        double *xj = x + (size_t)j * m->n, *yj = y + (size_t)j * m->n;
        if ((k = compact(m->step, cols[j], m->n, xj, yj)) > 0 || j == 0)
            s[ns++] = (hpt_plot_series){.name = names[j], .x = xj, .y = yj, .n = k, .dashed = j == 2};
    }
    char title[256], out[4200];
    snprintf(title, sizeof title, "loss: %s", base_name(dir));
    hpt_plot p;
    hpt_plot_init(&p);
    p.title = title; p.xlabel = "step"; p.ylabel = "loss";
    p.series = s; p.nseries = ns;
    p.nbands = predict_bands(m, bands);
    p.bands = bands; p.band_label = p.nbands ? "hybrid Predict phases" : NULL;
    snprintf(out, sizeof out, "%s/loss", dir);
    hpt_status st = hpt_plot_write(&p, out);
    if (st == HPT_OK) st = plot_accuracy(&p, dir, m, x, y);
    free(x); free(y); free(bands);
    hpt_rundir_free(&r);
    return st;
}

void usage_plot(FILE *f) {
    fprintf(f,
"hpt plot DIR — draw a run's curves from DIR/metrics.jsonl\n"
"\n"
"Writes DIR/loss.svg and DIR/loss.png (train loss smoothed, val loss, the EMA\n"
"weights' val loss when --ema was on, hybrid Predict phases shaded) and,\n"
"for image tasks, DIR/accuracy.svg and .png. hpt train draws them at the end of\n"
"every run; hpt plot redraws them, also for a run still in progress.\n"
"Exit status: 0 written, 1 the run's logs cannot be read or the plot written, 2 usage error.\n");
}

int cmd_plot(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage_plot(stdout); return 0; }
        if (argv[i][0] == '-') die_usage("unknown option '%s' for 'hpt plot' (usage: hpt plot DIR)", argv[i]);
        if (dir) die_usage("hpt plot takes one run directory (got a second: '%s')", argv[i]);
        dir = argv[i];
    }
    if (!dir) die_usage("%s", "hpt plot needs a run directory: hpt plot DIR");
    hpt_status st = cli_plot_run(dir);
    /* the directory was named correctly: what fails is its content, not the usage */
    if (st != HPT_OK) die_status(st == HPT_ERR_ARG ? HPT_ERR_DATA : st);
    fprintf(stderr, "plot: %s/loss.{svg,png}\n", dir);
    return 0;
}
