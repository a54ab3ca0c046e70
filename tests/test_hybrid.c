/* tier: fast (make test; tests/run.sh) */
/*
 * test_hybrid.c — the hybrid layer's invariants at module level:
 *   - every predictor changes the parameters in place and runs no backward
 *     pass (counted on the model, not timed);
 *   - the snapshot restores parameters and AdamW moments byte for byte;
 *   - the linear and shrink predictors extrapolate an exactly linear
 *     trajectory exactly; shrink gates off a jittering tensor and, under
 *     noise, leaves parameters at rest where the per-parameter fit moves them;
 *   - hybrid config validation names the offending flag;
 *   - the predictor table keeps the indices checkpoints store;
 *   - both rollback paths, forced in real runs (a critical divergence after a
 *     kept jump; a non-finite gradient norm after one, the step redone):
 *     the step counter never moves backwards and the counters agree with
 *     the model's own (backward calls) and with each other.
 */
#include "../src/hybrid/predict.h"
#include "../src/hybrid/snapshot.h"
#include "../src/train/optim.h"
#include "../src/train/outer.h"
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static hpt_model *tiny_gpt(void) {
    hpt_gpt2_config c = {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
    hpt_model *m;
    if (hpt_gpt2_init(&m, &c, 2, 8, 7, NULL) != HPT_OK) return NULL;
    return m;
}

/* A few real AdamW steps so that m and v hold something. */
static void train_some(hpt_model *m, float *m1, float *m2, int steps, hpt_adamw *o) {
    int tok[16], tgt[16];
    for (int i = 0; i < 16; i++) { tok[i] = (i * 7) % 11; tgt[i] = (i * 7 + 3) % 11; }
    hpt_batch b = {.B = 2, .T = 8, .tokens = tok, .targets = tgt};
    for (int t = 1; t <= steps; t++) {
        float loss, norm;
        hpt_model_zero_grad(m);
        hpt_model_forward(m, &b, &loss);
        hpt_model_backward(m, 1.0f);
        hpt_optim_step(m, m1, m2, o, t, &norm);
    }
}

static void test_predictors_move_params(void) {
    const char *names[] = {"coast", "stale-adam", "linear", "shrink"};
    for (int k = 0; k < 4; k++) {
        hpt_model *m = tiny_gpt();
        size_t n;
        float *p = hpt_model_params(m, &n);
        float *m1 = calloc(n, sizeof(float)), *m2 = calloc(n, sizeof(float)), *before = malloc(n * sizeof(float));
        hpt_adamw o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
        hpt_predictor pr;
        CHECK(hpt_pred_init(&pr, hpt_pred_parse(names[k]), m, 3, 2) == HPT_OK, "%s init", names[k]);
        for (int t = 1; t <= 12; t++) {  /* real steps, snapshots for linear */
            train_some(m, m1, m2, 1, &o);
            hpt_pred_observe(&pr, p, t);
        }
        CHECK(hpt_pred_ready(&pr), "%s ready after 12 steps", names[k]);
        /* the coast gate may close noisy tensors; open it fully for this test */
        pr.snr_lo = -1.0f; pr.snr_hi = 0.0f;
        pr.straight_lo = -1.0f; pr.straight_hi = 0.0f;  /* and the shrink one */
        size_t calls = hpt_model_backward_calls(m);
        memcpy(before, p, n * sizeof(float));
        hpt_pred_begin(&pr, m1, m2, &o, 12);
        for (int s = 1; s <= 3; s++) hpt_pred_apply(&pr, p, m1, m2, &o, 12, o.lr, s, 1.0f);
        CHECK(hpt_model_backward_calls(m) == calls, "%s ran a backward pass", names[k]);
        int nt;
        const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
        int moved_tensors = 0;
        for (int i = 0; i < nt; i++) {
            size_t changed = 0;
            for (size_t j = ti[i].offset; j < ti[i].offset + ti[i].numel; j++) changed += p[j] != before[j];
            moved_tensors += changed > 0;
        }
        /* wte's padded rows and never-seen tokens may stay, but every tensor
         * has parameters that moved during training, so all must move here */
        CHECK(moved_tensors == nt, "%s moved %d of %d tensors", names[k], moved_tensors, nt);
        hpt_pred_free(&pr);
        free(m1); free(m2); free(before);
        hpt_model_free(m);
    }
}

/* A straight trajectory theta(u) = base + vel * u, observed at updates
 * 1..U by predictor pr, then extrapolated 3 steps: the largest error
 * against theta(U + 3). */
static double straight_line_error(hpt_predictor *pr, float *p, size_t n, const float *base, const float *vel, int U) {
    for (int u = 1; u <= U; u++) {
        for (size_t i = 0; i < n; i++) p[i] = base[i] + vel[i] * u;
        hpt_pred_observe(pr, p, u);
    }
    hpt_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
    hpt_pred_begin(pr, NULL, NULL, &o, U);
    for (int s = 1; s <= 3; s++) hpt_pred_apply(pr, p, NULL, NULL, &o, U, 0.0f, s, 1.0f);
    double maxerr = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(p[i] - (base[i] + vel[i] * (U + 3)));
        if (e > maxerr) maxerr = e;
    }
    return maxerr;
}

