/*
 * compare.c — `hpt compare`: wall-clock time to the same validation loss,
 * hybrid against a tuned baseline and the controls that could explain a
 * gain away (docs/references.md section 4).
 *
 * The protocol, in the order it runs:
 *   1. sweep: on the first seed, the baseline and the hybrid each train at
 *      every --lrs value (warmup + cosine to lr x min-lr ratio over the same
 *      budget); the lowest final val loss picks each arm's tuned LR;
 *   2. seeds: every arm trains at its tuned LR on every seed (the controls
 *      borrow one: stale-adam and linear the hybrid's, ema the baseline's);
 *   3. per seed, the target is the tuned baseline's final val loss (and two
 *      intermediate levels, its val at 1/3 and 2/3 of its evaluations); each
 *      arm's time to a target is the training clock (evaluation excluded,
 *      every probe and predictor cost included) at which its val curve first
 *      reaches it, interpolated linearly between evaluations.
 * Every run is a child `hpt train` process (same binary, same thread count,
 * one at a time), so each has its own peak RSS and a crash costs one run;
 * this file reads back the child's metrics.jsonl and summary.json. A run
 * whose directory already holds a summary for identical arguments (and
 * the same hpt binary, by CRC) is
 * reused, and one stopped by Ctrl-C (its child saved a checkpoint) is
 * resumed, so a stopped comparison continues where it stopped.
 * Outputs in --out DIR: results.json, results.md (the table, also printed),
 * val_vs_time.{svg,png}, val_vs_step.{svg,png}, runs/<arm>-lr<lr>-s<seed>/.
 */
#include "cli.h"
#include "../src/base/base.h"    /* hpt_read_file, hpt_mkdir_p */
#include "../src/report/plot.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- arms */

enum { ARM_BASELINE, ARM_HYBRID, ARM_STALE, ARM_LINEAR, ARM_EMA, NARMS };
static const char *const arm_names[NARMS] = {"baseline", "hybrid", "stale-adam", "linear", "ema"};
/* the arm whose tuned LR an arm uses (the sweeping arms use their own) */
static const int arm_lr_from[NARMS] = {ARM_BASELINE, ARM_HYBRID, ARM_HYBRID, ARM_HYBRID, ARM_BASELINE};

#define MAX_LRS 16
#define MAX_SEEDS 16
#define MAX_PASS 256
#define NLEVELS 3    /* targets: 1/3, 2/3 of the baseline's evaluations, its final val */
#define NBUDGETS 4   /* training-clock budgets: 25, 50, 75, 100% of the baseline's */

/* One finished `hpt train` run, as read back from its files. */
typedef struct run {
    int arm, done;
    float lr;
    uint64_t seed;
    char dir[4200];
    /* the val curve at each evaluation (the ema arm: the averaged weights) */
    int n, cap;
    double *step, *clock, *val;
    /* Predict phases: [x0, x1] in steps and in training-clock seconds */
    int nb, bcap;
    double *bstep, *bclock;
    double final_val, train_s, wall_s;
    double updates, backward, probes, peak_rss;
    double pred_s, ctrl_s;  /* the hybrid's time in Predict phases and on its bookkeeping (0: no hybrid) */
    double phase[4];  /* warmup, full, predict, correct steps (hybrid arms) */
} run;

typedef struct compare {
    /* flags */
    char **pass; int npass;          /* hpt train flags passed through to every run */
    char **hpass; int nhpass;        /* hybrid-only flags, for the hybrid arms */
    float lrs[MAX_LRS]; int nlrs;
    int nseeds;
    uint64_t seed0;
    int arms[NARMS];                 /* 1: arm requested */
    float ema_decay, min_lr_ratio;
    const char *out;
    const char *predictor;           /* the hybrid arm's (--predictor; default coast) */
    int max_iters, eval_interval_given, fresh, threads;
    uint32_t binary_crc;             /* of the hpt binary: a rebuilt one does not reuse old runs */
    /* runs */
    run *runs; int nruns, cap;
    int tuned[NARMS];                /* index into lrs of each sweeping arm's tuned LR */
    /* progress */
    int planned, finished, tty;
    double run_wall_sum; int run_wall_n;
    double t0;
} compare;

void usage_compare(FILE *f) {
    fprintf(f,
"Usage: hpt compare [hpt train options] [compare options]\n"
"\n"
"Trains every arm on the same data, seeds and thread count, one run at a time,\n"
"and measures wall-clock (training clock) time to the tuned baseline's final\n"
"validation loss. Train options (--data, --task, --model, --max-iters, --n-layer,\n"
"--eval-interval, --threads, ...) and hybrid options (--warmup-steps, ...) are\n"
"passed to every run (hybrid options to the hybrid arms only); --lr, --min-lr,\n"
"--seed, --out, --mode, --ema, --resume and --save-interval are set by compare\n"
"itself; --predictor chooses the hybrid arm's predictor (coast or shrink).\n"
"\n"
"compare options:\n"
"  --lrs LIST             peak learning rates of the sweep, comma-separated    [the task's lr]\n"
"  --min-lr-ratio X       each run decays to lr x X                            [the task's min-lr/lr]\n"
"  --seeds N              seeds per arm (the sweep runs on the first)          [3]\n"
"  --seed N               the first seed; the others follow it                 [1337]\n"
"  --arms LIST            of baseline,hybrid,stale-adam,linear,ema             [all]\n"
"  --ema-decay X          decay of the ema control's weight average            [0.99]\n"
"  --out DIR              results.json, results.md, plots, runs/               [runs/compare]\n"
"  --fresh                rerun every run (default: reuse finished identical runs)\n"
"\n"
"Without --eval-interval, text tasks evaluate every max-iters/20 steps: the\n"
"resolution of time-to-target. Exit status: 0 success (also when no arm reaches\n"
"the target: that is a result), 1 a run failed, 2 usage error.\n");
}

