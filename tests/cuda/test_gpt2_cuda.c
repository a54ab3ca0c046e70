/*
 * test_gpt2_cuda.c — the GPT-2 family on the CUDA row against the same model
 * on the CPU row (make test-cuda): the same seed gives the same weights bit
 * for bit (drawn on the host, uploaded); one batch's loss, logits and every
 * parameter's gradient agree within rounding, fp32 with TF32 off; the
 * accumulate contract holds (backward twice = twice the gradient); and two
 * GPU runs of the same step give the same bits (no atomics in the
 * reductions: kernels_cuda.h).
 *
 * Tolerances (normwise: max |gpu - cpu| <= tol * max |cpu| per tensor):
 * 1e-5 for the loss, 1e-4 for logits and gradients (cuBLAS's summation
 * order against OpenBLAS's, through L layers). Every check prints its worst
 * difference, so a GPU run's log is the record of the headroom.
 *
 * The attention is the CUDA row's default, the flash kernels (its state and
 * the activation arena against the ledger are checked too);
 * HPT_CUDA_ATTENTION=materialise build/cuda/test_gpt2_cuda runs the same
 * checks on the T x T kernels.
 *
 * Without a usable GPU it prints "skip: <why>" and exits 0.
 */
#include "../../src/model/model.h"
#include "../test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape { const char *name; int V, L, NH, C, B, T; } shape;

static float *download_all(const hpt_model *m, const float *src) {
    float *h = malloc(m->nparams * sizeof(float));
    m->dev->download(h, src, m->nparams);
    return h;
}

/* max |a - b| / max |b| over one tensor (0 when b is all zeros and a equals it) */
static double normwise(const float *a, const float *b, size_t n) {
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > d || e != e) d = e;
        if (fabs((double)b[i]) > s) s = fabs((double)b[i]);
    }
    return s > 0.0 ? d / s : d;
}

/* The GPU's gradients g against the CPU's, tensor by tensor, each within tol
 * of its largest value (checked as "LABEL dNAME"); the worst tensor's
 * difference, its name in *name */
static double worst_grad(const hpt_model *cpu, const float *g, double tol, const char *label, const char **name) {
    double worst = 0.0;
    *name = "";
    for (int i = 0; i < cpu->ntensors; i++) {
        const hpt_tensor_info *t = &cpu->tensors[i];
        double e = normwise(g + t->offset, cpu->grads + t->offset, t->numel);
        CHECK(e <= tol, "%s d%s differs by %.3g of its largest value", label, t->name, e);
        if (e > worst || e != e) { worst = e; *name = t->name; }
    }
    return worst;
}

static void compare_grads(const hpt_model *cpu, const hpt_model *gpu, const char *what) {
    float *g = download_all(gpu, gpu->grads);
    char label[96];
    snprintf(label, sizeof label, "%s:", what);
    const char *worst_name;
    const double worst = worst_grad(cpu, g, 1e-4, label, &worst_name);
    printf("  %s: worst gradient d%s, %.3g normwise\n", what, worst_name, worst);
    free(g);
}

/* Both models' forward of b's tokens without its targets: the logits stay
 * logits (with targets the probabilities overwrite them) */
static void forward_logits(hpt_model *cpu, hpt_model *gpu, const hpt_batch *b) {
    hpt_batch nb = *b;
    nb.targets = NULL;
    CHECK(hpt_model_forward(cpu, &nb, NULL) == HPT_OK && hpt_model_forward(gpu, &nb, NULL) == HPT_OK,
          "forward without targets: %s", hpt_errmsg());
}

/* Both models from one seed start with the same weights, bit for bit */
static void same_weights(const hpt_model *cpu, const hpt_model *gpu, const shape *s) {
    float *w = download_all(gpu, gpu->params);
    CHECK(!memcmp(w, cpu->params, cpu->nparams * sizeof(float)), "%s: the same seed gives the same weights", s->name);
    free(w);
}

/* What every shape's test starts with: the weights compared (the same
 * seed, the same bits), B x T tokens and targets drawn from seed 99 (the
 * same in every test), and both models' logits of them (forward_logits) */
static hpt_batch first_batch(hpt_model *cpu, hpt_model *gpu, const shape *s) {
    same_weights(cpu, gpu, s);
    const size_t n = (size_t)s->B * s->T;
    int *tok = malloc(n * sizeof(int)), *tgt = malloc(n * sizeof(int));
    hpt_rng r;
    hpt_rng_seed(&r, 99);
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)(hpt_rng_u64(&r) % (uint64_t)s->V);
        tgt[i] = (int)(hpt_rng_u64(&r) % (uint64_t)s->V);
    }
    hpt_batch b = {.B = s->B, .T = s->T, .tokens = tok, .targets = tgt};
    forward_logits(cpu, gpu, &b);
    return b;
}