/* base and vel of the straight trajectories the extrapolation tests use */
static void line_params(size_t n, float **base, float **vel) {
    *base = malloc(n * sizeof(float));
    *vel = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        (*base)[i] = (float)(i % 13) * 0.25f;
        (*vel)[i] = (float)((int)(i % 5) - 2) * 0.125f;
    }
}

static void test_linear_exact(void) {
    hpt_model *m = tiny_gpt();
    size_t n;
    float *p = hpt_model_params(m, &n), *base, *vel;
    line_params(n, &base, &vel);
    hpt_predictor pr;
    hpt_pred_init(&pr, hpt_pred_parse("linear"), m, 4, 2);
    /* snapshots at updates 2, 4, 6, 8 */
    double maxerr = straight_line_error(&pr, p, n, base, vel, 8);
    CHECK(maxerr < 1e-5, "linear extrapolation error %.3g", maxerr);
    hpt_pred_free(&pr);
    free(base); free(vel);
    hpt_model_free(m);
}

/* shrink: an exactly linear trajectory is extrapolated exactly (every
 * slope significant, straightness 1); a tensor that only jitters around a fixed
 * point is gated off; under noise, parameters at rest keep (nearly) still
 * where the per-parameter fit moves them, and moving ones lose little (the
 * shrinkage bias, 1 - 4/t^2 of each slope). */
