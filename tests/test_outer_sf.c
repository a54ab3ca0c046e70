/* tier: fast (make test; tests/run.sh) */
/*
 * test_outer_sf.c — the hybrid's outer step under schedule-free AdamW
 * (docs/hybrid.md, "The outer step under schedule-free"; src/train/outer.c with
 * the outer step's sf_z and sf_x set, optim.h's hpt_sf_outer_step):
 *   - 17 schedule-free steps on 7 parameters in two tensors (3 of warmup,
 *     weight decay on the first), the outer interval's anchor taken at step
 *     4, jumps after steps 9 and 14 (eta 2.5, mu 0.6, scale 1 then 0.5), end
 *     state y, z, x, v, anchor and u equal to a float64 reference written
 *     from the formulas (tests/fixtures/outer_sf_ref.txt, from
 *     tools/ref/outer_sf_ref.py) within 1e-5 relative;
 *   - the fixture tells the buffers apart: the same run with the outer step
 *     on the params (y) alone (the AdamW path), or on z's displacement,
 *     misses it by far more than the tolerance, so a driver that moves the
 *     wrong buffer fails the first check;
 *   - eta 1, mu 0 leaves x, z and y bit for bit where the steps put them;
 *   - the snapshot restores schedule-free's z, x and rate sums byte for byte.
 */
#include "../src/hybrid/snapshot.h"
#include "../src/train/optim.h"
#include "../src/train/outer.h"
#include "../src/train/settings.h"
#include "test.h"

#include <string.h>

#define FIXTURE "tests/fixtures/outer_sf_ref.txt"
#define N 7
#define MAXSTEPS 32

typedef struct ref {
    int n, ndecay, W, H, T, warmup, steps;
    float lr, b1, b2, eps, wd, eta, mu, s1, s2;
    float init[N], grad[MAXSTEPS][N];
    float y[N], z[N], x[N], v[N], anchor[N], u[N];
} ref;

static int load(ref *r) {
    FILE *f = fopen(FIXTURE, "r");
    if (!f) return 0;
    char comment[256];
    int ok = fgets(comment, sizeof comment, f) && comment[0] == '#' &&
             fscanf(f, " setup %d %d %d %d %d %d %f %f %f %f %f %f %f %f %f", &r->n, &r->ndecay, &r->W, &r->H, &r->T,
                    &r->warmup, &r->lr, &r->b1, &r->b2, &r->eps, &r->wd, &r->eta, &r->mu, &r->s1, &r->s2) == 15 &&
             r->n == N && r->W + 2 * r->H + r->T <= MAXSTEPS && test_read_tagged(f, "init", r->init, N);
    r->steps = r->W + 2 * r->H + r->T;
    for (int t = 0; ok && t < r->steps; t++) ok = test_read_tagged(f, "grad", r->grad[t], N);
    ok = ok && test_read_tagged(f, "y", r->y, N) && test_read_tagged(f, "z", r->z, N) && test_read_tagged(f, "x", r->x, N) &&
         test_read_tagged(f, "v", r->v, N) && test_read_tagged(f, "anchor", r->anchor, N) && test_read_tagged(f, "u", r->u, N);
    fclose(f);
    return ok;
}

enum { ON_X, ON_Y_ALONE, ON_Z };   /* where the outer step is taken */

typedef struct state { float y[N], z[N], x[N], v[N], anchor[N], u[N]; } state;

/* The fixture's run through the code that trains: hpt_sf_step on a model
 * built by hand, the outer step's reset and jump (src/train/outer.c) with
 * the trainer's z and x in sf_z and sf_x; `where` moves the jump to the
 * wrong buffer for the discrimination check. */
static void run(const ref *r, int where, float eta, float mu, state *out) {
    static hpt_model m;
    float g[N];
    memset(out, 0, sizeof *out);
    memcpy(out->y, r->init, sizeof out->y);
    memcpy(out->z, r->init, sizeof out->z);
    memcpy(out->x, r->init, sizeof out->x);
    m.params = out->y;
    m.grads = g;
    m.nparams = N;
    m.dev = &hpt_device_cpu;
    m.ntensors = 2;
    m.tensors[0] = (hpt_tensor_info){.name = "w", .offset = 0, .numel = (size_t)r->ndecay, .decay = 1};
    m.tensors[1] = (hpt_tensor_info){.name = "b", .offset = (size_t)r->ndecay, .numel = (size_t)(N - r->ndecay)};
    hpt_outer p;
    CHECK(hpt_outer_init(&p, &m, eta, mu) == HPT_OK, "outer init: %s", hpt_errmsg());
    if (where == ON_X) { p.sf_z = out->z; p.sf_x = out->x; }
    hpt_train_config c;
    hpt_train_config_default(&c);
    c.optimizer = "schedule-free";
    c.warmup_iters = r->warmup;
    c.max_iters = r->steps;
    c.lr = r->lr;
    hpt_sf_state s = {0};
    for (int t = 0; t < c.max_iters; t++) {
        memcpy(g, r->grad[t], sizeof g);
        hpt_adamw o = {.lr = hpt_lr_at(&c, t), .beta1 = r->b1, .beta2 = r->b2, .eps = r->eps, .weight_decay = r->wd};
        float norm;
        CHECK(hpt_sf_step(&m, out->z, out->x, out->v, &s, &o, t + 1, &norm) == HPT_OK, "step %d", t + 1);
        int done = t + 1;
        if (done == r->W) {
            hpt_outer_reset(&p, where == ON_Z ? out->z : out->y);
        } else if (done == r->W + r->H || done == r->W + 2 * r->H) {
            float sc = done == r->W + r->H ? r->s1 : r->s2;
            if (where == ON_Z)   /* z's displacement, the departure on all three */
                hpt_sf_outer_step(out->z, out->x, out->y, p.anchor, p.u, N, mu, sc * (eta - 1.0f), sc * eta * mu);
            else
                hpt_outer_apply(&p, out->y, NULL, sc, NULL);
        }
    }
    memcpy(out->anchor, p.anchor, sizeof out->anchor);
    memcpy(out->u, p.u, sizeof out->u);
    hpt_outer_free(&p);
}