/* ---------------------------------------------------------------- small helpers */

static void push_curve(run *r, double step, double clock, double val) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->step = cli_xrealloc(r->step, (size_t)r->cap * sizeof(double));
        r->clock = cli_xrealloc(r->clock, (size_t)r->cap * sizeof(double));
        r->val = cli_xrealloc(r->val, (size_t)r->cap * sizeof(double));
    }
    r->step[r->n] = step; r->clock[r->n] = clock; r->val[r->n] = val;
    r->n++;
}

static void push_band(run *r, double s0, double s1, double c0, double c1) {
    if (r->nb == r->bcap) {
        r->bcap = r->bcap ? 2 * r->bcap : 16;
        r->bstep = cli_xrealloc(r->bstep, (size_t)r->bcap * 2 * sizeof(double));
        r->bclock = cli_xrealloc(r->bclock, (size_t)r->bcap * 2 * sizeof(double));
    }
    r->bstep[2 * r->nb] = s0; r->bstep[2 * r->nb + 1] = s1;
    r->bclock[2 * r->nb] = c0; r->bclock[2 * r->nb + 1] = c1;
    r->nb++;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- one run */

/* The argument vector of one child run (NULL-terminated, strings owned by
 * the caller's scratch). */
typedef struct argv_buf { char *v[MAX_PASS * 2 + 32]; int n; char num[8][64]; } argv_buf;

static void build_argv(const compare *c, const run *r, argv_buf *a) {
    a->n = 0;
    a->v[a->n++] = "hpt";
    a->v[a->n++] = "train";
    for (int i = 0; i < c->npass; i++) a->v[a->n++] = c->pass[i];
    int hybrid = r->arm == ARM_HYBRID || r->arm == ARM_STALE || r->arm == ARM_LINEAR;
    if (hybrid) {
        a->v[a->n++] = "--mode";
        a->v[a->n++] = "hybrid";
        for (int i = 0; i < c->nhpass; i++) a->v[a->n++] = c->hpass[i];
        a->v[a->n++] = "--predictor";
        a->v[a->n++] = r->arm == ARM_STALE ? "stale-adam" : r->arm == ARM_LINEAR ? "linear" : (char *)c->predictor;
    }
    if (r->arm == ARM_EMA) {
        snprintf(a->num[0], sizeof a->num[0], "%g", c->ema_decay);
        a->v[a->n++] = "--ema";
        a->v[a->n++] = a->num[0];
    }
    snprintf(a->num[1], sizeof a->num[1], "%g", r->lr);
    snprintf(a->num[2], sizeof a->num[2], "%g", r->lr * c->min_lr_ratio);
    snprintf(a->num[3], sizeof a->num[3], "%llu", (unsigned long long)r->seed);
    a->v[a->n++] = "--lr"; a->v[a->n++] = a->num[1];
    a->v[a->n++] = "--min-lr"; a->v[a->n++] = a->num[2];
    a->v[a->n++] = "--seed"; a->v[a->n++] = a->num[3];
    if (!c->eval_interval_given && c->max_iters > 0) {
        snprintf(a->num[4], sizeof a->num[4], "%d", c->max_iters >= 20 ? c->max_iters / 20 : 1);
        a->v[a->n++] = "--eval-interval"; a->v[a->n++] = a->num[4];
    }
    a->v[a->n++] = "--log-interval"; a->v[a->n++] = "100000000";  /* the log file gets the summary lines */
    a->v[a->n++] = "--out"; a->v[a->n++] = (char *)r->dir;
    a->v[a->n] = NULL;
}

/* The arguments as one line (the reuse key of a finished run). */
static void argv_line(const argv_buf *a, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 1; i < a->n && k + 1 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i > 1 ? " " : "", a->v[i]);
}

/* Reads a finished run's metrics.jsonl and summary.json; 0 if incomplete. */
static int load_run(run *r) {
    char path[4400];
    snprintf(path, sizeof path, "%s/summary.json", r->dir);
    char *sum = cli_read_text(path);
    if (!sum) return 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->dir);
    char *met = cli_read_text(path);
    if (!met) { free(sum); return 0; }
    r->n = r->nb = 0;
    const char *key = r->arm == ARM_EMA ? "ema_val_loss" : "val_loss";
    double prev_step = 0, prev_clock = 0;
    for (char *cur = met, *line; (line = cli_next_line(&cur));) {
        double step = cli_json_num(line, "step"), clock = cli_json_num(line, "time_s");
        char phase[16];
        if (!strcmp(cli_json_str(line, "phase", phase, sizeof phase), "predict"))
            push_band(r, prev_step, step, prev_clock, clock);
        double v = cli_json_num(line, key);
        if (isfinite(step) && isfinite(v)) push_curve(r, step, clock, v);
        if (isfinite(step)) { prev_step = step; prev_clock = clock; }
    }
    r->final_val = cli_json_num(sum, r->arm == ARM_EMA ? "final_ema_val_loss" : "final_val_loss");
    r->train_s = cli_json_num(sum, "train_s");
    r->updates = cli_json_num(sum, "optimizer_updates");
    r->backward = cli_json_num(sum, "model_backward_calls");
    r->probes = cli_json_num(sum, "probe_passes");
    if (!isfinite(r->probes)) r->probes = 0;
    r->peak_rss = cli_json_num(sum, "peak_rss_bytes");
    r->pred_s = cli_json_num(sum, "predictor_overhead_s");
    r->ctrl_s = cli_json_num(sum, "controller_overhead_s");
    if (!isfinite(r->pred_s)) r->pred_s = 0;
    if (!isfinite(r->ctrl_s)) r->ctrl_s = 0;
    const char *ps = strstr(sum, "\"phase_steps\"");
    static const char *const pk[4] = {"warmup", "full", "predict", "correct"};
    for (int k = 0; k < 4; k++) r->phase[k] = ps ? cli_json_num(ps, pk[k]) : NAN;
    if (!ps) { r->phase[0] = r->phase[2] = r->phase[3] = 0; r->phase[1] = cli_json_num(sum, "steps"); }
    free(sum);
    free(met);
    return r->n > 0 && isfinite(r->final_val);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The last "step": value in a growing metrics.jsonl (progress display). */
