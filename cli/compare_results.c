/*
 * compare_results.c — what `hpt compare` reports: per seed, each arm's
 * time to the tuned baseline's val levels and its quality at equal
 * budgets, and with --budgets the smallest budget reaching the target;
 * results.json (cJSON), results.md (rendered from it by
 * compare_md.c, and printed) and the val-curve plots of the first seed.
 */
#include "cli.h"
#include "compare.h"
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- metrics */

/* The x (training clock, or optimizer updates) at which the curve first
 * reaches `target`, interpolated between the two evaluations around the
 * crossing; NaN if it never does. */
static double x_to(const run *r, const double *x, double target) {
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
static double time_to(const run *r, double target) { return x_to(r, r->clock, target); }
static double updates_to(const run *r, double target) { return x_to(r, r->upd, target); }

/* Lowest val among evaluations within a training-clock budget. */
static double best_within(const run *r, double budget) {
    double b = NAN;
    for (int i = 0; i < r->n; i++)
        if (r->clock[i] <= budget * (1 + 1e-9) && !(r->val[i] >= b)) b = r->val[i];
    return b;
}

typedef struct stat4 { double median, min, max; int n; } stat4;

static stat4 stats(const double *v, int n) {
    double s[NARMS * MAX_SEEDS];
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

/* Per arm and seed: what results.json reports. */
typedef struct armseed {
    const run *r;
    double target[NLEVELS], ttt[NLEVELS], speedup[NLEVELS];
    double utt, speedup_updates;  /* optimizer updates to the final target, and the baseline's over them */
    double best_at[NBUDGETS];
    double final_ratio;
    /* --budgets: final val, training clock and updates at each budget; the
     * smallest budget reaching the target and the speedups there */
    double bval[MAX_BUDGETS], btrain[MAX_BUDGETS], bupd[MAX_BUDGETS];
    budget_hit hit;
    double speedup_budget, speedup_budget_steps;
} armseed;

static void measure(const run *base, const run *r, armseed *o) {
    o->r = r;
    /* targets from the tuned baseline of this seed */
    int i1 = (base->n - 1) / 3, i2 = 2 * (base->n - 1) / 3;
    o->target[0] = base->val[i1];
    o->target[1] = base->val[i2];
    o->target[2] = base->final_val;
    for (int k = 0; k < NLEVELS; k++) {
        o->ttt[k] = time_to(r, o->target[k]);
        double tb = time_to(base, o->target[k]);
        o->speedup[k] = isfinite(o->ttt[k]) && o->ttt[k] > 0 ? tb / o->ttt[k] : NAN;
    }
    o->utt = updates_to(r, o->target[2]);
    double ub = updates_to(base, o->target[2]);
    o->speedup_updates = isfinite(o->utt) && o->utt > 0 ? ub / o->utt : NAN;
    for (int k = 0; k < NBUDGETS; k++) o->best_at[k] = best_within(r, base->train_s * (k + 1) / NBUDGETS);
    o->final_ratio = r->final_val / base->final_val;
}

/* An arm's run at its tuned LR and schedule on seed index s at a budget
 * (1: the full run); NULL if there is none. */
static run *tuned_run(compare *c, int arm, int s, double budget) {
    for (int i = 0; i < c->nruns; i++) {
        run *r = &c->runs[i];
        if (r->arm == arm && r->seed == c->seed0 + (uint64_t)s && r->budget == budget &&
            r->lr == compare_arm_lr(c, arm) && r->sched == compare_arm_sched(c, arm))
            return r;
    }
    return NULL;
}

/* The full runs of each arm at its tuned LR and schedule, by seed. */
static void tuned_runs(compare *c, run *by[NARMS][MAX_SEEDS]) {
    for (int a = 0; a < NARMS; a++)
        for (int s = 0; s < MAX_SEEDS; s++) by[a][s] = s < c->nseeds ? tuned_run(c, a, s, 1) : NULL;
}

/* --budgets: the arm's final val at each budget against the target (the
 * tuned baseline's full-budget final val on the seed); at the smallest
 * budget reaching it, the baseline's full training clock (updates) over the
 * arm's there, both interpolated in log f (compare_budget.c). */
static void measure_budgets(compare *c, int arm, int s, const run *base, armseed *o) {
    for (int k = 0; k < c->nbudgets; k++) {
        const run *r = tuned_run(c, arm, s, c->budgets[k]);
        o->bval[k] = r ? r->final_val : NAN;
        o->btrain[k] = r ? r->train_s : NAN;
        o->bupd[k] = r ? r->updates : NAN;
    }
    o->hit = compare_budget_hit(c->nbudgets, c->budgets, o->bval, base->final_val);
    double t = compare_budget_at(&o->hit, o->btrain), u = compare_budget_at(&o->hit, o->bupd);
    o->speedup_budget = t > 0 ? base->train_s / t : NAN;
    o->speedup_budget_steps = u > 0 ? base->updates / u : NAN;
}

/* Timing noise, measured in this comparison: a hybrid-family run that
 * never entered Predict trained exactly the baseline's steps (the same
 * final val, bit for bit), so its clock less the controller's own time
 * differs from the baseline's by noise alone. The spread of those ratios
 * says how far apart two equal runs land on this machine. */
static stat4 timing_noise(const compare *c, run *by[NARMS][MAX_SEEDS]) {
    double noise[NARMS * MAX_SEEDS];
    int n = 0;
    for (int a = ARM_HYBRID; a <= ARM_LINEAR; a++)
        for (int s = 0; c->arms[a] && s < c->nseeds; s++) {
            const run *r = by[a][s], *b = by[ARM_BASELINE][s];
            if (r && b && r->phase[2] == 0 && r->final_val == b->final_val && r->train_s > r->ctrl_s)
                noise[n++] = 100.0 * fabs(b->train_s / (r->train_s - r->ctrl_s) - 1.0);
        }
    return stats(noise, n);
}

/* ---------------------------------------------------------------- results.json */

/* Per arm, each a {median, min, max, n, per_seed} record. */
static const char *const arm_fields[] = {
    "final_val_loss", "final_val_ratio", "speedup_time_to_target", "time_to_target_s", "speedup_steps_to_target",
    "updates_to_target",
    "speedup_to_level_1of3", "speedup_to_level_2of3", "best_val_at_25pct_clock", "best_val_at_50pct_clock",
    "best_val_at_75pct_clock", "best_val_at_100pct_clock", "train_s", "optimizer_updates", "backward_passes",
    "training_forward_passes", "phase_warmup", "phase_full", "phase_predict", "phase_correct",
    "outer_jumps_kept", "predictor_overhead_s", "controller_overhead_s", "peak_rss_bytes"};
#define NFIELDS (int)(sizeof arm_fields / sizeof arm_fields[0])

/* One arm-seed's values in arm_fields' order (NaN: no run). */
static void arm_values(const armseed *x, double v[NFIELDS]) {
    const run *r = x->r;
    for (int k = 0; k < NFIELDS; k++) v[k] = NAN;
    if (!r) return;
    double f[NFIELDS] = {r->final_val, x->final_ratio, x->speedup[2], x->ttt[2], x->speedup_updates, x->utt,
                         x->speedup[0], x->speedup[1],
                         x->best_at[0], x->best_at[1], x->best_at[2], x->best_at[3], r->train_s, r->updates,
                         r->backward, r->backward + r->probes, r->phase[0], r->phase[1], r->phase[2], r->phase[3],
                         r->jumps, r->pred_s, r->ctrl_s, r->peak_rss};
    memcpy(v, f, sizeof f);
}

/* A measured number, to 6 significant digits (what a comparison can
 * resolve); null when not finite (JSON has no NaN). */
static cJSON *jnum(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return cJSON_CreateNumber(strtod(b, NULL));
}

static void jstat(cJSON *o, const char *key, const double *v, int n) {
    stat4 s = stats(v, n);
    cJSON *d = cJSON_AddObjectToObject(o, key);
    cJSON_AddItemToObject(d, "median", jnum(s.median));
    cJSON_AddItemToObject(d, "min", jnum(s.min));
    cJSON_AddItemToObject(d, "max", jnum(s.max));
    cJSON_AddNumberToObject(d, "n", s.n);
    cJSON *ps = cJSON_AddArrayToObject(d, "per_seed");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(ps, jnum(v[i]));
}

/* The CPU model from /proc/cpuinfo ("unknown" if none): timings compare
 * only within one machine. */
static const char *cpu_model(char *cpu, size_t cap) {
    char line[512];
    snprintf(cpu, cap, "unknown");
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (!ci) return cpu;
    while (fgets(line, sizeof line, ci)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        const char *q = colon + 1 + strspn(colon + 1, " \t");
        snprintf(cpu, cap, "%.*s", (int)strcspn(q, "\n"), q);
        break;
    }
    fclose(ci);
    return cpu;
}

static char *joined(char **v, int n) {
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? " " : "", v[i]);
    fclose(f);
    return s;
}

/* How the comparison was set up. */
static void json_setup(const compare *c, cJSON *o) {
    char buf[512], cpu[256];
    snprintf(buf, sizeof buf, "time to the tuned baseline's final val loss on the training clock (evaluation "
             "excluded), and optimizer updates to it, interpolated between evaluations; LR tuned on seed %llu by "
             "final val",
             (unsigned long long)c->seed0);
    cJSON_AddStringToObject(o, "protocol", buf);
    char *tf = joined(c->pass, c->npass), *hf = joined(c->hpass, c->nhpass);
    cJSON_AddStringToObject(o, "train_flags", tf);
    cJSON_AddStringToObject(o, "hybrid_flags", hf);
    free(tf); free(hf);
    cJSON *lrs = cJSON_AddArrayToObject(o, "lrs");
    for (int i = 0; i < c->nlrs; i++) cJSON_AddItemToArray(lrs, jnum(c->lrs[i]));
    /* the sweep's extension (--extend-sweep): per sweeping arm the rates it
     * added beyond the edge its best lay at, and where its best ended:
     * inside (bracketed), capped (still at the edge after the cap), limit
     * (the next rate would pass 10), none (one rate, or none finite) */
    cJSON_AddNumberToObject(o, "extend_sweep", c->extend_cap);
    cJSON *ext = cJSON_AddObjectToObject(o, "sweep_extension");
    for (int a = 0; a < NARMS; a++) {
        if (!ARM_SWEEPS(a) || !c->arms[a] || !c->arm_nlrs[a]) continue;
        cJSON *e = cJSON_AddObjectToObject(ext, compare_arms[a].name);
        cJSON *added = cJSON_AddArrayToObject(e, "added_lrs");
        for (int i = c->arm_nlrs[a] - c->nextended[a]; i < c->arm_nlrs[a]; i++)
            cJSON_AddItemToArray(added, jnum(c->arm_lrs[a][i]));
        /* the direction it was extended in: the first added rate against --lrs */
        int given = c->arm_nlrs[a] - c->nextended[a];
        if (c->nextended[a]) cJSON_AddStringToObject(e, "direction", c->arm_lrs[a][given] > c->arm_lrs[a][0] ? "up" : "down");
        if (compare_arms[a].grid != 1.0f)  /* its first rates: --lrs x it */
            cJSON_AddItemToObject(e, "lrs_scale", jnum(compare_arms[a].grid));
        cJSON_AddStringToObject(e, "status", compare_sweep_status_names[c->sweep_end[a]]);
        if (c->sweep_edge[a]) cJSON_AddStringToObject(e, "edge", c->sweep_edge[a] > 0 ? "upper" : "lower");
        else cJSON_AddNullToObject(e, "edge");
    }
    cJSON_AddStringToObject(o, "hybrid_predictor", c->predictor);
    cJSON_AddItemToObject(o, "min_lr_ratio", jnum(c->min_lr_ratio));
    cJSON_AddItemToObject(o, "ema_decay", jnum(c->ema_decay));
    cJSON *seeds = cJSON_AddArrayToObject(o, "seeds");
    for (int s = 0; s < c->nseeds; s++) cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)(c->seed0 + s)));
    cJSON_AddNumberToObject(o, "threads", c->threads);
    cJSON_AddNumberToObject(o, "jobs", c->jobs);  /* runs trained side by side */
    cJSON_AddStringToObject(o, "blas_core", hpt_blas_core());  /* the runs' too: every process picks the same */
    cJSON_AddStringToObject(o, "blas_core_origin", hpt_blas_origin());
    cJSON_AddStringToObject(o, "cpu", cpu_model(cpu, sizeof cpu));
    cJSON *tuned = cJSON_AddObjectToObject(o, "tuned_lr");
    for (int a = 0; a < NARMS; a++)
        if (c->arms[a]) cJSON_AddItemToObject(tuned, compare_arms[a].name, jnum(compare_arm_lr(c, a)));
    /* the schedules swept (--schedules), and each arm's */
    if (c->nscheds) {
        cJSON *sc = cJSON_AddArrayToObject(o, "schedules");
        for (int i = 0; i < c->nscheds; i++) cJSON_AddItemToArray(sc, cJSON_CreateString(compare_sched_name(c, i)));
    }
    cJSON_AddStringToObject(o, "baseline_schedule", compare_sched_name(c, compare_arm_sched(c, ARM_BASELINE)));
    cJSON *ts = cJSON_AddObjectToObject(o, "tuned_schedule");
    for (int a = 0; a < NARMS; a++)
        if (c->arms[a]) cJSON_AddStringToObject(ts, compare_arms[a].name, compare_arm_sched_name(c, a));
    /* --budgets: the fractions, ascending (1 last) */
    if (c->nbudgets) {
        cJSON *b = cJSON_AddArrayToObject(o, "budgets");
        for (int k = 0; k < c->nbudgets; k++) cJSON_AddItemToArray(b, jnum(c->budgets[k]));
    }
}

