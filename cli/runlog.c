/*
 * runlog.c — reading a run's own logs back, and `hpt plot`.
 *
 * A run directory's metrics.jsonl and summary.json are written by hpt
 * itself (flat JSON objects, one per line, null for NaN), so a reader for
 * exactly that shape is enough: no JSON library. `hpt compare` reads runs
 * through these helpers; `hpt plot DIR` and the end of every `hpt train`
 * turn metrics.jsonl into DIR/loss.{svg,png} (and accuracy.{svg,png} for
 * image tasks), because a curve is read at a glance where 2000 lines of
 * JSON are not.
 */
#include "cli.h"
#include "../src/base/base.h"    /* hpt_read_file, hpt_fail */
#include "../src/report/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void *cli_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    return q;
}

double cli_json_num(const char *s, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (!p) return NAN;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (!strncmp(p, "null", 4)) return NAN;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

const char *cli_json_str(const char *s, const char *key, char *buf, size_t cap) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(s, pat);
    buf[0] = 0;
    if (!p) return buf;
    p += strlen(pat);
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < cap) { buf[i] = p[i]; i++; }
    buf[i] = 0;
    return buf;
}

char *cli_read_text(const char *path) {
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) return NULL;
    char *s = cli_xrealloc(buf, n + 1);
    s[n] = 0;
    return s;
}

char *cli_next_line(char **cur) {
    char *line = *cur;
    if (!line || !*line) return NULL;
    char *nl = strchr(line, '\n');
    if (nl) { *nl = 0; *cur = nl + 1; } else *cur = line + strlen(line);
    return line;
}

/* ---------------------------------------------------------------- plots */

/* The metrics' columns, by step: y is NaN where a line lacks it. */
typedef struct curves {
    int n, cap;
    double *step, *train, *val, *ema_val, *acc;
    int nb, bcap;
    hpt_plot_band *bands;   /* Predict phases, in steps */
} curves;

static void curves_free(curves *c) {
    free(c->step); free(c->train); free(c->val); free(c->ema_val); free(c->acc);
    free(c->bands);
}

static void curves_push(curves *c, double step, double train, double val, double ema, double acc) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        size_t b = (size_t)c->cap * sizeof(double);
        c->step = cli_xrealloc(c->step, b); c->train = cli_xrealloc(c->train, b);
        c->val = cli_xrealloc(c->val, b); c->ema_val = cli_xrealloc(c->ema_val, b);
        c->acc = cli_xrealloc(c->acc, b);
    }
    int i = c->n++;
    c->step[i] = step; c->train[i] = train; c->val[i] = val; c->ema_val[i] = ema; c->acc[i] = acc;
}

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

hpt_status cli_plot_run(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *met = cli_read_text(path);
    if (!met) return hpt_fail(HPT_ERR_IO, "cannot read '%s' (is '%s' a run directory of hpt train?)", path, dir);
    curves c = {0};
    double prev_step = 0.0;
    for (char *cur = met, *line; (line = cli_next_line(&cur));) {
        double step = cli_json_num(line, "step");
        if (isfinite(step)) {
            char phase[16];
            if (!strcmp(cli_json_str(line, "phase", phase, sizeof phase), "predict")) {
                if (c.nb == c.bcap) {
                    c.bcap = c.bcap ? 2 * c.bcap : 16;
                    c.bands = cli_xrealloc(c.bands, (size_t)c.bcap * sizeof *c.bands);
                }
                c.bands[c.nb++] = (hpt_plot_band){prev_step, step};
            }
            curves_push(&c, step, cli_json_num(line, "train_loss"), cli_json_num(line, "val_loss"),
                        cli_json_num(line, "ema_val_loss"), cli_json_num(line, "val_accuracy"));
            prev_step = step;
        }
    }
    free(met);
    if (c.n == 0) {
        curves_free(&c);
        return hpt_fail(HPT_ERR_FORMAT, "'%s' holds no steps to plot", path);
    }
    /* the per-step train loss is one batch's: smooth it in place with a
     * bias-corrected EMA whose window is about 2% of the run, so that it
     * shows the trend */
    double beta = 1.0 - 1.0 / (c.n / 50.0 > 1.0 ? c.n / 50.0 : 1.0), m = 0.0, w = 0.0;
    for (int i = 0; i < c.n; i++) {
        if (isfinite(c.train[i])) { m = beta * m + (1.0 - beta) * c.train[i]; w = beta * w + (1.0 - beta); }
        c.train[i] = w > 0.0 ? m / w : NAN;
    }

    double *x = cli_xrealloc(NULL, (size_t)c.n * 3 * sizeof(double)), *y = cli_xrealloc(NULL, (size_t)c.n * 3 * sizeof(double));
    /* each series in its own third of x/y; a column with no value at all
     * (no evaluation, no --ema) is left out of the chart and its legend */
    const double *cols[3] = {c.train, c.val, c.ema_val};
    static const char *const names[3] = {"train loss (smoothed)", "val loss", "val loss, EMA weights"};
    hpt_plot_series s[3];
    int ns = 0, k;
    for (int j = 0; j < 3; j++) {
        double *xj = x + (size_t)j * c.n, *yj = y + (size_t)j * c.n;
        if ((k = compact(c.step, cols[j], c.n, xj, yj)) > 0 || j == 0)
            s[ns++] = (hpt_plot_series){.name = names[j], .x = xj, .y = yj, .n = k, .dashed = j == 2};
    }
    char title[256], out[4200];
    snprintf(title, sizeof title, "loss: %s", base_name(dir));
    hpt_plot p;
    hpt_plot_init(&p);
    p.title = title; p.xlabel = "step"; p.ylabel = "loss";
    p.series = s; p.nseries = ns;
    p.bands = c.bands; p.nbands = c.nb; p.band_label = c.nb ? "hybrid Predict phases" : NULL;
    snprintf(out, sizeof out, "%s/loss", dir);
    hpt_status st = hpt_plot_write(&p, out);
    if (st == HPT_OK && (k = compact(c.step, c.acc, c.n, x, y)) > 0) {
        for (int i = 0; i < k; i++) y[i] *= 100.0;
        hpt_plot_series a = {.name = "val accuracy", .x = x, .y = y, .n = k};
        snprintf(title, sizeof title, "accuracy: %s", base_name(dir));
        p.title = title; p.ylabel = "val accuracy (%)";
        p.series = &a; p.nseries = 1;
        snprintf(out, sizeof out, "%s/accuracy", dir);
        st = hpt_plot_write(&p, out);
    }
    free(x); free(y);
    curves_free(&c);
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
