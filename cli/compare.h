/*
 * compare.h — what the files of `hpt compare` share: the arms, one run, the
 * comparison. compare.c parses the flags and runs the protocol,
 * compare_run.c runs (or reuses) one `hpt train` child, compare_results.c
 * measures the runs into results.json and the plots, compare_md.c renders
 * results.json as Markdown.
 */
#ifndef HPT_CLI_COMPARE_H
#define HPT_CLI_COMPARE_H

#include "hpt.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

/* schedule-free: schedule-free AdamW (--optimizer schedule-free), its own
 * LR sweep (no schedules: its rate is constant after the warmup);
 * hybrid-ema: the hybrid's run with an EMA of the weights, evaluated at the
 * average as the ema arm is; hybrid-sf: the hybrid (its outer step, the
 * hybrid flags passed through) on schedule-free AdamW at the schedule-free
 * arm's tuned LR (it needs that arm); outer-snoo and outer-124m: the outer
 * step at its authors' published settings for small models, on
 * the tuned baseline's schedule and LR (SNOO on GPT-2 Medium in
 * modded-nanogpt: outer lr 0.68, momentum 0.37, every 28 steps; a 124M
 * outer-Nesterov wrapper: 0.7, 0.5, every 30), inner state kept, their
 * settings after the hybrid flags passed through (the last flag wins).
 * muon: --optimizer muon with Moonlight's RMS matching (--muon-scale rms,
 * --adam-lr the same rate), so that one LR grid fits Muon and AdamW alike
 * and the sweep tunes both; its own LR sweep, under every --schedules
 * schedule as the baseline's. hybrid-muon: the hybrid's outer step on Muon
 * (--predictor outer, the hybrid flags passed through) at the muon arm's
 * tuned LR and schedule (it needs that arm). muon-ns3: Muon with 3
 * Newton-Schulz steps (--muon-ns-steps 3, the reference's 5 otherwise) at
 * the muon arm's tuned LR and schedule (it needs that arm): what the
 * published fewer-step variant saves in time and costs in loss.
 * muon-spectral: Muon at Keller Jordan's own scale (--muon-scale spectral,
 * the train default), so that Muon's rate is its own and AdamW's
 * (--adam-lr, the embeddings, head, gains and biases) the tuned
 * baseline's: its sweep starts once the baseline is tuned, over --lrs x
 * SPECTRAL_GRID (below) x --schedules.
 * None is in the default --arms (add them), so an old command runs the
 * same runs. */
enum { ARM_BASELINE, ARM_HYBRID, ARM_STALE, ARM_LINEAR, ARM_EMA, ARM_SF, ARM_HEMA, ARM_HSF, ARM_SNOO, ARM_O124,
       ARM_MUON, ARM_HMUON, ARM_MNS3, ARM_MSPEC, NARMS };
/* An arm is a row of compare_arms (compare.c): what it trains beyond the
 * run's own flags and where its rate comes from. A new arm is a row (and
 * its name in the enum above). */
enum { ARM_K_HYBRID = 1,  /* --mode hybrid (it gets the hybrid-only flags) */
       ARM_K_SF = 2,      /* --optimizer schedule-free (constant rate after the warmup) */
       ARM_K_MUON = 4,    /* --optimizer muon */
       ARM_K_EMA = 8 };   /* --ema, measured at the averaged weights */