static void test_shrink(void) {
    hpt_model *m = tiny_gpt();
    size_t n;
    float *p = hpt_model_params(m, &n), *base, *vel;
    line_params(n, &base, &vel);
    hpt_predictor pr;
    CHECK(hpt_pred_init(&pr, hpt_pred_parse("shrink"), m, 6, 2) == HPT_OK, "shrink init");
    double maxerr = straight_line_error(&pr, p, n, base, vel, 12);
    CHECK(maxerr < 1e-4, "shrink extrapolation of a straight line: error %.3g", maxerr);
    hpt_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
    int nt;
    const hpt_tensor_info *ti = hpt_model_tensors(m, &nt);
    int open = 0;
    for (int i = 0; i < nt; i++) open += pr.tensor_gate[i] == 1.0f;
    CHECK(open == nt, "straight paths: %d of %d tensors gated open", open, nt);
    hpt_pred_free(&pr);

    /* tensor 0 jitters (independent noise each snapshot), the rest drift
     * with the same noise added: the drift's estimate must beat the
     * per-parameter fit's (linear) on the drifting tensors */
    hpt_predictor lin;
    hpt_pred_init(&pr, hpt_pred_parse("shrink"), m, 6, 2);
    hpt_pred_init(&lin, hpt_pred_parse("linear"), m, 6, 2);
    hpt_rng r;
    hpt_rng_seed(&r, 11);
    for (int u = 1; u <= 12; u++) {
        for (size_t i = 0; i < n; i++) {
            float drift = i < ti[0].numel ? 0.0f : vel[i] * u;
            p[i] = base[i] + drift + 0.05f * hpt_rng_normal(&r);
        }
        hpt_pred_observe(&pr, p, u);
        hpt_pred_observe(&lin, p, u);
    }
    hpt_pred_begin(&pr, NULL, NULL, &o, 12);
    hpt_pred_begin(&lin, NULL, NULL, &o, 12);
    CHECK(pr.tensor_gate[0] == 0.0f, "a jittering tensor is gated off (gate %.2f)", pr.tensor_gate[0]);
    /* squared slope error, on the parameters at rest (vel 0) and on the moving ones */
    double e_sh[2] = {0, 0}, e_lin[2] = {0, 0};
    for (size_t i = ti[0].numel; i < n; i++) {
        int moving = vel[i] != 0.0f;
        e_sh[moving] += (pr.slope[i] - vel[i]) * (double)(pr.slope[i] - vel[i]);
        e_lin[moving] += (lin.slope[i] - vel[i]) * (double)(lin.slope[i] - vel[i]);
    }
    CHECK(e_sh[0] < 0.5 * e_lin[0], "parameters at rest: shrink squared slope error %.4g, per-parameter fit %.4g",
          e_sh[0], e_lin[0]);
    CHECK(e_sh[1] < 1.1 * e_lin[1], "moving parameters: shrink squared slope error %.4g, per-parameter fit %.4g",
          e_sh[1], e_lin[1]);
    hpt_pred_free(&pr);
    hpt_pred_free(&lin);
    free(base); free(vel);
    hpt_model_free(m);
}

static void test_snapshot_bytes(void) {
    size_t n = 1000;
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *p0 = malloc(n * 4), *m0 = malloc(n * 4), *v0 = malloc(n * 4);
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) { p[i] = hpt_rng_normal(&r); m[i] = hpt_rng_normal(&r); v[i] = hpt_rng_uniform(&r); }
    p[0] = -0.0f; p[1] = NAN; m[2] = INFINITY;  /* bits that arithmetic would not preserve */
    memcpy(p0, p, n * 4); memcpy(m0, m, n * 4); memcpy(v0, v, n * 4);
    hpt_snapshot s;
    CHECK(hpt_snapshot_init(&s, n, 0, &hpt_device_cpu) == HPT_OK, "snapshot init");
    hpt_snapshot_take(&s, p, m, v, 42, 40);
    for (size_t i = 0; i < n; i++) { p[i] += 1.0f; m[i] *= 3.0f; v[i] = 0.0f; }
    hpt_snapshot_restore_params(&s, p);
    memcpy(m, hpt_snapshot_moment1(&s), n * 4);
    memcpy(v, hpt_snapshot_moment2(&s), n * 4);
    CHECK(!memcmp(p, p0, n * 4) && !memcmp(m, m0, n * 4) && !memcmp(v, v0, n * 4), "restore is byte for byte");
    CHECK(s.step == 42 && s.updates == 40 && s.valid, "snapshot remembers its step and update count");
    hpt_snapshot_free(&s);
    free(p); free(m); free(v); free(p0); free(m0); free(v0);
}

