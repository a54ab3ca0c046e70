/*
 * compare_md.c — the one renderer of a comparison's tables: results.json
 * in, Markdown out. It reads nothing but results.json, so the table printed
 * by `hpt compare`, its results.md and bench/RESULTS.md (through
 * bench/results_md.py, which adds each workload's title, command and plot
 * links around `hpt compare --report DIR`) cannot disagree, and a
 * results.json from an older hpt renders as long as it has the fields.
 * A missing or null number prints as "n/a".
 */
#include "compare.h"
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }
static double num(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static const char *str(const cJSON *o, const char *key) {
    const char *s = cJSON_GetStringValue(get(o, key));
    return s ? s : "";
}

/* A number as Python's str() prints one read from JSON: integers plain,
 * others in the shortest form that reads back exactly. */
static const char *repr(char *buf, size_t cap, double v) {
    if (v == floor(v) && fabs(v) < 1e16) { snprintf(buf, cap, "%.0f", v); return buf; }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* "median [min, max]" of a {median, min, max, n} record ("median" alone for
 * one seed); fmt formats one number. */
static const char *stat_str(char *buf, size_t cap, const cJSON *d, const char *fmt, const char *suffix) {
    double n = num(d, "n"), med = num(d, "median");
    if (!(n > 0) || isnan(med)) { snprintf(buf, cap, "n/a"); return buf; }
    char a[40], b[40], c[40];
    snprintf(a, sizeof a, fmt, med);
    if (n == 1) { snprintf(buf, cap, "%s%s", a, suffix); return buf; }
    snprintf(b, sizeof b, fmt, num(d, "min"));
    snprintf(c, sizeof c, fmt, num(d, "max"));
    snprintf(buf, cap, "%s%s [%s%s, %s%s]", a, suffix, b, suffix, c, suffix);
    return buf;
}

static void md_setup(const cJSON *r, FILE *o) {
    const cJSON *seeds = get(r, "seeds");
    int ns = cJSON_GetArraySize(seeds);
    char ema[32], mlr[32];
    if (get(r, "cpu")) fprintf(o, "Measured on: %s.\n\n", str(r, "cpu"));
    /* without --schedules: the runs' one schedule (the task's default,
     * linear, unless --schedule; a results.json of an hpt from before D2Z
     * was the default has none and ran cosine); with --schedules: the ones swept and the
     * baseline's tuned one, and the end of the cosine row's decay */
    char sched[256];
    snprintf(sched, sizeof sched, "%.40s", *str(r, "baseline_schedule") ? str(r, "baseline_schedule") : "cosine");
    const cJSON *sc = get(r, "schedules"), *x;
    if (cJSON_GetArraySize(sc)) {
        size_t n = (size_t)snprintf(sched, sizeof sched, "schedules");
        cJSON_ArrayForEach(x, sc)  /* a results.json is input: every append bounded */
            if (n < sizeof sched) n += (size_t)snprintf(sched + n, sizeof sched - n, "%s %.40s", n > 9 ? "," : "",
                                                        cJSON_GetStringValue(x) ? cJSON_GetStringValue(x) : "?");
        if (n < sizeof sched)
            snprintf(sched + n, sizeof sched - n, " (baseline tuned to %.40s): cosine", str(r, "baseline_schedule"));
    }
    char side[64] = "";
    if (num(r, "jobs") > 1) snprintf(side, sizeof side, " (%.0f runs side by side)", num(r, "jobs"));
    fprintf(o, "Seeds %.0f..%.0f (%d), %.0f threads%s, OpenBLAS kernels %s, hybrid predictor `%s`, EMA decay %s, "
               "%s to %s x LR. %s.\n\n",
            ns ? cJSON_GetArrayItem(seeds, 0)->valuedouble : NAN,
            ns ? cJSON_GetArrayItem(seeds, ns - 1)->valuedouble : NAN, ns, num(r, "threads"), side,
            str(r, "blas_core"), str(r, "hybrid_predictor"), repr(ema, sizeof ema, num(r, "ema_decay")), sched,
            repr(mlr, sizeof mlr, num(r, "min_lr_ratio")), str(r, "protocol"));
}

/* One row of the sweep: an arm's final val at each LR, under schedule sn
 * (NULL: a sweep without --schedules, whose entries have none). */
static void md_sweep_row(const cJSON *r, const char *arm, const char *sn, FILE *o) {
    const cJSON *x, *s;
    fprintf(o, "| %s%s%s |", arm, sn ? " " : "", sn ? sn : "");
    cJSON_ArrayForEach(x, get(r, "lrs")) {
        const cJSON *hit = NULL;
        cJSON_ArrayForEach(s, get(r, "sweep"))
            if (!strcmp(str(s, "arm"), arm) && num(s, "lr") == x->valuedouble && !strcmp(str(s, "schedule"), sn ? sn : ""))
                hit = s;
        double v = hit ? num(hit, "final_val_loss") : NAN;
        if (!hit) fprintf(o, " - |");
        else if (isnan(v)) fprintf(o, " n/a |");
        else fprintf(o, " %.4f |", v);
    }
    const char *ts = cJSON_GetStringValue(get(get(r, "tuned_schedule"), arm));
    fprintf(o, " %g%s%s |\n", num(get(r, "tuned_lr"), arm), sn && ts ? " " : "", sn && ts ? ts : "");
}

/* The rates an arm's sweep added (results.json's sweep_extension): which,
 * and whether its best is inside now; nothing for a sweep left as given
 * with its best inside (or an older results.json without the record).
 * 1 if it said something. */
static int md_sweep_extension(const cJSON *r, FILE *o) {
    const cJSON *ext = get(r, "sweep_extension"), *e, *x;
    int cap = (int)num(r, "extend_sweep"), any = 0;
    cJSON_ArrayForEach(e, ext) {
        const char *st = str(e, "status"), *edge = str(e, "edge"), *dir = str(e, "direction");
        int nadd = cJSON_GetArraySize(get(e, "added_lrs"));
        int stuck = !strcmp(st, "capped") || !strcmp(st, "limit");
        if (!nadd && !stuck) continue;
        fprintf(o, "- %s: ", e->string);
        if (nadd) {
            const cJSON *scale = get(e, "lrs_scale");  /* muon-spectral's first rates: --lrs x it */
            fprintf(o, "its best rate lay at the %s edge of --lrs", !strcmp(dir, "up") ? "upper" : "lower");
            if (cJSON_IsNumber(scale)) fprintf(o, " x %g", scale->valuedouble);
            fprintf(o, ", so the sweep added lr");
            cJSON_ArrayForEach(x, get(e, "added_lrs")) fprintf(o, "%s %g", x == get(e, "added_lrs")->child ? "" : ",", x->valuedouble);
            fprintf(o, " (%d extension%s of at most %d); ", nadd, nadd > 1 ? "s" : "", cap);
        }
        double tuned = num(get(r, "tuned_lr"), e->string);
        if (!strcmp(st, "capped"))
            fprintf(o, "its best, lr %g, is %sat the %s edge%s: not bracketed, widen --lrs.\n", tuned, nadd ? "still " : "",
                    edge, cap ? " (the --extend-sweep cap)" : " of its sweep (--extend-sweep 0)");
        else if (!strcmp(st, "limit"))
            fprintf(o, "its best, lr %g, is %sat the %s edge (the next rate would pass %s, hpt train's limit): not "
                    "bracketed.\n", tuned, nadd ? "still " : "", edge, !strcmp(edge, "upper") ? "10" : "1e-9");
        else fprintf(o, "its best, lr %g, is inside now.\n", tuned);
        any = 1;
    }
    return any;
}

/* The arms whose AdamW rate is not their swept one (muon-spectral's
 * adam_lr, the tuned baseline's): said once under the sweep; 1 if any. */
static int md_adam_lr(const cJSON *r, FILE *o) {
    const cJSON *a;
    int any = 0;
    cJSON_ArrayForEach(a, get(r, "arms")) {
        if (!cJSON_IsNumber(get(a, "adam_lr"))) continue;
        fprintf(o, "- %s: its swept rates are Muon's (--muon-scale spectral); AdamW's, for the embeddings, head, "
                "gains and biases (--adam-lr), is the tuned baseline's, %g.\n", a->string, num(a, "adam_lr"));
        any = 1;
    }
    return any;
}

/* The LR sweep: final val loss per arm (and schedule, with --schedules)
 * and LR on the first seed. */
static void md_sweep(const cJSON *r, FILE *o) {
    const cJSON *lrs = get(r, "lrs"), *sweep = get(r, "sweep"), *x, *s;
    const cJSON *seeds = get(r, "seeds"), *scheds = get(r, "schedules");
    fprintf(o, "LR sweep (final val loss on seed %.0f; the tuned LR is the one with the lowest):\n\n",
            cJSON_GetArraySize(seeds) ? cJSON_GetArrayItem(seeds, 0)->valuedouble : NAN);
    fprintf(o, "| arm |");
    cJSON_ArrayForEach(x, lrs) fprintf(o, " lr %g |", x->valuedouble);
    fprintf(o, " tuned |\n|---|");
    for (int i = 0; i <= cJSON_GetArraySize(lrs); i++) fprintf(o, "---|");
    fputc('\n', o);
    for (int a = 0; a < NARMS; a++) {
        if (!ARM_SWEEPS(a)) continue;
        int any = 0;
        cJSON_ArrayForEach(s, sweep) any |= !strcmp(str(s, "arm"), compare_arms[a].name);
        if (!any) continue;
        /* schedule-free sweeps LRs alone: one row, whatever --schedules says */
        if (!cJSON_GetArraySize(scheds) || a == ARM_SF) { md_sweep_row(r, compare_arms[a].name, NULL, o); continue; }
        cJSON_ArrayForEach(x, scheds) md_sweep_row(r, compare_arms[a].name, cJSON_GetStringValue(x), o);
    }
    fputc('\n', o);
    int notes = md_sweep_extension(r, o);
    notes |= md_adam_lr(r, o);   /* one list under the table */
    if (notes) fputc('\n', o);
}

/* Seeds that reached the target, of all. */
static void reached_of(const cJSON *a, int *reached, int *n) {
    const cJSON *x;
    *n = cJSON_GetArraySize(get(get(a, "final_val_loss"), "per_seed"));
    *reached = 0;
    cJSON_ArrayForEach(x, get(get(a, "time_to_target_s"), "per_seed")) *reached += cJSON_IsNumber(x);
}

static void md_arm_row(const cJSON *r, const char *arm, const cJSON *a, FILE *o) {
    char b[8][256];
    int reached, n;
    reached_of(a, &reached, &n);
    const cJSON *ttt = get(a, "time_to_target_s");
    if (reached == n) stat_str(b[0], sizeof b[0], ttt, "%.1f", "");
    else if (reached == 0) snprintf(b[0], sizeof b[0], "never");
    else {
        char t[200];
        snprintf(b[0], sizeof b[0], "%s (%d of %d)", stat_str(t, sizeof t, ttt, "%.1f", ""), reached, n);
    }
    const cJSON *pp = get(a, "phase_predict"), *oj = get(a, "outer_jumps_kept");
    char label[96];
    int hyb = !strcmp(arm, "hybrid") || !strcmp(arm, "hybrid-ema");  /* the arms with the chosen predictor */
    snprintf(label, sizeof label, hyb ? "%s (%s)" : "%s", arm, str(r, "hybrid_predictor"));
    if (cJSON_GetArraySize(get(r, "schedules")))  /* each arm's tuned schedule */
        snprintf(label + strlen(label), sizeof label - strlen(label), ", %s", str(a, "schedule"));
    fprintf(o, "| %s | %g | %s | %s | %s | %s | %s | %d/%d | %s | %s | %.0f | %.0f (max %.0f) | %s | %.0f |\n", label,
            num(a, "lr"), stat_str(b[1], sizeof b[1], get(a, "final_val_loss"), "%.4f", ""),
            stat_str(b[2], sizeof b[2], get(a, "final_val_ratio"), "%.4f", ""), b[0],
            stat_str(b[3], sizeof b[3], get(a, "speedup_time_to_target"), "%.2f", "x"),
            stat_str(b[6], sizeof b[6], get(a, "speedup_steps_to_target"), "%.2f", "x"), reached, n,
            stat_str(b[4], sizeof b[4], get(a, "speedup_to_level_1of3"), "%.2f", "x"),
            stat_str(b[5], sizeof b[5], get(a, "speedup_to_level_2of3"), "%.2f", "x"),
            num(get(a, "backward_passes"), "median"), num(pp, "median"), num(pp, "max"),
            stat_str(b[7], sizeof b[7], oj, "%.0f", ""), num(get(a, "peak_rss_bytes"), "median") / 1048576.0);
}

/* Per arm: medians over seeds with their ranges. */
static void md_arms(const cJSON *r, FILE *o) {
    fprintf(o, "| arm | lr | final val | final val / baseline | time to target (s) | speedup to target "
               "| speedup in updates | reached | speedup to level 1/3 | speedup to level 2/3 | backward "
               "| predict steps | outer jumps kept | peak RSS MiB |\n");
    fprintf(o, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < NARMS; i++) {
        const cJSON *a = get(get(r, "arms"), compare_arms[i].name);
        if (a) md_arm_row(r, compare_arms[i].name, a, o);
    }
    fputc('\n', o);
}

/* Quality at equal budgets of training clock. */
static void md_budgets(const cJSON *r, FILE *o) {
    fprintf(o, "Best val loss at equal training-clock budgets (share of the tuned baseline's median training "
               "time), median over seeds:\n\n| arm | 25%% | 50%% | 75%% | 100%% |\n|---|---|---|---|---|\n");
    for (int i = 0; i < NARMS; i++) {
        const cJSON *a = get(get(r, "arms"), compare_arms[i].name);
        if (!a) continue;
        fprintf(o, "| %s |", compare_arms[i].name);
        for (int pct = 25; pct <= 100; pct += 25) {
            char key[64], b[256];
            snprintf(key, sizeof key, "best_val_at_%dpct_clock", pct);
            stat_str(b, sizeof b, get(a, key), "%.4f", "");
            fprintf(o, " %.*s |", (int)strcspn(b, " "), b);
        }
        fputc('\n', o);
    }
    fputc('\n', o);
}

/* A budget speedup "median [min, max]" (n seeds reached), ">=" on each
 * number that is, or may be, a lower bound: the seeds that reached the
 * target at the smallest budget give only a bound, so the median and max
 * are bounds when any seed is one, the min when its own seed is. */
static const char *budget_speedup_str(char *buf, size_t cap, const cJSON *d, const cJSON *lbs) {
    double med = num(d, "median"), lo = num(d, "min"), hi = num(d, "max");
    if (!(num(d, "n") > 0) || isnan(med)) { snprintf(buf, cap, "none"); return buf; }
    int any_lb = 0, min_lb = 0, i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, get(d, "per_seed")) {
        int lb = cJSON_IsTrue(cJSON_GetArrayItem(lbs, i++));
        any_lb |= lb;
        min_lb |= lb && cJSON_IsNumber(x) && x->valuedouble == lo;
    }
    const char *ge = any_lb ? ">=" : "";
    if (num(d, "n") == 1) { snprintf(buf, cap, "%s%.2fx", ge, med); return buf; }
    snprintf(buf, cap, "%s%.2fx [%s%.2fx, %s%.2fx]", ge, med, min_lb ? ">=" : "", lo, ge, hi);
    return buf;
}

/* --budgets: final val at each budget and the speedup at the smallest
 * budget reaching the target, per arm. */
static void md_budget_sweep(const cJSON *r, FILE *o) {
    const cJSON *bs = get(r, "budgets"), *x;
    if (cJSON_GetArraySize(bs) < 2) return;  /* none, or 1 alone (an older --budgets 1): no budget run trained */
    fprintf(o, "Budget sweep: every arm also trained with its schedule compressed to a fraction f of the full run's "
               "steps; its speedup is the tuned baseline's full-budget training time (updates) over the arm's at the "
               "smallest f whose final val reaches the baseline's full-budget final val on that seed, final val, time "
               "and updates interpolated linearly in log f between the two budgets around the crossing (\">=\": "
               "already reached at the smallest budget, a lower bound). Final val, median over seeds:\n\n| arm |");
    cJSON_ArrayForEach(x, bs) fprintf(o, " f=%g |", x->valuedouble);
    fprintf(o, " f* | speedup to target | speedup in updates | reached |\n|---|");
    for (int i = 0; i < cJSON_GetArraySize(bs) + 4; i++) fprintf(o, "---|");
    fputc('\n', o);
    for (int i = 0; i < NARMS; i++) {
        const cJSON *a = get(get(r, "arms"), compare_arms[i].name);
        if (!a || !get(a, "budget_final_val")) continue;
        fprintf(o, "| %s |", compare_arms[i].name);
        cJSON_ArrayForEach(x, bs) {
            char key[32], b[256];
            snprintf(key, sizeof key, "%.6g", x->valuedouble);
            stat_str(b, sizeof b, get(get(a, "budget_final_val"), key), "%.4f", "");
            fprintf(o, " %.*s |", (int)strcspn(b, " "), b);
        }
        char f[256], sp[256], su[256];
        const cJSON *lbs = get(a, "budget_lower_bound");
        stat_str(f, sizeof f, get(a, "budget_f_star"), "%.3f", "");
        fprintf(o, " %s | %s | %s | %.0f/%d |\n", f, budget_speedup_str(sp, sizeof sp, get(a, "speedup_budget_to_target"), lbs),
                budget_speedup_str(su, sizeof su, get(a, "speedup_budget_steps_to_target"), lbs),
                num(a, "budget_reached"), cJSON_GetArraySize(lbs));
    }
    fputc('\n', o);
}

static void md_headline(const cJSON *r, FILE *o) {
    const cJSON *h = get(r, "speedup_time_to_target"), *f = get(r, "final_val_ratio"), *x;
    if (!cJSON_IsObject(h)) {  /* null: the arm hybrid did not run (hybrid-muon, hybrid-sf may have) */
        fprintf(o, "No headline: it is the hybrid arm's (the outer step on the tuned baseline), and --arms left it "
                   "out; each arm's measures over the tuned baseline are in the table above.\n");
        return;
    }
    fprintf(o, "Headline (hybrid over tuned baseline): speedup_time_to_target median **%.3f** (per seed ",
            num(h, "median"));
    int i = 0;
    cJSON_ArrayForEach(x, get(h, "per_seed")) {
        if (i++) fprintf(o, ", ");
        if (cJSON_IsNumber(x)) fprintf(o, "%.3f", x->valuedouble); else fprintf(o, "never");
    }
    fprintf(o, "); final_val_ratio median %.4f [%.4f, %.4f]", num(f, "median"), num(f, "min"), num(f, "max"));
    const cJSON *u = get(r, "speedup_steps_to_target");
    if (u) fprintf(o, "; speedup_steps_to_target (optimizer updates, free of timing noise) median %.3f", num(u, "median"));
    fprintf(o, ".\n");
    const cJSON *tn = get(r, "timing_noise_pct");
    if (num(tn, "runs") > 0)
        fprintf(o, "\nTiming noise: %.0f hybrid-arm runs never predicted and trained the baseline's exact steps; "
                   "their training clock, less the controller's own time, differs from the baseline's by "
                   "%.1f%% median, %.1f%% at most.\n", num(tn, "runs"), num(tn, "median"), num(tn, "max"));
}

void compare_render_md(const cJSON *r, FILE *o) {
    md_setup(r, o);
    md_sweep(r, o);
    md_arms(r, o);
    md_budgets(r, o);
    md_budget_sweep(r, o);
    md_headline(r, o);
}

int compare_report_dir(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", dir);
    char *text = cli_read_text(path);
    if (!text) { fprintf(stderr, "hpt: cannot read '%s'\n", path); return 1; }
    cJSON *r = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(r) || !cJSON_IsObject(get(r, "arms")) || !cJSON_IsArray(get(r, "seeds"))) {
        fprintf(stderr, "hpt: '%s' is not a results.json of hpt compare (no \"arms\" object, \"seeds\" list)\n", path);
        cJSON_Delete(r);
        return 1;
    }
    compare_render_md(r, stdout);
    cJSON_Delete(r);
    return 0;
}
