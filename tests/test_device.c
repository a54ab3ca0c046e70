/* tier: fast (make test; tests/run.sh) */
/*
 * test_device.c — the device table (src/device): opening an instance and its
 * refusals, every operation of the CPU row against the plain formula or the
 * kernel it must equal, bit for bit, at 1 and 2 threads, and two models on
 * two instances in one process, their steps interleaved, each the bits of
 * the same model trained alone (instances keep their settings and memory
 * apart). A GPU row is tested against this one by `make test-cuda` on a
 * machine that has one (there with two precisions).
 */
#include "test.h"
#include "../src/device/device.h"
#include "../src/kernels/kernels.h"
#include "../src/model/model.h"
#include "../src/train/optim.h"

#include <stdint.h>

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

static void fill_random(float *x, size_t n, uint32_t s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 3.0f;
    }
}

static void test_open(void) {
    hpt_device *d = NULL;
    CHECK(hpt_device_open(NULL, NULL, &d) == HPT_OK && d && !strcmp(d->name, "cpu") && !strcmp(d->precision, "fp32"),
          "the default device is the CPU at fp32");
    hpt_device_close(d);
    const hpt_device_settings fp32 = {.precision = "fp32", .mem_limit = 0};
    CHECK(hpt_device_open("cpu", &fp32, &d) == HPT_OK && d && d->alloc, "cpu by name");
    hpt_device_close(d);
    d = (hpt_device *)1;
    CHECK(hpt_device_open("tpu", NULL, &d) == HPT_ERR_ARG && d == NULL, "an unknown device is refused");
    CHECK(strstr(hpt_errmsg(), "cpu, cuda") != NULL, "the refusal lists the table: %s", hpt_errmsg());
    const hpt_device_settings bf16 = {.precision = "bf16", .mem_limit = 0};
    CHECK(hpt_device_open("cpu", &bf16, &d) == HPT_ERR_ARG && d == NULL &&
          strstr(hpt_errmsg(), "fp32 only") != NULL, "a precision the row has not is refused: %s", hpt_errmsg());
    CHECK(hpt_device_open("guard", &bf16, &d) == HPT_ERR_ARG && d == NULL, "the guard row's is the CPU's");
    /* this build's CUDA row says why it cannot be used instead of failing later */
    if (hpt_device_cuda.unavailable()) {
        CHECK(hpt_device_open("cuda", NULL, &d) == HPT_ERR_ARG && d == NULL, "cuda refused where it is not here");
        CHECK(strstr(hpt_errmsg(), "--device cuda") != NULL, "the reason names the flag: %s", hpt_errmsg());
        CHECK(hpt_device_check("cuda") == HPT_ERR_ARG, "hpt_device_check refuses it as the open does");
    }
    CHECK(hpt_device_check(NULL) == HPT_OK && hpt_device_check("guard") == HPT_OK, "hpt_device_check: cpu, guard");
    int n = 0;
    while (hpt_device_at(n)) n++;
    CHECK(n == 3 && hpt_device_at(0) == &hpt_device_cpu, "the table's rows: %d", n);
    for (int i = 0; i < n; i++)
        CHECK(hpt_device_at(i)->name && hpt_device_at(i)->summary && hpt_device_at(i)->unavailable,
              "row %d has a name, a summary and an availability check", i);
}

