/*
 * compare_run.c — one run of `hpt compare`: a child `hpt train` process
 * (same binary, its stderr to DIR/train.log, progress polled from its
 * metrics), or a finished identical run reused, or a stopped one resumed.
 * A run is identical when its arguments, the hpt binary (CRC) and the data
 * (the identity a checkpoint records, size and CRC; a fashion-mnist
 * directory's files by size, mtime and CRC) are: all in
 * DIR/compare-args.txt, the reuse key.
 */
#include "cli.h"
#include "compare.h"
#include "../src/base/base.h"    /* hpt_mkdir_p, hpt_save_atomic */
#include "../src/data/shards.h"   /* hpt_data_identity */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- small helpers */

static double or_zero(double v) { return isfinite(v) ? v : 0.0; }

static hpt_status put_text(FILE *f, void *text) {
    return fputs(text, f) < 0 ? hpt_fail(HPT_ERR_IO, "write failed") : HPT_OK;
}

/* Writes PATH whole or not at all (write, fsync, rename): an interrupted
 * compare never leaves a torn results file or reuse key. */
void compare_save_text(const char *path, const char *text) {
    hpt_status st = hpt_save_atomic(path, put_text, (void *)text);
    if (st != HPT_OK) die_status(st);
}

/* ---------------------------------------------------------------- the reuse key */

/* The arguments of one child run (NULL-terminated, strings owned by the
 * caller's scratch). */
typedef struct argv_buf { char *v[MAX_PASS * 2 + 48]; int n; char num[8][64]; } argv_buf;

static uint32_t file_crc(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static unsigned char buf[1 << 16];
    uint32_t crc = 0;
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) crc = hpt_crc32(crc, buf, n);
    fclose(f);
    return crc;
}

/* The data's identity, so that a finished run is not reused after its data
 * changed. Text files and token shards: the library's, the one a
 * checkpoint records (hpt_data_identity: every file the run reads, a glob's
 * matches and the validation files found beside them included). Anything
 * else (a fashion-mnist directory): size, mtime and CRC-32 of each regular
 * file in it. Missing or unreadable data adds nothing: the run itself
 * reports it. */