/* qsort: by arm, then schedule, then rate */
static int cmp_sweep_run(const void *pa, const void *pb) {
    const run *a = *(const run *const *)pa, *b = *(const run *const *)pb;
    if (a->arm != b->arm) return a->arm < b->arm ? -1 : 1;
    if (a->sched != b->sched) return a->sched < b->sched ? -1 : 1;
    return a->lr < b->lr ? -1 : a->lr > b->lr;
}

/* The LR sweep: the sweeping arms' runs on the first seed, by arm,
 * schedule and rate (the order the runs were decided in depends on
 * --jobs and on which finished first). */
static void json_sweep(const compare *c, cJSON *o) {
    cJSON *sweep = cJSON_AddArrayToObject(o, "sweep");
    const run **sw = cli_xrealloc(NULL, (size_t)(c->nruns ? c->nruns : 1) * sizeof *sw);
    int n = 0;
    for (int i = 0; i < c->nruns; i++) {
        const run *r = &c->runs[i];
        if (r->seed == c->seed0 && ARM_SWEEPS(r->arm) && r->budget == 1) sw[n++] = r;
    }
    qsort(sw, (size_t)n, sizeof *sw, cmp_sweep_run);
    for (int i = 0; i < n; i++) {
        const run *r = sw[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "arm", compare_arms[r->arm].name);
        if (c->nscheds && r->arm != ARM_SF) cJSON_AddStringToObject(e, "schedule", compare_sched_name(c, r->sched));
        cJSON_AddItemToObject(e, "lr", jnum(r->lr));
        cJSON_AddItemToObject(e, "final_val_loss", jnum(r->final_val));
        cJSON_AddItemToObject(e, "train_s", jnum(r->train_s));
        cJSON_AddItemToArray(sweep, e);
    }
    free(sw);
}