static void test_config_messages(void) {
    hpt_hybrid_config c;
    hpt_hybrid_config_default(&c);
    CHECK(hpt_hybrid_config_check(&c) == HPT_OK, "defaults valid: %s", hpt_errmsg());
    c.predictor = "oracle";
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--predictor"), "bad predictor: %s", hpt_errmsg());
    hpt_hybrid_config_default(&c);
    c.probe_batches = 0;
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--probe-batches"), "bad probes: %s", hpt_errmsg());
    hpt_hybrid_config_default(&c);
    c.full_steps = 0;
    CHECK(hpt_hybrid_config_check(&c) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--full-steps"), "bad full steps: %s", hpt_errmsg());
}

/* The predictor table: each name parses to its row, and the rows keep the
 * indices checkpoints store (HYBR): coast 0, stale-adam 1, linear 2, shrink 3, outer 4. */
static void test_predictor_table(void) {
    const char *names[] = {"coast", "stale-adam", "linear", "shrink", "outer"};
    CHECK(hpt_pred_count() >= 5, "%d predictors", hpt_pred_count());
    for (int i = 0; i < 5; i++)
        CHECK(hpt_pred_parse(names[i]) == i && !strcmp(hpt_pred_name(i), names[i]), "%s is row %d", names[i], i);
    for (int i = 0; i < hpt_pred_count(); i++)
        CHECK(hpt_pred_parse(hpt_pred_name(i)) == i, "row %d round-trips", i);
    CHECK(hpt_pred_parse("oracle") == -1 && hpt_pred_parse(NULL) == -1, "unknown names are refused");
    CHECK(hpt_pred_name(-1) == NULL && hpt_pred_name(hpt_pred_count()) == NULL, "no row past the table");
    char list[256];
    hpt_pred_list(list, sizeof list);
    CHECK(!strcmp(list, "coast, stale-adam, linear, shrink or outer"), "list: %s", list);
}

/* The outer step on a known displacement: from anchor a, params theta and
 * momentum u, u' = mu u + (theta - a) and theta' = a + eta ((theta - a) +
 * mu u') at scale 1 (docs/hybrid.md), the new anchor theta'; at scale s the
 * departure from theta is s times that; eta 1, mu 0 leaves theta bit for bit
 * (a -0.0f included) and u' = theta - a. */
static void test_outer_formula(void) {
    hpt_model *m = tiny_gpt();
    CHECK(m != NULL, "tiny model");
    if (!m) return;
    hpt_predictor p;
    CHECK(hpt_pred_init(&p, hpt_pred_parse("outer"), m, 0, 0) == HPT_OK, "outer init: %s", hpt_errmsg());
    CHECK(p.ops->outer && p.arena_bytes == 0, "outer row: its flag, no arena of its own");
    hpt_pred_free(&p);
    hpt_outer o;
    CHECK(hpt_outer_init(&o, m, 1.0f, 0.5f) == HPT_OK && hpt_outer_bytes(&o) == 2 * m->nparams * sizeof(float),
          "outer step: one arena, its anchor and momentum");
    const size_t n = m->nparams;
    float *th = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        a[i] = sinf((float)i * 0.37f);
        th[i] = a[i] + 0.01f * cosf((float)i * 1.3f);
        u[i] = 0.02f * sinf((float)i * 0.11f + 1.0f);
    }
    th[5] = -0.0f; a[5] = -0.0f;  /* a signed zero that must survive "no change" */
    const float etas[] = {0.7f, 1.0f, 1.0f, 2.5f}, mus[] = {0.9f, 0.0f, 0.5f, 0.3f}, scales[] = {1.0f, 1.0f, 1.0f, 0.25f};
    for (int c = 0; c < 4; c++) {
        float eta = etas[c], mu = mus[c], s = scales[c];
        memcpy(o.anchor, a, n * sizeof(float));
        memcpy(o.u, u, n * sizeof(float));
        memcpy(m->params, th, n * sizeof(float));
        o.lr = eta;
        o.momentum = mu;
        hpt_outer_apply(&o, m->params, NULL, s, NULL);
        double worst = 0.0, worst_u = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)th[i] - a[i], u2 = mu * (double)u[i] + d;
            double want = th[i] + s * ((a[i] + eta * (d + mu * u2)) - th[i]);
            double e = fabs(m->params[i] - want), eu = fabs(o.u[i] - u2);
            if (e > worst) worst = e;
            if (eu > worst_u) worst_u = eu;
        }
        CHECK(worst < 1e-6 && worst_u < 1e-7, "outer eta %g mu %g scale %g: |theta' - formula| %.3g, |u' - formula| %.3g",
              eta, mu, s, worst, worst_u);
        CHECK(!memcmp(o.anchor, m->params, n * sizeof(float)), "outer eta %g mu %g: the new anchor is theta'", eta, mu);
        if (eta == 1.0f && mu == 0.0f) {
            CHECK(!memcmp(m->params, th, n * sizeof(float)), "outer eta 1 mu 0: theta unchanged bit for bit");
            int same = 1;
            for (size_t i = 0; i < n; i++) same &= o.u[i] == th[i] - a[i];
            CHECK(same, "outer eta 1 mu 0: u' is the displacement");
        }
    }
    hpt_outer_reset(&o, th);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= o.u[i] == 0.0f;
    CHECK(zero && !memcmp(o.anchor, th, n * sizeof(float)), "outer reset: anchor = params, u = 0");
    hpt_outer_free(&o);
    free(th); free(a); free(u);
    hpt_model_free(m);
}