static void data_identity(FILE *key, const char *path) {
    uint64_t bytes;
    uint32_t crc;
    if (hpt_data_identity(path, &bytes, &crc) == HPT_OK) {
        fprintf(key, " [data %s: %llu bytes, crc32 %08x]", path, (unsigned long long)bytes, crc);
        return;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    if (S_ISREG(sb.st_mode)) {
        fprintf(key, " [data %s: %lld bytes, mtime %lld.%09ld, crc32 %08x]", path, (long long)sb.st_size,
                (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec, file_crc(path));
        return;
    }
    struct dirent **names;
    int n = S_ISDIR(sb.st_mode) ? scandir(path, &names, NULL, alphasort) : -1;
    for (int i = 0; i < n; i++) {
        char child[4400];
        snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
        if (stat(child, &sb) == 0 && S_ISREG(sb.st_mode)) data_identity(key, child);
        free(names[i]);
    }
    if (n >= 0) free(names);
}

/* What besides the arguments decides a run: the hpt binary (a rebuilt one
 * does not reuse old runs) and the data. */
char *compare_reuse_tag(const char *data) {
    char *tag = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&tag, &len);
    if (!f) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    unsigned char *exe;
    size_t exe_n;
    if (hpt_read_file("/proc/self/exe", &exe, &exe_n) == HPT_OK) {
        fprintf(f, " [hpt binary crc32 %08x]", hpt_crc32(0, exe, exe_n));
        free(exe);
    }
    if (data) data_identity(f, data);
    fclose(f);
    return tag;
}

/* The arguments as one line, then the tag: a finished run whose
 * compare-args.txt holds the same is reused. */
static char *reuse_key(const compare *c, const argv_buf *a) {
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    for (int i = 1; i < a->n; i++) fprintf(f, "%s%s", i > 1 ? " " : "", a->v[i]);
    fputs(c->reuse_tag, f);
    fclose(f);
    return key;
}

/* ---------------------------------------------------------------- one run */

static void build_argv(const compare *c, const run *r, argv_buf *a) {
    const compare_arm *arm = &compare_arms[r->arm];
    a->n = 0;
    a->v[a->n++] = "hpt";
    a->v[a->n++] = "train";
    for (int i = 0; i < c->npass; i++)
        if (!(r->iters && c->pass_steps[i])) a->v[a->n++] = c->pass[i];
    if (ARM_HYBRID_MODE(r->arm)) {
        a->v[a->n++] = "--mode";
        a->v[a->n++] = "hybrid";
        for (int i = 0; i < c->nhpass; i++) a->v[a->n++] = c->hpass[i];
        a->v[a->n++] = "--predictor";
        a->v[a->n++] = (char *)(arm->predictor ? arm->predictor : c->predictor);
    }
    for (int i = 0; arm->flags[i]; i++) a->v[a->n++] = (char *)arm->flags[i];
    if (ARM_AVERAGED(r->arm)) {
        snprintf(a->num[0], sizeof a->num[0], "%g", c->ema_decay);
        a->v[a->n++] = "--ema";
        a->v[a->n++] = a->num[0];
    }
    const compare_sched *sc = r->sched >= 0 ? &compare_scheds[c->scheds[r->sched]] : NULL;
    for (int i = 0; sc && sc->args[i]; i++) a->v[a->n++] = (char *)sc->args[i];
    snprintf(a->num[1], sizeof a->num[1], "%g", r->lr);
    snprintf(a->num[2], sizeof a->num[2], "%g", sc && sc->to_zero ? 0.0f : r->lr * c->min_lr_ratio);
    snprintf(a->num[3], sizeof a->num[3], "%llu", (unsigned long long)r->seed);
    a->v[a->n++] = "--lr"; a->v[a->n++] = a->num[1];
    if (ARM_SCHEDULE_FREE(r->arm)) {  /* no decay to give it: the rate is constant after the warmup */
        a->v[a->n++] = "--optimizer"; a->v[a->n++] = "schedule-free";
    } else {
        if (ARM_MUON_OPT(r->arm)) {  /* AdamW's rate: the run's own (RMS matching) or the tuned baseline's */
            snprintf(a->num[6], sizeof a->num[6], "%g", arm->adam_tuned ? compare_arm_lr(c, ARM_BASELINE) : r->lr);
            a->v[a->n++] = "--optimizer"; a->v[a->n++] = "muon";
            a->v[a->n++] = "--muon-scale"; a->v[a->n++] = (char *)arm->muon_scale;
            a->v[a->n++] = "--adam-lr"; a->v[a->n++] = a->num[6];
        }
        a->v[a->n++] = "--min-lr"; a->v[a->n++] = a->num[2];
    }
    a->v[a->n++] = "--seed"; a->v[a->n++] = a->num[3];
    if (r->iters) {  /* a budget run: the schedule follows --max-iters (warmup kept, decay compressed) */
        snprintf(a->num[5], sizeof a->num[5], "%d", r->iters);
        a->v[a->n++] = "--max-iters"; a->v[a->n++] = a->num[5];
    }
    if (r->eval_every) {
        snprintf(a->num[4], sizeof a->num[4], "%d", r->eval_every);
        a->v[a->n++] = "--eval-interval"; a->v[a->n++] = a->num[4];
    }
    a->v[a->n++] = "--log-interval"; a->v[a->n++] = "100000000";  /* the log file gets the summary lines */
    a->v[a->n++] = "--out"; a->v[a->n++] = (char *)r->dir;
    a->v[a->n] = NULL;
}

/* The arguments that continue a stopped run from its newest checkpoint. */
static void resume_argv(const run *r, argv_buf *a) {
    a->n = 0;
    a->v[a->n++] = "hpt"; a->v[a->n++] = "train"; a->v[a->n++] = "--resume"; a->v[a->n++] = (char *)r->dir;
    a->v[a->n++] = "--log-interval"; a->v[a->n++] = "100000000";
    a->v[a->n] = NULL;
}

/* The val curve (finite evaluations only) and the Predict phases, each
 * from the line before the phase to its own, in steps and clock. */
static void take_curve(run *r, const hpt_run_metrics *m) {
    const double *v = ARM_AVERAGED(r->arm) ? m->ema_val_loss : m->val_loss;
    size_t b = (size_t)m->n * sizeof(double);
    r->step = cli_xrealloc(r->step, b); r->clock = cli_xrealloc(r->clock, b); r->val = cli_xrealloc(r->val, b);
    r->upd = cli_xrealloc(r->upd, b);
    r->bstep = cli_xrealloc(r->bstep, 2 * b); r->bclock = cli_xrealloc(r->bclock, 2 * b);
    r->n = r->nb = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->predict[i]) {
            r->bstep[2 * r->nb] = i ? m->step[i - 1] : 0; r->bstep[2 * r->nb + 1] = m->step[i];
            r->bclock[2 * r->nb] = i ? m->time_s[i - 1] : 0; r->bclock[2 * r->nb + 1] = m->time_s[i];
            r->nb++;
        }
        if (isfinite(v[i])) {
            r->step[r->n] = m->step[i]; r->clock[r->n] = m->time_s[i]; r->upd[r->n] = m->updates[i]; r->val[r->n] = v[i];
            r->n++;
        }
    }
}