/* A budget's key in the per-budget objects: as the "budgets" list prints it */
static const char *budget_key(char *buf, size_t cap, double f) {
    snprintf(buf, cap, "%.6g", f);
    return buf;
}

/* One per-budget quantity, x[seed][budget], as
 * {"<f>": {median, min, max, n, per_seed}, ...}. */
static void jbudgets(const compare *c, cJSON *o, const char *key, double x[MAX_SEEDS][MAX_BUDGETS]) {
    cJSON *d = cJSON_AddObjectToObject(o, key);
    double v[MAX_SEEDS];
    char f[32];
    for (int k = 0; k < c->nbudgets; k++) {
        for (int s = 0; s < c->nseeds; s++) v[s] = x[s][k];
        jstat(d, budget_key(f, sizeof f, c->budgets[k]), v, c->nseeds);
    }
}

/* --budgets, per arm: the final val (clock, updates) at each budget, f*,
 * the two speedups (null: even the full budget misses the target; their n
 * is the seeds that reached it), and per seed whether f* is the smallest
 * budget's (a lower bound on the speedup: nothing below it was run). */
static void json_arm_budgets(const compare *c, const armseed *m, cJSON *o) {
    double val[MAX_SEEDS][MAX_BUDGETS], train[MAX_SEEDS][MAX_BUDGETS], upd[MAX_SEEDS][MAX_BUDGETS];
    for (int s = 0; s < c->nseeds; s++)
        for (int k = 0; k < c->nbudgets; k++) {
            val[s][k] = m[s].r ? m[s].bval[k] : NAN;
            train[s][k] = m[s].r ? m[s].btrain[k] : NAN;
            upd[s][k] = m[s].r ? m[s].bupd[k] : NAN;
        }
    jbudgets(c, o, "budget_final_val", val);
    jbudgets(c, o, "budget_train_s", train);
    jbudgets(c, o, "budget_updates", upd);
    double f[MAX_SEEDS], sp[MAX_SEEDS], su[MAX_SEEDS];
    int reached = 0;
    cJSON *lb = cJSON_CreateArray();
    for (int s = 0; s < c->nseeds; s++) {
        const budget_hit *h = &m[s].hit;
        int ok = m[s].r && h->reached;
        f[s] = ok ? h->f_star : NAN;
        sp[s] = ok ? m[s].speedup_budget : NAN;
        su[s] = ok ? m[s].speedup_budget_steps : NAN;
        reached += ok;
        cJSON_AddItemToArray(lb, ok ? cJSON_CreateBool(h->lower_bound) : cJSON_CreateNull());
    }
    jstat(o, "budget_f_star", f, c->nseeds);
    jstat(o, "speedup_budget_to_target", sp, c->nseeds);
    jstat(o, "speedup_budget_steps_to_target", su, c->nseeds);
    cJSON_AddItemToObject(o, "budget_lower_bound", lb);
    cJSON_AddNumberToObject(o, "budget_reached", reached);
}

