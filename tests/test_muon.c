/* tier: fast (make test; tests/run.sh) */
/*
 * test_muon.c — --optimizer muon (src/train/optim.c hpt_muon_step, the
 * Newton-Schulz kernel src/kernels/muon.c):
 *   - hpt_muon_step on a hand-built model of six tensors (a tall and a
 *     square per-layer stack, a wide matrix and a convolution kernel under
 *     Muon; an embedding and a bias under AdamW) over 8 steps of a warmup
 *     and decay, two runs (spectral scale, 5 Newton-Schulz steps, momentum
 *     0.95, clipping active; rms scale, 3 steps, momentum 0.9, no clip),
 *     equals tools/ref/muon_ref.py's PyTorch step
 *     (tests/fixtures/muon_ref.txt) within 1e-6 relative (1e-7 absolute)
 *     on every parameter after every step;
 *   - the step gives the same bits at 1 and 2 threads;
 *   - the Newton-Schulz output of a random matrix has its singular values
 *     near 1 (O O^T within the quintic's band), for both orientations;
 *   - which tensors each family gives Muon, and the scratch the memory
 *     check plans (hpt_model_conf_muon_floats) is the step's;
 *   - TCFG v8 stores the four Muon settings, a v7 TCFG decodes to their
 *     defaults; muon on any device but the CPU is refused by the config check.
 */
#include "../src/kernels/kernels.h"
#include "../src/train/optim.h"
#include "../src/train/settings.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/muon_ref.txt"
#define NMAX 512
#define TMAX 8

typedef struct fixture_model {
    hpt_model m;
    char names[TMAX][17];
    float params[NMAX], grads[NMAX], m1[NMAX], m2[NMAX];
} fixture_model;

/* Reads the tensor table into fm's hand-built model (host arenas). */
static int read_table(FILE *f, fixture_model *fm) {
    int nt;
    if (fscanf(f, " tensors %d", &nt) != 1 || nt > TMAX) return 0;
    hpt_model *m = &fm->m;
    size_t off = 0;
    for (int i = 0; i < nt; i++) {
        hpt_tensor_info *t = &m->tensors[i];
        int hidden;
        if (fscanf(f, " tensor %16s %d %d %d %d %d %d %d", fm->names[i], &hidden, &t->decay, &t->ndim, &t->shape[0],
                   &t->shape[1], &t->shape[2], &t->shape[3]) != 8)
            return 0;
        t->name = fm->names[i];
        t->numel = (size_t)t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
        t->offset = off;
        off += t->numel;
        m->hidden[i] = (unsigned char)hidden;
    }
    if (off > NMAX) return 0;
    m->ntensors = nt;
    m->nparams = off;
    m->params = fm->params;
    m->grads = fm->grads;
    m->dev = &hpt_device_cpu;
    return 1;
}

static void test_torch_fixture(void) {
    FILE *f = test_fixture_open(FIXTURE);
    if (!f) return;
    static fixture_model fm;
    CHECK(read_table(f, &fm), "fixture tensor table");
    hpt_model *m = &fm.m;
    const int n = (int)m->nparams;
    float *scratch = malloc(hpt_muon_scratch_floats(m) * sizeof(float));
    static float want[NMAX];
    for (int run = 0; run < 2; run++) {
        char scale[16];
        int ns, steps;
        float mom, wd, b1, b2, eps, clip;
        CHECK(fscanf(f, " run %15s %d %f %f %f %f %f %f %d", scale, &ns, &mom, &wd, &b1, &b2, &eps, &clip, &steps) == 9,
              "fixture run %d header", run);
        CHECK(test_read_tagged(f, "init", m->params, n), "fixture init");
        memset(fm.m1, 0, sizeof fm.m1);
        memset(fm.m2, 0, sizeof fm.m2);
        double worst = 0;
        for (int t = 1; t <= steps; t++) {
            float mlr, alr, norm;
            CHECK(fscanf(f, " lr %f %f", &mlr, &alr) == 2, "fixture lr of step %d", t);
            CHECK(test_read_tagged(f, "grad", m->grads, n), "fixture grad of step %d", t);
            const hpt_adamw o = {.lr = alr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .grad_clip = clip};
            const hpt_muon mu = {.lr = mlr, .momentum = mom, .ns_steps = ns, .rms = !strcmp(scale, "rms")};
            CHECK(hpt_muon_step(m, fm.m1, fm.m2, scratch, &o, &mu, t, &norm) == HPT_OK, "step %d", t);
            CHECK(test_read_tagged(f, "params", want, n), "fixture params of step %d", t);
            for (int i = 0; i < n; i++) {
                worst = fmax(worst, fabs(m->params[i] - want[i]) / fmax(fabs(want[i]), 0.1));
                CHECK_NEAR(m->params[i], want[i], 1e-7, 1e-6, "params");
            }
        }
        printf("  %s scale, %d Newton-Schulz steps, %d steps against PyTorch: worst relative error %.3g\n", scale, ns,
               steps, worst);
    }
    free(scratch);
    fclose(f);
}

