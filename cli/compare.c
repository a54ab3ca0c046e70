/*
 * compare.c — `hpt compare`: wall-clock time to the same validation loss,
 * hybrid against a tuned baseline and the controls that could explain a
 * gain away (docs/references.md section 4).
 *
 * The protocol, in the order it runs:
 *   1. sweep: on the first seed, the baseline and the hybrid each train at
 *      every --lrs value over the same budget, under the runs' one schedule
 *      (--schedule, else the task's default: D2Z, linear to 0) or, with
 *      --schedules, under every schedule listed (cosine to lr x min-lr
 *      ratio, d2z, wsd); the lowest final val loss picks each arm's tuned
 *      LR (and schedule);
 *      an arm whose best rate lies at an edge of its rates trains at one
 *      more rate beyond that edge at the sweep's ratio there, until the
 *      best is inside or --extend-sweep (3) rates were added
 *      (compare_sweep.c; results.md says so);
 *      the schedule-free control (--arms ...,schedule-free: schedule-free
 *      AdamW, evaluated at its average) sweeps --lrs too, tuned like the
 *      baseline (no schedules: its rate is constant after the warmup);
 *      and the muon arm (--arms ...,muon: Muon with RMS matching, AdamW
 *      at the same rate) sweeps --lrs x --schedules as the baseline does;
 *      muon-spectral (Muon at its own spectral scale, AdamW at the tuned
 *      baseline's rate) sweeps --lrs x 4 x --schedules once the baseline
 *      is tuned;
 *   2. seeds: every arm trains at its tuned LR and schedule on every seed
 *      (the controls borrow them: stale-adam, linear and hybrid-ema the
 *      hybrid's; ema, outer-snoo and outer-124m the baseline's; hybrid-sf
 *      schedule-free's);
 *   3. budgets (--budgets): every arm on every seed again
 *      at each fraction f < 1 of its full run's steps, --max-iters
 *      round(f x steps), so its schedule (warmup kept, decay compressed)
 *      ends there. Under a decayed schedule the loss falls most in the
 *      decay, so every arm crosses the target near the end of its own run
 *      and ratios of time within runs say little; what a user saves is the
 *      smallest budget whose final val reaches the target;
 *   4. per seed, the target is the tuned baseline's final val loss (and two
 *      intermediate levels, its val at 1/3 and 2/3 of its evaluations); each
 *      arm's time to a target is the training clock (evaluation excluded,
 *      every probe and predictor cost included) at which its val curve first
 *      reaches it, interpolated linearly between evaluations; and its
 *      optimizer updates to it (speedup_steps_to_target: free of timing
 *      noise), interpolated the same way; with --budgets, the smallest f
 *      whose final val reaches the target (linear in log f between the
 *      budgets around it, compare_budget.c) and the baseline's full time
 *      (updates) over the arm's there.
 * Every run is a child `hpt train` process (same binary, same thread count,
 * one at a time, or --jobs side by side), so each has its own peak RSS and a crash costs one run;
 * this file reads each child's run directory back through the library
 * (hpt_rundir_open). A run whose directory already holds a summary for
 * identical arguments, the same hpt binary (by CRC) and the same data (the
 * identity a checkpoint records: every file the run reads, by size and CRC)
 * is reused, and one stopped by Ctrl-C (its child saved a
 * checkpoint) is resumed, so a stopped comparison continues where it stopped.
 * Outputs in --out DIR, each written atomically: results.json (cJSON),
 * results.md (rendered from results.json by compare_md.c, also printed),
 * val_vs_time.{svg,png}, val_vs_step.{svg,png}, runs/<arm>-lr<lr>-s<seed>/
 * (a budget run's: runs/<arm>-lr<lr>-s<seed>-b<f>/).
 */
#include "cli.h"
#include "compare.h"
#include "../src/base/base.h"    /* hpt_mkdir_p */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The arms, a row each (compare_arm in compare.h): the sweeping ones are
 * those whose rate is their own (lr_from is the arm itself). */
const compare_arm compare_arms[NARMS] = {
    [ARM_BASELINE] = {"baseline", 0, ARM_BASELINE, .grid = 1},
    [ARM_HYBRID] = {"hybrid", ARM_K_HYBRID, ARM_HYBRID, .grid = 1},
    [ARM_STALE] = {"stale-adam", ARM_K_HYBRID, ARM_HYBRID, .predictor = "stale-adam"},
    [ARM_LINEAR] = {"linear", ARM_K_HYBRID, ARM_HYBRID, .predictor = "linear"},
    [ARM_EMA] = {"ema", ARM_K_EMA, ARM_BASELINE},
    [ARM_SF] = {"schedule-free", ARM_K_SF, ARM_SF, .grid = 1},
    [ARM_HEMA] = {"hybrid-ema", ARM_K_HYBRID | ARM_K_EMA, ARM_HYBRID},
    [ARM_HSF] = {"hybrid-sf", ARM_K_HYBRID | ARM_K_SF, ARM_SF},
    [ARM_SNOO] = {"outer-snoo", ARM_K_HYBRID, ARM_BASELINE, .predictor = "outer",
                  .flags = {"--outer-lr", "0.68", "--outer-momentum", "0.37", "--outer-interval", "28", NULL}},
    [ARM_O124] = {"outer-124m", ARM_K_HYBRID, ARM_BASELINE, .predictor = "outer",
                  .flags = {"--outer-lr", "0.7", "--outer-momentum", "0.5", "--outer-interval", "30", NULL}},
    [ARM_MUON] = {"muon", ARM_K_MUON, ARM_MUON, .grid = 1, .muon_scale = "rms"},
    [ARM_HMUON] = {"hybrid-muon", ARM_K_HYBRID | ARM_K_MUON, ARM_MUON, .muon_scale = "rms", .predictor = "outer"},
    [ARM_MNS3] = {"muon-ns3", ARM_K_MUON, ARM_MUON, .muon_scale = "rms", .flags = {"--muon-ns-steps", "3", NULL}},
    [ARM_MSPEC] = {"muon-spectral", ARM_K_MUON, ARM_MSPEC, .grid = SPECTRAL_GRID, .muon_scale = "spectral",
                    .adam_tuned = 1},
};