static void json_arm(const compare *c, int a, const armseed *m, cJSON *arms) {
    cJSON *o = cJSON_AddObjectToObject(arms, compare_arms[a].name);
    cJSON_AddItemToObject(o, "lr", jnum(compare_arm_lr(c, a)));
    cJSON_AddStringToObject(o, "schedule", compare_arm_sched_name(c, a));
    if (compare_arms[a].adam_tuned) cJSON_AddItemToObject(o, "adam_lr", jnum(compare_arm_lr(c, ARM_BASELINE)));
    double vals[MAX_SEEDS][NFIELDS], v[MAX_SEEDS];
    for (int s = 0; s < c->nseeds; s++) arm_values(&m[s], vals[s]);
    for (int k = 0; k < NFIELDS; k++) {
        for (int s = 0; s < c->nseeds; s++) v[s] = vals[s][k];
        jstat(o, arm_fields[k], v, c->nseeds);
    }
    if (c->nbudgets) json_arm_budgets(c, m, o);
}

/* The headline: the hybrid over the tuned baseline, and the measured
 * timing noise. Without the arm hybrid (hybrid-muon and hybrid-sf have none) there is none to report: the three
 * fields are null (they were the baseline over itself, 1.000, printed as
 * "hybrid over tuned baseline"). */