typedef struct {
    const char *name;
    unsigned kind;           /* ARM_K_* */
    int lr_from;             /* the arm whose tuned rate and schedule it trains at; itself: it sweeps
                              * its own on the first seed */
    float grid;              /* a sweeping arm's first rates: --lrs x this */
    const char *muon_scale;  /* a Muon arm's --muon-scale */
    int adam_tuned;          /* a Muon arm's --adam-lr: 0, the run's own rate (RMS matching); 1, the tuned
                              * baseline's, so its sweep waits for the baseline's */
    const char *predictor;   /* a hybrid arm's own --predictor (NULL: the --predictor given) */
    const char *flags[8];    /* its own train flags, after the passed-through ones (and the hybrid
                              * flags), so that they win */
} compare_arm;
extern const compare_arm compare_arms[NARMS];
#define ARM_SWEEPS(a) (compare_arms[a].lr_from == (a))
#define ARM_HYBRID_MODE(a) (compare_arms[a].kind & ARM_K_HYBRID)
#define ARM_SCHEDULE_FREE(a) (compare_arms[a].kind & ARM_K_SF)
#define ARM_MUON_OPT(a) (compare_arms[a].kind & ARM_K_MUON)
#define ARM_AVERAGED(a) (compare_arms[a].kind & ARM_K_EMA)
/* muon-spectral's grid: --lrs x 4. RMS matching scales a hidden
 * matrix's update by 0.2 sqrt(max(rows, cols)), the spectral scale by
 * max(1, rows/cols)^0.5: 0.2 sqrt(cols) times less, 2.3x to 4.5x on the
 * C128 GPT's matrices, 3.9x to 7.8x on the C384's, so a spectral rate
 * about 4x the RMS-matched one moves the weights as far (the sweep's
 * extension finds the rest); 4, a power of two, keeps the grid's rates
 * exact multiples of --lrs (8e-3 is 4 x 2e-3 to the bit), so rates the
 * arms share fall in one column of the sweep table. */
#define SPECTRAL_GRID 4.0f

#define MAX_LRS 16     /* --lrs values */
#define MAX_EXTEND 8   /* --extend-sweep: at most this many extensions per arm */
#define NSWEEPING 5    /* the arms that sweep (checked at start) */
/* --lrs, muon-spectral's --lrs x SPECTRAL_GRID and every arm's extensions */
#define LRS_CAP (2 * MAX_LRS + NSWEEPING * MAX_EXTEND)
#define MAX_SCHEDS 8
#define MAX_SEEDS 16
#define MAX_PASS 256
#define MAX_JOBS 64   /* --jobs: children training at once */
#define NLEVELS 3    /* targets: 1/3, 2/3 of the baseline's evaluations, its final val */
#define NBUDGETS 4   /* training-clock budgets: 25, 50, 75, 100% of the baseline's */
#define MAX_BUDGETS 16  /* --budgets: fractions of the full run's steps, 1 included */

/* --schedules: a name, the train flags it stands for (NULL-terminated),
 * and whether it decays to 0 (else to lr x --min-lr-ratio). */
typedef struct compare_sched { const char *name; const char *args[8]; int to_zero; } compare_sched;
extern const compare_sched compare_scheds[];
extern const int compare_nscheds;

/* One finished `hpt train` run, as read back from its files. */
typedef struct run {
    int arm;
    int sched;   /* index into compare.scheds; -1 without --schedules */
    float lr;
    uint64_t seed;
    double budget;   /* --budgets: the fraction of the full run's steps (1: the full run) */
    int iters;       /* a budget run's --max-iters (0: the full run's own) */
    int eval_every;  /* a budget run's --eval-interval set by compare (0: none) */
    char dir[4200];
    /* the val curve at each evaluation (the ema arm: the averaged weights) */
    int n;
    double *step, *clock, *val;
    double *upd;   /* optimizer updates at each evaluation (hpt_run_metrics.updates) */
    /* Predict phases: [x0, x1] in steps and in training-clock seconds */
    int nb;
    double *bstep, *bclock;
    double final_val, train_s, wall_s;
    double steps;    /* the step counter at the end (summary.json steps): max-iters, epochs resolved */
    double updates, backward, probes, peak_rss;
    double pred_s, ctrl_s;  /* the hybrid's time in Predict phases and on its bookkeeping (0: no hybrid) */
    double phase[4];  /* warmup, full, predict, correct steps (hybrid arms) */
    double jumps;     /* the outer predictor's jumps kept (0: none or another predictor) */
    int pid;          /* its child while it trains (--jobs: several at once); 0 when done */
    double t0;        /* when its child started (hpt_now) */
} run;