static void free_batch(hpt_batch *b) {
    free((void *)b->tokens);
    free((void *)b->targets);
}

static void test_shape(const shape *s) {
    printf("%s: V%d L%d NH%d C%d, batch %dx%d\n", s->name, s->V, s->L, s->NH, s->C, s->B, s->T);
    hpt_gpt2_config cfg = {.vocab_size = s->V, .block_size = s->T, .n_layer = s->L, .n_head = s->NH, .n_embd = s->C};
    hpt_model *cpu = NULL, *gpu = NULL;
    hpt_device *dev = NULL;
    CHECK(hpt_device_open("cuda", NULL, &dev) == HPT_OK, "cuda at fp32: %s", hpt_errmsg());
    if (!dev) return;
    CHECK(hpt_gpt2_init(&cpu, &cfg, s->B, s->T, 7, NULL) == HPT_OK, "cpu model: %s", hpt_errmsg());
    CHECK(hpt_gpt2_init(&gpu, &cfg, s->B, s->T, 7, dev) == HPT_OK, "gpu model: %s", hpt_errmsg());
    if (!cpu || !gpu) { hpt_model_free(cpu); hpt_model_free(gpu); hpt_device_close(dev); return; }

    /* the memory plan: the arena is what the ledger counts (hpt_gpt2_act_floats),
     * and its att slot holds the CUDA row's attention state: B*NH*T
     * log-sum-exps a layer (flash), B*NH*T*T probabilities under
     * HPT_CUDA_ATTENTION=materialise; the CPU's stays B*NH*T*T */
    const char *mode = getenv("HPT_CUDA_ATTENTION");
    const int mat = mode && (!strcmp(mode, "materialise") || !strcmp(mode, "materialize"));
    const size_t A = dev->nn->attention_state_floats(dev, s->B, s->T, s->C, s->NH);
    CHECK(A == (size_t)s->B * s->NH * s->T * (mat ? (size_t)s->T : 1), "%s: attention state %zu floats", s->name, A);
    CHECK(hpt_device_cpu.nn->attention_state_floats(&hpt_device_cpu, s->B, s->T, s->C,
          s->NH) == (size_t)s->B * s->NH * s->T * s->T,
          "%s: the CPU's attention state", s->name);
    CHECK(gpu->act_bytes == hpt_gpt2_act_floats(&cfg, s->B, s->T, dev) * sizeof(float) &&
          cpu->act_bytes == hpt_gpt2_act_floats(&cfg, s->B, s->T, NULL) * sizeof(float),
          "%s: the activation arenas (%zu, %zu B) are what the ledger counts", s->name, gpu->act_bytes, cpu->act_bytes);
    printf("  activations: cpu %zu B, gpu %zu B (%s attention)\n", cpu->act_bytes, gpu->act_bytes,
           mat ? "T x T" : "flash");

    hpt_batch b = first_batch(cpu, gpu, s);
    const size_t n = (size_t)s->B * s->T;
    float *lc = malloc((size_t)s->V * sizeof(float)), *lg = malloc((size_t)s->V * sizeof(float));
    double worst = 0.0;
    for (int row = 0; row < (int)n; row += (int)n / 7 + 1) {
        hpt_model_logits_copy(cpu, row, lc);
        hpt_model_logits_copy(gpu, row, lg);
        double e = normwise(lg, lc, (size_t)s->V);
        if (e > worst || e != e) worst = e;
    }
    CHECK(worst <= 1e-4, "%s: logits differ by %.3g normwise", s->name, worst);
    printf("  logits: %.3g normwise (worst of the rows read)\n", worst);
    free(lc); free(lg);

    float loss_c = 0, loss_g = 0;
    CHECK(hpt_model_forward(cpu, &b, &loss_c) == HPT_OK && hpt_model_forward(gpu, &b, &loss_g) == HPT_OK,
          "forward: %s", hpt_errmsg());
    CHECK_NEAR(loss_g, loss_c, 0.0, 1e-5, "the loss");
    printf("  loss: cpu %.9g, gpu %.9g\n", loss_c, loss_g);
    CHECK(hpt_model_backward_fresh(cpu, 1.0f) == HPT_OK && hpt_model_backward_fresh(gpu, 1.0f) == HPT_OK,
          "backward: %s", hpt_errmsg());
    compare_grads(cpu, gpu, "one backward");

    /* the same step again on the GPU: the same bits */
    float *g1 = download_all(gpu, gpu->grads), loss_g2 = 0;
    CHECK(hpt_model_forward(gpu, &b, &loss_g2) == HPT_OK && hpt_model_backward_fresh(gpu, 1.0f) == HPT_OK,
          "again: %s", hpt_errmsg());
    float *g2 = download_all(gpu, gpu->grads);
    CHECK(loss_g2 == loss_g && !memcmp(g1, g2, gpu->nparams * sizeof(float)),
          "%s: the same step twice on the GPU gives the same bits", s->name);

    /* accumulate: a second backward onto the first (both devices) */
    CHECK(hpt_model_forward(cpu, &b, &loss_c) == HPT_OK && hpt_model_backward(cpu, 1.0f) == HPT_OK,
          "cpu accumulate: %s", hpt_errmsg());
    CHECK(hpt_model_forward(gpu, &b, &loss_g) == HPT_OK && hpt_model_backward(gpu, 1.0f) == HPT_OK,
          "gpu accumulate: %s", hpt_errmsg());
    compare_grads(cpu, gpu, "two backwards accumulated");
    free(g1); free(g2);
    free_batch(&b);
    hpt_model_free(cpu);
    hpt_model_free(gpu);
}