static void json_headline(const compare *c, armseed m[NARMS][MAX_SEEDS], stat4 noise, cJSON *o) {
    cJSON *tn = cJSON_AddObjectToObject(o, "timing_noise_pct");
    cJSON_AddNumberToObject(tn, "runs", noise.n);
    cJSON_AddItemToObject(tn, "median", jnum(noise.median));
    cJSON_AddItemToObject(tn, "max", jnum(noise.max));
    if (!c->arms[ARM_HYBRID]) {
        cJSON_AddNullToObject(o, "speedup_time_to_target");
        cJSON_AddNullToObject(o, "speedup_steps_to_target");
        cJSON_AddNullToObject(o, "final_val_ratio");
        return;
    }
    int ha = ARM_HYBRID;
    double v[MAX_SEEDS];
    for (int s = 0; s < c->nseeds; s++) v[s] = m[ha][s].r ? m[ha][s].speedup[2] : NAN;
    jstat(o, "speedup_time_to_target", v, c->nseeds);
    for (int s = 0; s < c->nseeds; s++) v[s] = m[ha][s].r ? m[ha][s].speedup_updates : NAN;
    jstat(o, "speedup_steps_to_target", v, c->nseeds);
    for (int s = 0; s < c->nseeds; s++) v[s] = m[ha][s].r ? m[ha][s].final_ratio : NAN;
    jstat(o, "final_val_ratio", v, c->nseeds);
}

