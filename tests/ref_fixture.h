/*
 * ref_fixture.h — what the PyTorch reference tests (test_gpt2_ref.c,
 * test_cnn_ref.c) share. Both fixtures (written by the scripts in
 * tools/ref/) hold, after a model-specific header and input batch, the same
 * results: the tensor table, the initial parameters, the logits, loss and
 * gradients there, and the losses, grad norms and final parameters of a few
 * AdamW steps on that batch. Both tests compare, at 1 and then 2 threads,
 *   1. the logits, 2. the loss, 3. every gradient tensor, 4. the training
 *   steps and the final parameters,
 * and then require the two thread counts to agree bit for bit. This header
 * reads the shared part of a fixture and does phases 2-4 (less the final
 * parameters, which the GPT-2 test compares with an exception), the logits'
 * comparison and the thread check; each test reads its own header, builds
 * its model and feeds it its batch.
 */
#ifndef HPT_REF_FIXTURE_H
#define HPT_REF_FIXTURE_H

#include "hpt.h"
#include "test.h"
#include "../src/train/optim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTEPS_MAX 64

/* Tolerances, |got - want| <= atol + rtol * |want|. Each test's header
 * comment lists the worst errors observed and the share of these they use. */
#define LOGIT_ATOL 1e-5
#define LOGIT_RTOL 1e-5
#define LOSS_ATOL  1e-6
#define LOSS_RTOL  1e-6
#define GRAD_ATOL  1e-6
#define GRAD_RTOL  1e-4
#define STEP_ATOL  2e-6
#define STEP_RTOL  1e-6
#define NORM_ATOL  1e-5
#define NORM_RTOL  1e-5
#define FINAL_ATOL 1e-5
#define FINAL_RTOL 1e-4

typedef struct ref_tensor { char name[17]; int ndim, shape[4]; size_t numel; } ref_tensor;

/* The part both fixtures share. The sizes of the inputs (token ids or
 * pixels, 4 bytes each), targets and logits depend on the model: the test
 * sets them before ref_read_body. */
typedef struct ref_data {
    int ntensors, nsteps;
    ref_tensor t[HPT_MAX_TENSORS];
    size_t nparams, ninputs, ntargets, nlogits;
    void *inputs;    /* int token ids (GPT-2) or float pixels (CNN) */
    int *targets;
    float *params, *logits, loss, *grads, losses[NSTEPS_MAX], norms[NSTEPS_MAX], *final;
} ref_data;

/* What one run at one thread count produced, for the cross-thread check. */
typedef struct run_out {
    float *logits;   /* (nlogits) */
    float *grads;    /* (nparams) */
    float *final;    /* (nparams) */
    float loss, losses[NSTEPS_MAX], norms[NSTEPS_MAX];
} run_out;

static int rd(FILE *f, void *p, size_t size, size_t n) { return fread(p, size, n, f) == n; }

/* Opens a fixture and checks its 8-byte magic and version 1; NULL (with a
 * message) when it cannot. */
static FILE *ref_open(const char *path, const char *magic) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s (run from the repo root)\n", path); return NULL; }
    char got[8];
    int32_t version;
    if (!rd(f, got, 1, 8) || memcmp(got, magic, 8) || !rd(f, &version, 4, 1) || version != 1) {
        fprintf(stderr, "%s: not a version 1 %.8s fixture\n", path, magic);
        fclose(f);
        return NULL;
    }
    return f;
}

/* Reads nt tensor descriptions (name[16], ndim, shape[4]) into d. */
static int ref_read_table(FILE *f, ref_data *d, int nt) {
    d->ntensors = nt;
    d->nparams = 0;
    for (int i = 0; i < nt; i++) {
        ref_tensor *t = &d->t[i];
        int32_t dims[5];
        if (!rd(f, t->name, 1, 16) || !rd(f, dims, 4, 5) || dims[0] < 1 || dims[0] > 4) return 0;
        t->name[16] = 0;
        t->ndim = dims[0];
        t->numel = 1;
        for (int k = 0; k < 4; k++) t->shape[k] = dims[1 + k];
        for (int k = 0; k < t->ndim; k++) t->numel *= (size_t)t->shape[k];
        d->nparams += t->numel;
    }
    return 1;
}