static int last_step(const char *dir) {
    char path[4400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char buf[4096];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    size_t n = 0;
    if (fseek(f, from, SEEK_SET) == 0) n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    int step = 0;
    for (char *p = buf; (p = strstr(p, "{\"step\":")); p++) step = atoi(p + 8);
    return step;
}

static void show_progress(compare *c, const run *r, int step, double run_t) {
    double per_run = c->run_wall_n ? c->run_wall_sum / c->run_wall_n : NAN;
    double left_this = step > 0 && c->max_iters > 0 ? run_t / step * (c->max_iters - step) : per_run;
    double eta = (isfinite(left_this) ? left_this : 0) + (isfinite(per_run) ? per_run : 0) * (c->planned - c->finished - 1);
    char e[32] = "?";
    if (isfinite(per_run) || step > 0) fmt_eta(e, sizeof e, eta);
    char of[24] = "";
    if (c->max_iters > 0) snprintf(of, sizeof of, "/%d", c->max_iters);  /* epochs: the count is the child's */
    fprintf(stderr, "%s[%d/%d] %-10s lr %-8g seed %-6llu step %d%s | elapsed %.0f s | ETA %s   %s",
            c->tty ? "\r" : "", c->finished + 1, c->planned, arm_names[r->arm], r->lr, (unsigned long long)r->seed,
            step, of, now_s() - c->t0, e, c->tty ? "" : "\n");
}

/* 1 if DIR holds a checkpoint file (a stopped run that can be resumed). */
static int has_checkpoint(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) found = !strncmp(e->d_name, "ckpt-", 5) && !strstr(e->d_name, ".corrupt");
    closedir(d);
    return found;
}

static volatile sig_atomic_t g_child = 0, g_stop = 0;
static void on_stop(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_child > 0) kill((pid_t)g_child, SIGTERM);  /* it checkpoints and exits */
}

/* Runs one arm at one LR and seed (or reuses an identical finished run). */
static run *do_run(compare *c, int arm, float lr, uint64_t seed) {
    for (int i = 0; i < c->nruns; i++)
        if (c->runs[i].arm == arm && c->runs[i].lr == lr && c->runs[i].seed == seed) return &c->runs[i];
    if (c->nruns == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 32;
        c->runs = cli_xrealloc(c->runs, (size_t)c->cap * sizeof(run));
    }
    run *r = &c->runs[c->nruns++];
    memset(r, 0, sizeof *r);
    r->arm = arm; r->lr = lr; r->seed = seed;
    snprintf(r->dir, sizeof r->dir, "%s/runs/%s-lr%g-s%llu", c->out, arm_names[arm], lr, (unsigned long long)seed);
    argv_buf a;
    build_argv(c, r, &a);
    static char line[65536];
    argv_line(&a, line, sizeof line);
    size_t ll = strlen(line);
    snprintf(line + ll, sizeof line - ll, " [hpt binary crc32 %08x]", c->binary_crc);
    char path[4400];
    snprintf(path, sizeof path, "%s/compare-args.txt", r->dir);
    char *prev = c->fresh ? NULL : cli_read_text(path);
    if (prev && !strcmp(prev, line) && load_run(r)) {
        free(prev);
        c->finished++;
        fprintf(stderr, "[%d/%d] %-10s lr %-8g seed %-6llu reused %s: final val %.4f, train clock %.1f s\n",
                c->finished, c->planned, arm_names[arm], lr, (unsigned long long)seed, r->dir, r->final_val, r->train_s);
        r->done = 1;
        return r;
    }
    /* the same run stopped by Ctrl-C (its child saved a checkpoint): resume
     * it, bit for bit, training clock included */
    char ck[4400];
    snprintf(ck, sizeof ck, "%s/checkpoints", r->dir);
    int resume = prev && !strcmp(prev, line) && has_checkpoint(ck);
    free(prev);
    if (resume) {
        a.n = 0;
        a.v[a.n++] = "hpt"; a.v[a.n++] = "train"; a.v[a.n++] = "--resume"; a.v[a.n++] = r->dir;
        a.v[a.n++] = "--log-interval"; a.v[a.n++] = "100000000";
        a.v[a.n] = NULL;
    } else {
        /* a fresh run: no stale summary may be read back as its result */
        snprintf(path, sizeof path, "%s/summary.json", r->dir);
        unlink(path);
        /* and it replaces whatever an earlier attempt left (not in the reuse key) */
        a.v[a.n++] = "--overwrite";
        a.v[a.n] = NULL;
    }
    if (hpt_mkdir_p(r->dir) != HPT_OK) die_status(HPT_ERR_IO);
    snprintf(path, sizeof path, "%s/compare-args.txt", r->dir);
    FILE *af = fopen(path, "w");
    if (!af || fputs(line, af) < 0 || fclose(af) != 0) { fprintf(stderr, "hpt: cannot write '%s'\n", path); exit(1); }
    char logp[4400];
    snprintf(logp, sizeof logp, "%s/train.log", r->dir);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) { fprintf(stderr, "hpt: fork: %s\n", strerror(errno)); exit(1); }
    if (pid == 0) {
        /* if compare itself is killed, the run checkpoints and stops too */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        FILE *lf = freopen(logp, resume ? "a" : "w", stderr);
        if (!lf || !freopen("/dev/null", "w", stdout)) _exit(127);
        execv("/proc/self/exe", a.v);
        fprintf(stderr, "hpt compare: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    g_child = pid;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) { fprintf(stderr, "hpt: waitpid: %s\n", strerror(errno)); exit(1); }
        if (c->tty) show_progress(c, r, last_step(r->dir), now_s() - t0);
        usleep(250000);  /* polling costs nothing measurable against a run */
    }
    g_child = 0;
    r->wall_s = now_s() - t0;
    if (c->tty) fprintf(stderr, "\r\033[K");
    if (g_stop) {
        fprintf(stderr, "hpt: compare interrupted; run the same command again to continue (finished runs are reused)\n");
        exit(1);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !load_run(r)) {
        fprintf(stderr, "hpt: the run in '%s' failed (%s %d); its log, %s, ends:\n", r->dir,
                WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                logp);
        char *log = cli_read_text(logp);
        if (log) {
            /* its last lines: the error is the last thing a run prints */
            size_t n = strlen(log);
            int lines = 0;
            while (n > 0 && lines < 6) if (log[--n] == '\n') lines++;
            fprintf(stderr, "%s", log + (n ? n + 1 : 0));
            free(log);
        }
        exit(1);
    }
    r->done = 1;
    c->finished++;
    c->run_wall_sum += r->wall_s;
    c->run_wall_n++;
    char eta[32];
    fmt_eta(eta, sizeof eta, c->run_wall_sum / c->run_wall_n * (c->planned - c->finished));
    fprintf(stderr, "[%d/%d] %-10s lr %-8g seed %-6llu final val %.4f, train clock %.1f s (wall %.1f s), ETA %s\n",
            c->finished, c->planned, arm_names[arm], lr, (unsigned long long)seed, r->final_val, r->train_s, r->wall_s,
            eta);
    return r;
}

