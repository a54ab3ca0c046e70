/* tier: fast (make test; tests/run.sh) */
/*
 * test_settings.c — the settings table (src/train/settings.h): every row
 * parses its range and refuses what is outside it naming its flag; the
 * defaults pass the checks and agree with the hybrid modules' own; TCFG and
 * the HYBR config words are byte-identical to the layouts written before the
 * table (the pre-table encoders are kept below as the reference); decoding
 * refuses an out-of-range value naming its flag.
 *
 * `test_settings --dump` prints one line per row for tests/cli_flags.sh:
 * flag, a valid value, one below the range, one above ("-": none; "@N": a
 * string of N letters; "(none)": the flag takes no value).
 */
#include "../src/hybrid/divergence.h"
#include "../src/hybrid/hybrid_internal.h"
#include "../src/hybrid/phased/phased.h"
#include "../src/hybrid/predict.h"
#include "../src/train/settings.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *cfg_for(const hpt_setting *s, hpt_train_config *t, hpt_run_options *r, hpt_hybrid_config *h) {
    return s->group == HPT_SET_TRAIN ? (void *)t : s->group == HPT_SET_RUN ? (void *)r : (void *)h;
}

/* The values the dump and the parse test use: valid, below, above ("" none). */
static void probe_values(const hpt_setting *s, char *ok, char *lo, char *hi, size_t n) {
    lo[0] = hi[0] = 0;
    switch (s->type) {
    case HPT_SET_SWITCH: snprintf(ok, n, "(none)"); snprintf(hi, n, "1"); break;  /* hi: given a value */
    case HPT_SET_ENUM: case HPT_SET_NAME: snprintf(ok, n, "%s", hpt_setting_name(s, 0)); snprintf(hi, n, "no-such-name"); break;
    case HPT_SET_STR:
        snprintf(ok, n, "x");
        if (s->min >= 1) snprintf(lo, n, "@0");
        snprintf(hi, n, "@%.0f", s->max + 1);
        break;
    case HPT_SET_U64:
        snprintf(ok, n, "%.0f", s->min);
        snprintf(lo, n, "-1");
        snprintf(hi, n, "9223372036854775808");
        break;
    case HPT_SET_INT:
        snprintf(ok, n, "%.0f", s->min);
        snprintf(lo, n, "%.0f", s->min - 1);
        snprintf(hi, n, "%.0f", s->max + 1);
        break;
    case HPT_SET_FLOAT:
        if (s->flags & HPT_SET_MIN_OPEN) snprintf(ok, n, "%.9g", isinf(s->max) ? s->min + 1 : (s->min + s->max) / 2);
        else snprintf(ok, n, "%.9g", s->min);  /* the bound as documented (1e-09 is no float: still taken) */
        snprintf(lo, n, "%.9g", s->flags & HPT_SET_MIN_OPEN ? s->min : s->min - 1 - fabs(s->min));
        if (!isinf(s->max)) snprintf(hi, n, "%.9g", s->flags & HPT_SET_MAX_OPEN ? s->max : s->max + 1 + fabs(s->max));
        break;
    }
}

static void dump(void) {
    for (int g = 0; g < 3; g++) {
        int n;
        const hpt_setting *t = hpt_settings((hpt_setting_group)g, &n);
        for (int i = 0; i < n; i++) {
            char ok[64], lo[64], hi[64];
            if (t[i].flags & HPT_SET_NO_FLAG) continue;   /* no flag to try */
            probe_values(&t[i], ok, lo, hi, sizeof ok);
            printf("%s\t%s\t%s\t%s\n", t[i].flag, ok, lo[0] ? lo : "-", hi[0] ? hi : "-");
        }
    }
}

/* "@N": N letters */
static const char *expand(const char *v, char *buf, size_t cap) {
    if (v[0] != '@') return v;
    size_t k = (size_t)atol(v + 1);
    if (k >= cap) k = cap - 1;
    memset(buf, 'a', k);
    buf[k] = 0;
    return buf;
}