/* --precision bf16: activations (and the GEMMs' weight copy) bf16 in device
 * memory, parameters and gradients fp32. Against the CPU's fp32 model from
 * the same seed: the arena is the ledger's at 2-byte activations and
 * smaller than fp32's; the weights are the same bits; the loss within 1e-2
 * relative, logits and every gradient within 5e-2 normwise (bf16 keeps 8
 * bits: 2^-9 relative per rounding, through L layers and the residual
 * stream), yet further from the CPU's than fp32 rounding goes (the bf16
 * kernels did run); the same step twice gives the same bits. */
static void test_shape_bf16(const shape *s) {
    printf("%s, bf16 activations: V%d L%d NH%d C%d, batch %dx%d\n", s->name, s->V, s->L, s->NH, s->C, s->B, s->T);
    hpt_gpt2_config cfg = {.vocab_size = s->V, .block_size = s->T, .n_layer = s->L, .n_head = s->NH, .n_embd = s->C};
    hpt_device *d32 = NULL, *dev = NULL;
    const hpt_device_settings bf16 = {.precision = "bf16", .mem_limit = 0};
    CHECK(hpt_device_open("cuda", NULL, &d32) == HPT_OK && hpt_device_open("cuda", &bf16, &dev) == HPT_OK,
          "cuda at fp32 and at bf16: %s", hpt_errmsg());
    if (!d32 || !dev) { hpt_device_close(d32); hpt_device_close(dev); return; }
    const size_t fp32_floats = hpt_gpt2_act_floats(&cfg, s->B, s->T, d32);
    hpt_device_close(d32);
    CHECK(dev->nn->act_bytes(dev) == 2, "bf16: 2-byte activations");
    hpt_model *cpu = NULL, *gpu = NULL;
    CHECK(hpt_gpt2_init(&cpu, &cfg, s->B, s->T, 7, NULL) == HPT_OK, "cpu model: %s", hpt_errmsg());
    CHECK(hpt_gpt2_init(&gpu, &cfg, s->B, s->T, 7, dev) == HPT_OK, "gpu model: %s", hpt_errmsg());
    if (!cpu || !gpu) { hpt_model_free(cpu); hpt_model_free(gpu); hpt_device_close(dev); return; }
    const size_t bf16_floats = hpt_gpt2_act_floats(&cfg, s->B, s->T, dev);
    CHECK(gpu->act_bytes == bf16_floats * sizeof(float), "%s: the bf16 arena (%zu B) is what the ledger counts",
          s->name, gpu->act_bytes);
    /* the GEMMs' bf16 copy of the weights (the tied embedding and 12 C^2 a
     * layer, 2 bytes each) is new; the activations themselves halve */
    const size_t Vp = (size_t)hpt_gpt2_padded_vocab(s->V);
    const size_t wcopy = ((Vp * s->C + (size_t)12 * s->L * s->C * s->C) * 2 + 63) / 64 * 64;
    CHECK(bf16_floats * sizeof(float) - wcopy < fp32_floats * sizeof(float), "%s: bf16 activations take less memory "
          "(%zu B and a weight copy of %zu B; fp32 %zu B)", s->name, bf16_floats * sizeof(float) - wcopy, wcopy,
          fp32_floats * sizeof(float));
    printf("  activations: bf16 %zu B (of which the weights' bf16 copy %zu B), fp32 %zu B\n",
           bf16_floats * sizeof(float), wcopy, fp32_floats * sizeof(float));
    hpt_batch b = first_batch(cpu, gpu, s);
    const size_t n = (size_t)s->B * s->T;
    float *lc = malloc((size_t)s->V * sizeof(float)), *lg = malloc((size_t)s->V * sizeof(float));
    double worst = 0.0;
    for (int row = 0; row < (int)n; row += (int)n / 7 + 1) {
        CHECK(hpt_model_logits_copy(cpu, row, lc) == HPT_OK && hpt_model_logits_copy(gpu, row, lg) == HPT_OK,
              "logits: %s", hpt_errmsg());
        double e = normwise(lg, lc, (size_t)s->V);
        if (e > worst || e != e) worst = e;
    }
    CHECK(worst <= 5e-2 && worst > 1e-6, "%s: bf16 logits differ by %.3g normwise (want bf16 rounding: 1e-6 to 5e-2)",
          s->name, worst);
    printf("  logits: %.3g normwise\n", worst);
    free(lc); free(lg);

    float loss_c = 0, loss_g = 0, loss_g2 = 0;
    CHECK(hpt_model_forward(cpu, &b, &loss_c) == HPT_OK && hpt_model_forward(gpu, &b, &loss_g) == HPT_OK,
          "forward: %s", hpt_errmsg());
    CHECK_NEAR(loss_g, loss_c, 0.0, 1e-2, "the bf16 loss");
    printf("  loss: cpu %.9g, gpu bf16 %.9g\n", loss_c, loss_g);
    CHECK(hpt_model_backward_fresh(cpu, 1.0f) == HPT_OK && hpt_model_backward_fresh(gpu, 1.0f) == HPT_OK,
          "backward: %s", hpt_errmsg());
    float *g = download_all(gpu, gpu->grads);
    char label[96];
    snprintf(label, sizeof label, "%s: bf16", s->name);
    const char *gname;
    const double gworst = worst_grad(cpu, g, 5e-2, label, &gname);
    CHECK(gworst > 1e-6, "%s: bf16 gradients within fp32 rounding (%.3g): the bf16 kernels did not run", s->name,
          gworst);
    printf("  one backward: worst gradient d%s, %.3g normwise\n", gname, gworst);
    CHECK(hpt_model_forward(gpu, &b, &loss_g2) == HPT_OK && hpt_model_backward_fresh(gpu, 1.0f) == HPT_OK,
          "again: %s", hpt_errmsg());
    float *g2 = download_all(gpu, gpu->grads);
    CHECK(loss_g2 == loss_g && !memcmp(g, g2, gpu->nparams * sizeof(float)),
          "%s: the same bf16 step twice gives the same bits", s->name);
    free(g); free(g2);
    free_batch(&b);
    hpt_model_free(cpu);
    hpt_model_free(gpu);
    hpt_device_close(dev);
}

