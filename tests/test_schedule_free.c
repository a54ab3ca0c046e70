/* tier: fast (make test; tests/run.sh) */
/*
 * test_schedule_free.c — schedule-free AdamW (src/train/optim.c, hpt_sf_*):
 *   - hpt_sf_step on a small arena (two tensors, one with weight decay) over
 *     12 steps, 4 of them warmup, equals PyTorch's AdamWScheduleFree update
 *     (tests/fixtures/schedule_free_ref.txt, written by
 *     tools/ref/schedule_free_ref.py) within 1e-6 relative, y and z;
 *   - the averaging coefficient is 1/t at a constant rate, and x is the
 *     plain average of the z iterates then;
 *   - the rate: the warmup, then constant --lr whatever --schedule says;
 *   - TCFG: version 4 stores --optimizer, versions 1 to 3 decode to adamw.
 */
#include "../src/train/optim.h"
#include "../src/train/settings.h"
#include "test.h"

#include <string.h>

#define FIXTURE "tests/fixtures/schedule_free_ref.txt"
#define NMAX 16

static void test_torch_fixture(void) {
    FILE *f = test_fixture_open(FIXTURE);
    if (!f) return;
    int n, ndecay, steps, warmup;
    float lr, b1, b2, eps, wd;
    CHECK(fscanf(f, " params %d %d %d %d %f %f %f %f %f", &n, &ndecay, &steps, &warmup, &lr, &b1, &b2, &eps, &wd) == 9
          && n <= NMAX && ndecay < n, "fixture header");
    static hpt_model m;
    float y[NMAX], g[NMAX], z[NMAX], x[NMAX], v[NMAX] = {0}, ry[NMAX], rz[NMAX];
    CHECK(test_read_tagged(f, "init", y, n), "fixture init");
    memcpy(z, y, sizeof y);
    memcpy(x, y, sizeof y);
    m.params = y;
    m.grads = g;
    m.nparams = (size_t)n;
    m.dev = &hpt_device_cpu;   /* a model built by hand: its arenas are host memory */
    m.ntensors = 2;
    m.tensors[0] = (hpt_tensor_info){.name = "w", .offset = 0, .numel = (size_t)ndecay, .decay = 1};
    m.tensors[1] = (hpt_tensor_info){.name = "b", .offset = (size_t)ndecay, .numel = (size_t)(n - ndecay)};
    hpt_train_config c;
    hpt_train_config_default(&c);
    c.optimizer = "schedule-free";
    c.warmup_iters = warmup;
    c.max_iters = steps;
    c.lr = lr;
    hpt_sf_state s = {0};
    double worst = 0;
    for (int t = 0; t < steps; t++) {
        CHECK(test_read_tagged(f, "grad", g, n), "fixture grad of step %d", t + 1);
        hpt_adamw o = {.lr = hpt_lr_at(&c, t), .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd};
        float norm;
        CHECK(hpt_sf_step(&m, z, x, v, &s, &o, t + 1, &norm) == HPT_OK, "step %d", t + 1);
        CHECK(test_read_tagged(f, "y", ry, n) && test_read_tagged(f, "z", rz, n), "fixture y, z of step %d", t + 1);
        for (int i = 0; i < n; i++) {
            double ey = fabs(y[i] - ry[i]) / fmax(fabs(ry[i]), 1e-3), ez = fabs(z[i] - rz[i]) / fmax(fabs(rz[i]), 1e-3);
            worst = fmax(worst, fmax(ey, ez));
            CHECK_NEAR(y[i], ry[i], 1e-9, 1e-6, "y");
            CHECK_NEAR(z[i], rz[i], 1e-9, 1e-6, "z");
        }
        /* the reference's implied average: y = (1 - b1) z + b1 x */
        for (int i = 0; i < n; i++) CHECK_NEAR(x[i], (ry[i] - (1 - b1) * rz[i]) / b1, 1e-5, 1e-5, "x");
    }
    printf("  %d steps (%d warmup) against PyTorch: worst relative error of y and z %.3g\n", steps, warmup, worst);
    fclose(f);
}