/* Reads what follows the tensor table, the inputs and targets to the final
 * parameters, and closes f. The file must end there: trailing bytes mean the
 * layout drifted, and fail. */
static int ref_read_body(FILE *f, ref_data *d, const char *path) {
    const size_t P = d->nparams;
    d->inputs = malloc(d->ninputs * 4);
    d->targets = malloc(d->ntargets * sizeof(int));
    d->params = malloc(P * sizeof(float));
    d->logits = malloc(d->nlogits * sizeof(float));
    d->grads = malloc(P * sizeof(float));
    d->final = malloc(P * sizeof(float));
    int ok = d->inputs && d->targets && d->params && d->logits && d->grads && d->final &&
             rd(f, d->inputs, 4, d->ninputs) && rd(f, d->targets, 4, d->ntargets) &&
             rd(f, d->params, 4, P) && rd(f, d->logits, 4, d->nlogits) && rd(f, &d->loss, 4, 1) &&
             rd(f, d->grads, 4, P) && rd(f, d->losses, 4, d->nsteps) && rd(f, d->norms, 4, d->nsteps) &&
             rd(f, d->final, 4, P);
    char extra;
    ok = ok && fread(&extra, 1, 1, f) == 0;
    fclose(f);
    if (!ok) fprintf(stderr, "%s: truncated or oversized fixture\n", path);
    return ok;
}

static void ref_data_free(ref_data *d) {
    free(d->inputs); free(d->targets);
    free(d->params); free(d->logits); free(d->grads); free(d->final);
}

/* The model's tensor table must be the fixture's: same names, shapes, order. */
static int table_matches(const hpt_model *m, const ref_data *d) {
    int n;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &n);
    CHECK(n == d->ntensors, "model has %d tensors, fixture %d", n, d->ntensors);
    if (n != d->ntensors) return 0;
    int ok = 1;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const ref_tensor *t = &d->t[i];
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

/* The model must have the fixture's parameters, tensor by tensor; on
 * success they are loaded into its arena. tool: the script that writes the
 * fixture, named in the hint. */
