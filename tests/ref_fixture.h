/*
 * ref_fixture.h — what the PyTorch reference tests (test_gpt2_ref.c,
 * test_cnn_ref.c) share: the fixture's tensor description, a checked read,
 * the tensor-table match and the tolerance comparison.
 */
#ifndef HPT_REF_FIXTURE_H
#define HPT_REF_FIXTURE_H

#include "hpt.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct ref_tensor { char name[17]; int ndim, shape[4]; size_t numel; } ref_tensor;

static int rd(FILE *f, void *p, size_t size, size_t n) { return fread(p, size, n, f) == n; }

/* The model's tensor table must be the fixture's: same names, shapes, order. */
static int table_matches(const hpt_model *m, const ref_tensor *rt, int ntensors) {
    int n;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &n);
    CHECK(n == ntensors, "model has %d tensors, fixture %d", n, ntensors);
    if (n != ntensors) return 0;
    int ok = 1;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const ref_tensor *t = &rt[i];
        int same = !strcmp(ti[i].name, t->name) && ti[i].ndim == t->ndim && ti[i].numel == t->numel &&
                   ti[i].offset == off;
        for (int k = 0; k < t->ndim && same; k++) same = ti[i].shape[k] == t->shape[k];
        CHECK(same, "tensor %d: model %s ndim %d [%d %d %d %d], fixture %s ndim %d [%d %d %d %d]", i,
              ti[i].name, ti[i].ndim, ti[i].shape[0], ti[i].shape[1], ti[i].shape[2], ti[i].shape[3],
              t->name, t->ndim, t->shape[0], t->shape[1], t->shape[2], t->shape[3]);
        ok &= same;
        off += t->numel;
    }
    return ok;
}

/* Largest |err| / (atol + rtol |want|) seen by compare(): how much of the
 * tolerance the worst element used (printed, to keep the margins visible). */
static double g_tol_used;

/* Compares n floats; counts one CHECK per array (the first failure is
 * detailed); returns the max abs error. */
static double compare(const char *what, const float *got, const float *want, size_t n,
                      double atol, double rtol) {
    double maxerr = 0.0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        double tol = atol + rtol * fabs(want[i]);
        if (!(e <= tol)) { if (!bad) first = i; bad++; }
        if (e / tol > g_tol_used || e != e) g_tol_used = e / tol;
        if (e > maxerr || e != e) maxerr = e;
    }
    CHECK(bad == 0, "%s: %zu of %zu elements out of tolerance; first [%zu] got %.9g want %.9g",
          what, bad, n, first, bad ? got[first] : 0.0, bad ? want[first] : 0.0);
    return maxerr;
}

#endif /* HPT_REF_FIXTURE_H */
