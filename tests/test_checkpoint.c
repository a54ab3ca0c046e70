/* tier: fast (make test; tests/run.sh) */
/*
 * test_checkpoint.c — whole-training-state checkpoints (src/train/checkpoint.c):
 * the section layout, a save/resume round trip that restores every piece of
 * state (config, parameters, AdamW moments, counters, clocks, data cursor)
 * and continues bit for bit, pruning to --keep-last, the fallback past a
 * corrupt newest file, damaged TCFG/TRST/LOGS/DATA fields behind a valid
 * CRC, the HYBR round trip, and the Fashion-MNIST cursor (when installed).
 *
 * Files live in a mkdtemp directory under /tmp, removed at the end.
 */
#include "../src/io/state.h"
#include "../src/train/trainer_impl.h"
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static char g_log[4096];
static void capture(void *ctx, const char *line) {
    (void)ctx;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", line);
}

static void tiny_config(hpt_train_config *c, const char *data, const char *out) {
    hpt_train_config_default(c);
    c->data_path = data;
    c->out_dir = out;
    c->n_layer = 1; c->n_head = 2; c->n_embd = 16; c->block_size = 16; c->batch_size = 4;
    c->max_iters = 40; c->warmup_iters = 5; c->eval_interval = 10; c->eval_iters = 2;
    c->threads = 1; c->keep_last = 2;
}