/* The table's invariants, checked once (always on): the sweep table's
 * capacity counts NSWEEPING sweeping arms, each with a grid; every Muon
 * arm names its scale. */
static void check_arms(void) {
    int sweeping = 0;
    for (int a = 0; a < NARMS; a++) {
        HPT_ASSERT(compare_arms[a].name);
        if (ARM_SWEEPS(a)) { sweeping++; HPT_ASSERT(compare_arms[a].grid > 0); }
        HPT_ASSERT(!ARM_MUON_OPT(a) || compare_arms[a].muon_scale);
    }
    HPT_ASSERT(sweeping == NSWEEPING);
}

/* --schedules' names: cosine to lr x --min-lr-ratio; d2z, the
 * linear decay to zero (Bergsma et al. 2025); wsd, constant then a 1 - sqrt
 * cooldown to zero over the last 20% (Hägele et al. 2024). A new one is a row. */
const compare_sched compare_scheds[] = {
    {"cosine", {"--schedule", "cosine", NULL}, 0},
    {"d2z", {"--schedule", "linear", NULL}, 1},
    {"wsd", {"--schedule", "wsd", "--decay-frac", "0.2", "--cooldown", "sqrt", NULL}, 1},
};
const int compare_nscheds = (int)(sizeof compare_scheds / sizeof compare_scheds[0]);

float compare_arm_lr(const compare *c, int arm) { return c->tuned_lr[compare_arms[arm].lr_from]; }
int compare_arm_sched(const compare *c, int arm) { return c->tuned_sched[compare_arms[arm].lr_from]; }
const char *compare_sched_name(const compare *c, int sched) {
    return sched >= 0 ? compare_scheds[c->scheds[sched]].name : c->train_schedule;
}
const char *compare_arm_sched_name(const compare *c, int arm) {
    return ARM_SCHEDULE_FREE(arm) ? "constant" : compare_sched_name(c, compare_arm_sched(c, arm));
}

void usage_compare(FILE *f) {
    fprintf(f,
"Usage: hpt compare [hpt train options] [compare options]\n"
"\n"
"Trains every arm on the same data, seeds and thread count, one run at a time\n"
"(or --jobs at a time),\n"
"and measures wall-clock (training clock) time to the tuned baseline's final\n"
"validation loss. Train options (--data, --task, --model, --max-iters, --n-layer,\n"
"--eval-interval, --threads, ...) and hybrid options (--warmup-steps, ...) are\n"
"passed to every run (hybrid options to the hybrid arms only); --lr, --min-lr,\n"
"--seed, --out, --mode, --ema, --resume and --save-interval are set by compare\n"
"itself; --predictor chooses the predictor of the hybrid and hybrid-ema arms\n"
"(default: the hybrid's own, outer)\n"
"(coast, shrink or outer; outer's --outer-interval, --outer-lr, --outer-momentum,\n"
"--outer-follow-lr and --outer-check are hybrid options like the others).\n"
"\n"
"  hpt compare --report DIR   prints the tables of DIR/results.json (Markdown)\n"
"\n"
"compare options:\n"
"  --lrs LIST             peak learning rates of the sweep, comma-separated,   [the task's lr]\n"
"                         each in [1e-9, 10] (train's --lr)\n"
"  --extend-sweep N       when a sweeping arm's best rate is at an edge of     [3]\n"
"                         its sweep, train it at one more rate beyond that\n"
"                         edge (the sweep's ratio there: x2 for 2e-3,4e-3,\n"
"                         8e-3), until the best is inside or N rates were\n"
"                         added (0: never; results.md says which)\n"
"  --min-lr-ratio X       each run decays to lr x X (--schedules: the cosine   [the task's min-lr/lr,\n"
"                         row's floor; d2z and wsd decay to 0)                  0; --schedules 0.1]\n"
"  --schedules LIST       tune the baseline and the hybrid over these          [off]\n"
"                         schedules x --lrs (first seed): cosine (to lr x\n"
"                         --min-lr-ratio), d2z (linear to 0), wsd (constant,\n"
"                         then 1 - sqrt to 0 over the last 20%%)\n"
"  --seeds N              seeds per arm (the sweep runs on the first)          [3]\n"
"  --seed N               the first seed; the others follow it                 [1337]\n"
"  --arms LIST            of baseline,hybrid,stale-adam,linear,ema,            [all but the\n"
"                         schedule-free (schedule-free AdamW, its own LR        last nine]\n"
"                         sweep; no --schedule, --decay-frac, --cooldown),\n"
"                         hybrid-ema (the hybrid's run with --ema, evaluated\n"
"                         at the average), hybrid-sf (the hybrid on\n"
"                         schedule-free AdamW at schedule-free's tuned LR),\n"
"                         outer-snoo and outer-124m (the outer step at\n"
"                         SNOO's 0.68/0.37/28 and a 124M wrapper's\n"
"                         0.7/0.5/30, on the tuned baseline's LR), muon\n"
"                         (--optimizer muon --muon-scale rms, --adam-lr the\n"
"                         same LR: its own sweep of --lrs x --schedules),\n"
"                         hybrid-muon (the outer step on Muon at muon's\n"
"                         tuned LR and schedule), muon-ns3 (Muon with 3\n"
"                         Newton-Schulz steps at muon's tuned LR and\n"
"                         schedule), muon-spectral (--optimizer muon\n"
"                         --muon-scale spectral, --adam-lr the tuned\n"
"                         baseline's: its own sweep of --lrs x 4 x\n"
"                         --schedules, once the baseline is tuned)\n"
"  --ema-decay X          decay of the ema arms' weight average                [0.99]\n"
"  --budgets LIST         fractions in (0, 1] of the full run's steps (1 is    [off]\n"
"                         implied): every arm on every seed also trains\n"
"                         with its schedule compressed to round(f x steps);\n"
"                         reports the smallest f whose final val reaches the\n"
"                         target, and the time saved there (1 alone: off)\n"
"  --out DIR              results.json, results.md, plots, runs/               [runs/compare]\n"
"  --jobs N               train N runs side by side (give --threads so that   [1]\n"
"                         N x threads fits the cores: each run's clock then\n"
"                         includes what its neighbour costs it, the same for\n"
"                         every arm; results.json records jobs)\n"
"  --fresh                rerun every run (default: reuse finished identical runs)\n"
"\n"
"Without --eval-interval, text tasks evaluate every max-iters/20 steps (of a\n"
"budget run's own max-iters): the resolution of time-to-target; tasks trained\n"
"by --epochs evaluate every epoch, budget runs too. Exit status: 0 success\n"
"(also when no arm reaches the target: that is a result), 1 a run failed, 2\n"
"usage error.\n");
}

