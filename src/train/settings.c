/*
 * settings.c — what is generated from the settings table (settings.h): the
 * rows of every group (train, run, hybrid) as hpt.h's descriptors and the
 * lookup of a flag among them, parsing, formatting and checking one value
 * of any row, the defaults and checks of the train config and the run
 * options, and the TCFG/HYBR byte layout of a group of rows.
 * src/hybrid/hybrid_config.c takes the hybrid config's defaults from the
 * same list and its checks and HYBR encoding from these rows.
 */
#include "settings.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the descriptors */

#define TRAIN_ROW(f, flag, T, lo, hi, fl, d, d_mlp, d_cnn, m, h) \
    HPT_SETTING_ROW(HPT_SET_TRAIN, hpt_train_config, f, flag, T, lo, hi, fl, d, m, h)
#define RUN_ROW(f, flag, T, lo, hi, fl, d, m, h) \
    HPT_SETTING_ROW(HPT_SET_RUN, hpt_run_options, f, flag, T, lo, hi, fl | HPT_SET_NOT_STORED, d, m, h)
/* hpt_hybrid_config is a public struct (hpt_hybrid.h): its rows are data
 * here like the others'; src/hybrid reads them through hpt_settings */
#define HYBRID_ROW(f, flag, T, lo, hi, fl, d, m, h) \
    HPT_SETTING_ROW(HPT_SET_HYBRID, hpt_hybrid_config, f, flag, T, lo, hi, fl, d, m, h)

static const hpt_setting train_rows[] = {HPT_TRAIN_SETTINGS(TRAIN_ROW)};
static const hpt_setting run_rows[] = {HPT_RUN_SETTINGS(RUN_ROW)};
static const hpt_setting hybrid_rows[] = {HPT_HYBRID_SETTINGS(HYBRID_ROW)};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

const hpt_setting *hpt_settings(hpt_setting_group g, int *n) {
    HPT_ASSERT(g == HPT_SET_TRAIN || g == HPT_SET_RUN || g == HPT_SET_HYBRID);
    *n = g == HPT_SET_TRAIN ? COUNT(train_rows) : g == HPT_SET_RUN ? COUNT(run_rows) : COUNT(hybrid_rows);
    return g == HPT_SET_TRAIN ? train_rows : g == HPT_SET_RUN ? run_rows : hybrid_rows;
}

/* Flags kept working under their old names: the local steps' outer step
 * had its own pair before the one outer step took the hybrid's. */
static const char *const aliases[][2] = {
    {"--sync-outer-lr", "--outer-lr"},
    {"--sync-outer-momentum", "--outer-momentum"},
};

const hpt_setting *hpt_setting_find(const char *flag) {
    static const hpt_setting_group groups[] = {HPT_SET_TRAIN, HPT_SET_RUN, HPT_SET_HYBRID};
    for (int k = 0; flag && k < COUNT(aliases); k++)
        if (!strcmp(flag, aliases[k][0])) flag = aliases[k][1];
    for (int g = 0; flag && g < 3; g++) {
        int n;
        const hpt_setting *rows = hpt_settings(groups[g], &n);
        for (int i = 0; i < n; i++)
            if (!(rows[i].flags & HPT_SET_NO_FLAG) && !strcmp(rows[i].flag, flag)) return &rows[i];
    }
    return NULL;
}

/* ---------------------------------------------------------------- one value */

static void *field_of(const hpt_setting *s, const void *cfg) { return (char *)cfg + s->offset; }
const char *hpt_setting_name(const hpt_setting *s, int i) {
    if (i < 0) return NULL;
    /* i may come from a crafted checkpoint: never index past the NULL */
    if (s->names) for (int k = 0; k < i; k++) if (!s->names[k]) return NULL;
    return s->names ? s->names[i] : s->name_at ? s->name_at(i) : NULL;
}
static int nnames(const hpt_setting *s) { int n = 0; while (hpt_setting_name(s, n)) n++; return n; }
static int name_index(const hpt_setting *s, const char *v) {
    for (int i = 0; v && hpt_setting_name(s, i); i++)
        if (!strcmp(hpt_setting_name(s, i), v)) return i;
    return -1;
}
static unsigned since(const hpt_setting *s) { return (s->flags >> 8) ? (s->flags >> 8) : 1u; }