/* ---------------------------------------------------------------- metrics */

/* Training clock at which the curve first reaches `target`, interpolated
 * between the two evaluations around the crossing; NaN if it never does. */
static double time_to(const run *r, double target, int by_step) {
    const double *x = by_step ? r->step : r->clock;
    for (int i = 0; i < r->n; i++) {
        if (r->val[i] <= target) {
            if (i == 0) return x[0];
            double v0 = r->val[i - 1], v1 = r->val[i];
            double f = v0 > v1 ? (v0 - target) / (v0 - v1) : 1.0;
            return x[i - 1] + f * (x[i] - x[i - 1]);
        }
    }
    return NAN;
}

/* Lowest val among evaluations within a training-clock budget. */
static double best_within(const run *r, double budget) {
    double b = NAN;
    for (int i = 0; i < r->n; i++)
        if (r->clock[i] <= budget * (1 + 1e-9) && !(r->val[i] >= b)) b = r->val[i];
    return b;
}

typedef struct stat4 { double median, min, max; int n; } stat4;

static stat4 stats(const double *v, int n) {
    double s[MAX_SEEDS];
    int k = 0;
    for (int i = 0; i < n; i++) if (isfinite(v[i])) s[k++] = v[i];
    stat4 r = {NAN, NAN, NAN, k};
    if (!k) return r;
    qsort(s, (size_t)k, sizeof(double), cmp_dbl);
    r.min = s[0];
    r.max = s[k - 1];
    r.median = k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
    return r;
}

static void jnum(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6g", v); else fputs("null", f);
}

static void jstat(FILE *f, const char *key, const double *v, int n) {
    stat4 s = stats(v, n);
    fprintf(f, "\"%s\": {\"median\": ", key); jnum(f, s.median);
    fputs(", \"min\": ", f); jnum(f, s.min);
    fputs(", \"max\": ", f); jnum(f, s.max);
    fprintf(f, ", \"n\": %d, \"per_seed\": [", s.n);
    for (int i = 0; i < n; i++) { if (i) fputs(", ", f); jnum(f, v[i]); }
    fputs("]}", f);
}

/* Per arm and seed: what the table and results.json report. */
typedef struct armseed {
    const run *r;
    double target[NLEVELS], ttt[NLEVELS], speedup[NLEVELS];
    double best_at[NBUDGETS], budget[NBUDGETS];
    double final_ratio;
} armseed;

static void measure(const run *base, const run *r, armseed *o) {
    o->r = r;
    /* targets from the tuned baseline of this seed */
    int i1 = (base->n - 1) / 3, i2 = 2 * (base->n - 1) / 3;
    o->target[0] = base->val[i1];
    o->target[1] = base->val[i2];
    o->target[2] = base->final_val;
    for (int k = 0; k < NLEVELS; k++) {
        o->ttt[k] = time_to(r, o->target[k], 0);
        double tb = time_to(base, o->target[k], 0);
        o->speedup[k] = isfinite(o->ttt[k]) && o->ttt[k] > 0 ? tb / o->ttt[k] : NAN;
    }
    for (int k = 0; k < NBUDGETS; k++) {
        o->budget[k] = base->train_s * (k + 1) / NBUDGETS;
        o->best_at[k] = best_within(r, o->budget[k]);
    }
    o->final_ratio = r->final_val / base->final_val;
}

/* ---------------------------------------------------------------- outputs */