/* --outer-adapt agree on a known displacement: tensor 0's displacement
 * along its momentum (gate 1), tensor 1's against it (gate 0: theta stays
 * bit for bit, u' still mu u + D), tensor 2's at 60 degrees (gate 0.5);
 * each tensor's departure is its gate times the plain outer step's. */
static void test_outer_agree(void) {
    hpt_model *m = tiny_gpt();
    CHECK(m != NULL, "tiny model");
    if (!m || m->ntensors < 3) { hpt_model_free(m); return; }
    hpt_outer o;
    CHECK(hpt_outer_init(&o, m, 1.5f, 0.5f) == HPT_OK, "outer init: %s", hpt_errmsg());
    float gate[HPT_MAX_TENSORS];
    for (int t = 0; t < HPT_MAX_TENSORS; t++) gate[t] = -1.0f;
    const size_t n = m->nparams;
    float *th = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { a[i] = sinf((float)i * 0.37f); u[i] = 0.0f; th[i] = a[i]; }
    /* the first two elements of tensors 0..2 carry the displacement */
    const float dx[3][2] = {{0.02f, 0.01f}, {0.02f, 0.01f}, {0.01f, 0.0f}};
    const float ux[3][2] = {{0.04f, 0.02f}, {-0.02f, -0.01f}, {0.01f, 0.017320508f}};
    const double want_g[3] = {1.0, 0.0, 0.5};
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 2; j++) {
            size_t i = m->tensors[t].offset + (size_t)j;
            th[i] = a[i] + dx[t][j];
            u[i] = ux[t][j];
        }
    memcpy(o.anchor, a, n * sizeof(float));
    memcpy(o.u, u, n * sizeof(float));
    memcpy(m->params, th, n * sizeof(float));
    o.adapt = 1;
    hpt_outer_apply(&o, m->params, NULL, 1.0f, gate);
    for (int t = 0; t < 3; t++) {
        CHECK(fabs(gate[t] - want_g[t]) < 1e-5, "agree: tensor %d's gate %.6f, want %.1f", t,
              gate[t], want_g[t]);
        double worst = 0.0;
        for (size_t k = 0; k < m->tensors[t].numel; k++) {
            size_t i = m->tensors[t].offset + k;
            double d = (double)th[i] - a[i], u2 = 0.5 * u[i] + d;
            double want = th[i] + want_g[t] * (0.5 * d + 1.5 * 0.5 * u2);
            double e = fabs(m->params[i] - want);
            if (e > worst) worst = e;
            if (fabs(o.u[i] - u2) > 1e-7) worst = 1.0;
        }
        CHECK(worst < 1e-6, "agree: tensor %d's step is its gate times the outer step (worst %.3g)", t, worst);
    }
    CHECK(!memcmp(m->params + m->tensors[1].offset, th + m->tensors[1].offset, m->tensors[1].numel * sizeof(float)),
          "agree: a tensor with gate 0 stays bit for bit");
    CHECK(gate[3] == 0.0f, "agree: a tensor without displacement gets gate 0");
    hpt_outer_free(&o);
    free(th); free(a); free(u);
    hpt_model_free(m);
}