typedef struct compare {
    /* flags */
    char **pass; int npass;          /* hpt train flags passed through to every run */
    char *pass_steps;                /* 1 for the words of pass that set the budget (--max-iters,
                                      * --epochs): a budget run gives its own --max-iters instead */
    char **hpass; int nhpass;        /* hybrid-only flags, for the hybrid arms */
    float lrs[LRS_CAP]; int nlrs;    /* --lrs, then the rates an extension or muon-spectral's grid added
                                      * (the sweep table's columns) */
    float given_lrs[MAX_LRS]; int ngiven;   /* --lrs as given: the first rates of every sweep */
    int extend_cap;                  /* --extend-sweep: extensions per sweeping arm (0: none) */
    int scheds[MAX_SCHEDS]; int nscheds;  /* --schedules: indices into compare_scheds (0: not given) */
    const char *train_schedule;      /* without --schedules: the runs' --schedule (default: the task's, linear to 0) */
    int sched_flags_given;           /* --schedule, --decay-frac or --cooldown passed through */
    int nseeds;
    uint64_t seed0;
    int arms[NARMS];                 /* 1: arm requested */
    float ema_decay, min_lr_ratio;
    const char *out;
    const char *predictor;           /* the hybrid arm's (--predictor; default the hybrid's, outer) */
    const char *data;                /* --data as given (NULL: the task's default) */
    double budgets[MAX_BUDGETS]; int nbudgets;  /* --budgets, ascending, 1 last (0: no budget sweep) */
    int max_iters, eval_interval_given, fresh, threads;
    int jobs;                        /* --jobs: runs trained side by side (1: one at a time) */
    int running;                     /* children training now */
    int epochs;                      /* a task trained by --epochs: their count (0: by --max-iters) */
    int epoch_cadence;               /* evaluation every epoch, the task's own (no --eval-interval given) */
    char *reuse_tag;                 /* the hpt binary's and the data's identity, for the reuse key */
    /* runs */
    run *runs; int nruns, cap;
    struct want *queue; int nqueue, qcap;   /* runs decided but not started (compare_enqueue) */
    float tuned_lr[NARMS];           /* each sweeping arm's tuned LR (a rate, not an index into lrs: an
                                      * extension below every rate moves the indices) */
    /* the rates each sweeping arm trained on the first seed (--lrs x
     * its grid, then its extensions in order), and
     * how its sweep ended (a sweep_status) */
    float arm_lrs[NARMS][MAX_LRS + MAX_EXTEND]; int arm_nlrs[NARMS];
    int nextended[NARMS], sweep_end[NARMS], sweep_edge[NARMS];
    int tuned_sched[NARMS];          /* index into scheds of its tuned schedule (-1 without --schedules) */
    /* progress */
    int planned, finished, tty;
    double run_wall_sum; int run_wall_n;
    double t0;
} compare;

/* compare_run.c: arm with schedule sched (index into c->scheds, -1:
 * none) at lr and seed, run as a child `hpt train` (or an identical
 * finished run reused, or a stopped one resumed); exits on failure or
 * Ctrl-C. budget < 1: the same run with its schedule compressed to
 * round(budget x the full run's steps) (the full run first, if not yet). */
run *compare_run(compare *c, int arm, int sched, float lr, uint64_t seed, double budget);
/* The same run started (or found finished) without waiting for it: with
 * --jobs N up to N children train at once, and this waits only for a free
 * slot; compare_wait_all waits for every child started. Returns its index
 * in c->runs (which may move as runs are added). */
int compare_start(compare *c, int arm, int sched, float lr, uint64_t seed, double budget);
void compare_wait_all(compare *c);
/* The queue: the protocol decides runs as the runs they depend on finish
 * (an arm's sweep extension once its own sweep has finished, an arm's
 * seeds once its lender is tuned), so that no slot idles while a decided
 * run waits behind an undecided one. compare_enqueue adds a run (first:
 * ahead of the queue, for the runs later decisions wait on);
 * compare_start_queued starts queued runs in order while --jobs slots are
 * free (reused runs take none); compare_reap waits until one child ends;
 * compare_done: 1 if that run has finished (0: queued, training or not
 * decided yet). */
typedef struct want { int arm, sched; float lr; uint64_t seed; double budget; int first; } want;
void compare_enqueue(compare *c, int arm, int sched, float lr, uint64_t seed, double budget, int first);
void compare_start_queued(compare *c);
void compare_reap(compare *c);
int compare_done(const compare *c, int arm, int sched, float lr, uint64_t seed, double budget);
/* compare.c: what an arm's seeds run with, its own tuned LR and schedule
 * or its lender's (compare_arms[].lr_from); a schedule's name ("cosine", the
 * train flags' one, for -1). */