static int ref_load_params(hpt_model *m, const ref_data *d, const char *tool) {
    size_t np;
    float *params = hpt_model_params(m, &np);
    CHECK(np == d->nparams, "model has %zu params, fixture %zu", np, d->nparams);
    if (np != d->nparams || !table_matches(m, d)) {
        fprintf(stderr, "tensor table differs from the fixture: regenerate it with "
                        "/usr/bin/python3 %s or fix the model\n", tool);
        return 0;
    }
    memcpy(params, d->params, np * sizeof(float));
    return 1;
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

/* Share of the tolerance |got - want| uses. */
static double tol_share(double got, double want, double atol, double rtol) {
    return fabs(got - want) / (atol + rtol * fabs(want));
}

/* The logits of a forward pass without targets: NULL (a failed check)
 * unless the model gives n_out of them per row of row floats. */
static const float *ref_logits(hpt_model *m, const hpt_batch *inputs, int n_out, int row) {
    CHECK(hpt_model_forward(m, inputs, NULL) == HPT_OK, "forward: %s", hpt_errmsg());
    int got_n = 0, got_row = 0;
    const float *lg = hpt_model_logits(m, &got_n, &got_row);
    int ok = lg && got_n == n_out && got_row == row;
    CHECK(ok, "logits %p n_out %d row %d, want %d and %d", (const void *)lg, got_n, got_row, n_out, row);
    return ok ? lg : NULL;
}

/* 1. logits (got: the model's, laid out as the fixture's) */
static void check_logits(const float *got, const ref_data *d, run_out *out) {
    memcpy(out->logits, got, d->nlogits * sizeof(float));
    g_tol_used = 0.0;
    double e = compare("logits", got, d->logits, d->nlogits, LOGIT_ATOL, LOGIT_RTOL);
    printf("  logits          max abs err %.3g (%.0f%% of tolerance)\n", e, 100 * g_tol_used);
}

/* 2. the loss, a forward pass with targets */
static void check_loss(hpt_model *m, const hpt_batch *b, const ref_data *d, run_out *out) {
    float loss = NAN;
    CHECK(hpt_model_forward(m, b, &loss) == HPT_OK, "forward: %s", hpt_errmsg());
    CHECK_NEAR(loss, d->loss, LOSS_ATOL, LOSS_RTOL, "loss");
    printf("  loss            %.7f (torch %.7f) abs err %.3g (%.0f%% of tolerance)\n", loss, d->loss,
           fabs(loss - d->loss), 100 * tol_share(loss, d->loss, LOSS_ATOL, LOSS_RTOL));
    out->loss = loss;
}

/* 3. the gradients of that loss, tensor by tensor. verbose: print each. */
static void check_grads(hpt_model *m, const ref_data *d, run_out *out, int verbose) {
    hpt_model_zero_grad(m);
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    const float *grads = hpt_model_grads(m, NULL);
    for (int i = 0; i < nt; i++) {
        char what[64];
        snprintf(what, sizeof what, "grad %s", ti[i].name);
        const float *g = grads + ti[i].offset, *w = d->grads + ti[i].offset;
        g_tol_used = 0.0;
        double e = compare(what, g, w, ti[i].numel, GRAD_ATOL, GRAD_RTOL);
        double mx = 0.0;
        for (size_t k = 0; k < ti[i].numel; k++) if (fabs(w[k]) > mx) mx = fabs(w[k]);
        if (verbose) printf("  grad %-10s max abs err %.3g (max |grad| %.3g, %.0f%% of tolerance)\n",
                            ti[i].name, e, mx, 100 * g_tol_used);
    }
    memcpy(out->grads, grads, d->nparams * sizeof(float));
}

/* 4. training: from the fixture's parameters, nsteps of hpt's optimizer
 * step on batch b, step it at lr[it] (opt's lr ignored); compares each
 * step's loss and grad norm. The final parameters are left in the model
 * (the test compares them) and copied to out. */
static void check_training(hpt_model *m, const hpt_batch *b, const hpt_adamw *opt, const float *lr,
                           const ref_data *d, run_out *out, int verbose) {
    const size_t P = d->nparams;
    memcpy(hpt_model_params(m, NULL), d->params, P * sizeof(float));
    float *mom = calloc(2 * P, sizeof(float));
    CHECK(mom != NULL, "out of memory");
    if (!mom) return;
    double maxl = 0.0, maxn = 0.0, usel = 0.0, usen = 0.0;
    for (int it = 0; it < d->nsteps; it++) {
        hpt_model_zero_grad(m);
        float l = NAN, norm = NAN;
        CHECK(hpt_model_forward(m, b, &l) == HPT_OK, "step %d forward: %s", it, hpt_errmsg());
        CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "step %d backward: %s", it, hpt_errmsg());
        hpt_adamw o = *opt;
        o.lr = lr[it];
        CHECK(hpt_optim_step(m, mom, mom + P, &o, it + 1, &norm) == HPT_OK, "step %d: %s", it, hpt_errmsg());
        char what[64];
        snprintf(what, sizeof what, "step %d loss", it);
        CHECK_NEAR(l, d->losses[it], STEP_ATOL, STEP_RTOL, what);
        snprintf(what, sizeof what, "step %d grad norm", it);
        CHECK_NEAR(norm, d->norms[it], NORM_ATOL, NORM_RTOL, what);
        usel = fmax(usel, tol_share(l, d->losses[it], STEP_ATOL, STEP_RTOL));
        usen = fmax(usen, tol_share(norm, d->norms[it], NORM_ATOL, NORM_RTOL));
        maxl = fmax(maxl, fabs(l - d->losses[it]));
        maxn = fmax(maxn, fabs(norm - d->norms[it]));
        out->losses[it] = l;
        out->norms[it] = norm;
        if (verbose)
            printf("  step %2d lr %.6f loss %.7f (torch %.7f) norm %.6f (torch %.6f)\n", it,
                   o.lr, l, d->losses[it], norm, d->norms[it]);
    }
    printf("  %d steps: losses max abs err %.3g (%.0f%% of tolerance), grad norms max abs err %.3g "
           "(%.0f%%)\n", d->nsteps, maxl, 100 * usel, maxn, 100 * usen);
    memcpy(out->final, hpt_model_params(m, NULL), P * sizeof(float));
    free(mom);
}