static void test_rows_parse(void) {
    static char big[8192];
    int total = 0;
    for (int g = 0; g < 3; g++) {
    int n;
    const hpt_setting *t = hpt_settings((hpt_setting_group)g, &n);
    total += n;
    for (int i = 0; i < n; i++) {
        const hpt_setting *s = &t[i];
        CHECK(s->group == (hpt_setting_group)g, "%s: in its group", s->flag);
        hpt_train_config tc;
        hpt_run_options rc;
        hpt_hybrid_config hc;
        hpt_train_config_default(&tc);
        hpt_run_options_default(&rc);
        hpt_hybrid_config_default(&hc);
        void *cfg = cfg_for(s, &tc, &rc, &hc);
        CHECK(!strncmp(s->flag, "--", 2) && s->help && s->help[0], "row %d: flag and help", i);
        if (s->flags & HPT_SET_NO_FLAG)   /* its old flag is an alias of the row that sets it */
            CHECK(hpt_setting_find(s->flag) && hpt_setting_find(s->flag) != s &&
                      hpt_setting_find(s->flag)->type == s->type && hpt_setting_find(s->flag)->min == s->min &&
                      hpt_setting_find(s->flag)->max == s->max && hpt_setting_find(s->flag)->flags % 4 == s->flags % 4,
                  "%s: an alias of a row with its type and range", s->flag);
        else CHECK(hpt_setting_find(s->flag) == s, "%s: found (and only once)", s->flag);
        char ok[64], lo[64], hi[64];
        probe_values(s, ok, lo, hi, sizeof ok);
        const char *okv = strcmp(ok, "(none)") ? ok : NULL;
        CHECK(hpt_setting_parse(s, cfg, okv) == HPT_OK, "%s %s: %s", s->flag, ok, hpt_errmsg());
        if (s->type == HPT_SET_INT || s->type == HPT_SET_FLOAT) {
            char top[64];
            snprintf(top, sizeof top, "%.9g", s->max);
            if (!isinf(s->max) && !(s->flags & HPT_SET_MAX_OPEN))
                CHECK(hpt_setting_parse(s, cfg, top) == HPT_OK, "%s %s (the maximum): %s", s->flag, top, hpt_errmsg());
            CHECK(hpt_setting_parse(s, cfg, "1x") == HPT_ERR_ARG && strstr(hpt_errmsg(), s->flag),
                  "%s 1x: %s", s->flag, hpt_errmsg());
        }
        const char *bad[2] = {lo, hi};
        for (int k = 0; k < 2; k++) {
            if (!bad[k][0]) continue;
            const char *v = expand(bad[k], big, sizeof big);
            CHECK(hpt_setting_parse(s, cfg, v) == HPT_ERR_ARG && strstr(hpt_errmsg(), s->flag),
                  "%s %.20s refused naming the flag: %s", s->flag, v, hpt_errmsg());
        }
    }
    }
    CHECK(total > 50, "%d rows", total);
}