static cJSON *results_json(compare *c, armseed m[NARMS][MAX_SEEDS], stat4 noise) {
    cJSON *o = cJSON_CreateObject();
    json_setup(c, o);
    json_sweep(c, o);
    cJSON *arms = cJSON_AddObjectToObject(o, "arms");
    for (int a = 0; a < NARMS; a++)
        if (c->arms[a]) json_arm(c, a, m[a], arms);
    json_headline(c, m, noise, o);
    return o;
}

/* ---------------------------------------------------------------- outputs */

/* every arm a series: with --arms naming them all the plots were refused */
_Static_assert(NARMS <= HPT_PLOT_MAX_SERIES, "an arm without a plot series");

static void write_plots(const compare *c, run *const *first) {
    hpt_plot_series s[NARMS];
    int ns = 0;
    for (int a = 0; a < NARMS; a++)
        if (first[a])
            s[ns++] = (hpt_plot_series){.name = compare_arms[a].name, .n = first[a]->n, .y = first[a]->val,
                                        .dashed = a != ARM_BASELINE && a != ARM_HYBRID};
    const run *hr = first[ARM_HYBRID], *b0 = first[ARM_BASELINE];
    int nb = hr ? hr->nb : 0;
    hpt_plot_band *bands = nb ? cli_xrealloc(NULL, (size_t)nb * sizeof *bands) : NULL;
    char title[256], path[4400];
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

/* results.json, then results.md rendered from it (and printed), then the
 * plots of the first seed. */
void compare_report(compare *c) {
    run *by[NARMS][MAX_SEEDS];
    tuned_runs(c, by);
    armseed m[NARMS][MAX_SEEDS];
    memset(m, 0, sizeof m);
    for (int a = 0; a < NARMS; a++)
        for (int s = 0; s < c->nseeds; s++)
            if (by[a][s] && by[ARM_BASELINE][s]) {
                measure(by[ARM_BASELINE][s], by[a][s], &m[a][s]);
                if (c->nbudgets) measure_budgets(c, a, s, by[ARM_BASELINE][s], &m[a][s]);
            }
    cJSON *res = results_json(c, m, timing_noise(c, by));
    char path[4400], *text = cJSON_Print(res), *md = NULL;
    if (!text) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    snprintf(path, sizeof path, "%s/results.json", c->out);
    size_t len = strlen(text), mdlen = 0;
    text = cli_xrealloc(text, len + 2);
    memcpy(text + len, "\n", 2);
    compare_save_text(path, text);
    FILE *f = open_memstream(&md, &mdlen);
    if (!f) { fprintf(stderr, "hpt: out of memory\n"); exit(1); }
    compare_render_md(res, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/results.md", c->out);
    compare_save_text(path, md);
    fputs(md, stdout);
    free(md); free(text);
    cJSON_Delete(res);
    run *first[NARMS];
    for (int a = 0; a < NARMS; a++) first[a] = c->arms[a] ? by[a][0] : NULL;
    if (first[ARM_BASELINE]) write_plots(c, first);
    fprintf(stderr, "compare: %s/results.json, results.md, val_vs_time.{svg,png}, val_vs_step.{svg,png}\n", c->out);
}

