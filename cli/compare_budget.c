/*
 * compare_budget.c — the arithmetic of `hpt compare --budgets`: the
 * smallest budget whose final val reaches a target, and what the arm spent
 * there. Pure (no I/O, no compare state), so tests/test_compare_budget.c
 * links this file alone.
 *
 * Why log f: a loss curve over steps is closer to a power law than to a
 * line, so between two budgets the final val is interpolated linearly in
 * log f (each halving of the budget weighs the same), and the time and
 * updates spent at the crossing with the same weights.
 */
#include "compare.h"

#include <math.h>

budget_hit compare_budget_hit(int n, const double *f, const double *v, double target) {
    budget_hit h = {0, 0, -1, -1, NAN, NAN};
    int i = 0;
    while (i < n && !(v[i] <= target)) i++;  /* NaN (no run) never reaches */
    if (i == n) return h;
    h.reached = 1;
    h.hi = i;
    if (i == 0) {
        /* below the smallest budget nothing was measured: report it, as a bound */
        h.lower_bound = 1;
        h.lo = 0;
        h.w = 1.0;
        h.f_star = f[0];
        return h;
    }
    h.lo = i - 1;
    h.w = (v[i - 1] - target) / (v[i - 1] - v[i]);  /* v[i-1] > target >= v[i] */
    h.f_star = exp((1.0 - h.w) * log(f[i - 1]) + h.w * log(f[i]));
    if (h.w == 1.0) h.f_star = f[i];  /* the budget itself, not exp(log(f)) */
    return h;
}

double compare_budget_at(const budget_hit *h, const double *y) {
    if (!h->reached) return NAN;
    /* (1-w) y0 + w y1: at w 1 (the crossing on a budget) exactly y1 */
    return (1.0 - h->w) * y[h->lo] + h->w * y[h->hi];
}