/* Every elementwise operation against its formula written out here. */
static void test_elementwise(const hpt_device *d, size_t n) {
    float *a = d->alloc(d, n), *b = d->alloc(d, n), *h = malloc(n * sizeof(float)), *w = malloc(n * sizeof(float));
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    HPT_ASSERT(a && b && h && w && x && y);
    fill_random(x, n, 1);
    fill_random(y, n, 2);
    d->upload(a, x, n);
    d->download(h, a, n);
    CHECK(same_bits(h, x, n), "upload then download gives the same bits");
    d->copy(b, a, n);
    d->download(h, b, n);
    CHECK(same_bits(h, x, n), "copy");

    d->fill(a, -0.0f, n);
    d->download(h, a, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= h[i] == 0.0f && signbit(h[i]);
    CHECK(ok, "fill writes the value (even -0)");

    d->upload(a, x, n);
    d->upload(b, y, n);
    d->swap(a, b, n);
    d->download(h, a, n);
    d->download(w, b, n);
    CHECK(same_bits(h, y, n) && same_bits(w, x, n), "swap");

    d->upload(a, x, n);
    d->scale(a, 0.37f, n);
    d->download(h, a, n);
    for (size_t i = 0; i < n; i++) w[i] = x[i] * 0.37f;
    CHECK(same_bits(h, w, n), "scale: x * s");

    d->upload(a, x, n);
    d->upload(b, y, n);
    d->axpy(a, -1.25f, b, n);
    d->download(h, a, n);
    for (size_t i = 0; i < n; i++) w[i] = x[i] + -1.25f * y[i];
    CHECK(same_bits(h, w, n), "axpy: y + a x");

    d->upload(a, x, n);
    d->lerp(a, 0.9f, 0.1f, b, n);
    d->download(h, a, n);
    for (size_t i = 0; i < n; i++) w[i] = 0.9f * x[i] + 0.1f * y[i];
    CHECK(same_bits(h, w, n), "lerp: a e + b x (the weight average's update)");

    d->upload(a, x, n);
    double ss = d->sumsq(a, n), dd = d->dot(a, a, n), ref = 0.0, dref = 0.0, dab = d->dot(a, b, n);
    for (size_t i = 0; i < n; i++) { ref += (double)x[i] * x[i]; dref += (double)x[i] * y[i]; }
    CHECK(!memcmp(&ss, &dd, sizeof ss), "sumsq(x) = dot(x, x) bit for bit");
    CHECK_NEAR(ss, ref, 0.0, 1e-12, "sumsq against the plain double sum");
    CHECK_NEAR(dab, dref, 1e-9, 1e-12, "dot against the plain double sum");
    hpt_set_threads(1);
    double ss1 = d->sumsq(a, n), dab1 = d->dot(a, b, n);
    hpt_set_threads(2);
    CHECK(ss1 == ss && dab1 == dab, "reductions: the same bits at 1 and 2 threads");
    d->free(d, a);
    d->free(d, b);
    free(h); free(w); free(x); free(y);
}

/* The optimizer rows against the kernels they must be, with every argument
 * distinct so that a field passed to the wrong parameter shows. */
static void test_optimizers(const hpt_device *d, size_t n) {
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
    float *dp = d->alloc(d, n), *dg = d->alloc(d, n), *dm = d->alloc(d, n), *dv = d->alloc(d, n), *dz = d->alloc(d, n);
    HPT_ASSERT(p && g && m && v && p2 && m2 && v2 && dp && dg && dm && dv && dz);
    fill_random(p, n, 3); fill_random(g, n, 4); fill_random(m, n, 5); fill_random(v, n, 6);
    for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];   /* a second moment is >= 0 */
    d->upload(dp, p, n); d->upload(dg, g, n); d->upload(dm, m, n); d->upload(dv, v, n);
    const hpt_dev_adamw a = {.gscale = 0.5f, .lr = 3e-3f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f,
                             .weight_decay = 0.1f, .t = 7};
    d->adamw(dp, dg, dm, dv, n, &a);
    memcpy(p2, p, n * 4); memcpy(m2, m, n * 4); memcpy(v2, v, n * 4);
    adamw_update_scaled(p2, g, m2, v2, n, 0.5f, 3e-3f, 0.8f, 0.95f, 1e-6f, 0.1f, 7);
    d->download(p, dp, n); d->download(m, dm, n); d->download(v, dv, n);
    CHECK(same_bits(p, p2, n) && same_bits(m, m2, n) && same_bits(v, v2, n), "adamw = adamw_update_scaled");

    /* schedule-free: y, z, x, v */
    float *z = malloc(n * 4), *x = malloc(n * 4), *y2 = malloc(n * 4), *z2 = malloc(n * 4), *x2 = malloc(n * 4);
    HPT_ASSERT(z && x && y2 && z2 && x2);
    fill_random(z, n, 7); fill_random(x, n, 8);
    memcpy(y2, p, n * 4); memcpy(z2, z, n * 4); memcpy(x2, x, n * 4); memcpy(v2, v, n * 4);
    float *dx = dm;   /* reuse: the moments' buffer holds x now */
    d->upload(dz, z, n); d->upload(dx, x, n);
    const hpt_dev_sf s = {.gscale = 0.75f, .lr = 2e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.05f, .c = 0.125f, .t = 5};
    d->sf_adamw(dp, dg, dz, dx, dv, n, &s);
    hpt_sf_update_scaled(y2, g, z2, x2, v2, n, 0.75f, 2e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.125f, 5);
    d->download(p, dp, n); d->download(z, dz, n); d->download(x, dx, n); d->download(v, dv, n);
    CHECK(same_bits(p, y2, n) && same_bits(z, z2, n) && same_bits(x, x2, n) && same_bits(v, v2, n),
          "sf_adamw = hpt_sf_update_scaled");

    /* the outer step, both forms (d NULL: this process's displacement) */
    for (int with_d = 0; with_d < 2; with_d++) {
        fill_random(p, n, 9); fill_random(z, n, 10); fill_random(x, n, 11); fill_random(g, n, 12);
        memcpy(p2, p, n * 4); memcpy(z2, z, n * 4); memcpy(x2, x, n * 4);
        d->upload(dp, p, n); d->upload(dz, z, n); d->upload(dx, x, n); d->upload(dg, g, n);
        d->outer_step(dp, dz, dx, with_d ? dg : NULL, n, 0.6f, 0.4f, 0.9f);
        hpt_outer_step(p2, z2, x2, with_d ? g : NULL, n, 0.6f, 0.4f, 0.9f);
        d->download(p, dp, n); d->download(z, dz, n); d->download(x, dx, n);
        CHECK(same_bits(p, p2, n) && same_bits(z, z2, n) && same_bits(x, x2, n),
              "outer_step = hpt_outer_step (%s)", with_d ? "a given displacement" : "its own displacement");
    }

    /* the schedule-free outer step, with a departure and without: x, z, y
     * (p), anchor (dm), u (dv) against hpt_sf_outer_step */
    for (int stay = 0; stay < 2; stay++) {
        const float sa = stay ? 0.0f : 0.4f, sb = stay ? 0.0f : 0.9f;
        fill_random(x, n, 13); fill_random(z, n, 14); fill_random(p, n, 15); fill_random(m, n, 16); fill_random(v, n,
                    17);
        if (stay && n) p[0] = -0.0f;   /* y untouched, even a -0 */
        memcpy(x2, x, n * 4); memcpy(z2, z, n * 4); memcpy(y2, p, n * 4); memcpy(m2, m, n * 4); memcpy(v2, v, n * 4);
        d->upload(dx, x, n); d->upload(dz, z, n); d->upload(dp, p, n); d->upload(dg, m, n); d->upload(dv, v, n);
        d->sf_outer_step(dx, dz, dp, dg, dv, n, 0.6f, sa, sb);
        hpt_sf_outer_step(x2, z2, y2, m2, v2, n, 0.6f, sa, sb);
        d->download(x, dx, n); d->download(z, dz, n); d->download(p, dp, n); d->download(m, dg, n);
        d->download(v, dv, n);
        CHECK(same_bits(x, x2, n) && same_bits(z, z2, n) && same_bits(p, y2, n) && same_bits(m, m2, n) &&
              same_bits(v, v2, n), "sf_outer_step = hpt_sf_outer_step (%s)", stay ? "a = b = 0" : "a departure");
    }
    d->free(d, dp); d->free(d, dg); d->free(d, dm); d->free(d, dv); d->free(d, dz);
    free(p); free(g); free(m); free(v); free(p2); free(m2); free(v2); free(z); free(x); free(y2); free(z2); free(x2);
}