/* ---------------------------------------------------------------- the command */

/* Flags compare sets itself, refused in the pass-through. */
static const char *const owned[] = {"--lr", "--min-lr", "--seed", "--out", "--mode", "--ema",
                                    "--resume", "--save-interval", "--log-interval", "--keep-last", "--overwrite"};

/* A comma-separated list with an empty item ("1e-3,,2e-3", a trailing
 * comma) is refused: strtok skipped it, so a typo for a missing value went
 * unseen. flag names the list in the message. */
static void no_empty_items(const char *flag, const char *s) {
    size_t n = strlen(s);
    if (n && (s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,"))) {
        char why[1200];
        snprintf(why, sizeof why, "%s has an empty item in '%.1024s'", flag, s);
        die_usage("%s", why);
    }
}

static void parse_lrs(compare *c, const char *s) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    no_empty_items("--lrs", s);
    /* hpt train's --lr range, as train checks it (a float against the row's
     * bounds): a rate outside it ran as a run that failed with exit 2 */
    const hpt_setting *row = hpt_setting_find("--lr");
    const float lo = (float)row->min, hi = (float)row->max;
    c->nlrs = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (c->nlrs == MAX_LRS) die_usage("--lrs takes at most 16 values, got '%s'", s);
        float v = parse_float("--lrs", tok);
        if (!(v >= lo && v <= hi)) die_usage("--lrs values must be in [1e-9, 10] (hpt train's --lr), got '%s'", tok);
        for (int i = 0; i < c->nlrs; i++) if (c->lrs[i] == v) die_usage("--lrs lists '%s' twice", tok);
        c->lrs[c->nlrs++] = v;
    }
    if (!c->nlrs) die_usage("--lrs needs at least one value, got '%s'", s);
}

static void parse_schedules(compare *c, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    no_empty_items("--schedules", s);
    c->nscheds = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int k = 0;
        while (k < compare_nscheds && strcmp(tok, compare_scheds[k].name)) k++;
        if (k == compare_nscheds) die_usage("--schedules: unknown schedule '%s' (cosine, d2z, wsd)", tok);
        for (int i = 0; i < c->nscheds; i++) if (c->scheds[i] == k) die_usage("--schedules lists '%s' twice", tok);
        c->scheds[c->nscheds++] = k;
    }
    if (!c->nscheds) die_usage("--schedules needs at least one of cosine, d2z, wsd, got '%s'", s);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --budgets: fractions of the full run's steps, ascending, 1 always among
 * them (the full runs are the comparison's own). */
static void parse_budgets(compare *c, const char *s) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    no_empty_items("--budgets", s);
    c->nbudgets = 0;
    int ntok = 0, one = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","), ntok++) {
        parse_float("--budgets", tok);  /* exits 2 on a non-number */
        double v = strtod(tok, NULL);  /* a double: round(f x steps) as written, 0.7 x 5 = 3.5 */
        if (!(v > 0 && v <= 1)) die_usage("--budgets values are fractions of the full run's steps, in (0, 1], got '%s'", tok);
        for (int i = 0; i < c->nbudgets; i++) if (c->budgets[i] == v) die_usage("--budgets lists '%s' twice", tok);
        if (v == 1 && one++) die_usage("--budgets lists '%s' twice", tok);
        if (v == 1) continue;  /* added last, once */
        if (c->nbudgets == MAX_BUDGETS - 1) die_usage("--budgets takes at most 15 fractions besides 1, got '%s'", s);
        c->budgets[c->nbudgets++] = v;
    }
    if (!ntok) die_usage("--budgets needs at least one fraction in (0, 1], got '%s'", s);
    c->budgets[c->nbudgets++] = 1;
    qsort(c->budgets, (size_t)c->nbudgets, sizeof(double), cmp_dbl);
    /* 1 alone trains no budget run: no budget sweep (its table measured
     * the full runs against themselves, every arm ">= 1.00x in updates") */
    if (c->nbudgets == 1) c->nbudgets = 0;
}