float compare_arm_lr(const compare *c, int arm);
int compare_arm_sched(const compare *c, int arm);
const char *compare_sched_name(const compare *c, int sched);
/* An arm's tuned schedule by name ("constant" for schedule-free). */
const char *compare_arm_sched_name(const compare *c, int arm);
/* What besides the arguments decides a run: the hpt binary and the data. */
char *compare_reuse_tag(const char *data);
void compare_catch_signals(void);   /* Ctrl-C / SIGTERM: the child checkpoints, compare stops */
void compare_save_text(const char *path, const char *text);   /* atomic; exits on failure */

/* compare_results.c: results.json, results.md (printed too) and the plots
 * in c->out, from the runs at their tuned LRs. */
void compare_report(compare *c);

/* compare_budget.c: the budget sweep's arithmetic, pure (tests/
 * test_compare_budget.c). Given n budgets f (ascending) and an arm's final
 * val v at each, where the smallest budget f* whose final val reaches
 * `target` lies: between budgets lo and hi (the first to reach it), v
 * interpolated linearly in log f; hi's weight w. lower_bound: the smallest
 * budget already reaches it (f* is that budget, not extrapolated below). */
typedef struct budget_hit {
    int reached, lower_bound;
    int lo, hi;
    double w, f_star;
} budget_hit;
budget_hit compare_budget_hit(int n, const double *f, const double *v, double target);
/* y (a run's train_s, its updates) at f*, interpolated with the same
 * weights; NaN if the target was not reached. */
double compare_budget_at(const budget_hit *h, const double *y);

/* compare_sweep.c: the LR sweep's extension, pure (tests/
 * test_compare_sweep.c). An arm's sweep: n rates lr (any order, distinct)
 * and its final val at each (the lowest over its schedules; NaN: diverged,
 * never the best). When the lowest final val lies at the smallest or the
 * largest rate (a tie with an interior rate counts as inside) the sweep
 * has not bracketed it: the next rate to try is one step beyond that edge
 * by the sweep's own ratio there (edge / its neighbour: x2 for 1e-3,2e-3,
 * 4e-3), rounded to 3 significant digits. `done` extensions were made of
 * at most `cap`; a rate above lr_max is never proposed. */
typedef enum {
    SWEEP_INSIDE,   /* the best rate has a rate on each side: bracketed */
    SWEEP_EXTEND,   /* at an edge: try .lr next */
    SWEEP_CAPPED,   /* at an edge after cap extensions: not bracketed */
    SWEEP_LIMIT,    /* at an edge, and one step beyond leaves [lr_min, lr_max] (train's --lr range) */
    SWEEP_NONE      /* nothing to bracket: fewer than 2 rates, or no finite final val */
} sweep_status;
typedef struct sweep_next {
    sweep_status status;
    int best;    /* index of the lowest final val (the first of ties); -1: none finite */
    int edge;    /* +1: the best is the largest rate, -1: the smallest, 0: neither */
    float lr;    /* SWEEP_EXTEND: the rate to try */
} sweep_next;
sweep_next compare_sweep_next(int n, const float *lr, const double *val, int done, int cap, float lr_min,
                              float lr_max);
extern const char *const compare_sweep_status_names[];   /* "inside", "extend", "capped", "limit", "none" */

/* compare_md.c: the tables of a comparison, as Markdown, from its
 * results.json (the LR sweep, per arm medians with ranges, the equal-budget
 * quality, the --budgets sweep, the headline, the timing noise). The one renderer: hpt compare
 * writes results.md and prints the same text with it, and
 * bench/results_md.py builds bench/RESULTS.md's tables from
 * `hpt compare --report DIR`. */
void compare_render_md(const cJSON *results, FILE *out);
/* hpt compare --report DIR: DIR/results.json rendered to stdout; the exit status. */
int compare_report_dir(const char *dir);

#endif /* HPT_CLI_COMPARE_H */