static void take_summary(run *r, const hpt_run_summary *s) {
    r->final_val = ARM_AVERAGED(r->arm) ? s->final_ema_val_loss : s->final_val_loss;
    r->train_s = s->train_s;
    r->steps = s->steps;
    r->updates = s->optimizer_updates;
    r->backward = s->model_backward_calls;
    r->probes = or_zero(s->probe_passes);
    r->peak_rss = s->peak_rss_bytes;
    r->pred_s = or_zero(s->predictor_overhead_s);
    r->ctrl_s = or_zero(s->controller_overhead_s);
    int hybrid = 0;
    for (int k = 0; k < 4; k++) { r->phase[k] = s->phase_steps[k]; hybrid |= !isnan(s->phase_steps[k]); }
    if (!hybrid) { r->phase[0] = r->phase[2] = r->phase[3] = 0; r->phase[1] = s->steps; }  /* all steps full */
    r->jumps = or_zero(s->outer_jumps[0]);
}

/* Reads a finished run's directory back; 0 if it is incomplete. */
static int load_run(run *r) {
    hpt_rundir d;
    if (hpt_rundir_open(&d, r->dir) != HPT_OK) return 0;
    int ok = d.summary.present;
    if (ok) { take_curve(r, &d.metrics); take_summary(r, &d.summary); }
    hpt_rundir_free(&d);
    return ok && r->n > 0 && isfinite(r->final_val);
}

/* "baseline", or with --schedules "baseline/wsd", and a budget run's
 * fraction ("baseline@0.5"), for the progress lines */
static const char *label_of(const compare *c, const run *r) {
    static char buf[80];
    snprintf(buf, sizeof buf, "%s%s%s", compare_arms[r->arm].name, r->sched >= 0 ? "/" : "",
             r->sched >= 0 ? compare_sched_name(c, r->sched) : "");
    if (r->iters) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "@%g", r->budget);
    return buf;
}

/* The progress line while children train: the oldest running run's step
 * (and how many more train beside it), elapsed time, and an ETA from the
 * finished runs' mean wall time shared over the --jobs slots. */
static void show_progress(compare *c) {
    const run *r = NULL;
    for (int i = 0; i < c->nruns && !r; i++) if (c->runs[i].pid) r = &c->runs[i];
    if (!r) return;
    int step = hpt_rundir_last_step(r->dir);
    double run_t = hpt_now() - r->t0;
    double per_run = c->run_wall_n ? c->run_wall_sum / c->run_wall_n : NAN;
    int total = r->iters ? r->iters : c->max_iters;
    double left_this = step > 0 && total > 0 ? run_t / step * (total - step) : per_run;
    int after = c->planned - c->finished - c->running;
    double eta = (isfinite(left_this) ? left_this : 0) + (isfinite(per_run) ? per_run : 0) * after / c->jobs;
    char e[32] = "?";
    if (isfinite(per_run) || step > 0) fmt_eta(e, sizeof e, eta);
    char of[24] = "", more[32] = "";
    if (total > 0) snprintf(of, sizeof of, "/%d", total);  /* epochs: the count is the child's */
    if (c->running > 1) snprintf(more, sizeof more, " (+%d beside it)", c->running - 1);
    fprintf(stderr, "\r[%d/%d] %-10s lr %-8g seed %-6llu step %d%s%s | elapsed %.0f s | ETA %s   \033[K",
            c->finished + 1, c->planned, label_of(c, r), r->lr, (unsigned long long)r->seed, step, of, more,
            hpt_now() - c->t0, e);
}