/* "name, name, ..." of every arm, for --arms' error: the table's names,
 * so that a new row is named there without an edit. */
static void arm_names(char *out, size_t n) {
    size_t len = 0;
    out[0] = 0;
    for (int a = 0; a < NARMS && len < n; a++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", a ? ", " : "", compare_arms[a].name);
}

/* An arm trained at another sweeping arm's rate needs that arm when its
 * optimizer is not the baseline's (schedule-free's, Muon's): the
 * baseline's rate, the fallback for a lender left out, is not one for
 * it. */
static void check_lenders(const compare *c) {
    for (int a = 0; a < NARMS; a++) {
        int from = compare_arms[a].lr_from;
        if (!c->arms[a] || from == a || c->arms[from] || !(compare_arms[from].kind & (ARM_K_SF | ARM_K_MUON)))
            continue;
        char why[160];
        snprintf(why, sizeof why, "--arms %s needs %s too: it trains at that arm's tuned LR%s", compare_arms[a].name,
                 compare_arms[from].name, ARM_SCHEDULE_FREE(from) ? "" : " and schedule");
        die_usage("%s", why);
    }
}

static void parse_arms(compare *c, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    no_empty_items("--arms", s);
    memset(c->arms, 0, sizeof c->arms);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int a = 0;
        while (a < NARMS && strcmp(tok, compare_arms[a].name)) a++;
        if (a == NARMS) {
            char names[512], why[768];
            arm_names(names, sizeof names);
            snprintf(why, sizeof why, "--arms: unknown arm '%s' (%s)", tok, names);
            die_usage("%s", why);
        }
        if (c->arms[a]) die_usage("--arms lists '%s' twice", tok);  /* as --lrs, --schedules and --budgets do */
        c->arms[a] = 1;
    }
    if (!c->arms[ARM_BASELINE]) die_usage("%s", "--arms must include baseline: it defines the target");
    check_lenders(c);
}

/* compare's own flags; 0 if `name` is not one of them. */
static int own_flag(compare *c, const char *name, const char *val) {
    if (!strcmp(name, "--lrs")) parse_lrs(c, val);
    else if (!strcmp(name, "--schedules")) parse_schedules(c, val);
    else if (!strcmp(name, "--extend-sweep")) c->extend_cap = (int)parse_int(name, val, 0, MAX_EXTEND);
    else if (!strcmp(name, "--seeds")) c->nseeds = (int)parse_int(name, val, 1, MAX_SEEDS);
    else if (!strcmp(name, "--seed")) c->seed0 = (uint64_t)parse_int(name, val, 0, 1L << 40);
    else if (!strcmp(name, "--arms")) parse_arms(c, val);
    else if (!strcmp(name, "--budgets")) parse_budgets(c, val);
    else if (!strcmp(name, "--ema-decay")) {
        c->ema_decay = parse_float(name, val);
        if (!(c->ema_decay > 0 && c->ema_decay < 1)) die_usage("--ema-decay must be in (0, 1), got '%s'", val);
    } else if (!strcmp(name, "--min-lr-ratio")) {
        c->min_lr_ratio = parse_float(name, val);
        if (!(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1)) die_usage("--min-lr-ratio must be in [0, 1], got '%s'", val);
    } else if (!strcmp(name, "--out")) c->out = val;
    else if (!strcmp(name, "--predictor")) {
        if (!strcmp(val, "stale-adam") || !strcmp(val, "linear"))
            die_usage("--predictor %s is a control arm of its own; the hybrid arm's predictor is coast, shrink or outer",
                      val);
        c->predictor = val;  /* hpt train validates the name */
    } else if (!strcmp(name, "--jobs")) c->jobs = (int)parse_int(name, val, 1, MAX_JOBS);
    else if (!strcmp(name, "--fresh")) c->fresh = 1;
    else return 0;
    return 1;
}

/* What compare reads from the flags it passes through. */
typedef struct seen { const char *task, *model, *device; int max_iters, epochs, warmup; } seen;

/* A train or hybrid flag, passed to the runs as given ("--x=v" stays one
 * word, "--x v" two). */