static void write_plots(const compare *c, run *const *first) {
    hpt_plot_series s[NARMS];
    int ns = 0, hyb = -1;
    for (int a = 0; a < NARMS; a++) {
        if (!first[a]) continue;
        if (a == ARM_HYBRID) hyb = a;
        s[ns++] = (hpt_plot_series){.name = arm_names[a], .n = first[a]->n, .y = first[a]->val,
                                    .dashed = a != ARM_BASELINE && a != ARM_HYBRID};
    }
    const run *hr = hyb >= 0 ? first[hyb] : NULL;
    hpt_plot_band *bands = NULL;
    int nb = hr ? hr->nb : 0;
    if (nb) bands = cli_xrealloc(NULL, (size_t)nb * sizeof *bands);
    char title[256], path[4400];
    const run *b0 = first[ARM_BASELINE];
    for (int by_step = 0; by_step < 2; by_step++) {
        int k = 0;
        for (int a = 0; a < NARMS; a++)
            if (first[a]) s[k++].x = by_step ? first[a]->step : first[a]->clock;
        for (int i = 0; i < nb; i++) {
            const double *x = by_step ? hr->bstep : hr->bclock;
            bands[i] = (hpt_plot_band){x[2 * i], x[2 * i + 1]};
        }
        snprintf(title, sizeof title, "validation loss, seed %llu, each arm at its tuned LR",
                 (unsigned long long)b0->seed);
        hpt_plot p = {.title = title, .xlabel = by_step ? "step" : "training clock (s), evaluation excluded",
                      .ylabel = "val loss", .series = s, .nseries = ns, .bands = bands, .nbands = nb,
                      .band_label = nb ? "hybrid Predict phases" : NULL, .hline = b0->final_val,
                      .hline_label = "target: tuned baseline's final val"};
        snprintf(path, sizeof path, "%s/%s", c->out, by_step ? "val_vs_step" : "val_vs_time");
        hpt_status st = hpt_plot_write(&p, path);
        if (st != HPT_OK) fprintf(stderr, "hpt: warning: plot %s not written: %s\n", path, hpt_errmsg());
    }
    free(bands);
}

/* The CPU model from /proc/cpuinfo, JSON-safe ("unknown" if none): timings
 * compare only within one machine. */
static const char *cpu_model(char *cpu, size_t cap) {
    char line[512];
    snprintf(cpu, cap, "unknown");
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (!ci) return cpu;
    while (fgets(line, sizeof line, ci)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        size_t k = 0;
        for (const char *q = colon + 1 + strspn(colon + 1, " \t"); *q && *q != '\n' && k + 1 < cap; q++)
            if (*q != '"' && *q != '\\') cpu[k++] = *q;
        cpu[k] = 0;
        break;
    }
    fclose(ci);
    return cpu;
}