/* The children training now, for Ctrl-C: each gets SIGTERM, checkpoints
 * and exits, and the same command continues them. */
static volatile sig_atomic_t g_child[MAX_JOBS], g_stop = 0;
static void stop_children(void) {
    for (int i = 0; i < MAX_JOBS; i++)
        if (g_child[i] > 0) kill((pid_t)g_child[i], SIGTERM);
}
static void on_stop(int sig) {
    (void)sig;
    g_stop = 1;
    stop_children();
}

void compare_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void track_child(pid_t pid, pid_t was) {
    for (int i = 0; i < MAX_JOBS; i++)
        if (g_child[i] == was) { g_child[i] = pid; return; }
    HPT_ASSERT(!"more children than MAX_JOBS");
}

/* Starts `hpt train` with argv a as r's child, its stderr to DIR/train.log
 * (appended to when resuming). */
static void spawn_child(compare *c, run *r, argv_buf *a, int resume) {
    char logp[4400];
    snprintf(logp, sizeof logp, "%s/train.log", r->dir);
    r->t0 = hpt_now();
    pid_t pid = fork();
    if (pid < 0) { fprintf(stderr, "hpt: fork: %s\n", strerror(errno)); exit(1); }
    if (pid == 0) {
        /* if compare itself is killed, the run checkpoints and stops too */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        FILE *lf = freopen(logp, resume ? "a" : "w", stderr);
        if (!lf || !freopen("/dev/null", "w", stdout)) _exit(127);
        execv("/proc/self/exe", a->v);
        fprintf(stderr, "hpt compare: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    r->pid = (int)pid;
    track_child(pid, 0);
    c->running++;
}

/* A failed run: its status and the last lines of its log (the error is
 * the last thing a run prints); exits 1. */
static void die_run_failed(const run *r, int status) {
    char logp[4400];
    snprintf(logp, sizeof logp, "%s/train.log", r->dir);
    fprintf(stderr, "hpt: the run in '%s' failed (%s %d); its log, %s, ends:\n", r->dir,
            WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
            logp);
    char *log = cli_read_text(logp);
    if (log) {
        size_t n = strlen(log);
        int lines = 0;
        while (n > 0 && lines < 6) if (log[--n] == '\n') lines++;
        fprintf(stderr, "%s", log + (n ? n + 1 : 0));
        free(log);
    }
    exit(1);
}

/* The --eval-interval compare gives a run: text tasks evaluate every
 * max-iters/20 steps of the run's own budget (each budget run's curve as
 * fine as the full one's; the final val, what a budget run is measured
 * by, is evaluated at the end whatever the interval); a task trained by
 * epochs keeps evaluating once an epoch (steps / epochs of the full run),
 * which hpt train does itself only under --epochs. 0: none to give. */
static int eval_every(const compare *c, int iters, double full_steps) {
    if (c->epoch_cadence) return iters && full_steps >= c->epochs ? (int)(full_steps / c->epochs) : 0;
    if (c->eval_interval_given) return 0;
    int total = iters ? iters : c->max_iters;
    return total >= 20 ? total / 20 : 1;
}

static run *add_run(compare *c, int arm, int sched, float lr, uint64_t seed, double budget) {
    if (c->nruns == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 32;
        c->runs = cli_xrealloc(c->runs, (size_t)c->cap * sizeof(run));
    }
    run *r = &c->runs[c->nruns++];
    memset(r, 0, sizeof *r);
    r->arm = arm; r->sched = sched; r->lr = lr; r->seed = seed; r->budget = budget;
    /* without --schedules, the names of before it (finished runs stay reusable) */
    char sn[40] = "", bn[40] = "";
    if (sched >= 0) snprintf(sn, sizeof sn, "-%s", compare_sched_name(c, sched));
    if (budget < 1) snprintf(bn, sizeof bn, "-b%g", budget);
    snprintf(r->dir, sizeof r->dir, "%s/runs/%s%s-lr%g-s%llu%s", c->out, compare_arms[arm].name, sn, lr,
             (unsigned long long)seed, bn);
    return r;
}

/* Reuses the finished run in r->dir when its reuse key matched: 1 if it did. */
static int try_reuse(compare *c, run *r, int same_key) {
    if (!same_key || !load_run(r)) return 0;
    c->finished++;
    fprintf(stderr, "[%d/%d] %-10s lr %-8g seed %-6llu reused %s: final val %.4f, train clock %.1f s\n",
            c->finished, c->planned, label_of(c, r), r->lr, (unsigned long long)r->seed, r->dir, r->final_val,
            r->train_s);
    return 1;
}

/* Runs one arm under one schedule at one LR and seed (or reuses an
 * identical finished run, or resumes an identical stopped one, bit for bit,
 * training clock included). */

/* After Ctrl-C (or SIGTERM): every child checkpoints and exits, then
 * compare does; the same command continues. */
static void stop_if_asked(compare *c) {
    if (!g_stop) return;
    compare_wait_all(c);
    fprintf(stderr, "hpt: compare interrupted; run the same command again to continue (finished runs are reused)\n");
    exit(1);
}

/* r's child has ended: its slot is free. */
static void forget_child(compare *c, run *r) {
    track_child(0, (pid_t)r->pid);
    r->pid = 0;
    c->running--;
}

/* A child has ended: its run is read back, or compare stops (Ctrl-C, or
 * the run failed: its log's last lines). */
static void finish_run(compare *c, run *r, int status) {
    forget_child(c, r);
    r->wall_s = hpt_now() - r->t0;
    if (c->tty) fprintf(stderr, "\r\033[K");
    stop_if_asked(c);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !load_run(r)) {
        stop_children();  /* they checkpoint: a rerun continues them */
        die_run_failed(r, status);
    }
    c->finished++;
    c->run_wall_sum += r->wall_s;
    c->run_wall_n++;
    char eta[32];
    int after = c->planned - c->finished;
    fmt_eta(eta, sizeof eta, c->run_wall_sum / c->run_wall_n * after / c->jobs);
    fprintf(stderr, "[%d/%d] %-10s lr %-8g seed %-6llu final val %.4f, train clock %.1f s (wall %.1f s), ETA %s\n",
            c->finished, c->planned, label_of(c, r), r->lr, (unsigned long long)r->seed, r->final_val, r->train_s,
            r->wall_s, eta);
}

/* Waits until one child ends and finishes its run (the progress line
 * meanwhile, on a terminal). */
static void reap_one(compare *c) {
    HPT_ASSERT(c->running > 0);
    for (;;) {
        int status = 0;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w < 0 && errno != EINTR) { fprintf(stderr, "hpt: waitpid: %s\n", strerror(errno)); exit(1); }
        for (int i = 0; w > 0 && i < c->nruns; i++)
            if (c->runs[i].pid == (int)w) { finish_run(c, &c->runs[i], status); return; }
        if (w > 0) continue;  /* not one of ours */
        if (c->tty) show_progress(c);
        usleep(250000);  /* polling costs nothing measurable against a run */
    }
}