static void pass_flag(compare *c, seen *sn, const char *name, char *word, const char *val, int two_words, int hyb) {
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
        if (!strcmp(name, owned[k]))
            die_usage("%s is set by hpt compare for each run (use --lrs, --seed, --seeds, --out, --arms)", name);
    if (c->npass + c->nhpass + 2 > MAX_PASS) die_usage("%s", "too many options");
    char **dst = hyb ? c->hpass : c->pass;
    int *nd = hyb ? &c->nhpass : &c->npass;
    /* a budget run replaces what sets the step count with its own --max-iters */
    int steps = !hyb && (!strcmp(name, "--max-iters") || !strcmp(name, "--epochs"));
    if (!hyb) c->pass_steps[*nd] = (char)steps;
    dst[(*nd)++] = word;
    if (!hyb && two_words) c->pass_steps[*nd] = (char)steps;
    if (two_words) dst[(*nd)++] = (char *)val;
    if (!strcmp(name, "--task")) sn->task = val;
    if (!strcmp(name, "--model")) sn->model = val;
    if (!strcmp(name, "--device")) sn->device = val;
    if (!strcmp(name, "--data")) c->data = val;
    if (!strcmp(name, "--threads")) c->threads = (int)parse_int(name, val, 0, 1024);
    if (!strcmp(name, "--max-iters")) sn->max_iters = (int)parse_int(name, val, 1, 100000000);
    if (!strcmp(name, "--epochs")) sn->epochs = (int)parse_int(name, val, 0, 100000);
    if (!strcmp(name, "--warmup-iters")) sn->warmup = 1 + (int)parse_int(name, val, 0, 100000000);
    if (!strcmp(name, "--eval-interval")) c->eval_interval_given = 1;
    if (!strcmp(name, "--schedule")) c->train_schedule = val;
    if (!strcmp(name, "--schedule") || !strcmp(name, "--decay-frac") || !strcmp(name, "--cooldown"))
        c->sched_flags_given = 1;
}

/* Parses argv into c; returns -1 to go on, else the exit status (--help,
 * --report). */
static int parse_args(compare *c, seen *sn, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        char *s = argv[i], name[128];
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) { usage_compare(stdout); return 0; }
        if (strncmp(s, "--", 2)) die_usage("unexpected argument '%s'", s);
        const char *eq = strchr(s, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - s) : (int)strlen(s), s);
        /* the settings table knows hpt train's flags: which take a value,
         * which are the hybrid's; of compare's own, --fresh takes none */
        const hpt_setting *row = hpt_setting_find(name);
        int takes = row ? row->type != HPT_SET_SWITCH : strcmp(name, "--fresh") != 0;
        int hyb = row && row->group == HPT_SET_HYBRID;
        if (!takes && eq) die_usage("%s takes no value", name);
        const char *val = eq ? eq + 1 : NULL;
        if (takes && !val) {
            if (i + 1 >= argc) die_usage("%s needs a value", name);
            val = argv[++i];
        }
        if (!strcmp(name, "--report")) return compare_report_dir(val);
        if (!own_flag(c, name, val)) pass_flag(c, sn, name, s, val, takes && !eq, hyb);
    }
    return -1;
}

/* Settles what the flags left to the task's defaults. */
static void settle(compare *c, const seen *sn) {
    if (c->nscheds && c->sched_flags_given)
        die_usage("%s", "--schedules sets each run's --schedule, --decay-frac and --cooldown: give them without it");
    if (c->arms[ARM_SF] && c->sched_flags_given)
        die_usage("%s", "--arms schedule-free: its runs take no --schedule, --decay-frac or --cooldown (its rate "
                  "is constant after the warmup); give them without it, or use --schedules");
    hpt_train_config d;
    hpt_train_config_default_for(&d, sn->task, sn->model);
    if (!c->nlrs) { c->lrs[0] = d.lr; c->nlrs = 1; }
    /* --schedules' cosine row decays to 10% of lr unless told; the
     * runs without --schedules follow the task's defaults (D2Z: ratio 0) */
    if (c->min_lr_ratio < 0) c->min_lr_ratio = c->nscheds ? 0.1f : d.min_lr / d.lr;
    if (!c->train_schedule) c->train_schedule = d.schedule;
    c->max_iters = sn->max_iters > 0 ? sn->max_iters : d.epochs > 0 ? -1 : d.max_iters;
    if (c->max_iters < 0) c->epochs = sn->epochs > 0 ? sn->epochs : d.epochs;
    /* hpt train refuses a given --warmup-iters that is not below the run's
     * --max-iters: said here, before any directory is made, for the full
     * runs and for each budget run (its --max-iters is a fraction of the
     * full one's, the warmup kept). With --epochs the steps are known only
     * once the first run has read the data. */
    for (int k = 0; sn->warmup > 1 && c->max_iters > 0 && k <= c->nbudgets; k++) {
        double f = k < c->nbudgets ? c->budgets[k] : 1.0;
        long iters = lround(f * c->max_iters);
        if (iters < 1) iters = 1;
        if (sn->warmup - 1 >= iters) {
            char why[256];
            if (f == 1.0)
                snprintf(why, sizeof why, "--warmup-iters %d is not below --max-iters %d: the rate would rise for "
                         "the whole run, never reaching --lr nor decaying", sn->warmup - 1, c->max_iters);
            else
                snprintf(why, sizeof why, "--budgets %g gives runs of %ld steps, not past --warmup-iters %d: their "
                         "rate would never reach --lr (give larger --budgets or a shorter warmup)", f, iters,
                         sn->warmup - 1);
            die_usage("%s", why);
        }
    }
    c->epoch_cadence = c->max_iters < 0 && !c->eval_interval_given;
    if (c->epoch_cadence) c->eval_interval_given = 1;  /* epochs: the task's cadence */
    c->tty = isatty(2);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (c->jobs > 1 && (c->threads < 1 || (long)c->jobs * c->threads > ncpu))
        fprintf(stderr, "hpt compare: warning: --jobs %d x --threads %d%s is more than the %ld cores: the runs' "
                "clocks measure their contention\n", c->jobs, c->threads < 1 ? (int)ncpu : c->threads,
                c->threads < 1 ? " (all cores)" : "", ncpu);
    c->reuse_tag = compare_reuse_tag(c->data);
    /* the plan: the sweep (first seed; schedule-free under its own
     * schedule only), then each arm's tuned runs */
    c->planned = 0;
    for (int a = 0; a < NARMS; a++) {
        if (!c->arms[a]) continue;
        int sweep = ARM_SWEEPS(a) ? c->nlrs * (c->nscheds && !ARM_SCHEDULE_FREE(a) ? c->nscheds : 1) : 1;
        c->planned += sweep + (c->nseeds - 1) + c->nseeds * (c->nbudgets ? c->nbudgets - 1 : 0);  /* 3. budgets */
    }
}