static void test_defaults(void) {
    hpt_train_config t;
    hpt_train_config_default_for(&t, "text", NULL);
    t.data_path = "x.txt";
    CHECK(hpt_train_config_check(&t) == HPT_OK, "text defaults: %s", hpt_errmsg());
    /* min_lr 0 (was 1e-4 / 1e-5 with cosine) since D2Z became the default schedule */
    CHECK(t.batch_size == 12 && t.lr == 1e-3f && t.min_lr == 0.0f && t.beta2 == 0.99f && t.eps == 1e-8f &&
          t.eval_interval == 250 && t.seed == 1337 && t.keep_last == 2 && t.tokenizer == HPT_TOK_CHAR &&
          !strcmp(t.out_dir, "runs/latest") && t.epochs == 0, "text defaults as before the table");
    const char *models[2] = {"mlp", "cnn"};
    for (int i = 0; i < 2; i++) {
        hpt_train_config_default_for(&t, "fashion-mnist", models[i]);
        CHECK(hpt_train_config_check(&t) == HPT_OK, "%s defaults: %s", models[i], hpt_errmsg());
        CHECK(!strcmp(t.model, models[i]) && t.epochs == (i ? 5 : 10) && t.batch_size == 128 &&
              t.min_lr == 0.0f && t.beta2 == 0.999f && t.eval_interval == -1 && !t.data_path,
              "%s defaults as before the table", models[i]);
    }
    hpt_hybrid_config h;
    hpt_hybrid_config_default(&h);
    CHECK(hpt_hybrid_config_check(&h) == HPT_OK, "hybrid defaults: %s", hpt_errmsg());
    /* the table's hybrid defaults are the phase controller's and the divergence monitor's */
    hpt_phase_config pc, pt;
    hpt_phase_config_default(&pc);
    hpt_phased_phase_config(&h, &pt);
    CHECK(!memcmp(&pc, &pt, sizeof pc), "hybrid defaults = phase controller defaults");
    hpt_div_config dc, dt;
    hpt_div_config_default(&dc);
    hpt_hyb_to_div_config(&h, &dt);
    CHECK(!memcmp(&dc, &dt, sizeof dc), "hybrid defaults = divergence monitor defaults");
    /* the predictor: outer (coast in older versions) */
    CHECK(!strcmp(h.predictor, "outer") && h.outer_interval == 50 && h.outer_lr == 1.0f && h.outer_momentum == 0.5f &&
          !h.outer_adapt && !h.outer_gate && !h.outer_moments && h.correction_interval == 4 && h.probe_batches == 2 && !h.whole_phase &&
          h.count_cost == 1 && h.ensemble == 3 && h.hidden == 32 && h.bptt == 16, "hybrid defaults as before");
    const hpt_setting *p = hpt_setting_find("--predictor"), *w = hpt_setting_find("--div-window");
    for (int i = 0; hpt_setting_name(p, i); i++)
        CHECK(hpt_pred_parse(hpt_setting_name(p, i)) == i, "predictor %s stored as its index", hpt_setting_name(p, i));
    CHECK(hpt_setting_name(p, hpt_pred_count()) == NULL, "every predictor of the table, no more");
    /* the phased design's block: its rows, hybrid rows, under their own heading in the help */
    const char *phased_flags = " --full-steps --min-predict-steps --max-predict-steps --correct-steps "
                               "--max-consecutive-predict --confidence-threshold --backoff-after --max-backoff "
                               "--predict-waste-budget --correction-interval --probe-batches --whole-phase --ensemble "
                               "--hidden --bptt --cost-by-time ";
    int nh, nphased = 0, wrong = 0;
    const hpt_setting *hrows = hpt_settings(HPT_SET_HYBRID, &nh);
    for (int i = 0; i < nh; i++) {
        char word[64];
        snprintf(word, sizeof word, " %s ", hrows[i].flag);
        int marked = (hrows[i].flags & HPT_SET_PHASED) != 0, listed = strstr(phased_flags, word) != NULL;
        nphased += marked;
        if (marked != listed) { wrong++; fprintf(stderr, "  %s: marked %d, the phased design's %d\n", hrows[i].flag, marked, listed); }
    }
    CHECK(nphased == 16 && !wrong, "the phased design's 16 rows, and no other, are marked HPT_SET_PHASED (%d, %d wrong)",
          nphased, wrong);
    CHECK(w->max == HPT_DIV_MAX_WINDOW, "--div-window max is the ring's size");
    hpt_run_options r;
    hpt_run_options_default(&r);
    CHECK(!r.hybrid && !r.resume_dir && !r.log_interval && !r.rss_warn_mib && !r.rss_limit_mib, "run defaults");
}

/* ---------------------------------------------------------------- the layouts before the table */

typedef struct membuf { unsigned char *p; size_t n; } membuf;
static void put(membuf *b, const void *p, size_t n) { memcpy(b->p + b->n, p, n); b->n += n; }
static void put_u32(membuf *b, uint32_t v) { put(b, &v, 4); }
static void put_i32(membuf *b, int v) { int32_t x = v; put(b, &x, 4); }
static void put_f32(membuf *b, float v) { put(b, &v, 4); }
static void put_str(membuf *b, const char *s) { uint32_t n = (uint32_t)strlen(s); put_u32(b, n); put(b, s, n); }

/* checkpoint.c's encode_tcfg as it was, after its version and mode words */
static size_t old_tcfg(const hpt_train_config *c, unsigned char *buf) {
    membuf b = {buf, 0};
    put_str(&b, c->task); put_str(&b, c->model); put_str(&b, c->data_path ? c->data_path : ""); put_str(&b, c->out_dir);
    put_u32(&b, (uint32_t)c->tokenizer);
    put_i32(&b, c->n_layer); put_i32(&b, c->n_head); put_i32(&b, c->n_embd); put_i32(&b, c->block_size);
    put_i32(&b, c->batch_size); put_i32(&b, c->grad_accum); put_i32(&b, c->max_iters);
    put_i32(&b, c->warmup_iters); put_i32(&b, c->epochs);
    put_f32(&b, c->lr); put_f32(&b, c->min_lr); put_f32(&b, c->weight_decay); put_f32(&b, c->grad_clip);
    put_f32(&b, c->beta1); put_f32(&b, c->beta2); put_f32(&b, c->eps);
    put_i32(&b, c->eval_interval); put_i32(&b, c->eval_iters);
    put(&b, &c->seed, 8);
    put_i32(&b, c->threads); put_i32(&b, c->save_interval); put_i32(&b, c->keep_last);
    put_f32(&b, c->ema_decay);
    return b.n;
}

