/*
 * test.h — a tiny test harness (sds testhelp.h style): CHECK records a
 * failure and goes on, TEST_REPORT prints "N passed, N failed" and returns the
 * exit status, so every test binary exits non-zero on any failure.
 */
#ifndef HPT_TEST_H
#define HPT_TEST_H

#include <math.h>
#include <stdio.h>

static int test_passed_, test_failed_;

#define CHECK(cond, ...) do {                                              \
    if (cond) test_passed_++;                                              \
    else {                                                                 \
        test_failed_++;                                                    \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
        fprintf(stderr, __VA_ARGS__);                                      \
        fputc('\n', stderr);                                               \
    }                                                                      \
} while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_NEAR(a, b, atol, rtol, what) do {                            \
    double a_ = (a), b_ = (b);                                             \
    CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_),                     \
          "%s: got %.9g, want %.9g", (what), a_, b_);                      \
} while (0)

#define TEST_REPORT(name) (                                                \
    printf("%s: %d passed, %d failed\n", (name), test_passed_, test_failed_), \
    test_failed_ ? 1 : 0)

#endif /* HPT_TEST_H */
