/* tier: fast (make test; tests/run.sh) */
/*
 * test_compare_budget.c — the budget sweep's arithmetic of `hpt compare
 * --budgets` (cli/compare_budget.c, linked alone): the crossing between the
 * two budgets around it, linear in log f; the time and updates at it with
 * the same weights; the smallest budget already reaching the target as a
 * lower bound (never extrapolated); a target missed everywhere; a missing
 * run (NaN); the first crossing when the curve is not monotone; the
 * baseline's own target, met exactly at f 1.
 */
#include "../cli/compare.h"
#include "test.h"

static const double F[4] = {0.5, 0.65, 0.8, 1.0};

/* final val falls from 3.0 at f 0.5 to 2.4 at f 1; the target 2.55 lies a
 * quarter of the way from 2.6 (f 0.8) to 2.4 (f 1) */
static void test_between(void) {
    const double v[4] = {3.0, 2.8, 2.6, 2.4}, t[4] = {5, 6.5, 8, 10}, u[4] = {50, 65, 80, 100};
    budget_hit h = compare_budget_hit(4, F, v, 2.55);
    CHECK(h.reached && !h.lower_bound && h.lo == 2 && h.hi == 3, "reached between 0.8 and 1: lo %d hi %d lb %d",
          h.lo, h.hi, h.lower_bound);
    CHECK_NEAR(h.w, 0.25, 1e-12, 0, "weight of the upper budget");
    double fs = exp(0.75 * log(0.8) + 0.25 * log(1.0));
    CHECK_NEAR(h.f_star, fs, 0, 1e-12, "f* in log f");
    CHECK(h.f_star > 0.8 && h.f_star < 0.8 + 0.25 * 0.2, "log-f f* %.6f lies below the linear-f one", h.f_star);
    CHECK_NEAR(compare_budget_at(&h, t), 8 + 0.25 * 2, 0, 1e-12, "train_s at f*");
    CHECK_NEAR(compare_budget_at(&h, u), 80 + 0.25 * 20, 0, 1e-12, "updates at f*");
}

/* the target exactly on a budget: that budget, bit for bit */
static void test_on_budget(void) {
    const double v[4] = {3.0, 2.8, 2.6, 2.4}, t[4] = {5.1, 6.3, 7.7, 9.9};
    budget_hit h = compare_budget_hit(4, F, v, 2.4);  /* the baseline's own final val at f 1 */
    CHECK(h.reached && !h.lower_bound && h.hi == 3 && h.f_star == 1.0, "own target: f* %.17g hi %d", h.f_star, h.hi);
    CHECK(compare_budget_at(&h, t) == 9.9, "train_s at f 1 exactly: %.17g", compare_budget_at(&h, t));
    h = compare_budget_hit(4, F, v, 2.8);
    CHECK(h.hi == 1 && h.f_star == 0.65 && compare_budget_at(&h, t) == 6.3, "on f 0.65: f* %.17g, t %.17g", h.f_star,
          compare_budget_at(&h, t));
}

/* already reached at the smallest budget: its values, flagged */
static void test_lower_bound(void) {
    const double v[4] = {2.3, 2.2, 2.1, 2.0}, t[4] = {5, 6.5, 8, 10};
    budget_hit h = compare_budget_hit(4, F, v, 2.4);
    CHECK(h.reached && h.lower_bound && h.f_star == 0.5 && compare_budget_at(&h, t) == 5,
          "lower bound at the smallest budget: lb %d f* %g t %g", h.lower_bound, h.f_star, compare_budget_at(&h, t));
}

static void test_missed(void) {
    const double v[4] = {3.0, 2.8, 2.6, 2.5}, t[4] = {5, 6.5, 8, 10};
    budget_hit h = compare_budget_hit(4, F, v, 2.4);
    CHECK(!h.reached && isnan(h.f_star) && isnan(compare_budget_at(&h, t)), "missed everywhere: none");
    const double w[4] = {3.0, NAN, 2.6, NAN};
    h = compare_budget_hit(4, F, w, 2.4);
    CHECK(!h.reached, "missing runs (NaN) never reach");
    h = compare_budget_hit(0, F, w, 2.4);
    CHECK(!h.reached, "no budgets: none");
}

/* not monotone: the smallest budget that reaches it counts, interpolated
 * from the budget below it */
static void test_first_crossing(void) {
    const double v[4] = {3.0, 2.0, 2.6, 2.4}, t[4] = {5, 6.5, 8, 10};
    budget_hit h = compare_budget_hit(4, F, v, 2.5);
    CHECK(h.reached && h.lo == 0 && h.hi == 1, "first crossing between 0.5 and 0.65: lo %d hi %d", h.lo, h.hi);
    CHECK_NEAR(h.w, 0.5, 1e-12, 0, "weight");
    CHECK_NEAR(h.f_star, sqrt(0.5 * 0.65), 0, 1e-12, "f* the geometric mean");
    CHECK_NEAR(compare_budget_at(&h, t), 5.75, 0, 1e-12, "train_s halfway");
}

/* two budgets, the test script's shape */
static void test_two(void) {
    const double f[2] = {0.5, 1.0}, v[2] = {2.9, 2.5}, t[2] = {1.0, 2.0};
    budget_hit h = compare_budget_hit(2, f, v, 2.5);
    CHECK(h.reached && !h.lower_bound && h.f_star == 1.0 && compare_budget_at(&h, t) == 2.0, "f 1: %g", h.f_star);
    h = compare_budget_hit(2, f, v, 2.7);
    CHECK_NEAR(h.f_star, sqrt(0.5), 0, 1e-12, "halfway in val: f* sqrt(0.5)");
    CHECK_NEAR(compare_budget_at(&h, t), 1.5, 0, 1e-12, "train_s halfway");
}

int main(void) {
    test_between();
    test_on_budget();
    test_lower_bound();
    test_missed();
    test_first_crossing();
    test_two();
    return TEST_REPORT("test_compare_budget");
}