/* ---- two precisions in one process: a model on an fp32 instance and one on
 * a bf16 instance, their steps interleaved, each the bits of the same model
 * trained alone on an instance of its own (each instance keeps its cuBLAS
 * handle, math mode and activation type: neither sees the other's). */

enum { TWO_STEPS = 2 };

typedef struct run {
    hpt_device *dev;
    hpt_model *m;
    float *mom;   /* AdamW's m and v on the device */
    int t;
    float loss[TWO_STEPS];
} run;

static int run_open(run *r, const shape *s, const char *precision) {
    memset(r, 0, sizeof *r);
    const hpt_device_settings ds = {.precision = precision, .mem_limit = 0};
    hpt_gpt2_config cfg = {.vocab_size = s->V, .block_size = s->T, .n_layer = s->L, .n_head = s->NH, .n_embd = s->C};
    CHECK(hpt_device_open("cuda", &ds, &r->dev) == HPT_OK, "cuda at %s: %s", precision, hpt_errmsg());
    if (r->dev) CHECK(hpt_gpt2_init(&r->m, &cfg, s->B, s->T, 7, r->dev) == HPT_OK, "model: %s", hpt_errmsg());
    if (r->m) r->mom = r->dev->alloc(r->dev, 2 * r->m->nparams);
    return r->mom != NULL;
}