/* ---------------------------------------------------------------- forced rollbacks */

/* A text of words over 12 symbols (a vocabulary that GPT-2 pads from 12 to
 * 16 rows of wte). */
static const char *rollback_corpus(void) {
    const char *path = test_tmp_path("words.txt");
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    uint32_t s = 7;
    for (int i = 0; i < 6000; i++) {
        s = s * 1664525u + 1013904223u;
        int len = 2 + (int)(s >> 29);
        for (int j = 0; j < len; j++) { s = s * 1664525u + 1013904223u; fputc("abcdefghij"[(s >> 24) % 10], f); }
        fputc(i % 12 == 11 ? '\n' : ' ', f);
    }
    fclose(f);
    return path;
}

static void rollback_configs(hpt_train_config *c, hpt_hybrid_config *hc, const char *data, const char *out) {
    hpt_train_config_default(c);
    c->data_path = data;
    c->out_dir = out;
    c->n_layer = 1; c->n_head = 2; c->n_embd = 16; c->block_size = 16; c->batch_size = 4;
    c->max_iters = 300; c->warmup_iters = 10; c->eval_interval = 100; c->eval_iters = 2; c->threads = 1;
    hpt_hybrid_config_default(hc);
    hc->predictor = "stale-adam";
    hc->warmup_steps = 20; hc->full_steps = 5; hc->min_predict_steps = 4; hc->max_predict_steps = 12;
    hc->correct_steps = 3; hc->confidence_threshold = 0.0f; hc->waste_budget = 1.0f; hc->backoff_after = 1000;
}

static cJSON *read_json(const char *path, size_t skip_lines) {
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) return NULL;
    const char *s = (const char *)buf;
    for (size_t i = 0; i < skip_lines && s; i++) { s = strchr(s, '\n'); if (s) s++; }
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(buf);
    return o;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The counters of a finished hybrid run in dir: the metrics' step counter
 * never goes backwards; backward passes are the model's backward calls;
 * every real step is an update in effect or one a rollback undid; every
 * step of the schedule is one of those or a predicted step, kept or undone. */
static void check_counts(const char *dir, const char *what, int *rollbacks) {
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    unsigned char *buf;
    size_t n;
    *rollbacks = -1;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) { CHECK(0, "%s: %s", what, hpt_errmsg()); return; }
    int real = 0, last = 0, monotone = 1, jumped = 0;
    for (char *line = (char *)buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        cJSON *o = cJSON_ParseWithLength(line, nl ? (size_t)(nl - line) : strlen(line));
        int step = (int)num(o, "step");
        if (step < last) monotone = 0;
        last = step;
        real += num(o, "backward") == 1;
        if (num(o, "accepted") == 1) jumped += (int)num(o, "predicted_steps");
        cJSON_Delete(o);
    }
    free(buf);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *s = read_json(path, 0);
    CHECK(s != NULL, "%s: no summary.json", what);
    if (!s) return;
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "predict_phases");
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(s, "rolled_back");
    double steps = num(s, "steps"), updates = num(s, "optimizer_updates"), kept = num(pp, "steps_kept");
    double undone_u = num(rb, "updates"), undone_p = num(rb, "predicted_steps");
    *rollbacks = (int)num(s, "divergence_rollbacks");
    CHECK(monotone, "%s: the metrics' step counter went backwards", what);
    CHECK(num(s, "backward_passes") == num(s, "model_backward_calls"), "%s: backward passes %g, the model ran %g",
          what, num(s, "backward_passes"), num(s, "model_backward_calls"));
    CHECK(updates + undone_u == real, "%s: %g updates in effect + %g undone, %d real steps", what, updates, undone_u, real);
    CHECK(steps == real + kept + undone_p, "%s: %g steps, %d real + %g predicted kept + %g undone", what, steps, real,
          kept, undone_p);
    CHECK(steps == last && kept >= 0 && undone_u >= 0 && undone_p >= 0, "%s: %g steps, last line %d", what, steps, last);
    CHECK(kept + undone_p == jumped, "%s: kept jumps advanced %d steps: %g still kept, %g undone", what, jumped, kept,
          undone_p);
    cJSON_Delete(s);
}