/* What every run would refuse, refused once before anything is written:
 * a --device this machine cannot use (each run exited 2 after compare had
 * made the output and run directories), and an --out that is an hpt train
 * run directory (results and runs/ were written beside its model.bin;
 * train itself refuses to reuse a directory). */
static void check_before_writing(const compare *c, const seen *sn) {
    if (sn->device) {
        hpt_status st = hpt_device_check(sn->device);
        if (st != HPT_OK) die_status(st);
        /* every muon run would exit 2 (hpt train's check): said once, here */
        for (int a = 0; a < NARMS; a++)
            if (c->arms[a] && ARM_MUON_OPT(a) && strcmp(sn->device, "cpu"))
                die_usage("--arms muon: --optimizer muon runs on --device cpu only, not --device %s", sn->device);
    }
    static const char *const run_files[] = {"metrics.jsonl", "model.bin", "summary.json", "checkpoints",
                                            "manifest.json" /* hpt tokenize's shards */};
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", c->out, run_files[i]);
        if (stat(path, &sb) == 0) {
            char why[4600];
            snprintf(why, sizeof why, "--out '%s' is %s (it holds %s): choose another --out for the comparison",
                     c->out, i < 4 ? "an hpt train run directory" : "a token shard directory", run_files[i]);
            die_usage("%s", why);
        }
    }
}

static void announce(const compare *c) {
    fprintf(stderr, "compare: %d runs: arms", c->planned);
    for (int a = 0; a < NARMS; a++) if (c->arms[a]) fprintf(stderr, " %s", compare_arms[a].name);
    fprintf(stderr, "; lrs");
    for (int i = 0; i < c->nlrs; i++) fprintf(stderr, " %g", c->lrs[i]);
    fprintf(stderr, " (min-lr ratio %g)", c->min_lr_ratio);
    if (c->nscheds) fprintf(stderr, "; schedules");
    for (int i = 0; i < c->nscheds; i++) fprintf(stderr, "%s%s", i ? "," : " ", compare_scheds[c->scheds[i]].name);
    if (c->nbudgets) fprintf(stderr, "; budgets");
    for (int i = 0; i < c->nbudgets; i++) fprintf(stderr, "%s%g", i ? "," : " ", c->budgets[i]);
    fprintf(stderr, "; seeds %llu..%llu; out %s\n", (unsigned long long)c->seed0,
            (unsigned long long)(c->seed0 + c->nseeds - 1), c->out);
}

/* The k-th schedule arm a sweeps: -1 without --schedules, and for
 * schedule-free (its rate is constant after the warmup); how many it
 * sweeps. */
static int sweep_sched(const compare *c, int a, int k) { return c->nscheds && !ARM_SCHEDULE_FREE(a) ? k : -1; }
static int sweep_nscheds(const compare *c, int a) { return c->nscheds && !ARM_SCHEDULE_FREE(a) ? c->nscheds : 1; }

/* A rate becomes a column of the sweep table (c->lrs) if it is not one
 * yet, before the first larger rate (an extension beyond every rate goes
 * last or first, muon-spectral's grid between), so an ascending --lrs
 * stays ascending. */
static void lr_column(compare *c, float lr) {
    for (int i = 0; i < c->nlrs; i++) if (c->lrs[i] == lr) return;
    int at = 0;
    while (at < c->nlrs && !(c->lrs[at] > lr)) at++;
    memmove(c->lrs + at + 1, c->lrs + at, (size_t)(c->nlrs - at) * sizeof(float));
    c->lrs[at] = lr;
    c->nlrs++;
}

/* Arm a's sweep runs at lr on the first seed, under each of its
 * schedules, queued (first: ahead of the queue, an extension). */
static void sweep_queue(compare *c, int a, float lr, int first) {
    int ns = sweep_nscheds(c, a);
    for (int k = 0; k < ns; k++) compare_enqueue(c, a, sweep_sched(c, a, k), lr, c->seed0, 1, first);
}

/* The arm whose tuned rate arm a's sweep runs take (an --adam-lr of the
 * tuned baseline's), so that its sweep starts once that arm is tuned; -1:
 * none, it starts at once. */
static int sweep_after(int a) { return compare_arms[a].adam_tuned ? ARM_BASELINE : -1; }

/* Arm a's sweep begins: its first rates (--lrs x its grid: 1, or
 * muon-spectral's SPECTRAL_GRID), each a column of the sweep table, queued under its
 * schedules (first: ahead of the queue, for a sweep that starts late, as
 * the arm's seeds wait on it as they wait on an extension). */