/* The same steps at 1 and 2 threads: the same bits. */
static void test_threads(void) {
    static fixture_model a, b;
    FILE *f = test_fixture_open(FIXTURE);
    if (!f) return;
    CHECK(read_table(f, &a), "fixture");
    fclose(f);
    b = a;
    b.m.params = b.params;
    b.m.grads = b.grads;
    b.m.tensors[0].name = a.m.tensors[0].name;
    float *scratch = malloc(hpt_muon_scratch_floats(&a.m) * sizeof(float));
    const int n = (int)a.m.nparams;
    for (int i = 0; i < n; i++) a.params[i] = b.params[i] = sinf((float)i * 0.37f);
    const hpt_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f,
                         .grad_clip = 1.0f};
    const hpt_muon mu = {.lr = 0.02f, .momentum = 0.95f, .ns_steps = 5};
    fixture_model *r[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        hpt_set_threads(k + 1);
        for (int t = 1; t <= 4; t++) {
            for (int i = 0; i < n; i++) r[k]->grads[i] = cosf(r[k]->params[i] * 5.0f + (float)t);
            float norm;
            CHECK(hpt_muon_step(&r[k]->m, r[k]->m1, r[k]->m2, scratch, &o, &mu, t, &norm) == HPT_OK, "step");
        }
    }
    hpt_set_threads(1);
    CHECK(!memcmp(a.params, b.params, (size_t)n * sizeof(float)) && !memcmp(a.m1, b.m1, (size_t)n * sizeof(float)),
          "1 and 2 threads: other bits");
    free(scratch);
}

/* O = newton_schulz(G): O O^T (short side) within the quintic's band, its
 * diagonal in about [0.5, 1.5] and off-diagonals small. */
static void test_orthogonal(void) {
    const int shapes[2][2] = {{24, 40}, {40, 24}};
    for (int k = 0; k < 2; k++) {
        int r = shapes[k][0], c = shapes[k][1], s = r < c ? r : c;
        float *g = malloc((size_t)r * c * sizeof(float)), *o = malloc((size_t)r * c * sizeof(float));
        float *scr = malloc(newton_schulz_scratch_floats(r, c) * sizeof(float));
        hpt_rng rng;
        hpt_rng_seed(&rng, 7);
        for (int i = 0; i < r * c; i++) g[i] = hpt_rng_normal(&rng);
        newton_schulz(o, g, r, c, 5, HPT_MUON_NS_A, HPT_MUON_NS_B, HPT_MUON_NS_C, HPT_MUON_EPS, scr);
        double dmin = 1e9, dmax = 0, off = 0;
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                double d = 0;  /* (O O^T)_ij on the short side */
                for (int x = 0; x < (r < c ? c : r); x++)
                    d += r < c ? (double)o[i * c + x] * o[j * c + x] : (double)o[x * c + i] * o[x * c + j];
                if (i == j) { dmin = fmin(dmin, d); dmax = fmax(dmax, d); }
                else off = fmax(off, fabs(d));
            }
        CHECK(dmin > 0.45 && dmax < 1.5 && off < 0.3, "%dx%d: diagonal of O O^T in [%.3f, %.3f], off-diagonal %.3f", r,
              c, dmin, dmax, off);
        free(g); free(o); free(scr);
    }
}