/* The largest difference between a and b relative to b's values, floor
 * the least scale (the parameters' 1 for y, z, x, the anchor and u: u is a
 * small difference of parameters, known to a parameter's float rounding). */
static double worst_at(const float *a, const float *b, double floor) {
    double w = 0;
    for (int i = 0; i < N; i++) w = fmax(w, fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), floor));
    return w;
}
static double worst(const float *a, const float *b) { return worst_at(a, b, 1.0); }

static void test_fixture(const ref *r) {
    state s;
    run(r, ON_X, r->eta, r->mu, &s);
    const float *got[6] = {s.y, s.z, s.x, s.v, s.anchor, s.u}, *want[6] = {r->y, r->z, r->x, r->v, r->anchor, r->u};
    const char *names[6] = {"y", "z", "x", "v", "anchor", "u"};
    double all = 0;
    for (int k = 0; k < 6; k++) {
        double w = worst_at(got[k], want[k], k == 3 ? 1e-6 : 1.0);   /* v: relative */
        all = fmax(all, w);
        CHECK(w < 2e-6, "%s against the reference: worst error %.3g", names[k], w);
    }
    printf("  %d schedule-free steps, 2 outer jumps (eta %g, mu %g): worst error %.3g\n", r->steps, r->eta, r->mu,
           all);
    /* the outer step keeps schedule-free's own state: y = (1 - b1) z + b1 x */
    for (int i = 0; i < N; i++) CHECK_NEAR(s.y[i], (1 - r->b1) * s.z[i] + r->b1 * s.x[i], 1e-6, 1e-5, "y interpolates");
    /* the outer step on the wrong buffer misses the reference by far */
    state wrong;
    run(r, ON_Y_ALONE, r->eta, r->mu, &wrong);
    double wy = fmax(worst(wrong.x, r->x), worst(wrong.y, r->y));
    CHECK(wy > 1e-3, "the step on y alone (the AdamW path) would pass: %.3g from the reference", wy);
    run(r, ON_Z, r->eta, r->mu, &wrong);
    double wz = fmax(worst(wrong.x, r->x), worst(wrong.y, r->y));
    CHECK(wz > 1e-3, "the step on z's displacement would pass: %.3g from the reference", wz);
    printf("  the same with the step on y alone: %.3g off; on z's displacement: %.3g off\n", wy, wz);
}

/* eta 1, mu 0: x, z and y where the steps put them, bit for bit. */
static void test_identity(const ref *r) {
    state with, without;
    run(r, ON_X, 1.0f, 0.0f, &with);
    ref r2 = *r;
    r2.W = r2.H = MAXSTEPS;   /* no anchor and no jump within the run */
    run(&r2, ON_X, 1.0f, 0.0f, &without);
    CHECK(!memcmp(with.y, without.y, sizeof with.y) && !memcmp(with.z, without.z, sizeof with.z) &&
          !memcmp(with.x, without.x, sizeof with.x) && !memcmp(with.v, without.v, sizeof with.v),
          "eta 1, mu 0: y, z, x and v bit for bit those of plain schedule-free");
}

static void test_snapshot(void) {
    const size_t n = 513;
    float *a[5], *b[5];
    for (int k = 0; k < 5; k++) {
        a[k] = malloc(n * sizeof(float));
        b[k] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) a[k][i] = sinf((float)(i * (k + 3)));
        memcpy(b[k], a[k], n * sizeof(float));
    }
    a[3][0] = -0.0f; b[3][0] = -0.0f;
    hpt_snapshot s;
    CHECK(hpt_snapshot_init(&s, n, 1, &hpt_device_cpu) == HPT_OK && hpt_snapshot_floats(&s) == 5 * n, "a schedule-free snapshot: 5 n");
    hpt_sf_state sums = {.lr_max = 3e-3, .weight_sum = 0.125};
    hpt_snapshot_take(&s, a[0], a[1], a[2], 7, 6);
    hpt_snapshot_take_sf(&s, a[3], a[4], sums);
    for (int k = 0; k < 5; k++) for (size_t i = 0; i < n; i++) a[k][i] += 1.0f;
    CHECK(!memcmp(hpt_snapshot_sf_z(&s), b[3], n * sizeof(float)) && !memcmp(hpt_snapshot_sf_x(&s), b[4], n * sizeof(float)) &&
          !memcmp(hpt_snapshot_params(&s), b[0], n * sizeof(float)) && !memcmp(hpt_snapshot_moment2(&s), b[2], n * sizeof(float)),
          "the snapshot holds y, v, z and x byte for byte");
    CHECK(s.sf_sums.lr_max == sums.lr_max && s.sf_sums.weight_sum == sums.weight_sum, "and the rate sums");
    hpt_snapshot_free(&s);
    for (int k = 0; k < 5; k++) { free(a[k]); free(b[k]); }
}

int main(void) {
    hpt_set_threads(1);
    static ref r;
    CHECK(load(&r), "cannot read %s", FIXTURE);
    if (r.n == N) {
        test_fixture(&r);
        test_identity(&r);
    }
    test_snapshot();
    return TEST_REPORT("test_outer_sf");
}