/* hybrid_config.c's hpt_hyb_encode_cfg as it was (then the version-5 rows appended) */
static void old_hybr(const hpt_hybrid_config *c, unsigned char *out) {
    membuf b = {out, 0};
    put_i32(&b, c->warmup_steps); put_i32(&b, c->full_steps); put_i32(&b, c->min_predict_steps);
    put_i32(&b, c->max_predict_steps); put_i32(&b, c->correct_steps); put_i32(&b, c->max_consecutive_predict);
    put_f32(&b, c->confidence_threshold); put_i32(&b, c->backoff_after); put_i32(&b, c->max_backoff);
    put_f32(&b, c->waste_budget); put_i32(&b, hpt_pred_parse(c->predictor)); put_i32(&b, c->correction_interval);
    put_i32(&b, c->probe_batches); put_i32(&b, c->whole_phase); put_i32(&b, c->ensemble); put_i32(&b, c->hidden);
    put_i32(&b, c->bptt); put_i32(&b, c->div_window); put_f32(&b, c->div_loss_z); put_f32(&b, c->div_grad_explode);
    put_f32(&b, c->div_grad_vanish); put_i32(&b, c->count_cost);
    /* version 5: the outer predictor's rows */
    put_i32(&b, c->outer_interval); put_f32(&b, c->outer_lr); put_f32(&b, c->outer_momentum);
    put_i32(&b, c->outer_follow_lr); put_i32(&b, c->outer_check);
    /* version 6: the outer predictor's moment, adapt and gate choices */
    put_i32(&b, c->outer_moments); put_i32(&b, c->outer_adapt); put_i32(&b, c->outer_gate);
}

static void test_tcfg_layout(void) {
    int ntr;
    const hpt_setting *tr = hpt_settings(HPT_SET_TRAIN, &ntr);
    static unsigned char a[20000], b[20000];
    static char strs[2 * 4096];
    hpt_train_config c;
    hpt_train_config_default_for(&c, "fashion-mnist", "cnn");
    c.data_path = "/some/where";
    c.out_dir = "runs/x";
    c.n_layer = 3; c.max_iters = 12345; c.lr = 0.0123f; c.seed = 0x123456789abcull; c.threads = 7; c.ema_decay = 0.5f;
    c.tokenizer = HPT_TOK_BYTE; c.grad_clip = 0.25f; c.eval_interval = 77;
    size_t na = hpt_settings_encode(tr, ntr, &c, 2, 0, a, sizeof a), nb = old_tcfg(&c, b);
    CHECK(na == nb && !memcmp(a, b, na), "TCFG v2 bytes as before the table (%zu vs %zu)", na, nb);
    size_t n1 = hpt_settings_encode(tr, ntr, &c, 1, 0, a, sizeof a);
    CHECK(n1 == nb - 4 && !memcmp(a, b, n1), "TCFG v1: the same without ema_decay");
    /* round trip, and a version-1 decode keeps the default average (off) */
    hpt_train_config d;
    hpt_train_config_default(&d);
    hpt_cursor k = {b, nb, 0};
    CHECK(hpt_settings_decode(tr, ntr, &d, 2, 0, &k, strs, sizeof strs) && k.pos == nb, "decode: %s", hpt_errmsg());
    size_t nd = hpt_settings_encode(tr, ntr, &d, 2, 0, a, sizeof a);
    CHECK(nd == nb && !memcmp(a, b, nb) && !strcmp(d.data_path, "/some/where"), "TCFG round trip");
    hpt_train_config_default(&d);
    k = (hpt_cursor){b, n1, 0};
    CHECK(hpt_settings_decode(tr, ntr, &d, 1, 0, &k, strs, sizeof strs) && d.ema_decay == 0.0f, "v1 decode");
    /* an out-of-range value is refused naming its flag */
    c.n_layer = 0;
    nb = old_tcfg(&c, b);
    k = (hpt_cursor){b, nb, 0};
    CHECK(!hpt_settings_decode(tr, ntr, &d, 2, 0, &k, strs, sizeof strs) && strstr(hpt_errmsg(), "--n-layer"),
          "n_layer 0 refused: %s", hpt_errmsg());
    c.n_layer = 3;
    c.model = "resnet";
    nb = old_tcfg(&c, b);
    k = (hpt_cursor){b, nb, 0};
    CHECK(!hpt_settings_decode(tr, ntr, &d, 2, 0, &k, strs, sizeof strs) && strstr(hpt_errmsg(), "--model") &&
          strstr(hpt_errmsg(), "resnet"), "an unknown model refused: %s", hpt_errmsg());
    c.model = "cnn";
    c.lr = NAN;
    nb = old_tcfg(&c, b);
    k = (hpt_cursor){b, nb, 0};
    CHECK(!hpt_settings_decode(tr, ntr, &d, 2, 0, &k, strs, sizeof strs) && strstr(hpt_errmsg(), "--lr"),
          "lr NaN refused: %s", hpt_errmsg());
    k = (hpt_cursor){b, nb - 3, 0};
    CHECK(!hpt_settings_decode(tr, ntr, &d, 2, 0, &k, strs, sizeof strs), "a truncated TCFG refused");
}