static void report(compare *c) {
    /* the runs of each arm at its tuned LR, by seed */
    run *by[NARMS][MAX_SEEDS] = {{0}};
    for (int i = 0; i < c->nruns; i++) {
        run *r = &c->runs[i];
        float want = c->lrs[c->tuned[arm_lr_from[r->arm]]];
        if (r->lr != want) continue;
        int s = (int)(r->seed - c->seed0);
        if (s >= 0 && s < c->nseeds) by[r->arm][s] = r;
    }
    armseed m[NARMS][MAX_SEEDS];
    memset(m, 0, sizeof m);
    for (int a = 0; a < NARMS; a++)
        for (int s = 0; s < c->nseeds; s++)
            if (by[a][s] && by[ARM_BASELINE][s]) measure(by[ARM_BASELINE][s], by[a][s], &m[a][s]);

    /* Timing noise, measured in this comparison: a hybrid-family run that
     * never entered Predict trained exactly the baseline's steps (the same
     * final val, bit for bit), so its clock less the controller's own time
     * differs from the baseline's by noise alone. The spread of those
     * ratios says how far apart two equal runs land on this machine. */
    double noise[NARMS * MAX_SEEDS];
    int nnoise = 0;
    for (int a = ARM_HYBRID; a <= ARM_LINEAR; a++)
        for (int s = 0; c->arms[a] && s < c->nseeds; s++) {
            const run *r = by[a][s], *b = by[ARM_BASELINE][s];
            if (r && b && r->phase[2] == 0 && r->final_val == b->final_val && r->train_s > r->ctrl_s)
                noise[nnoise++] = 100.0 * fabs(b->train_s / (r->train_s - r->ctrl_s) - 1.0);
        }
    stat4 sn = stats(noise, nnoise);

    char path[4400];
    /* results.json */
    snprintf(path, sizeof path, "%s/results.json", c->out);
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "hpt: cannot write '%s': %s\n", path, strerror(errno)); exit(1); }
    fprintf(f, "{\n  \"protocol\": \"time to the tuned baseline's final val loss on the training clock "
               "(evaluation excluded), interpolated between evaluations; LR tuned on seed %llu by final val\",\n",
            (unsigned long long)c->seed0);
    fprintf(f, "  \"train_flags\": \"");
    for (int i = 0; i < c->npass; i++) fprintf(f, "%s%s", i ? " " : "", c->pass[i]);
    fprintf(f, "\",\n  \"hybrid_flags\": \"");
    for (int i = 0; i < c->nhpass; i++) fprintf(f, "%s%s", i ? " " : "", c->hpass[i]);
    fprintf(f, "\",\n  \"lrs\": [");
    for (int i = 0; i < c->nlrs; i++) fprintf(f, "%s%g", i ? ", " : "", c->lrs[i]);
    fprintf(f, "],\n  \"hybrid_predictor\": \"%s\",\n  \"min_lr_ratio\": %g,\n  \"ema_decay\": %g,\n  \"seeds\": [", c->predictor, c->min_lr_ratio, c->ema_decay);
    for (int s = 0; s < c->nseeds; s++) fprintf(f, "%s%llu", s ? ", " : "", (unsigned long long)(c->seed0 + s));
    fprintf(f, "],\n  \"threads\": %d,\n  \"blas_core\": \"%s\",\n", c->threads, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "default");
    char cpu[128];
    fprintf(f, "  \"cpu\": \"%s\",\n", cpu_model(cpu, sizeof cpu));
    fprintf(f, "  \"tuned_lr\": {");
    int first_key = 1;
    for (int a = 0; a < NARMS; a++)
        if (c->arms[a]) { fprintf(f, "%s\"%s\": %g", first_key ? "" : ", ", arm_names[a], c->lrs[c->tuned[arm_lr_from[a]]]); first_key = 0; }
    fprintf(f, "},\n  \"sweep\": [");
    int k = 0;
    for (int i = 0; i < c->nruns; i++) {
        const run *r = &c->runs[i];
        if (r->seed != c->seed0 || (r->arm != ARM_BASELINE && r->arm != ARM_HYBRID)) continue;
        fprintf(f, "%s\n    {\"arm\": \"%s\", \"lr\": %g, \"final_val_loss\": ", k++ ? "," : "", arm_names[r->arm], r->lr);
        jnum(f, r->final_val);
        fputs(", \"train_s\": ", f); jnum(f, r->train_s);
        fputs("}", f);
    }
    fprintf(f, "\n  ],\n  \"arms\": {");
    k = 0;
    for (int a = 0; a < NARMS; a++) {
        if (!c->arms[a]) continue;
        double v[MAX_SEEDS];
        fprintf(f, "%s\n    \"%s\": {\n      \"lr\": %g,\n      ", k++ ? "," : "", arm_names[a], c->lrs[c->tuned[arm_lr_from[a]]]);
#define PER_SEED(expr) for (int s = 0; s < c->nseeds; s++) { const armseed *x = &m[a][s]; v[s] = x->r ? (expr) : NAN; }
        PER_SEED(x->r->final_val) jstat(f, "final_val_loss", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->final_ratio) jstat(f, "final_val_ratio", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->speedup[2]) jstat(f, "speedup_time_to_target", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->ttt[2]) jstat(f, "time_to_target_s", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->speedup[0]) jstat(f, "speedup_to_level_1of3", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->speedup[1]) jstat(f, "speedup_to_level_2of3", v, c->nseeds); fputs(",\n      ", f);
        static const char *const bk[NBUDGETS] = {"best_val_at_25pct_clock", "best_val_at_50pct_clock",
                                                "best_val_at_75pct_clock", "best_val_at_100pct_clock"};
        for (int b = 0; b < NBUDGETS; b++) { PER_SEED(x->best_at[b]) jstat(f, bk[b], v, c->nseeds); fputs(",\n      ", f); }
        PER_SEED(x->r->train_s) jstat(f, "train_s", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->r->updates) jstat(f, "optimizer_updates", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->r->backward) jstat(f, "backward_passes", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->r->backward + x->r->probes) jstat(f, "training_forward_passes", v, c->nseeds); fputs(",\n      ", f);
        static const char *const pk[4] = {"phase_warmup", "phase_full", "phase_predict", "phase_correct"};
        for (int p = 0; p < 4; p++) { PER_SEED(x->r->phase[p]) jstat(f, pk[p], v, c->nseeds); fputs(",\n      ", f); }
        PER_SEED(x->r->pred_s) jstat(f, "predictor_overhead_s", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->r->ctrl_s) jstat(f, "controller_overhead_s", v, c->nseeds); fputs(",\n      ", f);
        PER_SEED(x->r->peak_rss) jstat(f, "peak_rss_bytes", v, c->nseeds);
#undef PER_SEED
        fputs("\n    }", f);
    }
    fputs("\n  },\n", f);
    /* the headline: the hybrid over the tuned baseline */
    double v[MAX_SEEDS];
    int ha = c->arms[ARM_HYBRID] ? ARM_HYBRID : ARM_BASELINE;
    for (int s = 0; s < c->nseeds; s++) v[s] = m[ha][s].r ? m[ha][s].speedup[2] : NAN;
    fprintf(f, "  \"timing_noise_pct\": {\"runs\": %d, \"median\": ", sn.n);
    jnum(f, sn.median); fputs(", \"max\": ", f); jnum(f, sn.max); fputs("},\n", f);
    fputs("  ", f); jstat(f, "speedup_time_to_target", v, c->nseeds); fputs(",\n  ", f);
    for (int s = 0; s < c->nseeds; s++) v[s] = m[ha][s].r ? m[ha][s].final_ratio : NAN;
    jstat(f, "final_val_ratio", v, c->nseeds);
    fputs("\n}\n", f);
    if (fclose(f) != 0) { fprintf(stderr, "hpt: cannot write '%s'\n", path); exit(1); }

    /* the table: printed and written as Markdown */
    snprintf(path, sizeof path, "%s/results.md", c->out);
    FILE *md = fopen(path, "w");
    if (!md) { fprintf(stderr, "hpt: cannot write '%s': %s\n", path, strerror(errno)); exit(1); }
    for (int pass = 0; pass < 2; pass++) {
        FILE *o = pass ? stdout : md;
        fprintf(o, "| arm | lr | final val (median) | vs baseline | time to target (median s) | speedup median [min, max] | "
                   "reached | updates | backward | predict steps | peak RSS MiB |\n");
        fprintf(o, "|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int a = 0; a < NARMS; a++) {
            if (!c->arms[a]) continue;
            double fv[MAX_SEEDS], fr[MAX_SEEDS], tt[MAX_SEEDS], sp[MAX_SEEDS], up[MAX_SEEDS], bw[MAX_SEEDS],
                pr[MAX_SEEDS], rs[MAX_SEEDS];
            for (int s = 0; s < c->nseeds; s++) {
                const armseed *x = &m[a][s];
                fv[s] = x->r ? x->r->final_val : NAN; fr[s] = x->r ? x->final_ratio : NAN;
                tt[s] = x->r ? x->ttt[2] : NAN;       sp[s] = x->r ? x->speedup[2] : NAN;
                up[s] = x->r ? x->r->updates : NAN;   bw[s] = x->r ? x->r->backward : NAN;
                pr[s] = x->r ? x->r->phase[2] : NAN;  rs[s] = x->r ? x->r->peak_rss / 1048576.0 : NAN;
            }
            stat4 sfv = stats(fv, c->nseeds), sfr = stats(fr, c->nseeds), stt = stats(tt, c->nseeds),
                  ssp = stats(sp, c->nseeds);
            char label[64];
            snprintf(label, sizeof label, a == ARM_HYBRID ? "%s (%s)" : "%s", arm_names[a], c->predictor);
            fprintf(o, "| %s | %g | %.4f | %+.2f%% | ", label, c->lrs[c->tuned[arm_lr_from[a]]], sfv.median,
                    100.0 * (sfr.median - 1.0));
            if (stt.n) fprintf(o, "%.1f | %.2fx [%.2f, %.2f] | ", stt.median, ssp.median, ssp.min, ssp.max);
            else fprintf(o, "never | n/a | ");
            fprintf(o, "%d/%d | %.0f | %.0f | %.0f | %.0f |\n", stt.n, sfv.n, stats(up, c->nseeds).median,
                    stats(bw, c->nseeds).median, stats(pr, c->nseeds).median, stats(rs, c->nseeds).median);
        }
        if (sn.n)
            fprintf(o, "\nTiming noise: %d hybrid-arm run%s never predicted and trained the baseline's exact steps; "
                       "their training clock, less the controller's own time, differs from the baseline's by %.1f%% median, "
                       "%.1f%% at most. "
                       "Speedups inside that band are noise, not prediction.\n",
                    sn.n, sn.n == 1 ? "" : "s", sn.median, sn.max);
        if (pass == 0) {
            fprintf(o, "\nTarget per seed: the tuned baseline's final val loss; time on the training clock "
                       "(evaluation excluded, probes and predictor included), interpolated between evaluations. "
                       "Seeds %llu..%llu; LR sweep on seed %llu.\n",
                    (unsigned long long)c->seed0, (unsigned long long)(c->seed0 + c->nseeds - 1),
                    (unsigned long long)c->seed0);
        }
    }
    fclose(md);
    run *first[NARMS] = {0};
    for (int a = 0; a < NARMS; a++) first[a] = c->arms[a] ? by[a][0] : NULL;
    if (first[ARM_BASELINE]) write_plots(c, first);
    fprintf(stderr, "compare: %s/results.json, results.md, val_vs_time.{svg,png}, val_vs_step.{svg,png}\n", c->out);
}