/* Right after a kept jump (from the run's step callback), up to 3 times:
 * spike: wte's rows times 30, a finite loss far above its window (a
 *        critical divergence at the next real step);
 * nan:   NaN in wte's padded rows, which the forward pass never reads (the
 *        loss stays finite) and the backward pass multiplies by their zero
 *        gradient (0 x NaN): the next step's gradient norm is NaN after its
 *        backward pass, so the step is redone from the snapshot. */
typedef struct injector { hpt_model *m; int nan, done; } injector;

static void inject(void *ctx, const hpt_step_info *info) {
    injector *in = ctx;
    if (!info->phase || strcmp(info->phase, "predict") || !info->accepted || in->done >= 3) return;
    const hpt_tensor_info *wte = &in->m->tensors[0];
    int Vp = wte->shape[0], C = wte->shape[1], V = in->m->n_out;
    float *w = in->m->params + wte->offset;
    for (int r = in->nan ? V : 0; r < (in->nan ? Vp : V); r++)
        for (int k = 0; k < C; k++) w[(size_t)r * C + k] = in->nan ? NAN : 30.0f * w[(size_t)r * C + k];
    in->done++;
}

static void run_injected(const char *data, int nan, const char *what) {
    hpt_train_config c;
    hpt_hybrid_config hc;
    const char *out = test_tmp_path(nan ? "nan" : "spike");
    rollback_configs(&c, &hc, data, out);
    hc.div_window = 8;  /* judged from the 9th real step on */
    hpt_trainer *tr = NULL;
    CHECK(hpt_trainer_init(&tr, &c) == HPT_OK, "init: %s", hpt_errmsg());
    if (!tr) return;
    injector in = {.m = hpt_trainer_model(tr), .nan = nan};
    CHECK(!strcmp(in.m->tensors[0].name, "wte") && in.m->tensors[0].shape[0] == 16, "wte is tensor 0, 16 rows");
    CHECK(hpt_trainer_run_hybrid(tr, &hc, NULL, inject, &in) == HPT_OK, "%s run: %s", what, hpt_errmsg());
    const float *p = in.m->params;
    size_t np = in.m->nparams, bad = 0;
    for (size_t i = 0; i < np; i++) bad += !isfinite(p[i]);
    CHECK(bad == 0, "%s: %zu non-finite parameters after the run", what, bad);
    hpt_trainer_free(tr);
    int rollbacks;
    check_counts(out, what, &rollbacks);
    CHECK(in.done > 0 && rollbacks == in.done, "%s: %d injections, %d rollbacks", what, in.done, rollbacks);
}

int main(void) {
    test_predictor_table();
    hpt_set_threads(1);
    test_outer_formula();
    test_outer_agree();
    test_predictors_move_params();
    test_shrink();
    test_linear_exact();
    test_snapshot_bytes();
    test_config_messages();
    if (test_tmpdir_make("hpt_test_hybrid")) {
        const char *data = rollback_corpus();
        CHECK(data != NULL, "cannot write the corpus");
        if (data) {
            run_injected(data, 0, "divergence rollback");
            run_injected(data, 1, "non-finite redo");
        }
        test_tmpdir_remove();
    }
    return TEST_REPORT("test_hybrid");
}
