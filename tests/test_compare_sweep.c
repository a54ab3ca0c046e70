/* tier: fast (make test; tests/run.sh) */
/*
 * test_compare_sweep.c — when `hpt compare` extends an arm's LR sweep
 * (cli/compare_sweep.c, linked alone): the best inside is left alone; the
 * best at the upper (lower) edge proposes one rate beyond it at the sweep's
 * ratio there (x2 for a doubling sweep, the edge's own for an uneven one),
 * rounded to 3 digits; a sweep given in any order; repeated extensions
 * until the best is inside; the cap; the 10 limit on a rate; ties; NaN
 * (diverged) never best; one rate or none finite: nothing to bracket.
 */
#include "../cli/compare.h"
#include "test.h"

/* a bowl in log lr with its minimum at lr m: the final val of each rate */
static void bowl(int n, const float *lr, double *v, double m) {
    for (int i = 0; i < n; i++) v[i] = 2.0 + 0.1 * pow(log((double)lr[i] / m), 2);
}

static void test_inside(void) {
    const float lr[3] = {2e-3f, 4e-3f, 8e-3f};
    double v[3];
    bowl(3, lr, v, 4.5e-3);
    sweep_next s = compare_sweep_next(3, lr, v, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_INSIDE && s.best == 1 && s.edge == 0, "best inside: status %d best %d edge %d", s.status,
          s.best, s.edge);
}

static void test_upper(void) {
    const float lr[3] = {2e-3f, 4e-3f, 8e-3f};
    const double v[3] = {2.5, 2.4, 2.3};
    sweep_next s = compare_sweep_next(3, lr, v, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.edge == 1 && s.best == 2 && s.lr == 1.6e-2f, "upper edge: x2 to %g (status %d)",
          (double)s.lr, s.status);
    /* the demo's rates in another order: the same */
    const float l2[3] = {8e-3f, 2e-3f, 4e-3f};
    const double v2[3] = {2.3, 2.5, 2.4};
    s = compare_sweep_next(3, l2, v2, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.best == 0 && s.lr == 1.6e-2f, "unsorted: %g", (double)s.lr);
    /* an uneven sweep: the edge's own ratio (1e-2 / 3e-3), rounded to 3 digits */
    const float l3[2] = {3e-3f, 1e-2f};
    const double v3[2] = {2.6, 2.5};
    s = compare_sweep_next(2, l3, v3, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.lr == 3.33e-2f, "3e-3,1e-2 extends to 3.33e-2, got %.9g", (double)s.lr);
}

static void test_lower(void) {
    const float lr[3] = {2e-3f, 4e-3f, 8e-3f};
    const double v[3] = {2.3, 2.4, 2.5};
    sweep_next s = compare_sweep_next(3, lr, v, 1, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.edge == -1 && s.best == 0 && s.lr == 1e-3f, "lower edge: /2 to %g",
          (double)s.lr);
    const float l3[2] = {3e-3f, 1e-2f};
    const double v3[2] = {2.5, 2.6};
    s = compare_sweep_next(2, l3, v3, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.lr == 9e-4f, "3e-3,1e-2 extends down to 9e-4, got %.9g", (double)s.lr);
}

/* what compare does: propose, "train", repeat until inside */
static int extend_until_inside(float *lr, int n, double m, int cap, sweep_next *last) {
    double v[16];
    int done = 0;
    for (;;) {
        bowl(n, lr, v, m);
        *last = compare_sweep_next(n, lr, v, done, cap, 1e-9f, 10);
        if (last->status != SWEEP_EXTEND) return n;
        lr[n++] = last->lr;
        done++;
    }
}