/* The exponent without its leading zero (1e-08 -> 1e-8). */
static void trim_exponent(char *buf) {
    char *e = strstr(buf, "e-0");
    if (!e) e = strstr(buf, "e+0");
    if (e) memmove(e + 2, e + 3, strlen(e + 3) + 1);
}

/* %g, or 1e-3 where that is shorter and reads back as the same float */
static void fmt_g(char *buf, size_t n, double v) {
    char e[32];
    snprintf(buf, n, "%g", v);
    trim_exponent(buf);
    snprintf(e, sizeof e, "%.0e", v);
    trim_exponent(e);
    if (strlen(e) < strlen(buf) && (float)strtod(e, NULL) == (float)v) snprintf(buf, n, "%s", e);
}

int hpt_setting_format(const hpt_setting *s, const void *cfg, char *buf, size_t n) {
    const void *p = field_of(s, cfg);
    switch (s->type) {
    case HPT_SET_INT: case HPT_SET_SWITCH: return snprintf(buf, n, "%d", *(const int *)p);
    case HPT_SET_U64: return snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p);
    case HPT_SET_FLOAT: { char g[64]; fmt_g(g, sizeof g, *(const float *)p); return snprintf(buf, n, "%s", g); }
    case HPT_SET_ENUM: {
        int v = *(const int *)p;
        const char *name = hpt_setting_name(s, v);
        return snprintf(buf, n, "%s", name ? name : "?");
    }
    case HPT_SET_STR: case HPT_SET_NAME: {
        const char *v = *(const char *const *)p;
        return snprintf(buf, n, "%s", v ? v : "");
    }
    }
    return snprintf(buf, n, "?");
}

/* "in [1, 256]", "> 1", "one of a, b" */
static void range_text(const hpt_setting *s, char *buf, size_t n) {
    char lo[64], hi[64];
    if (s->type == HPT_SET_FLOAT) {
        fmt_g(lo, sizeof lo, s->min);
        fmt_g(hi, sizeof hi, s->max);
    } else {
        snprintf(lo, sizeof lo, "%.0f", s->min);
        snprintf(hi, sizeof hi, "%.0f", s->max);
    }
    if (s->type == HPT_SET_ENUM || s->type == HPT_SET_NAME) {
        size_t k = (size_t)snprintf(buf, n, "one of");
        for (int i = 0; hpt_setting_name(s, i) && k < n; i++)
            k += (size_t)snprintf(buf + k, n - k, "%s %s", i ? "," : "", hpt_setting_name(s, i));
    } else if (s->type == HPT_SET_U64) {
        snprintf(buf, n, "in [0, %lld]", (long long)INT64_MAX);
    } else if (isinf(s->max)) {
        snprintf(buf, n, "%s %s", s->flags & MIN_OPEN ? ">" : ">=", lo);
    } else {
        snprintf(buf, n, "in %c%s, %s%c", s->flags & MIN_OPEN ? '(' : '[', lo, hi, s->flags & MAX_OPEN ? ')' : ']');
    }
}

static hpt_status out_of_range(const hpt_setting *s, const char *got) {
    char r[256];
    range_text(s, r, sizeof r);
    return hpt_fail(HPT_ERR_ARG, "%s must be %s, got %s", s->flag, r, got);
}

/* The bounds are compared as floats, the type of the value: a documented
 * bound like 1e-9 is not a float, and as a double it would refuse the
 * value typed as that bound (1e-9f < 1e-9). */
static int float_ok(const hpt_setting *s, float v) {
    float lo = (float)s->min, hi = (float)s->max;
    if (s->flags & MIN_OPEN ? !(v > lo) : !(v >= lo)) return 0;  /* the negated forms reject NaN */
    return s->flags & MAX_OPEN ? v < hi : v <= hi;
}