static void sweep_begin(compare *c, int a, int first) {
    float scale = compare_arms[a].grid;
    c->arm_nlrs[a] = c->ngiven;
    c->sweep_end[a] = SWEEP_NONE;
    for (int i = 0; i < c->ngiven; i++) {
        c->arm_lrs[a][i] = c->given_lrs[i] * scale;
        lr_column(c, c->arm_lrs[a][i]);
        sweep_queue(c, a, c->arm_lrs[a][i], first);
    }
}

/* 1 once every run of arm a's sweep so far has finished. */
static int sweep_finished(const compare *c, int a) {
    int ns = sweep_nscheds(c, a);
    for (int i = 0; i < c->arm_nlrs[a]; i++)
        for (int k = 0; k < ns; k++)
            if (!compare_done(c, a, sweep_sched(c, a, k), c->arm_lrs[a][i], c->seed0, 1)) return 0;
    return 1;
}

/* An arm's sweep read back (its runs have finished): its lowest final val
 * at each of its rates, over its schedules; and where that leaves it. */
static sweep_next sweep_read(compare *c, int a) {
    int ns = sweep_nscheds(c, a);
    double v[MAX_LRS + MAX_EXTEND];
    for (int i = 0; i < c->arm_nlrs[a]; i++) {
        v[i] = NAN;
        for (int k = 0; k < ns; k++) {
            double f = compare_run(c, a, sweep_sched(c, a, k), c->arm_lrs[a][i], c->seed0, 1)->final_val;
            if (f < v[i] || isnan(v[i])) v[i] = f;
        }
    }
    const hpt_setting *row = hpt_setting_find("--lr");  /* train's range bounds the extension both ways */
    return compare_sweep_next(c->arm_nlrs[a], c->arm_lrs[a], v, c->nextended[a], c->extend_cap, (float)row->min,
                              (float)row->max);
}

/* Arm a's tuned LR and schedule: the lowest final val of its sweep (the
 * arms that sweep but were not asked for lend the baseline's). */
static void tune(compare *c, int a) {
    int ns = sweep_nscheds(c, a);
    double best = INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < c->arm_nlrs[a]; i++) {
            int sched = sweep_sched(c, a, k);
            run *r = compare_run(c, a, sched, c->arm_lrs[a][i], c->seed0, 1);
            if (r->final_val < best) {
                best = r->final_val;
                c->tuned_lr[a] = c->arm_lrs[a][i];
                c->tuned_sched[a] = sched;
            }
        }
    for (int b = 0; a == ARM_BASELINE && b < NARMS; b++)
        if (ARM_SWEEPS(b) && !c->arms[b]) { c->tuned_lr[b] = c->tuned_lr[a]; c->tuned_sched[b] = c->tuned_sched[a]; }
    if (c->arm_nlrs[a] * ns > 1)
        fprintf(stderr, "compare: tuned %s lr %g%s%s (final val %.4f on seed %llu)\n", compare_arms[a].name,
                c->tuned_lr[a], ns > 1 ? ", schedule " : "", ns > 1 ? compare_sched_name(c, c->tuned_sched[a]) : "",
                best, (unsigned long long)c->seed0);
    if (c->arm_nlrs[a] == 1)  /* one rate: its lr was not tuned, and the edge rule cannot fire */
        fprintf(stderr, "compare: warning: %s's lr %g was not swept (one rate): it is not tuned; give --lrs "
                "two or more rates\n", compare_arms[a].name, c->tuned_lr[a]);
    if (c->sweep_end[a] == SWEEP_CAPPED || c->sweep_end[a] == SWEEP_LIMIT)
        fprintf(stderr, "compare: warning: %s's tuned lr %g is %sat the %s edge of its sweep (%s): widen --lrs\n",
                compare_arms[a].name, c->tuned_lr[a], c->nextended[a] ? "still " : "", c->sweep_edge[a] > 0 ? "upper" : "lower",
                c->sweep_end[a] == SWEEP_LIMIT ? (c->sweep_edge[a] > 0 ? "the next rate would pass 10"
                                                                       : "the next rate would pass 1e-9")
                : c->extend_cap ? "the --extend-sweep cap was reached" : "--extend-sweep 0");
}

/* Arm a's sweep has finished: where its best rate lies at an edge, one
 * more rate beyond it (compare_sweep.c), queued ahead of every other run
 * (the arm's seeds wait on it); else its tuned rate. 1: tuned. */
static int sweep_advance(compare *c, int a) {
    sweep_next s = sweep_read(c, a);
    c->sweep_end[a] = s.status;
    c->sweep_edge[a] = s.edge;
    if (s.status != SWEEP_EXTEND) { tune(c, a); return 1; }
    fprintf(stderr, "compare: %s's best lr %g is at the %s edge of its sweep: trying lr %g (extension %d of "
            "at most %d)\n", compare_arms[a].name, c->arm_lrs[a][s.best], s.edge > 0 ? "upper" : "lower",
            s.lr, c->nextended[a] + 1, c->extend_cap);
    lr_column(c, s.lr);
    c->arm_lrs[a][c->arm_nlrs[a]++] = s.lr;
    c->nextended[a]++;
    c->planned += sweep_nscheds(c, a);
    sweep_queue(c, a, s.lr, 1);
    return 0;
}