static void run_step(run *r, const shape *s) {
    const size_t n = (size_t)s->B * s->T;
    int *tok = malloc(n * sizeof(int)), *tgt = malloc(n * sizeof(int));
    HPT_ASSERT(tok && tgt);
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)((i * 7 + (size_t)r->t * 3) % (size_t)s->V);
        tgt[i] = (int)((i * 5 + (size_t)r->t * 11 + 1) % (size_t)s->V);
    }
    const hpt_batch b = {.B = s->B, .T = s->T, .tokens = tok, .targets = tgt};
    CHECK(hpt_model_forward(r->m, &b, &r->loss[r->t]) == HPT_OK &&
          hpt_model_backward_fresh(r->m, 1.0f) == HPT_OK, "step: %s", hpt_errmsg());
    const hpt_dev_adamw a = {.gscale = 1.0f, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                             .weight_decay = 0.1f, .t = r->t + 1};
    r->dev->adamw(r->m->params, r->m->grads, r->mom, r->mom + r->m->nparams, r->m->nparams, &a);
    r->t++;
    free(tok); free(tgt);
}

static void run_close(run *r) {
    if (r->mom) r->dev->free(r->dev, r->mom);
    hpt_model_free(r->m);
    hpt_device_close(r->dev);
}

static void test_two_precisions(const shape *s) {
    printf("%s: fp32 and bf16 side by side\n", s->name);
    const char *prec[2] = {"fp32", "bf16"};
    run both[2], alone;
    int ok = run_open(&both[0], s, prec[0]) & run_open(&both[1], s, prec[1]);
    if (!ok) { run_close(&both[0]); run_close(&both[1]); return; }
    CHECK(both[0].m->act_bytes != both[1].m->act_bytes, "%s: each model's arena carved for its own precision",
          s->name);
    for (int k = 0; k < TWO_STEPS; k++) { run_step(&both[0], s); run_step(&both[1], s); }
    for (int i = 0; i < 2; i++) {
        if (!run_open(&alone, s, prec[i])) { run_close(&alone); continue; }
        for (int k = 0; k < TWO_STEPS; k++) run_step(&alone, s);
        float *p = download_all(both[i].m, both[i].m->params), *q = download_all(alone.m, alone.m->params);
        CHECK(!memcmp(both[i].loss, alone.loss, sizeof alone.loss) &&
              !memcmp(p, q, alone.m->nparams * sizeof(float)),
              "%s: %s beside %s, interleaved, is the %s model alone bit for bit (loss %.9g, alone %.9g)", s->name,
              prec[i], prec[1 - i], prec[i], both[i].loss[TWO_STEPS - 1], alone.loss[TWO_STEPS - 1]);
        printf("  %s beside %s: loss %.9g, alone %.9g\n", prec[i], prec[1 - i], both[i].loss[TWO_STEPS - 1],
               alone.loss[TWO_STEPS - 1]);
        free(p); free(q);
        run_close(&alone);
    }
    CHECK(both[0].loss[TWO_STEPS - 1] != both[1].loss[TWO_STEPS - 1], "%s: the two precisions did differ", s->name);
    run_close(&both[0]);
    run_close(&both[1]);
}

int main(void) {
    const char *why = hpt_device_cuda.unavailable();
    if (why) {
        printf("skip: %s\n", why);
        return 0;
    }
    hpt_set_threads(0);
    const shape shapes[] = {
        {"odd", 101, 2, 4, 96, 3, 37},
        {"d4", 512, 4, 4, 128, 4, 64},
        {"124M-wide", 50257, 1, 12, 768, 2, 64},   /* GPT-2's vocabulary and width, one layer */
    };
    /* On the CPU's CUDA emulator (make CUDA=emu test-cuda, in CI), where a
     * step is thousands of times slower than on a GPU: fp32 at the odd shape
     * and GPT-2's width and vocabulary, bf16 at the latter; a GPU runs
     * every shape in both. */
    const int emulated = getenv("HPT_CUDA_EMULATED") != NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!emulated || strcmp(shapes[i].name, "d4") != 0) test_shape(&shapes[i]);
    const char *mode = getenv("HPT_CUDA_ATTENTION");
    if (mode && (!strcmp(mode, "materialise") || !strcmp(mode, "materialize")))
        printf("bf16: skipped (the T x T attention has no bf16 twin)\n");
    else
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (!emulated || !strcmp(shapes[i].name, "124M-wide")) test_shape_bf16(&shapes[i]);
    if (!(mode && (!strcmp(mode, "materialise") || !strcmp(mode, "materialize"))))
        test_two_precisions(&shapes[0]);
    return TEST_REPORT("test_gpt2_cuda");
}