static void test_hybr_layout(void) {
    unsigned char a[HYBR_CFG_BYTES], b[HYBR_CFG_BYTES];
    const char *preds[5] = {"coast", "stale-adam", "linear", "shrink", "outer"};
    for (int i = 0; i < 5; i++) {
        hpt_hybrid_config c, d;
        hpt_hybrid_config_default(&c);
        c.predictor = preds[i];
        c.warmup_steps = 11 + i; c.confidence_threshold = 0.5f; c.whole_phase = i & 1; c.count_cost = !(i & 2);
        c.div_loss_z = 7.5f; c.hidden = 64;
        c.outer_interval = 30 + i; c.outer_lr = 0.7f; c.outer_momentum = 0.9f; c.outer_follow_lr = i & 1; c.outer_check = 3;
        c.outer_moments = i & 1; c.outer_adapt = (i >> 1) & 1; c.outer_gate = i == 4;
        hpt_hyb_encode_cfg(&c, a);
        old_hybr(&c, b);
        CHECK(!memcmp(a, b, sizeof a), "HYBR config words as before the table (%s)", preds[i]);
        CHECK(hpt_hyb_decode_cfg(b, &d) && !strcmp(d.predictor, preds[i]) && d.warmup_steps == 11 + i &&
              d.whole_phase == (i & 1) && d.count_cost == !(i & 2) && d.outer_interval == 30 + i && d.outer_lr == 0.7f &&
              d.outer_momentum == 0.9f && d.outer_follow_lr == (i & 1) && d.outer_check == 3 &&
              d.outer_moments == (i & 1) && d.outer_adapt == ((i >> 1) & 1) && d.outer_gate == (i == 4),
              "HYBR round trip (%s): %s", preds[i], hpt_errmsg());
    }
    hpt_hybrid_config c, d;
    hpt_hybrid_config_default(&c);
    c.probe_batches = 65;
    old_hybr(&c, b);
    CHECK(!hpt_hyb_decode_cfg(b, &d) && strstr(hpt_errmsg(), "--probe-batches"), "probe_batches 65 refused: %s",
          hpt_errmsg());
    hpt_hybrid_config_default(&c);
    old_hybr(&c, b);
    int32_t bad = 9;
    memcpy(b + 10 * 4, &bad, 4);  /* the predictor's word */
    CHECK(!hpt_hyb_decode_cfg(b, &d) && strstr(hpt_errmsg(), "--predictor"), "predictor 9 refused: %s", hpt_errmsg());
}

static void test_cross_checks(void) {
    hpt_train_config t;
    hpt_train_config_default(&t);
    t.data_path = "x";
    t.batch_size = 65536; t.grad_accum = 65536;
    CHECK(hpt_train_config_check(&t) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--batch-size") &&
          strstr(hpt_errmsg(), "--grad-accum"), "batch x accum beyond an int: %s", hpt_errmsg());
    hpt_train_config_default(&t);
    t.data_path = "x";
    t.min_lr = 0.01f;
    CHECK(hpt_train_config_check(&t) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--min-lr"), "min_lr > lr: %s", hpt_errmsg());
    hpt_train_config_default(&t);
    t.model = "cnn";
    t.data_path = "x";
    CHECK(hpt_train_config_check(&t) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--model"), "cnn on text: %s", hpt_errmsg());
    hpt_train_config_default(&t);
    CHECK(hpt_train_config_check(&t) == HPT_ERR_ARG && strstr(hpt_errmsg(), "--data"), "text without data: %s", hpt_errmsg());
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--dump")) { dump(); return 0; }
    test_rows_parse();
    test_defaults();
    test_tcfg_layout();
    test_hybr_layout();
    test_cross_checks();
    return TEST_REPORT("test_settings");
}