/* At a constant rate c_t = 1/t: x is the running mean of z_1..z_t. */
static void test_average(void) {
    hpt_sf_state s = {0};
    int ok = 1;
    for (int t = 1; t <= 50; t++) ok &= hpt_sf_coef(&s, 2e-3f) == (float)(1.0 / t);
    CHECK(ok, "c_t = 1/t at a constant rate");
    /* and during a warmup (rates rising) the weight is the current rate's square */
    s = (hpt_sf_state){0};
    float c1 = hpt_sf_coef(&s, 1.0f), c2 = hpt_sf_coef(&s, 2.0f), c3 = hpt_sf_coef(&s, 1.0f);
    CHECK(c1 == 1.0f && c2 == 0.8f && c3 == (float)(4.0 / 9.0), "warmup weights: %g %g %g (want 1, 0.8, 4/9: lr_max)",
          c1, c2, c3);
    float y[3] = {1, 2, 3}, z[3] = {1, 2, 3}, x[3] = {1, 2, 3}, v[3] = {0}, g[3], zsum[3] = {0};
    s = (hpt_sf_state){0};
    for (int t = 1; t <= 20; t++) {
        for (int i = 0; i < 3; i++) g[i] = sinf((float)(t * (i + 1)));
        hpt_sf_update(y, g, z, x, v, 3, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, hpt_sf_coef(&s, 0.01f), t);
        for (int i = 0; i < 3; i++) zsum[i] += z[i];
    }
    for (int i = 0; i < 3; i++) CHECK_NEAR(x[i], zsum[i] / 20, 1e-6, 1e-6, "x is the mean of the z iterates");
    for (int i = 0; i < 3; i++) CHECK_NEAR(y[i], 0.1 * z[i] + 0.9 * x[i], 1e-6, 1e-6, "y interpolates z and x");
}

static void test_rate(void) {
    hpt_train_config c;
    hpt_train_config_default(&c);
    c.warmup_iters = 10;
    c.max_iters = 100;
    c.lr = 1e-3f;
    c.min_lr = 1e-4f;
    c.schedule = "cosine";
    c.optimizer = "schedule-free";
    int ok = 1;
    for (int it = 0; it < 10; it++) ok &= hpt_lr_at(&c, it) == c.lr * (float)(it + 1) / 10.0f;
    for (int it = 10; it < 110; it++) ok &= hpt_lr_at(&c, it) == c.lr;
    CHECK(ok, "schedule-free: the warmup, then constant --lr (the cosine schedule ignored)");
    c.optimizer = "adamw";
    CHECK(hpt_lr_at(&c, 99) < 2e-4f, "adamw: the schedule applies");
}

static void test_tcfg(void) {
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    unsigned char buf[20000];
    hpt_train_config c, d;
    hpt_train_config_default(&c);
    CHECK(!strcmp(c.optimizer, "adamw"), "the default optimizer is adamw");
    c.data_path = "x";
    c.optimizer = "schedule-free";
    size_t n4 = hpt_settings_encode(rows, n, &c, 4, 0, buf, sizeof buf);
    size_t n3 = hpt_settings_encode(rows, n, &c, 3, 0, buf, sizeof buf);
    CHECK(n4 == n3 + 4 + 13, "TCFG v4 appends the optimizer (%zu vs %zu)", n4, n3);
    CHECK(test_tcfg_round_trip(&c, 4, &d) && !strcmp(d.optimizer, "schedule-free"), "v4 round trip: %s",
          hpt_errmsg());
    for (unsigned ver = 1; ver <= 3; ver++)
        CHECK(test_tcfg_round_trip(&c, ver, &d) && !strcmp(d.optimizer, "adamw"), "a v%u TCFG decodes to adamw", ver);
    c.optimizer = "sgd";
    CHECK(hpt_train_config_check(&c) != HPT_OK && strstr(hpt_errmsg(), "--optimizer"), "an unknown optimizer: %s",
          hpt_errmsg());
    c.optimizer = "schedule-free";
    c.ema_decay = 0.99f;
    CHECK(hpt_train_config_check(&c) != HPT_OK && strstr(hpt_errmsg(), "--ema"), "--ema with schedule-free: %s",
          hpt_errmsg());
}

int main(void) {
    test_torch_fixture();
    test_average();
    test_rate();
    test_tcfg();
    return TEST_REPORT("test_schedule_free");
}