static int run_alloc(run_out *o, const ref_data *d) {
    memset(o, 0, sizeof *o);
    o->logits = calloc(d->nlogits, sizeof(float));
    o->grads = calloc(d->nparams, sizeof(float));
    o->final = calloc(d->nparams, sizeof(float));
    return o->logits && o->grads && o->final;
}

static void run_free(run_out *o) { free(o->logits); free(o->grads); free(o->final); }

/* Determinism across thread counts: bit-identical results. */
static void check_runs_identical(const run_out *a, const run_out *b, const ref_data *d) {
    CHECK(!memcmp(a->logits, b->logits, d->nlogits * sizeof(float)), "logits differ between 1 and 2 threads");
    CHECK(!memcmp(&a->loss, &b->loss, sizeof(float)), "loss differs between 1 and 2 threads");
    size_t off = 0;
    for (int i = 0; i < d->ntensors; i++) {
        CHECK(!memcmp(a->grads + off, b->grads + off, d->t[i].numel * sizeof(float)),
              "grad %s differs between 1 and 2 threads", d->t[i].name);
        off += d->t[i].numel;
    }
    CHECK(!memcmp(a->losses, b->losses, d->nsteps * sizeof(float)) &&
          !memcmp(a->norms, b->norms, d->nsteps * sizeof(float)),
          "training losses/norms differ between 1 and 2 threads");
    CHECK(!memcmp(a->final, b->final, d->nparams * sizeof(float)),
          "final parameters differ between 1 and 2 threads");
}

/* One full comparison, at the thread count already set: fills out.
 * verbose: print the per-tensor and per-step tables. */
typedef void (*ref_run_fn)(const void *fixture, run_out *out, int verbose);

/* Runs the comparison at 1 thread (verbose) and at 2, then requires the two
 * to agree bit for bit. */
static void run_at_1_and_2_threads(ref_run_fn run, const void *fixture, const ref_data *d) {
    run_out o1, o2;
    int ok = run_alloc(&o1, d) && run_alloc(&o2, d);
    CHECK(ok, "out of memory");
    if (ok) {
        hpt_set_threads(1);
        printf("-- threads 1\n");
        run(fixture, &o1, 1);
        hpt_set_threads(2);
        printf("-- threads 2\n");
        run(fixture, &o2, 0);
        check_runs_identical(&o1, &o2, d);
    }
    run_free(&o1);
    run_free(&o2);
}

/* Reads a fixture into the test's own struct (which holds its ref_data). */
typedef int (*ref_load_fn)(void *fixture, const char *path);

/* A whole reference test: load the fixture, compare at 1 and 2 threads,
 * report; returns the exit status. */
static int ref_test_main(const char *name, const char *path, ref_load_fn load, ref_run_fn run,
                         void *fixture, ref_data *d) {
    int ok = load(fixture, path);
    CHECK(ok, "cannot load %s", path);
    if (ok) run_at_1_and_2_threads(run, fixture, d);
    ref_data_free(d);
    return TEST_REPORT(name);
}

#endif /* HPT_REF_FIXTURE_H */