static int same_floats(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

static void test_round_trip(const char *data) {
    const char *out = tmp_path("run");
    hpt_train_config c;
    tiny_config(&c, data, out);
    hpt_trainer *a = NULL, *b = NULL;
    CHECK(hpt_trainer_init(&a, &c) == HPT_OK, "init: %s", hpt_errmsg());
    if (!a) return;
    for (int i = 0; i < 7; i++) CHECK(hpt_trainer_step(a, NULL) == HPT_OK, "step: %s", hpt_errmsg());
    a->final_val = 2.5f; a->best_val = 2.25f; a->next_eval = 10; a->eval_s = 0.125;
    CHECK(hpt_trainer_save_checkpoint(a) == HPT_OK, "save: %s", hpt_errmsg());
    const char *ck = tmp_path("run/checkpoints/ckpt-00000007.bin");
    CHECK(exists(ck) && !strcmp(hpt_trainer_checkpoint(a), ck), "checkpoint path '%s'", hpt_trainer_checkpoint(a));

    /* the sections, in order; the model sections come first, as in model.bin */
    unsigned char *buf = NULL;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    int nsec = 0;
    CHECK(hpt_state_read(ck, &buf, secs, &nsec) == HPT_OK, "read: %s", hpt_errmsg());
    const char *want[] = {"CONF", "TOKN", "PARM", "TCFG", "TRST", "ADAM", "DATA", "LOGS", "DSRC"};
    CHECK(nsec == 9, "%d sections, want 9", nsec);
    for (int i = 0; i < nsec && i < 9; i++)
        CHECK(!memcmp(secs[i].tag, want[i], 4), "section %d is %.4s, want %s", i, secs[i].tag, want[i]);
    free(buf);

    /* a checkpoint is a model file */
    hpt_model *m = NULL;
    hpt_text *tok = NULL;
    CHECK(hpt_weights_load(ck, 1, 0, NULL, &m, &tok) == HPT_OK, "weights_load(checkpoint): %s", hpt_errmsg());
    if (m) CHECK(same_floats(m->params, a->model->params, a->model->nparams), "checkpoint parameters differ");
    hpt_model_free(m);
    hpt_text_free(tok);

    g_log[0] = 0;
    CHECK(hpt_trainer_resume(&b, out, -1, 0u, NULL, 0, capture, NULL) == HPT_OK, "resume: %s", hpt_errmsg());
    if (!b) { hpt_trainer_free(a); return; }
    CHECK(strstr(g_log, "step 7 of 40") != NULL, "resume log: %s", g_log);
    size_t n = a->model->nparams;
    CHECK(b->model->nparams == n && same_floats(a->model->params, b->model->params, n), "parameters differ");
    CHECK(same_floats(a->m, b->m, n) && same_floats(a->v, b->v, n), "AdamW moments differ");
    CHECK(b->step == 7 && b->updates == 7 && b->tokens == a->tokens && b->train_s == a->train_s &&
          b->eval_s == a->eval_s, "counters: step %d updates %d tokens %g", b->step, b->updates, b->tokens);
    CHECK(b->final_val == 2.5f && b->best_val == 2.25f && b->next_eval == 10 && isnan(b->final_acc),
          "run-loop state: final %g best %g next_eval %d", b->final_val, b->best_val, b->next_eval);
    CHECK(b->model->backward_calls == a->model->backward_calls, "backward calls %zu vs %zu",
          b->model->backward_calls, a->model->backward_calls);
    const hpt_train_config *ca = &a->cfg, *cb = &b->cfg;
    CHECK(!strcmp(ca->task, cb->task) && !strcmp(ca->model, cb->model) && !strcmp(ca->data_path, cb->data_path) &&
          !strcmp(ca->out_dir, cb->out_dir) && ca->tokenizer == cb->tokenizer && ca->n_layer == cb->n_layer &&
          ca->n_head == cb->n_head && ca->n_embd == cb->n_embd && ca->block_size == cb->block_size &&
          ca->batch_size == cb->batch_size && ca->grad_accum == cb->grad_accum && ca->max_iters == cb->max_iters &&
          ca->warmup_iters == cb->warmup_iters && ca->epochs == cb->epochs && ca->lr == cb->lr &&
          ca->min_lr == cb->min_lr && ca->weight_decay == cb->weight_decay && ca->grad_clip == cb->grad_clip &&
          ca->beta1 == cb->beta1 && ca->beta2 == cb->beta2 && ca->eps == cb->eps &&
          ca->eval_interval == cb->eval_interval && ca->eval_iters == cb->eval_iters && ca->seed == cb->seed &&
          ca->threads == cb->threads && ca->save_interval == cb->save_interval && ca->keep_last == cb->keep_last,
          "the restored config differs");
    /* the same steps from here on: data cursor and optimizer state */
    for (int i = 0; i < 5; i++) {
        hpt_step_info ia, ib;
        CHECK(hpt_trainer_step(a, &ia) == HPT_OK && hpt_trainer_step(b, &ib) == HPT_OK, "step: %s", hpt_errmsg());
        CHECK(ia.train_loss == ib.train_loss && ia.grad_norm == ib.grad_norm && ia.lr == ib.lr,
              "step %d: loss %.9g vs %.9g", ia.step, ia.train_loss, ib.train_loss);
    }
    CHECK(same_floats(a->model->params, b->model->params, n), "parameters differ 5 steps after the resume");

    /* --threads must match the stored count (b, a resumed trainer, holds
     * the run directory's lock until it runs or is freed: release it) */
    hpt_dir_unlock(b->lock_fd);
    b->lock_fd = -1;
    hpt_trainer *t2 = NULL;
    CHECK(hpt_trainer_resume(&t2, out, 2, 0u, NULL, 0, NULL, NULL) == HPT_ERR_ARG && !t2,
          "resume with threads 2 not refused");
    CHECK(strstr(hpt_errmsg(), "--threads") != NULL, "message: %s", hpt_errmsg());

    /* keep_last 2: saving at 12, 13 leaves 12 and 13; a newer file is left alone */
    FILE *f = fopen(tmp_path("run/checkpoints/ckpt-00000099.bin"), "wb");
    if (f) { fputs("not a checkpoint", f); fclose(f); }
    CHECK(hpt_trainer_save_checkpoint(a) == HPT_OK, "save: %s", hpt_errmsg());
    CHECK(hpt_trainer_step(a, NULL) == HPT_OK, "step");
    CHECK(hpt_trainer_save_checkpoint(a) == HPT_OK, "save: %s", hpt_errmsg());
    CHECK(!exists(ck) && exists(tmp_path("run/checkpoints/ckpt-00000012.bin")) &&
          exists(tmp_path("run/checkpoints/ckpt-00000013.bin")) && exists(tmp_path("run/checkpoints/ckpt-00000099.bin")),
          "pruning to keep_last 2 left the wrong files");

    /* the newest (99) is garbage: resume says so and takes 13; the bad one is renamed */
    hpt_trainer_free(b);
    b = NULL;
    g_log[0] = 0;
    CHECK(hpt_trainer_resume(&b, out, 1, 0u, NULL, 0, capture, NULL) == HPT_OK, "resume past a bad file: %s",
          hpt_errmsg());
    CHECK(strstr(g_log, "ckpt-00000099.bin") && strstr(g_log, "falling back") && strstr(g_log, "step 13 of 40"),
          "fallback log: %s", g_log);
    CHECK(!exists(tmp_path("run/checkpoints/ckpt-00000099.bin")) &&
          exists(tmp_path("run/checkpoints/ckpt-00000099.bin.corrupt")), "the bad checkpoint was not renamed");
    if (b) CHECK(same_floats(a->model->params, b->model->params, n) && same_floats(a->v, b->v, n),
                 "state differs after resuming from step 13");
    hpt_trainer_free(a);
    hpt_trainer_free(b);
}

/* Overwrites n bytes at offset `at` of section `tag`'s payload in the file
 * and repairs the CRC trailer, as a crafted file would. 0: no such section. */
static int patch_section(const char *path, const char *tag, size_t at, const void *bytes, size_t n) {
    unsigned char *buf = NULL;
    size_t len = 0;
    if (hpt_read_file(path, &buf, &len) != HPT_OK) return 0;
    int done = 0;
    for (size_t off = 32; off + 16 <= len - 20 && !done;) {
        uint64_t sn;
        memcpy(&sn, buf + off + 8, 8);
        if (!memcmp(buf + off, tag, 4) && at + n <= sn) {
            memcpy(buf + off + 16 + at, bytes, n);
            uint32_t crc = hpt_crc32(0, buf, len - 4);
            memcpy(buf + len - 4, &crc, 4);
            done = 1;
        }
        off += 16 + sn;
    }
    FILE *f = done ? fopen(path, "wb") : NULL;
    if (f) { done = fwrite(buf, 1, len, f) == len; fclose(f); }
    free(buf);
    return done;
}

/* Damaged TCFG, TRST and LOGS fields (CRC repaired) make a checkpoint
 * unusable, named with the reason, and resume falls back to the previous
 * one; a data cursor that does not fit the data is refused. */
static void test_damaged_sections(const char *data) {
    const char *out = tmp_path("dmg");
    hpt_train_config c;
    tiny_config(&c, data, out);
    c.keep_last = 5;
    hpt_trainer *a = NULL;
    CHECK(hpt_trainer_init(&a, &c) == HPT_OK, "init: %s", hpt_errmsg());
    if (!a) return;
    for (int i = 0; i < 5; i++) {
        CHECK(hpt_trainer_step(a, NULL) == HPT_OK, "step: %s", hpt_errmsg());
        if (i == 2 || i == 4) CHECK(hpt_trainer_save_checkpoint(a) == HPT_OK, "save: %s", hpt_errmsg());
    }
    hpt_trainer_free(a);
    static char ck[512];
    snprintf(ck, sizeof ck, "%s", tmp_path("dmg/checkpoints/ckpt-00000005.bin"));
    unsigned char *orig = NULL;
    size_t orig_n = 0;
    CHECK(hpt_read_file(ck, &orig, &orig_n) == HPT_OK, "read: %s", hpt_errmsg());
    if (!orig) return;
    /* TCFG: u32 version, u32 mode, 4 strings, u32 tokenizer, 9 x i32, then f32 lr */
    size_t lr_at = 8;
    const hpt_state_sec *t = NULL;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    unsigned char *buf = NULL;
    int nsec = 0;
    if (hpt_state_read(ck, &buf, secs, &nsec) == HPT_OK) t = hpt_state_find(secs, nsec, "TCFG");
    for (int i = 0; t && i < 4; i++) {
        uint32_t sl;
        memcpy(&sl, t->p + lr_at, 4);
        lr_at += 4 + sl;
    }
    lr_at += 4 + 9 * 4;
    free(buf);
    double nan_d = NAN;
    float big = 100.0f, two = 2.0f;
    uint32_t far = 1000;
    int64_t neg = -5;
    int32_t zero = 0;
    struct damage { const char *tag; size_t at; const void *v; size_t n; const char *why; } cases[] = {
        {"TRST", 8, &nan_d, 8, "clock"},            /* train_s NaN */
        {"TRST", 0, &far, 4, "step counters"},      /* step 1000 of 40 */
        {"TRST", 40, &two, 4, "accuracy"},          /* final accuracy 2 */
        {"LOGS", 0, &neg, 8, "LOGS"},               /* metrics.jsonl length -5 */
        {"TCFG", lr_at, &big, 4, "TCFG"},           /* lr 100 */
        {"TCFG", lr_at - 32, &zero, 4, "TCFG"},     /* n_head 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(ck, "wb");
        if (f) { fwrite(orig, 1, orig_n, f); fclose(f); }
        CHECK(patch_section(ck, cases[i].tag, cases[i].at, cases[i].v, cases[i].n), "patch %s", cases[i].tag);
        hpt_trainer *b = NULL;
        g_log[0] = 0;
        hpt_status st = hpt_trainer_resume(&b, out, -1, 0u, NULL, 0, capture, NULL);
        CHECK(st == HPT_OK && strstr(g_log, "ckpt-00000005.bin' is unusable") && strstr(g_log, cases[i].why) &&
              strstr(g_log, "step 3 of 40"), "case %zu (%s at %zu): status %d, log: %s", i, cases[i].tag,
              cases[i].at, st, g_log);
        hpt_trainer_free(b);
        char bad[600];
        snprintf(bad, sizeof bad, "%s.corrupt", ck);
        unlink(bad);
    }
    /* a text data cursor of 0 (xorshift never reaches it): refused, naming DATA */
    FILE *f = fopen(ck, "wb");
    if (f) { fwrite(orig, 1, orig_n, f); fclose(f); }
    uint64_t z = 0;
    CHECK(patch_section(ck, "DATA", 0, &z, 8), "patch DATA");
    hpt_trainer *b = NULL;
    CHECK(hpt_trainer_resume(&b, out, -1, 0u, NULL, 0, NULL, NULL) == HPT_ERR_FORMAT && !b && strstr(hpt_errmsg(), "DATA"),
          "a zero data cursor: %s", hpt_errmsg());
    hpt_trainer_free(b);
    free(orig);
}

static void test_fashion_cursor(void) {
    if (!exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
        printf("  fashion-mnist not installed: cursor test skipped\n");
        return;
    }
    hpt_train_config c;
    hpt_train_config_default_for(&c, "fashion-mnist", "mlp");
    c.batch_size = 4000;  /* 15 batches an epoch */
    c.out_dir = tmp_path("fm");
    c.threads = 1;
    hpt_task *a = NULL, *b = NULL;
    CHECK(hpt_task_fashion_init(&a, &c, &hpt_device_cpu) == HPT_OK &&
          hpt_task_fashion_init(&b, &c, &hpt_device_cpu) == HPT_OK, "init: %s", hpt_errmsg());
    if (!a || !b) { if (a) { hpt_model_free(a->model); a->free(a); } if (b) { hpt_model_free(b->model); b->free(b); } return; }
    hpt_batch x, y;
    /* into the second epoch: 20 batches, then compare the next 15 (across the boundary) */
    for (int i = 0; i < 20; i++) a->train_batch(a, &x);
    unsigned char cur[HPT_CURSOR_MAX];
    size_t n = a->cursor_save(a, cur);
    CHECK(n > 0 && n <= HPT_CURSOR_MAX && b->cursor_load(b, cur, n), "cursor save/load (%zu bytes)", n);
    int same = 1;
    for (int i = 0; i < 15; i++) {
        a->train_batch(a, &x);
        b->train_batch(b, &y);
        same &= x.B == y.B && !memcmp(x.x, y.x, (size_t)x.B * 784 * sizeof(float)) &&
                !memcmp(x.targets, y.targets, (size_t)x.B * sizeof(int));
    }
    CHECK(same, "batches after a restored cursor differ");
    CHECK(!b->cursor_load(b, cur, n - 1), "a short cursor was accepted");
    hpt_model_free(a->model); a->free(a);
    hpt_model_free(b->model); b->free(b);
}


/* A hybrid run's checkpoint: its HYBR section loads into a fresh driver and
 * saves again to the same bytes; a damaged section is refused. */
static void test_hybrid_state(const char *data) {
    const char *out = tmp_path("hyb");
    hpt_train_config c;
    tiny_config(&c, data, out);
    c.max_iters = 60; c.save_interval = 30; c.keep_last = 5;
    hpt_hybrid_config hc;
    hpt_hybrid_config_default(&hc);
    hc.warmup_steps = 10; hc.full_steps = 3; hc.min_predict_steps = 2; hc.max_predict_steps = 4;
    hc.correct_steps = 2; hc.confidence_threshold = 0.0f; hc.predictor = "linear"; hc.waste_budget = 0.5f;
    hc.count_cost = 1;
    hpt_trainer *a = NULL, *b = NULL;
    CHECK(hpt_trainer_init(&a, &c) == HPT_OK, "init: %s", hpt_errmsg());
    if (!a) return;
    CHECK(hpt_trainer_run_hybrid(a, &hc, NULL, NULL, NULL) == HPT_OK, "hybrid run: %s", hpt_errmsg());
    size_t n = a->model->nparams;
    hpt_trainer_free(a);

    const char *ck = tmp_path("hyb/checkpoints/ckpt-00000060.bin");
    unsigned char *buf = NULL;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    int nsec = 0;
    CHECK(hpt_state_read(ck, &buf, secs, &nsec) == HPT_OK, "read %s: %s", ck, hpt_errmsg());
    if (!buf) return;
    const hpt_state_sec *hy = hpt_state_find(secs, nsec, "HYBR"), *t = hpt_state_find(secs, nsec, "TCFG");
    CHECK(hy && hy->n > 3 * n * sizeof(float), "HYBR section with the snapshot arena (%llu bytes)",
          hy ? (unsigned long long)hy->n : 0ull);
    uint32_t mode = 9;
    if (t) memcpy(&mode, t->p + 4, 4);
    CHECK(mode == 1, "TCFG mode %u (want 1: hybrid)", mode);

    g_log[0] = 0;
    CHECK(hpt_trainer_resume(&b, out, -1, 0u, NULL, 0, capture, NULL) == HPT_OK, "resume: %s", hpt_errmsg());
    if (b && hy) {
        CHECK(hpt_trainer_resumed_hybrid(b), "resumed as a hybrid run");
        hpt_hybrid_config rc;
        CHECK(hpt_hybrid_config_resumed(b, &rc) == HPT_OK, "config: %s", hpt_errmsg());
        CHECK(rc.warmup_steps == 10 && rc.full_steps == 3 && rc.max_predict_steps == 4 && rc.count_cost == 1 &&
              rc.confidence_threshold == 0.0f && rc.waste_budget == 0.5f && !strcmp(rc.predictor, "linear"),
              "the hybrid config comes back");
        unsigned char *again = NULL;
        size_t again_n = 0;
        CHECK(hpt_hybrid_state_roundtrip(b, &again, &again_n) == HPT_OK, "round trip: %s", hpt_errmsg());
        CHECK(again && again_n == hy->n && !memcmp(again, hy->p, again_n),
              "HYBR saved again: %zu bytes, equal: %d", again_n, again && again_n == hy->n && !memcmp(again, hy->p, again_n));
        free(again);
        /* a damaged payload (a block length) is refused, not half-loaded */
        b->resume_state[4 + 120 + 8] ^= 0x40;  /* after u32 version, the config (30 words), u64 log length */
        CHECK(hpt_hybrid_state_roundtrip(b, &again, &again_n) != HPT_OK, "a damaged HYBR is refused");
        free(again);
    }
    hpt_trainer_free(b);
    free(buf);
}

static void remove_tree(const char *dir) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/hpt_ckpt.XXXXXX");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 2; }
    /* a text file: words from an LCG */
    static char data[512];  /* its own copy: tmp_path's buffers rotate */
    snprintf(data, sizeof data, "%s", tmp_path("data.txt"));
    FILE *f = fopen(data, "w");
    if (!f) { perror(data); return 2; }
    const char *w[] = {"the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was"};
    uint32_t s = 12345;
    for (int i = 0; i < 4000; i++) {
        s = s * 69069u + 1u;
        fprintf(f, "%s%s", w[(s >> 16) % 12], i % 12 == 11 ? ".\n" : " ");
    }
    fclose(f);
    printf("round trip\n");
    test_round_trip(data);
    printf("damaged sections\n");
    test_damaged_sections(data);
    printf("hybrid state\n");
    test_hybrid_state(data);
    printf("fashion cursor\n");
    test_fashion_cursor();
    remove_tree(g_dir);
    return TEST_REPORT("test_checkpoint");
}