/* ---- two instances at once */

static const hpt_gpt2_config TWO_CFG = {.vocab_size = 37, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
enum { TWO_B = 2, TWO_T = 8, TWO_STEPS = 3 };

/* One model's training: the model, AdamW's moments on its device, its step
 * count, its losses. */
typedef struct run {
    hpt_model *m;
    float *mom;   /* m then v, 2 n floats of the model's device */
    int t;
    float loss[TWO_STEPS];
} run;

static void run_init(run *r, const hpt_device *d) {
    memset(r, 0, sizeof *r);
    CHECK(hpt_gpt2_init(&r->m, &TWO_CFG, TWO_B, TWO_T, 5, d) == HPT_OK, "model on %s: %s", d ? d->name : "NULL",
          hpt_errmsg());
    HPT_ASSERT(r->m);
    r->mom = r->m->dev->alloc(r->m->dev, 2 * r->m->nparams);
    HPT_ASSERT(r->mom);
}

/* one step: forward, backward, AdamW (the device's) on a batch of step t's tokens */
static void run_step(run *r) {
    int tok[TWO_B * TWO_T], tgt[TWO_B * TWO_T];
    for (int i = 0; i < TWO_B * TWO_T; i++) {
        tok[i] = (i * 7 + r->t * 3) % TWO_CFG.vocab_size;
        tgt[i] = (i * 5 + r->t * 11 + 1) % TWO_CFG.vocab_size;
    }
    const hpt_batch b = {.B = TWO_B, .T = TWO_T, .tokens = tok, .targets = tgt};
    CHECK(hpt_model_forward(r->m, &b, &r->loss[r->t]) == HPT_OK, "forward: %s", hpt_errmsg());
    CHECK(hpt_model_backward_fresh(r->m, 1.0f) == HPT_OK, "backward: %s", hpt_errmsg());
    const size_t n = r->m->nparams;
    const hpt_dev_adamw a = {.gscale = 1.0f, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                             .weight_decay = 0.1f, .t = r->t + 1};
    r->m->dev->adamw(r->m->params, r->m->grads, r->mom, r->mom + n, n, &a);
    r->t++;
}

/* the parameters in host memory (the caller frees them) */
static float *run_params(const run *r) {
    float *h = malloc(r->m->nparams * sizeof(float));
    HPT_ASSERT(h);
    r->m->dev->download(h, r->m->params, r->m->nparams);
    return h;
}

static void run_free(run *r) {
    r->m->dev->free(r->m->dev, r->mom);
    hpt_model_free(r->m);
}

/* Two models on two instances, their steps interleaved (a, b, a, b, ...),
 * each against the same model trained alone on an instance of its own:
 * the same losses and parameters, bit for bit. Each instance's ledger
 * counts its own memory alone. */
static void test_two_instances(const char *name_a, const char *name_b) {
    hpt_device *da, *db, *dref;
    const hpt_device_settings s = {.precision = "fp32", .mem_limit = 1u << 20};
    CHECK(hpt_device_open(name_a, &s, &da) == HPT_OK && hpt_device_open(name_b, NULL, &db) == HPT_OK,
          "open %s and %s: %s", name_a, name_b, hpt_errmsg());
    CHECK(da != db && da->mem_limit == 1u << 20 && db->mem_limit == 0, "each instance keeps its own settings");
    run ra, rb, ref;
    run_init(&ra, da);
    run_init(&rb, db);
    if (da->mem_info && db->mem_info) {
        size_t fa, ta, fb, tb;
        da->mem_info(da, &fa, &ta);
        db->mem_info(db, &fb, &tb);
        run_free(&rb);
        size_t fa2, ta2;
        da->mem_info(da, &fa2, &ta2);
        CHECK(fa2 == fa && fb < tb, "freeing one instance's model leaves the other's ledger as it was");
        run_init(&rb, db);
    }
    if (da->mem_info) {   /* a ledger of its own: the limit applies */
        CHECK(hpt_device_check_plan(da, (size_t)2 << 20, "a test plan") == HPT_ERR_NOMEM &&
              strstr(hpt_errmsg(), "--vram-limit") != NULL, "the instance's limit refuses a plan past it");
        CHECK(hpt_device_check_plan(db, (size_t)2 << 20, "a test plan") == HPT_OK, "the other instance has none");
    }
    for (int k = 0; k < TWO_STEPS; k++) {
        run_step(&ra);
        run_step(&rb);
    }
    const char *names[2] = {name_a, name_b};
    run *runs[2] = {&ra, &rb};
    for (int i = 0; i < 2; i++) {
        CHECK(hpt_device_open(names[i], NULL, &dref) == HPT_OK, "open %s alone", names[i]);
        run_init(&ref, dref);
        for (int k = 0; k < TWO_STEPS; k++) run_step(&ref);
        float *p = run_params(runs[i]), *q = run_params(&ref);
        CHECK(!memcmp(runs[i]->loss, ref.loss, sizeof ref.loss) && same_bits(p, q, ref.m->nparams),
              "%s beside %s, interleaved: the bits of the model alone (losses %.6f %.6f)", names[i], names[1 - i],
              runs[i]->loss[TWO_STEPS - 1], ref.loss[TWO_STEPS - 1]);
        free(p); free(q);
        run_free(&ref);
        hpt_device_close(dref);
    }
    run_free(&ra);
    run_free(&rb);
    hpt_device_close(da);
    hpt_device_close(db);
}

int main(void) {
    hpt_set_threads(2);
    test_open();
    hpt_device *guard;
    HPT_ASSERT(hpt_device_open("guard", NULL, &guard) == HPT_OK);
    const size_t sizes[] = {1, 17, 1000, 100003};
    /* the guard row (the CPU's operations on memory the host may not touch
     * between them): the same results, and the test's own reads go through
     * download, as they must on a GPU */
    const hpt_device *rows[] = {&hpt_device_cpu, guard};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 4; i++) {
            test_elementwise(rows[r], sizes[i]);
            test_optimizers(rows[r], sizes[i]);
        }
    hpt_device_close(guard);
    test_two_instances("cpu", "guard");
    test_two_instances("guard", "guard");
    return TEST_REPORT("test_device");
}