/* The value in cfg against its row. */
static hpt_status check_row(const hpt_setting *s, const void *cfg) {
    const void *p = field_of(s, cfg);
    int ok = 1;
    switch (s->type) {
    case HPT_SET_INT: case HPT_SET_SWITCH: ok = *(const int *)p >= s->min && *(const int *)p <= s->max; break;
    case HPT_SET_U64: ok = *(const uint64_t *)p <= (uint64_t)INT64_MAX; break;
    case HPT_SET_FLOAT: ok = float_ok(s, *(const float *)p); break;
    case HPT_SET_ENUM: ok = *(const int *)p >= 0 && *(const int *)p < nnames(s); break;
    case HPT_SET_NAME: ok = name_index(s, *(const char *const *)p) >= 0; break;
    case HPT_SET_STR: {
        const char *v = *(const char *const *)p;
        size_t len = v ? strlen(v) : 0;
        if (len < s->min) return hpt_fail(HPT_ERR_ARG, "%s must not be empty", s->flag);
        if (len > s->max)
            return hpt_fail(HPT_ERR_ARG, "%s must be at most %.0f bytes long, got %zu", s->flag, s->max, len);
        return HPT_OK;
    }
    }
    if (ok) return HPT_OK;
    char got[128];
    hpt_setting_format(s, cfg, got, sizeof got);
    if (s->type == HPT_SET_NAME) {
        const char *v = *(const char *const *)p;
        snprintf(got, sizeof got, "'%.100s'", v ? v : "");
    }
    return out_of_range(s, got);
}

hpt_status hpt_settings_check(const hpt_setting *rows, int n, const void *cfg) {
    for (int i = 0; i < n; i++) HPT_TRY(check_row(&rows[i], cfg));
    return HPT_OK;
}

static hpt_status parse_number(const hpt_setting *s, void *p, const char *text) {
    char *end;
    errno = 0;
    if (s->type == HPT_SET_FLOAT) {
        double x = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(x))
            return hpt_fail(HPT_ERR_ARG, "%s expects a finite number, got '%s'", s->flag, text);
        if (!float_ok(s, (float)x)) return out_of_range(s, text);
        *(float *)p = (float)x;
        return HPT_OK;
    }
    long long x = strtoll(text, &end, 10);
    if (errno || end == text || *end)
        return hpt_fail(HPT_ERR_ARG, "%s expects an integer, got '%s'", s->flag, text);
    if (s->type == HPT_SET_U64) {
        if (x < 0) return out_of_range(s, text);
        *(uint64_t *)p = (uint64_t)x;
    } else {
        if (x < s->min || x > s->max) return out_of_range(s, text);
        *(int *)p = (int)x;
    }
    return HPT_OK;
}

hpt_status hpt_setting_parse(const hpt_setting *s, void *cfg, const char *text) {
    void *p = field_of(s, cfg);
    if (s->type == HPT_SET_SWITCH) {
        if (text) return hpt_fail(HPT_ERR_ARG, "%s takes no value, got '%s'", s->flag, text);
        *(int *)p = s->on;
        return HPT_OK;
    }
    if (!text) return hpt_fail(HPT_ERR_ARG, "%s needs a value", s->flag);
    switch (s->type) {
    case HPT_SET_INT: case HPT_SET_U64: case HPT_SET_FLOAT: return parse_number(s, p, text);
    case HPT_SET_STR: {
        const char *old = *(const char **)p;
        *(const char **)p = text;
        hpt_status st = check_row(s, cfg);
        if (st != HPT_OK) *(const char **)p = old;
        return st;
    }
    case HPT_SET_ENUM: case HPT_SET_NAME: {
        int i = name_index(s, text);
        char got[128];
        snprintf(got, sizeof got, "'%.100s'", text);
        if (i < 0) return out_of_range(s, got);
        if (s->type == HPT_SET_ENUM) *(int *)p = i;
        else *(const char **)p = hpt_setting_name(s, i);
        return HPT_OK;
    }
    case HPT_SET_SWITCH: break;
    }
    return hpt_fail(HPT_ERR_ARG, "%s: unknown setting type", s->flag);
}

/* ---------------------------------------------------------------- defaults and checks */

