/*
 * compare_sweep.c — when `hpt compare` extends an arm's LR sweep: the best
 * rate at an edge of the sweep was not bracketed (a larger or a smaller
 * rate might do better still, and a hybrid that acts like a larger rate
 * would look like a speedup), so compare tries one more rate beyond that
 * edge, at the sweep's own ratio there, until the best lies inside or the
 * cap is reached. Pure (no I/O, no compare state), so
 * tests/test_compare_sweep.c links this file alone; compare.c runs the
 * rates it proposes.
 */
#include "compare.h"

#include <math.h>

const char *const compare_sweep_status_names[] = {"inside", "extend", "capped", "limit", "none"};

/* x rounded to 3 significant digits (a run directory's name prints it %g) */
static double round3(double x) {
    double e = pow(10.0, floor(log10(x)) - 2);
    return round(x / e) * e;
}

sweep_next compare_sweep_next(int n, const float *lr, const double *val, int done, int cap, float lr_min,
                              float lr_max) {
    sweep_next s = {SWEEP_NONE, -1, 0, 0};
    if (n < 1) return s;
    int lo = 0, hi = 0;
    for (int i = 0; i < n; i++) {
        if (lr[i] < lr[lo]) lo = i;
        if (lr[i] > lr[hi]) hi = i;
        if (!isnan(val[i]) && (s.best < 0 || val[i] < val[s.best])) s.best = i;
    }
    if (n < 2 || s.best < 0) return s;
    /* a tie with a rate inside the sweep counts as inside */
    for (int i = 0; i < n; i++)
        if (i != lo && i != hi && val[i] == val[s.best]) { s.status = SWEEP_INSIDE; return s; }
    /* inside; or a tie at both edges, which gives no direction */
    if ((s.best != hi && s.best != lo) || val[lo] == val[hi]) { s.status = SWEEP_INSIDE; return s; }
    s.edge = s.best == hi ? 1 : -1;
    if (done >= cap) { s.status = SWEEP_CAPPED; return s; }
    /* the edge's neighbour: the nearest rate inside */
    int e = s.edge > 0 ? hi : lo, nb = -1;
    for (int i = 0; i < n; i++)
        if (i != e && (nb < 0 || fabs(log((double)lr[i] / lr[e])) < fabs(log((double)lr[nb] / lr[e])))) nb = i;
    double ratio = (double)lr[e] / lr[nb];   /* > 1 at the upper edge, < 1 at the lower */
    double next = (double)lr[e] * ratio, r = round3(next);
    /* the rounded rate, unless rounding brought it back to the edge */
    if (s.edge > 0 ? (float)r > lr[e] : (float)r < lr[e]) next = r;
    /* train's range, both ways: a rate past it would be a run refused with
     * exit 2, failing the whole comparison after its other runs */
    if (s.edge > 0 ? next > lr_max : (float)next < lr_min) { s.status = SWEEP_LIMIT; return s; }
    s.status = SWEEP_EXTEND;
    s.lr = (float)next;
    return s;
}