/* ---------------------------------------------------------------- the command */

/* Flags compare sets itself, refused in the pass-through. */
static const char *const owned[] = {"--lr", "--min-lr", "--seed", "--out", "--mode", "--ema",
                                    "--resume", "--save-interval", "--log-interval", "--keep-last"};

static void parse_lrs(compare *c, const char *s) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    c->nlrs = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (c->nlrs == MAX_LRS) die_usage("--lrs takes at most 16 values, got '%s'", s);
        float v = parse_float("--lrs", tok);
        if (!(v > 0 && v <= 10)) die_usage("--lrs values must be in (0, 10], got '%s'", tok);
        for (int i = 0; i < c->nlrs; i++) if (c->lrs[i] == v) die_usage("--lrs lists '%s' twice", tok);
        c->lrs[c->nlrs++] = v;
    }
    if (!c->nlrs) die_usage("--lrs needs at least one value, got '%s'", s);
}

static void parse_arms(compare *c, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    memset(c->arms, 0, sizeof c->arms);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int a = 0;
        while (a < NARMS && strcmp(tok, arm_names[a])) a++;
        if (a == NARMS) die_usage("--arms: unknown arm '%s' (baseline, hybrid, stale-adam, linear, ema)", tok);
        c->arms[a] = 1;
    }
    if (!c->arms[ARM_BASELINE]) die_usage("%s", "--arms must include baseline: it defines the target");
}