/* The hidden matrices of each family, and the planned scratch = the step's. */
static void test_families(void) {
    hpt_model *m;
    const hpt_gpt2_config gc = {.vocab_size = 50, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16};
    CHECK(hpt_gpt2_init(&m, &gc, 1, 8, 1, NULL) == HPT_OK, "gpt2: %s", hpt_errmsg());
    char got[256] = "";
    for (int i = 0; i < m->ntensors; i++)
        if (m->hidden[i]) { strcat(got, m->tensors[i].name); strcat(got, " "); }
    CHECK(!strcmp(got, "qkvw attprojw fcw fcprojw "), "gpt2's Muon tensors: %s", got);
    int count, rows, cols;
    int qkv = -1;
    for (int i = 0; i < m->ntensors; i++) if (!strcmp(m->tensors[i].name, "qkvw")) qkv = i;
    CHECK(qkv >= 0 && hpt_muon_matrix(m, qkv, &count, &rows, &cols) && count == 2 && rows == 48 && cols == 16,
          "qkvw: %d matrices of %dx%d", count, rows, cols);
    CHECK(hpt_muon_scratch_floats(m) == hpt_model_conf_muon_floats(m->conf, m->nconf), "gpt2 scratch %zu vs %zu",
          hpt_muon_scratch_floats(m), hpt_model_conf_muon_floats(m->conf, m->nconf));
    hpt_model_free(m);

    const hpt_mlp_config mc = {.n_in = 20, .n_hidden = 2, .hidden = {30, 12}, .n_classes = 5};
    CHECK(hpt_mlp_init(&m, &mc, 4, 1) == HPT_OK, "mlp: %s", hpt_errmsg());
    got[0] = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->hidden[i]) { strcat(got, m->tensors[i].name); strcat(got, " "); }
    CHECK(!strcmp(got, "fc1w fc2w "), "mlp's Muon tensors (not the head fc3w): %s", got);
    CHECK(hpt_muon_scratch_floats(m) == hpt_model_conf_muon_floats(m->conf, m->nconf), "mlp scratch %zu vs %zu",
          hpt_muon_scratch_floats(m), hpt_model_conf_muon_floats(m->conf, m->nconf));
    hpt_model_free(m);

    const hpt_cnn_config cc = {.in_c = 1, .in_h = 8, .in_w = 8, .c1 = 4, .c2 = 6, .hidden = 10, .n_classes = 3};
    CHECK(hpt_cnn_init(&m, &cc, 2, 1) == HPT_OK, "cnn: %s", hpt_errmsg());
    got[0] = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->hidden[i]) { strcat(got, m->tensors[i].name); strcat(got, " "); }
    CHECK(!strcmp(got, "conv1w conv2w fc1w "), "cnn's Muon tensors: %s", got);
    CHECK(hpt_muon_matrix(m, 2, &count, &rows, &cols) && count == 1 && rows == 6 && cols == 36,
          "conv2w as %d matrices of %dx%d (want 1 of 6x36)", count, rows, cols);
    CHECK(hpt_muon_scratch_floats(m) == hpt_model_conf_muon_floats(m->conf, m->nconf), "cnn scratch %zu vs %zu",
          hpt_muon_scratch_floats(m), hpt_model_conf_muon_floats(m->conf, m->nconf));
    hpt_model_free(m);
}

static void test_tcfg(void) {
    hpt_train_config c, d;
    hpt_train_config_default(&c);
    CHECK(c.adam_lr == 1e-3f && c.muon_momentum == 0.95f && c.muon_ns_steps == 5 && !strcmp(c.muon_scale, "spectral"),
          "muon defaults");
    c.data_path = "x";
    c.optimizer = "muon";
    c.adam_lr = 4e-3f;
    c.muon_momentum = 0.9f;
    c.muon_ns_steps = 3;
    c.muon_scale = "rms";
    CHECK(test_tcfg_round_trip(&c, 8, &d) && !strcmp(d.optimizer, "muon") && d.adam_lr == 4e-3f &&
          d.muon_momentum == 0.9f && d.muon_ns_steps == 3 && !strcmp(d.muon_scale, "rms"),
          "v8 round trip: %s", hpt_errmsg());
    c.optimizer = "adamw";
    CHECK(test_tcfg_round_trip(&c, 7, &d) && d.adam_lr == 1e-3f && d.muon_ns_steps == 5 &&
          !strcmp(d.muon_scale, "spectral"), "a v7 TCFG decodes to Muon's defaults");
    c.optimizer = "muon";
    c.device = "guard";
    CHECK(hpt_train_config_check(&c) != HPT_OK && strstr(hpt_errmsg(), "--device cpu only"), "muon on guard: %s",
          hpt_errmsg());
    c.device = "cuda";
    CHECK(hpt_train_config_check(&c) != HPT_OK && strstr(hpt_errmsg(), "--device cpu only"), "muon on cuda: %s",
          hpt_errmsg());
    c.device = "cpu";
    CHECK(hpt_train_config_check(&c) == HPT_OK, "muon on cpu: %s", hpt_errmsg());
}

int main(void) {
    hpt_set_threads(1);   /* small matrices: one thread is quickest; test_threads tries two */
    test_torch_fixture();
    test_threads();
    test_orthogonal();
    test_families();
    test_tcfg();
    return TEST_REPORT("test_muon");
}