void hpt_train_config_default(hpt_train_config *c) {
    memset(c, 0, sizeof *c);
#define X(f, flag, T, lo, hi, fl, d, d_mlp, d_cnn, m, h) c->f = d;
    HPT_TRAIN_SETTINGS(X)
#undef X
}

void hpt_train_config_default_for(hpt_train_config *c, const char *task, const char *model) {
    hpt_train_config_default(c);
    if (task && !strcmp(task, "fashion-mnist")) {
        /* Image classifiers: minibatches of 128, whole epochs, evaluation on
         * the 10k test images after every epoch. Measured to reach the
         * targets of the Fashion-MNIST baselines (MLP >= 88%, CNN >= 91%). */
        int cnn = model && !strcmp(model, "cnn");
#define X(f, flag, T, lo, hi, fl, d, d_mlp, d_cnn, m, h) c->f = cnn ? d_cnn : d_mlp;
        HPT_TRAIN_SETTINGS(X)
#undef X
    }
}

void hpt_run_options_default(hpt_run_options *o) {
    memset(o, 0, sizeof *o);
#define X(f, flag, T, lo, hi, fl, d, m, h) o->f = d;
    HPT_RUN_SETTINGS(X)
#undef X
}

void hpt_train_config_legacy(hpt_train_config *c, unsigned version) {
    if (version < 3) c->schedule = "cosine";
}

hpt_status hpt_train_config_check(const hpt_train_config *c) {
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    HPT_TRY(hpt_settings_check(rows, n, c));
    /* what one row cannot say alone */
    int text = !strcmp(c->task, "text");
    if (text != !strcmp(c->model, "gpt2"))
        return hpt_fail(HPT_ERR_ARG, "--model must be %s for --task %s", text ? "'gpt2'" : "'mlp' or 'cnn'", c->task);
    if (text && (!c->data_path || !*c->data_path)) return hpt_fail(HPT_ERR_ARG, "--data is required for --task text");
    if (!text && c->init_path && *c->init_path)
        return hpt_fail(HPT_ERR_ARG, "--init applies to --task text (a GPT-2 model file)");
    if (c->n_embd % c->n_head)
        return hpt_fail(HPT_ERR_ARG, "--n-embd (%d) must be divisible by --n-head (%d)", c->n_embd, c->n_head);
    if (c->min_lr > c->lr) return hpt_fail(HPT_ERR_ARG, "--min-lr (%g) must not exceed --lr (%g)", c->min_lr, c->lr);
    if (c->ema_decay > 0 && c->optimizer && !strcmp(c->optimizer, "schedule-free"))
        return hpt_fail(HPT_ERR_ARG, "--ema with --optimizer schedule-free: schedule-free already evaluates an "
                        "average of the weights; give one or the other");
    /* Muon's step (optim.c) reads and writes the arenas from the host: the
     * CPU row's memory alone (the GPU feature freeze keeps it off the cuda
     * row until a GPU record exists; guard memory is the host's to crash on) */
    if (c->optimizer && !strcmp(c->optimizer, "muon") && c->device && strcmp(c->device, "cpu"))
        return hpt_fail(HPT_ERR_ARG, "--optimizer muon runs on --device cpu only (its Newton-Schulz step is CPU "
                        "code; not yet on --device %s)", c->device);
    /* samples per optimizer step are counted in an int */
    if ((int64_t)c->batch_size * c->grad_accum > INT32_MAX)
        return hpt_fail(HPT_ERR_ARG, "--batch-size x --grad-accum must be at most %d (got %d x %d)", INT32_MAX,
                        c->batch_size, c->grad_accum);
    return HPT_OK;
}

/* ---------------------------------------------------------------- TCFG and HYBR */

typedef struct outbuf { unsigned char *p; size_t n, cap; } outbuf;