static void test_repeated(void) {
    float lr[16] = {2e-3f, 4e-3f, 8e-3f};
    sweep_next s;
    int n = extend_until_inside(lr, 3, 1.4e-2, 3, &s);  /* the optimum between 8e-3 and 1.6e-2 */
    CHECK(n == 5 && lr[3] == 1.6e-2f && lr[4] == 3.2e-2f && s.status == SWEEP_INSIDE && lr[s.best] == 1.6e-2f,
          "two extensions bracket 1.6e-2: n %d status %d", n, s.status);
    /* bracketed by the third (the cap's last): inside, not capped */
    float l2[16] = {2e-3f, 4e-3f, 8e-3f};
    n = extend_until_inside(l2, 3, 2.5e-2, 3, &s);
    CHECK(n == 6 && l2[5] == 6.4e-2f && s.status == SWEEP_INSIDE && l2[s.best] == 3.2e-2f,
          "the third extension brackets 3.2e-2: n %d status %d", n, s.status);
    /* the lower edge, repeatedly */
    float l3[16] = {2e-3f, 4e-3f, 8e-3f};
    n = extend_until_inside(l3, 3, 8e-4, 3, &s);
    CHECK(n == 5 && l3[3] == 1e-3f && l3[4] == 5e-4f && s.status == SWEEP_INSIDE, "down twice: n %d status %d", n,
          s.status);
}

static void test_cap(void) {
    float lr[16] = {2e-3f, 4e-3f, 8e-3f};
    sweep_next s;
    int n = extend_until_inside(lr, 3, 1.0, 3, &s);  /* the optimum far above: the cap stops it */
    CHECK(n == 6 && s.status == SWEEP_CAPPED && s.edge == 1 && lr[s.best] == 6.4e-2f,
          "capped after 3: n %d status %d best %g", n, s.status, n ? (double)lr[s.best] : 0.0);
    n = extend_until_inside(lr, 3, 1e-6, 0, &s);
    CHECK(n == 3 && s.status == SWEEP_CAPPED && s.edge == -1, "cap 0: no extension, at the lower edge (status %d)",
          s.status);
    /* the upper limit on a rate */
    const float big[2] = {4.0f, 8.0f};
    const double v[2] = {2.5, 2.4};
    s = compare_sweep_next(2, big, v, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_LIMIT && s.edge == 1, "16 > 10: limit (status %d)", s.status);
    /* and the lower one: 2e-9 of {2e-9, 10} would go on to
     * 4e-19, a rate train refuses; 1e-9 itself is still tried */
    const float wide[2] = {2e-9f, 10.0f}, low[2] = {2e-9f, 4e-9f};
    const double vl[2] = {2.4, 2.5};
    s = compare_sweep_next(2, wide, vl, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_LIMIT && s.edge == -1, "4e-19 < 1e-9: limit (status %d, lr %g)", s.status, (double)s.lr);
    s = compare_sweep_next(2, low, vl, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.lr == 1e-9f, "2e-9 / 2 = 1e-9: extended (status %d, lr %g)", s.status,
          (double)s.lr);
}

static void test_degenerate(void) {
    const float lr[3] = {2e-3f, 4e-3f, 8e-3f};
    const double nanv[3] = {NAN, NAN, NAN};
    sweep_next s = compare_sweep_next(3, lr, nanv, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_NONE && s.best == -1, "all diverged: nothing to bracket (status %d)", s.status);
    const double one[1] = {2.0};
    s = compare_sweep_next(1, lr, one, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_NONE && s.best == 0, "one rate: nothing to bracket (status %d)", s.status);
    /* the largest rate diverged: the best (the middle) is inside */
    const double dv[3] = {2.5, 2.4, NAN};
    s = compare_sweep_next(3, lr, dv, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_INSIDE && s.best == 1, "diverged edge: inside (status %d best %d)", s.status, s.best);
    /* the middle diverged, the smallest is best: extend down */
    const double mv[3] = {2.4, NAN, 2.5};
    s = compare_sweep_next(3, lr, mv, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_EXTEND && s.edge == -1 && s.lr == 1e-3f, "NaN middle: down to %g", (double)s.lr);
    /* a tie between an edge and the inside: inside */
    const double tv[3] = {2.5, 2.3, 2.3};
    s = compare_sweep_next(3, lr, tv, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_INSIDE, "tie with the inside: inside (status %d)", s.status);
    const double ev[2] = {2.3, 2.3};
    s = compare_sweep_next(2, lr, ev, 0, 3, 1e-9f, 10);
    CHECK(s.status == SWEEP_INSIDE && s.edge == 0, "a tie at both edges: no direction (status %d)", s.status);
}

int main(void) {
    test_inside();
    test_upper();
    test_lower();
    test_repeated();
    test_cap();
    test_degenerate();
    return TEST_REPORT("test_compare_sweep");
}