void compare_wait_all(compare *c) {
    int stopping = g_stop;
    while (c->running > 0) {
        if (!stopping) { reap_one(c); continue; }
        /* Ctrl-C: the children checkpoint and exit; nothing more is read */
        int status;
        pid_t w = waitpid(-1, &status, 0);
        if (w < 0 && errno == ECHILD) break;
        for (int i = 0; w > 0 && i < c->nruns; i++)
            if (c->runs[i].pid == (int)w) forget_child(c, &c->runs[i]);
    }
}

/* The steps of arm's full run at seed, which its budget runs are fractions
 * of: every full run of a comparison has the same (the same --max-iters or
 * --epochs over the same data), so while this one trains beside others a
 * finished one's count serves; with none finished, it waits for this one. */
static double full_run_steps(compare *c, int arm, int sched, float lr, uint64_t seed) {
    int k = compare_start(c, arm, sched, lr, seed, 1);
    while (c->runs[k].pid) {
        for (int i = 0; i < c->nruns; i++)
            if (c->runs[i].budget == 1 && !c->runs[i].pid && c->runs[i].steps > 0) return c->runs[i].steps;
        reap_one(c);
    }
    return c->runs[k].steps;
}

/* The index in c->runs of a run started (or reused) before; -1 if none. */
static int find_run(const compare *c, int arm, int sched, float lr, uint64_t seed, double budget) {
    for (int i = 0; i < c->nruns; i++) {
        const run *q = &c->runs[i];
        if (q->arm == arm && q->sched == sched && q->lr == lr && q->seed == seed && q->budget == budget) return i;
    }
    return -1;
}