static void put(outbuf *b, const void *p, size_t n) {
    HPT_ASSERT(b->n + n <= b->cap);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put_i32(outbuf *b, int v) { int32_t x = v; put(b, &x, 4); }
static void put_str(outbuf *b, const char *s) {
    uint32_t n = (uint32_t)(s ? strlen(s) : 0);
    put(b, &n, 4);
    put(b, s ? s : "", n);
}

static void encode_row(const hpt_setting *s, const void *cfg, int words, outbuf *b) {
    const void *p = field_of(s, cfg);
    switch (s->type) {
    case HPT_SET_INT: case HPT_SET_SWITCH: case HPT_SET_ENUM: put_i32(b, *(const int *)p); break;
    case HPT_SET_FLOAT: put(b, p, 4); break;
    case HPT_SET_U64: HPT_ASSERT(!words); put(b, p, 8); break;
    case HPT_SET_STR: HPT_ASSERT(!words); put_str(b, *(const char *const *)p); break;
    case HPT_SET_NAME:
        if (words) put_i32(b, name_index(s, *(const char *const *)p));
        else put_str(b, *(const char *const *)p);
        break;
    }
}

static int stored(const hpt_setting *s, unsigned version) {
    return !(s->flags & HPT_SET_NOT_STORED) && since(s) <= version;
}

size_t hpt_settings_encode(const hpt_setting *rows, int n, const void *cfg, unsigned version, int words,
                           unsigned char *out, size_t cap) {
    outbuf b = {out, 0, cap};
    for (int i = 0; i < n; i++)
        if (stored(&rows[i], version)) encode_row(&rows[i], cfg, words, &b);
    return b.n;
}

/* A length-prefixed string of at most max bytes into dst (cap bytes, NUL added). */
static int get_str(hpt_cursor *k, char *dst, size_t cap, double max) {
    uint32_t n;
    if (!hpt_cur_u32(k, &n) || n > max || n >= cap || !hpt_cur_bytes(k, dst, n)) return 0;
    dst[n] = 0;
    return 1;
}

/* 1: read; 0: the bytes ran out (or a string is too long); -1: failed with a message */
static int decode_row(const hpt_setting *s, void *cfg, int words, hpt_cursor *k, char *strbuf, size_t strcap,
                      size_t *used) {
    void *p = field_of(s, cfg);
    int32_t x;
    switch (s->type) {
    case HPT_SET_INT: case HPT_SET_SWITCH: case HPT_SET_ENUM:
        if (!hpt_cur_bytes(k, &x, 4)) return 0;
        *(int *)p = x;
        return 1;
    case HPT_SET_FLOAT: return hpt_cur_bytes(k, p, 4);
    case HPT_SET_U64: return hpt_cur_u64(k, p);
    case HPT_SET_STR:
        if (!get_str(k, strbuf + *used, strcap - *used, s->max)) return 0;
        *(const char **)p = strbuf + *used;
        *used += strlen(strbuf + *used) + 1;
        return 1;
    case HPT_SET_NAME: {
        char name[64];
        int i;
        if (words) {
            if (!hpt_cur_bytes(k, &x, 4)) return 0;
            i = x >= 0 && x < nnames(s) ? x : -1;
            snprintf(name, sizeof name, "%d", (int)x);
        } else {
            if (!get_str(k, name, sizeof name, sizeof name - 1)) return 0;
            i = name_index(s, name);
        }
        if (i < 0) {
            char r[256];
            range_text(s, r, sizeof r);
            hpt_fail(HPT_ERR_FORMAT, "%s must be %s, got %s'%s'", s->flag, r, words ? "index " : "", name);
            return -1;
        }
        *(const char **)p = hpt_setting_name(s, i);
        return 1;
    }
    }
    return 0;
}

int hpt_settings_decode(const hpt_setting *rows, int n, void *cfg, unsigned version, int words, hpt_cursor *k,
                        char *strbuf, size_t strcap) {
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const hpt_setting *s = &rows[i];
        if (!stored(s, version)) continue;
        int r = decode_row(s, cfg, words, k, strbuf, strcap, &used);
        if (r < 0) return 0;
        if (r == 0) {
            hpt_fail(HPT_ERR_FORMAT, "%s: truncated, or a string too long", s->flag);
            return 0;
        }
        if (check_row(s, cfg) != HPT_OK) return 0;
    }
    return 1;
}