int cmd_compare(int argc, char **argv) {
    compare c;
    memset(&c, 0, sizeof c);
    c.nseeds = 3;
    c.seed0 = 1337;
    c.ema_decay = 0.99f;
    c.min_lr_ratio = -1;
    c.out = "runs/compare";
    c.predictor = "coast";
    for (int a = 0; a < NARMS; a++) c.arms[a] = 1;
    c.pass = cli_xrealloc(NULL, (size_t)(argc + 1) * sizeof(char *));
    c.hpass = cli_xrealloc(NULL, (size_t)(argc + 1) * sizeof(char *));
    const char *task = "text", *model = NULL;
    int threads = 0, max_iters = -1;
    /* compare's own flags; the rest is passed through as given */
    for (int i = 0; i < argc; i++) {
        char *s = argv[i], name[128];
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) { usage_compare(stdout); return 0; }
        if (strncmp(s, "--", 2)) die_usage("unexpected argument '%s'", s);
        const char *eq = strchr(s, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - s) : (int)strlen(s), s);
        int takes = strcmp(name, "--fresh") != 0;
        int hyb = hpt_cli_hybrid_flag(name, &takes);
        const char *val = eq ? eq + 1 : NULL;
        if (takes && !val) {
            if (i + 1 >= argc) die_usage("%s needs a value", name);
            val = argv[++i];
        }
        if (!strcmp(name, "--lrs")) parse_lrs(&c, val);
        else if (!strcmp(name, "--seeds")) c.nseeds = (int)parse_int(name, val, 1, MAX_SEEDS);
        else if (!strcmp(name, "--seed")) c.seed0 = (uint64_t)parse_int(name, val, 0, 1L << 40);
        else if (!strcmp(name, "--arms")) parse_arms(&c, val);
        else if (!strcmp(name, "--ema-decay")) {
            c.ema_decay = parse_float(name, val);
            if (!(c.ema_decay > 0 && c.ema_decay < 1)) die_usage("--ema-decay must be in (0, 1), got '%s'", val);
        }
        else if (!strcmp(name, "--min-lr-ratio")) {
            c.min_lr_ratio = parse_float(name, val);
            if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1)) die_usage("--min-lr-ratio must be in [0, 1], got '%s'", val);
        }
        else if (!strcmp(name, "--out")) c.out = val;
        else if (!strcmp(name, "--predictor")) {
            if (!strcmp(val, "stale-adam") || !strcmp(val, "linear"))
                die_usage("--predictor %s is a control arm of its own; the hybrid arm's predictor is coast or shrink", val);
            c.predictor = val;  /* hpt train validates the name */
        }
        else if (!strcmp(name, "--fresh")) { c.fresh = 1; if (eq) die_usage("%s takes no value", name); }
        else {
            for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
                if (!strcmp(name, owned[k]))
                    die_usage("%s is set by hpt compare for each run (use --lrs, --seed, --seeds, --out, --arms)", name);
            if (c.npass + c.nhpass + 2 > MAX_PASS) die_usage("%s", "too many options");
            char **dst = hyb ? c.hpass : c.pass;
            int *nd = hyb ? &c.nhpass : &c.npass;
            dst[(*nd)++] = s;  /* "--x=v" stays one word, "--x v" two */
            if (!eq && takes) dst[(*nd)++] = (char *)val;
            if (!strcmp(name, "--task")) task = val;
            if (!strcmp(name, "--model")) model = val;
            if (!strcmp(name, "--threads")) threads = (int)parse_int(name, val, 0, 1024);
            if (!strcmp(name, "--max-iters")) max_iters = (int)parse_int(name, val, 1, 100000000);
            if (!strcmp(name, "--eval-interval")) c.eval_interval_given = 1;
        }
    }
    hpt_train_config d;
    hpt_train_config_default_for(&d, task, model);
    if (!c.nlrs) { c.lrs[0] = d.lr; c.nlrs = 1; }
    if (c.min_lr_ratio < 0) c.min_lr_ratio = d.min_lr / d.lr;
    c.max_iters = max_iters > 0 ? max_iters : d.epochs > 0 ? -1 : d.max_iters;
    if (c.max_iters < 0 && !c.eval_interval_given) c.eval_interval_given = 1;  /* epochs: the task's cadence */
    c.threads = threads;
    c.tty = isatty(2);
    unsigned char *exe;
    size_t exe_n;
    if (hpt_read_file("/proc/self/exe", &exe, &exe_n) == HPT_OK) {
        c.binary_crc = hpt_crc32(0, exe, exe_n);
        free(exe);
    }
    c.t0 = now_s();
    /* the plan: the sweep (first seed), then each arm's tuned runs */
    int sweep_arms = 1 + c.arms[ARM_HYBRID], narms = 0;
    for (int a = 0; a < NARMS; a++) narms += c.arms[a];
    c.planned = sweep_arms * c.nlrs + (narms - sweep_arms) + narms * (c.nseeds - 1);
    if (hpt_mkdir_p(c.out) != HPT_OK) die_status(HPT_ERR_IO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "compare: %d runs: arms", c.planned);
    for (int a = 0; a < NARMS; a++) if (c.arms[a]) fprintf(stderr, " %s", arm_names[a]);
    fprintf(stderr, "; lrs");
    for (int i = 0; i < c.nlrs; i++) fprintf(stderr, " %g", c.lrs[i]);
    fprintf(stderr, " (min-lr ratio %g); seeds %llu..%llu; out %s\n", c.min_lr_ratio, (unsigned long long)c.seed0,
            (unsigned long long)(c.seed0 + c.nseeds - 1), c.out);

    /* 1. the sweep */
    for (int a = ARM_BASELINE; a <= ARM_HYBRID; a++) {
        if (!c.arms[a]) { c.tuned[a] = c.tuned[ARM_BASELINE]; continue; }
        double best = INFINITY;
        for (int i = 0; i < c.nlrs; i++) {
            run *r = do_run(&c, a, c.lrs[i], c.seed0);
            if (r->final_val < best) { best = r->final_val; c.tuned[a] = i; }
        }
        if (c.nlrs > 1)
            fprintf(stderr, "compare: tuned %s lr %g (final val %.4f on seed %llu)\n", arm_names[a],
                    c.lrs[c.tuned[a]], best, (unsigned long long)c.seed0);
    }
    /* 2. every arm at its tuned LR on every seed */
    for (int s = 0; s < c.nseeds; s++)
        for (int a = 0; a < NARMS; a++)
            if (c.arms[a]) do_run(&c, a, c.lrs[c.tuned[arm_lr_from[a]]], c.seed0 + (uint64_t)s);
    report(&c);
    for (int i = 0; i < c.nruns; i++) {
        run *r = &c.runs[i];
        free(r->step); free(r->clock); free(r->val); free(r->bstep); free(r->bclock);
    }
    free(c.runs);
    free(c.pass);
    free(c.hpass);
    return 0;
}