/* 2. and 3.: arm a at its tuned LR and schedule (its own, or its
 * lender's) on every seed, then again at each --budgets fraction f < 1 of
 * its full run's steps, largest first, the schedule compressed to them. */
static void queue_seeds(compare *c, int a) {
    float lr = compare_arm_lr(c, a);
    int sched = compare_arm_sched(c, a);
    for (int s = 0; s < c->nseeds; s++) compare_enqueue(c, a, sched, lr, c->seed0 + (uint64_t)s, 1, 0);
    for (int k = c->nbudgets - 2; k >= 0; k--)
        for (int s = 0; s < c->nseeds; s++) compare_enqueue(c, a, sched, lr, c->seed0 + (uint64_t)s, c->budgets[k], 0);
}

/* The protocol. 1. the sweep: every sweeping arm (the baseline, the
 * hybrid, schedule-free, Muon; muon-spectral once the baseline is tuned)
 * at every LR on the first seed, under every
 * --schedules schedule (schedule-free: its own); an arm whose best rate
 * lies at an edge of its rates trains at one more beyond it, until the
 * best is inside or --extend-sweep rates were added; the lowest final val
 * tunes it. Then 2. and 3. for each arm (queue_seeds).
 * Each decision is taken as soon as the runs it reads have finished, and
 * the runs it makes go to the queue (an extension ahead of it), so with
 * --jobs N no slot idles while a decided run waits: an arm's extension
 * trains beside another arm's sweep, an arm's seeds as soon as the arm
 * whose rate they take is tuned. Which runs train does not depend on
 * --jobs nor on the order they finish in; only when they do. */
static void run_protocol(compare *c) {
    int begun[NARMS] = {0}, settled[NARMS] = {0}, queued[NARMS] = {0};
    memcpy(c->given_lrs, c->lrs, (size_t)c->nlrs * sizeof(float));
    c->ngiven = c->nlrs;
    for (int a = 0; a < NARMS; a++)
        if (ARM_SWEEPS(a) && c->arms[a] && sweep_after(a) < 0) { sweep_begin(c, a, 0); begun[a] = 1; }
    for (;;) {
        int changed = 0;
        for (int a = 0; a < NARMS; a++)
            if (begun[a] && !settled[a] && sweep_finished(c, a)) {
                settled[a] = sweep_advance(c, a);
                changed = 1;
            }
        for (int a = 0; a < NARMS; a++)
            if (ARM_SWEEPS(a) && c->arms[a] && !begun[a] && sweep_after(a) >= 0 && settled[sweep_after(a)]) {
                sweep_begin(c, a, 1);
                begun[a] = changed = 1;
            }
        for (int a = 0; a < NARMS; a++) {
            int from = compare_arms[a].lr_from;
            if (!c->arms[from]) from = ARM_BASELINE;
            if (c->arms[a] && !queued[a] && settled[from]) { queue_seeds(c, a); queued[a] = changed = 1; }
        }
        int waiting = c->nqueue;
        compare_start_queued(c);
        if (c->running) compare_reap(c);
        else if (!changed && !waiting) break;  /* nothing trains, nothing was started or decided: done */
    }
}

static void compare_free(compare *c) {
    for (int i = 0; i < c->nruns; i++) {
        run *r = &c->runs[i];
        free(r->step); free(r->clock); free(r->val); free(r->upd); free(r->bstep); free(r->bclock);
    }
    free(c->runs); free(c->queue); free(c->pass); free(c->pass_steps); free(c->hpass); free(c->reuse_tag);
}

int cmd_compare(int argc, char **argv) {
    compare c;
    check_arms();
    memset(&c, 0, sizeof c);
    c.nseeds = 3;
    c.extend_cap = 3;
    c.jobs = 1;
    c.seed0 = 1337;
    c.ema_decay = 0.99f;
    c.min_lr_ratio = -1;
    c.out = "runs/compare";
    hpt_hybrid_config hd;
    hpt_hybrid_config_default(&hd);
    c.predictor = hd.predictor;   /* the hybrid's default (outer) */
    c.train_schedule = NULL;      /* settle: the task's default (linear to 0) */
    for (int a = 0; a < NARMS; a++) c.tuned_sched[a] = -1;
    /* the default arms: baseline, hybrid, stale-adam, linear, ema (the later ones are added by --arms) */
    for (int a = 0; a < NARMS; a++) c.arms[a] = a < ARM_SF;
    c.pass = cli_xrealloc(NULL, (size_t)(argc + 1) * sizeof(char *));
    c.pass_steps = cli_xrealloc(NULL, (size_t)(argc + 1));
    c.hpass = cli_xrealloc(NULL, (size_t)(argc + 1) * sizeof(char *));
    seen sn = {"text", NULL, NULL, -1, 0, 0};  /* warmup: 1 + --warmup-iters, 0 when not given */
    int rc = parse_args(&c, &sn, argc, argv);
    if (rc >= 0) { compare_free(&c); return rc; }
    settle(&c, &sn);
    check_before_writing(&c, &sn);
    c.t0 = hpt_now();
    if (hpt_mkdir_p(c.out) != HPT_OK) die_status(HPT_ERR_IO);
    compare_catch_signals();
    announce(&c);
    run_protocol(&c);
    compare_wait_all(&c);
    compare_report(&c);
    compare_free(&c);
    return 0;
}