int compare_start(compare *c, int arm, int sched, float lr, uint64_t seed, double budget) {
    int found = find_run(c, arm, sched, lr, seed, budget);
    if (found >= 0) return found;
    /* a budget run's step count is its full run's (epochs resolved by hpt train) */
    int iters = 0;
    double full_steps = NAN;
    if (budget < 1) {
        full_steps = full_run_steps(c, arm, sched, lr, seed);
        iters = (int)lround(budget * full_steps);
        if (iters < 1) iters = 1;
    }
    run *r = add_run(c, arm, sched, lr, seed, budget);
    int idx = (int)(r - c->runs);
    r->iters = iters;
    r->eval_every = eval_every(c, iters, full_steps);
    argv_buf a;
    build_argv(c, r, &a);
    char *key = reuse_key(c, &a), path[4400], ck[4400];
    snprintf(path, sizeof path, "%s/compare-args.txt", r->dir);
    char *prev = c->fresh ? NULL : cli_read_text(path);
    int same = prev && !strcmp(prev, key);
    free(prev);
    if (try_reuse(c, r, same)) { free(key); return idx; }
    int resume = same && hpt_rundir_newest_checkpoint(r->dir, ck, sizeof ck) >= 0;
    if (resume) resume_argv(r, &a);
    else {
        /* a fresh run: no stale summary may be read back as its result */
        snprintf(ck, sizeof ck, "%s/summary.json", r->dir);
        unlink(ck);
        /* and it replaces whatever an earlier attempt left (not in the reuse key) */
        a.v[a.n++] = "--overwrite";
        a.v[a.n] = NULL;
    }
    if (hpt_mkdir_p(r->dir) != HPT_OK) die_status(HPT_ERR_IO);
    compare_save_text(path, key);
    free(key);
    while (c->running >= c->jobs) reap_one(c);  /* a free slot (reaping adds no run: r stays put) */
    stop_if_asked(c);  /* no new run after Ctrl-C */
    spawn_child(c, r, &a, resume);
    return idx;
}

/* Runs one arm under one schedule at one LR and seed (or reuses an
 * identical finished run, or resumes an identical stopped one, bit for bit,
 * training clock included), and waits for it. */
run *compare_run(compare *c, int arm, int sched, float lr, uint64_t seed, double budget) {
    int k = compare_start(c, arm, sched, lr, seed, budget);
    while (c->runs[k].pid) reap_one(c);
    return &c->runs[k];
}

void compare_enqueue(compare *c, int arm, int sched, float lr, uint64_t seed, double budget, int first) {
    if (c->nqueue == c->qcap) {
        c->qcap = c->qcap ? 2 * c->qcap : 32;
        c->queue = cli_xrealloc(c->queue, (size_t)c->qcap * sizeof(want));
    }
    int at = first ? 0 : c->nqueue;
    /* ahead of the queue, behind the runs queued ahead before it (an
     * extension's runs under each schedule stay in their order) */
    while (first && at < c->nqueue && c->queue[at].first) at++;
    memmove(c->queue + at + 1, c->queue + at, (size_t)(c->nqueue - at) * sizeof(want));
    c->queue[at] = (want){arm, sched, lr, seed, budget, first};
    c->nqueue++;
}

void compare_start_queued(compare *c) {
    while (c->nqueue && c->running < c->jobs) {
        want w = c->queue[0];
        memmove(c->queue, c->queue + 1, (size_t)--c->nqueue * sizeof(want));
        compare_start(c, w.arm, w.sched, w.lr, w.seed, w.budget);
    }
}

void compare_reap(compare *c) { reap_one(c); }

int compare_done(const compare *c, int arm, int sched, float lr, uint64_t seed, double budget) {
    int k = find_run(c, arm, sched, lr, seed, budget);
    return k >= 0 && !c->runs[k].pid;
}
