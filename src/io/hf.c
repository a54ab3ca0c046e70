/*
 * hf.c — GPT-2 in Hugging Face's safetensors layout, in (hpt import) and
 * out (hpt export).
 *
 * A safetensors file is: u64 little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}), then the data, offsets relative to its start.
 * The header is untrusted: every dtype, shape, offset and size is checked
 * against the bytes actually in the file, and every tensor's name, dtype and
 * shape against the one config its embeddings and blocks describe, before
 * the model is allocated, so a lying header is refused with its reason and
 * at the cost of reading it.
 *
 * Names are transformers' (src/transformers/models/gpt2/modeling_gpt2.py):
 * GPT2Model's state dict, the hub's bare layout (wte.weight and wpe.weight,
 * nn.Embedding parameters; h.N.ln_1.weight, h.N.attn.c_attn.weight, ...;
 * ln_f), or GPT2LMHeadModel's, save_pretrained's: the same under
 * "transformer." and maybe lm_head.weight, tied, which must equal wte. The
 * h.N.attn.bias / masked_bias buffers (the causal mask; old files have them,
 * persistent=False keeps them out of new ones) are not parameters: skipped.
 *
 * Layouts: HF's GPT-2 stores its linear layers as Conv1D, weight [in, out];
 * hpt stores [out, in] (y = x W^T, as nn.Linear), so every matrix but the
 * embeddings is transposed on the way in and out. hpt pads the vocabulary
 * to Vp rows (hpt_gpt2_padded_vocab): the padded rows are zero on import and
 * dropped on export. Export writes the hub's bare names; its __metadata__
 * also names the tokenizer (hpt_tokenizer) and, for a char tokenizer, its
 * table (hpt_chars: the codepoints in hex), which import reads back.
 */
#include "../model/model.h"
#include "state.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST_MAX_HEADER (100u << 20)  /* the safetensors library's own limit */
#define ST_MAX_DIMS 8

/* ---------------------------------------------------------------- dtypes */

/* The float types a parameter may have, then the types a mask buffer may
 * have too (transformers registered it as uint8, then bool). */
typedef enum { DT_F32, DT_F16, DT_BF16, DT_BOOL, DT_U8 } st_dtype;
static const struct { const char *name; int size; } dtypes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"BOOL", 1}, {"U8", 1}};
#define NDTYPES (int)(sizeof dtypes / sizeof dtypes[0])

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, bits;
    if (e == 31) bits = sign | 0x7F800000u | m << 13;         /* inf, nan */
    else if (e) bits = sign | (e + 112) << 23 | m << 13;       /* normal */
    else if (!m) bits = sign;                                  /* zero */
    else {                                                     /* subnormal: normalise */
        e = 113;
        while (!(m & 1024u)) { m <<= 1; e--; }
        bits = sign | e << 23 | (m & 1023u) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* element i of a tensor's raw little-endian bytes, as float */
static float st_get(const unsigned char *p, st_dtype dt, size_t i) {
    if (dt == DT_F32) { float f; memcpy(&f, p + 4 * i, 4); return f; }
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    if (dt == DT_F16) return half_to_float(h);
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---------------------------------------------------------------- reading */

typedef struct st_tensor {
    const char *name;      /* as stored */
    const char *bare;      /* without "transformer.", hpt's old names as the hub's */
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;   /* in the data */
    int used;
} st_tensor;

typedef struct st_file {
    const char *path;
    unsigned char *buf;
    size_t len;
    const unsigned char *data;
    uint64_t data_len;
    cJSON *root;
    const cJSON *meta;     /* __metadata__, or NULL */
    st_tensor *t;
    int n;
} st_file;

static void st_close(st_file *f) {
    free(f->buf);
    cJSON_Delete(f->root);
    free(f->t);
    memset(f, 0, sizeof *f);
}

/* a JSON number that is an integer in [0, max] */
static int json_uint(const cJSON *j, uint64_t max, uint64_t *v) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0 || d > (double)max || d != floor(d)) return 0;
    *v = (uint64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_bare(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->bare, ((const st_tensor *)b)->bare);
}

/* The name a tensor is looked up by: without save_pretrained's
 * "transformer." prefix, and "wte" / "wpe" (what hpt export wrote before it
 * used the hub's names) as "wte.weight" / "wpe.weight", so those files still
 * import and a file holding both spellings is refused as a repeat. */
static const char *bare_name(const char *nm) {
    const char *b = strncmp(nm, "transformer.", 12) ? nm : nm + 12;
    if (!strcmp(b, "wte")) return "wte.weight";
    if (!strcmp(b, "wpe")) return "wpe.weight";
    return b;
}

#define BAD(...) return hpt_fail(HPT_ERR_FORMAT, __VA_ARGS__)

/* One header entry into *t, every field checked against the data's length. */
static hpt_status st_entry(const st_file *f, const cJSON *e, st_tensor *t) {
    const char *nm = e->string;
    if (!cJSON_IsObject(e)) BAD("'%s': tensor '%s' is not a JSON object", f->path, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"),
                *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of))
        BAD("'%s': tensor '%s' lacks a dtype, shape or data_offsets", f->path, nm);
    int k = 0;
    while (k < NDTYPES && strcmp(dtypes[k].name, dt->valuestring)) k++;
    if (k == NDTYPES)
        BAD("'%s': tensor '%s' has dtype %.16s; hpt reads F32, F16 and BF16 (and BOOL or U8 mask buffers)", f->path,
            nm, dt->valuestring);
    t->name = nm;
    t->bare = bare_name(nm);
    t->dtype = (st_dtype)k;
    t->ndim = cJSON_GetArraySize(sh);
    if (t->ndim > ST_MAX_DIMS) BAD("'%s': tensor '%s' has %d dimensions", f->path, nm, t->ndim);
    /* the element count, bounded by the data at every factor: no overflow */
    uint64_t numel = 1, d;
    for (int i = 0; i < t->ndim; i++) {
        if (!json_uint(cJSON_GetArrayItem(sh, i), 1ull << 40, &d))
            BAD("'%s': tensor '%s' has a bad shape (dimension %d is not a non-negative integer)", f->path, nm, i);
        t->shape[i] = (int64_t)d;
        if (d && numel > f->data_len / d) BAD("'%s': tensor '%s' declares more elements than the file holds", f->path, nm);
        numel *= d;
    }
    uint64_t b, en;
    if (cJSON_GetArraySize(of) != 2 || !json_uint(cJSON_GetArrayItem(of, 0), UINT64_MAX >> 11, &b) ||
        !json_uint(cJSON_GetArrayItem(of, 1), UINT64_MAX >> 11, &en) || b > en || en > f->data_len)
        BAD("'%s': tensor '%s' has data_offsets outside the data (%llu bytes)", f->path, nm,
            (unsigned long long)f->data_len);
    if (numel * (uint64_t)dtypes[k].size != en - b)
        BAD("'%s': tensor '%s' of %s and %llu elements needs %llu bytes, its offsets span %llu", f->path, nm,
            dtypes[k].name, (unsigned long long)numel, (unsigned long long)(numel * dtypes[k].size),
            (unsigned long long)(en - b));
    t->begin = b;
    t->end = en;
    return HPT_OK;
}

/* Checks that no two tensors' byte ranges overlap, and that no bare name is
 * given twice ("wte.weight" and "transformer.wte.weight", or a repeated
 * key). The non-empty ranges sorted by their start, each is compared with
 * the furthest end of all before it, not only with its neighbour's: an
 * empty entry between two overlapping tensors must not hide them, nor a
 * short tensor inside a long one. Empty ranges hold no bytes to share. */
static hpt_status st_check_layout(st_file *f) {
    if (f->n == 0) return HPT_OK;
    st_tensor **by = malloc((size_t)f->n * sizeof *by);
    if (!by) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < f->n; i++)
        if (f->t[i].begin < f->t[i].end) by[n++] = &f->t[i];
    qsort(by, (size_t)n, sizeof *by, cmp_begin);
    const st_tensor *reach = NULL;  /* the tensor ending furthest so far */
    for (int i = 0; i < n; i++) {
        if (reach && by[i]->begin < reach->end) {
            hpt_status st = hpt_fail(HPT_ERR_FORMAT, "'%s': tensors '%s' and '%s' overlap in the data", f->path,
                                     reach->name, by[i]->name);
            free(by);
            return st;
        }
        if (!reach || by[i]->end > reach->end) reach = by[i];
    }
    free(by);
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_bare);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->t[i].bare, f->t[i - 1].bare))
            BAD("'%s': tensor '%s' is given twice ('%s' and '%s')", f->path, f->t[i].bare, f->t[i - 1].name,
                f->t[i].name);
    return HPT_OK;
}

static hpt_status st_parse(st_file *f) {
    if (f->len < 8) BAD("'%s' is %zu bytes: too short for a safetensors header", f->path, f->len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->buf[i];
    if (hlen > f->len - 8)
        BAD("'%s': its header claims %llu bytes, the file has %zu after the length: truncated or not safetensors",
            f->path, (unsigned long long)hlen, f->len - 8);
    if (hlen > ST_MAX_HEADER) BAD("'%s': a %llu-byte header is over the 100 MB limit", f->path, (unsigned long long)hlen);
    f->data = f->buf + 8 + hlen;
    f->data_len = f->len - 8 - hlen;
    /* a \u0000 escape decodes to a NUL inside a C string: "byte\u0000x"
     * would read as "byte", a name that is not the file's */
    for (uint64_t i = 0; i + 5 < hlen; i++)
        if (f->buf[8 + i] == '\\') {
            if (!memcmp(f->buf + 8 + i + 1, "u0000", 5)) BAD("'%s': its header holds a NUL character (\\u0000)", f->path);
            i++;  /* the escaped character: a \\ is no escape of what follows */
        }
    f->root = cJSON_ParseWithLength((const char *)f->buf + 8, (size_t)hlen);
    if (!f->root) BAD("'%s': its header is not JSON (not a safetensors file?)", f->path);
    if (!cJSON_IsObject(f->root)) BAD("'%s': its header is not a JSON object", f->path);
    int n = cJSON_GetArraySize(f->root);
    f->t = calloc((size_t)n + 1, sizeof *f->t);
    if (!f->t) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    for (const cJSON *e = f->root->child; e; e = e->next) {
        if (!e->string) BAD("'%s': a header entry without a name", f->path);
        if (!strcmp(e->string, "__metadata__")) {
            if (f->meta || !cJSON_IsObject(e)) BAD("'%s': its __metadata__ is not one JSON object", f->path);
            f->meta = e;
            continue;
        }
        HPT_TRY(st_entry(f, e, &f->t[f->n]));
        f->n++;
    }
    return st_check_layout(f);
}

static hpt_status st_open(st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->path = path;
    HPT_TRY(hpt_read_file(path, &f->buf, &f->len));
    hpt_status st = st_parse(f);
    if (st != HPT_OK) st_close(f);
    return st;
}

static st_tensor *st_find(st_file *f, const char *bare) {
    st_tensor key = {.bare = bare};
    return bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, cmp_bare);
}

/* ---------------------------------------------------------------- the mapping */

/* One tensor of HF's GPT-2 and where it goes in hpt's: HF's shape in units
 * of C (d1 0: a vector), transposed ([in, out] <-> [out, in]) or not. */
typedef struct hf_row { const char *hf, *hpt; int d0, d1, transpose; } hf_row;
static const hf_row layer_rows[] = {
    {"ln_1.weight", "ln1w", 1, 0, 0},        {"ln_1.bias", "ln1b", 1, 0, 0},
    {"attn.c_attn.weight", "qkvw", 1, 3, 1}, {"attn.c_attn.bias", "qkvb", 3, 0, 0},
    {"attn.c_proj.weight", "attprojw", 1, 1, 1}, {"attn.c_proj.bias", "attprojb", 1, 0, 0},
    {"ln_2.weight", "ln2w", 1, 0, 0},        {"ln_2.bias", "ln2b", 1, 0, 0},
    {"mlp.c_fc.weight", "fcw", 1, 4, 1},     {"mlp.c_fc.bias", "fcb", 4, 0, 0},
    {"mlp.c_proj.weight", "fcprojw", 4, 1, 1}, {"mlp.c_proj.bias", "fcprojb", 1, 0, 0},
};
#define NLAYER_ROWS (int)(sizeof layer_rows / sizeof layer_rows[0])
static const hf_row final_rows[] = {{"ln_f.weight", "lnfw", 1, 0, 0}, {"ln_f.bias", "lnfb", 1, 0, 0}};

static const hpt_tensor_info *model_tensor(const hpt_model *m, const char *name) {
    int n;
    const hpt_tensor_info *t = hpt_model_tensors(m, &n);
    for (int i = 0; i < n; i++) if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

static int shape_is(const st_tensor *t, int ndim, int64_t a, int64_t b) {
    return t->ndim == ndim && t->shape[0] == a && (ndim == 1 || t->shape[1] == b);
}

static void fmt_shape(const st_tensor *t, char *buf, size_t n) {
    int k = snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < (int)n; i++) k += snprintf(buf + k, n - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < (int)n) snprintf(buf + k, n - (size_t)k, "]");
}

/* The tensor named bare (layer l >= 0: "h.<l>.<bare>"), present, of a float
 * dtype and of its shape, marked used. */
static hpt_status need(st_file *f, int l, const char *bare, int ndim, int64_t a, int64_t b, st_tensor **out) {
    char name[128];
    if (l >= 0) snprintf(name, sizeof name, "h.%d.%s", l, bare);
    else snprintf(name, sizeof name, "%s", bare);
    st_tensor *t = st_find(f, name);
    if (!t) BAD("'%s' has no tensor '%s' (nor 'transformer.%s'): not a complete GPT-2", f->path, name, name);
    if (t->dtype > DT_BF16)
        BAD("'%s': tensor '%s' has dtype %s; a parameter must be F32, F16 or BF16", f->path, t->name,
            dtypes[t->dtype].name);
    if (!shape_is(t, ndim, a, b)) {
        char got[96];
        fmt_shape(t, got, sizeof got);
        if (ndim == 1) BAD("'%s': tensor '%s' has shape %s, expected [%lld]", f->path, t->name, got, (long long)a);
        BAD("'%s': tensor '%s' has shape %s, expected [%lld, %lld]", f->path, t->name, got, (long long)a, (long long)b);
    }
    t->used = 1;
    *out = t;
    return HPT_OK;
}

/* HF tensor t (rows x cols as stored) into dst, transposed or not. */
static void copy_in(const st_file *f, const st_tensor *t, float *dst, int transpose) {
    const unsigned char *p = f->data + t->begin;
    size_t rows = (size_t)t->shape[0], cols = t->ndim > 1 ? (size_t)t->shape[1] : 1;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            dst[transpose ? c * rows + r : r * cols + c] = st_get(p, t->dtype, r * cols + c);
}

/* The shapes say the config; n_head comes from the caller. */
typedef struct hf_shape { int V, P, L, C; } hf_shape;

/* N of a name "h.N.<rest>" (N in 0..999999, no leading zero), else -1 */
static int block_index(const char *s) {
    if (strncmp(s, "h.", 2) || s[2] < '0' || s[2] > '9' || (s[2] == '0' && s[3] != '.')) return -1;
    int n = 0, k = 2;
    while (s[k] >= '0' && s[k] <= '9' && k < 8) n = n * 10 + (s[k++] - '0');
    return s[k] == '.' ? n : -1;
}

/* V, P and C from wte and wpe; L from the highest block index named (every
 * block below it must then be complete: the mapping asks for each). */
static hpt_status read_shape(st_file *f, hf_shape *s) {
    st_tensor *wte = st_find(f, "wte.weight"), *wpe = st_find(f, "wpe.weight");
    if (!wte || !wpe)
        BAD("'%s' has no 'wte.weight' or 'wpe.weight' tensor (nor 'transformer.wte.weight', ...): not a GPT-2 in "
            "Hugging Face's layout", f->path);
    if (wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1])
        BAD("'%s': wte.weight and wpe.weight must be [vocab, n_embd] and [positions, n_embd]", f->path);
    if (wte->shape[0] < 2 || wte->shape[0] > (1 << 24) || wpe->shape[0] < 1 || wpe->shape[0] > 8192 ||
        wte->shape[1] < 1 || wte->shape[1] > 16384)
        BAD("'%s': vocab %lld, positions %lld, n_embd %lld out of hpt's range", f->path, (long long)wte->shape[0],
            (long long)wpe->shape[0], (long long)wte->shape[1]);
    s->V = (int)wte->shape[0];
    s->P = (int)wpe->shape[0];
    s->C = (int)wte->shape[1];
    s->L = 0;
    for (int i = 0; i < f->n; i++) {
        int b = block_index(f->t[i].bare);
        if (b > 255) BAD("'%s' has tensor '%s': hpt takes 1 to 256 transformer blocks", f->path, f->t[i].name);
        if (b + 1 > s->L) s->L = b + 1;
    }
    if (s->L < 1) BAD("'%s' has no transformer blocks (h.N.*): not a GPT-2", f->path);
    return HPT_OK;
}

/* n_head (and cross-checks of the shapes) from config.json beside the file */
static hpt_status read_config_json(const char *st_path, const hf_shape *s, int *n_head) {
    char path[4200];
    const char *slash = strrchr(st_path, '/');
    snprintf(path, sizeof path, "%.*sconfig.json", slash ? (int)(slash - st_path + 1) : 0, st_path);
    unsigned char *buf;
    size_t len;
    if (hpt_read_file(path, &buf, &len) != HPT_OK) {
        char why[768];  /* the read's reason, copied: hpt_fail writes the buffer hpt_errmsg() points to */
        snprintf(why, sizeof why, "%s", hpt_errmsg());
        return hpt_fail(HPT_ERR_ARG, "no --n-head given and no readable config.json beside '%s' (%s)", st_path, why);
    }
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    if (!cJSON_IsObject(j)) { cJSON_Delete(j); BAD("'%s' is not a JSON object", path); }
    const struct { const char *key; int want; } checks[] = {
        {"n_embd", s->C}, {"n_layer", s->L}, {"vocab_size", s->V}, {"n_positions", s->P}};
    hpt_status st = HPT_OK;
    uint64_t v;
    const cJSON *nh = cJSON_GetObjectItemCaseSensitive(j, "n_head");
    if (!nh || !json_uint(nh, 256, &v) || v < 1) st = hpt_fail(HPT_ERR_FORMAT, "'%s' has no n_head in [1, 256]", path);
    else *n_head = (int)v;
    for (int i = 0; st == HPT_OK && i < 4; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, checks[i].key);
        if (x && (!json_uint(x, 1u << 30, &v) || (int)v != checks[i].want))
            st = hpt_fail(HPT_ERR_FORMAT, "'%s' says %s %g, the tensors say %d", path, checks[i].key,
                          cJSON_IsNumber(x) ? x->valuedouble : NAN, checks[i].want);
    }
    /* hpt computes LayerNorm with eps 1e-5 and GELU's tanh form (gelu_new) */
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(j, "layer_norm_epsilon"),
                *act = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
    if (st == HPT_OK && eps && (!cJSON_IsNumber(eps) || fabs(eps->valuedouble - 1e-5) > 1e-12))
        st = hpt_fail(HPT_ERR_FORMAT, "'%s': layer_norm_epsilon must be 1e-5 (hpt's LayerNorm)", path);
    if (st == HPT_OK && act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_new")))
        st = hpt_fail(HPT_ERR_FORMAT, "'%s': activation_function must be gelu_new (hpt's GELU is the tanh form)", path);
    cJSON_Delete(j);
    return st;
}

/* h.N.attn.bias, h.N.attn.masked_bias: the causal mask, a buffer */
static int is_mask_buffer(const char *s) {
    if (block_index(s) < 0) return 0;
    s += 2;
    while (*s >= '0' && *s <= '9') s++;
    return !strcmp(s, ".attn.bias") || !strcmp(s, ".attn.masked_bias");
}

/* Every parameter of the GPT-2 that s describes, found and checked (name,
 * dtype, shape) and marked used; with m, also copied into m's arena (zeroed:
 * the padded vocabulary rows stay 0). Called without m first, before the
 * model exists, then with it. */
static hpt_status map_params(st_file *f, const hf_shape *s, hpt_model *m) {
    const int C = s->C, L = s->L;
    float *P = m ? hpt_model_params(m, NULL) : NULL;
    st_tensor *t;
    HPT_TRY(need(f, -1, "wte.weight", 2, s->V, C, &t));
    if (P) copy_in(f, t, P + model_tensor(m, "wte")->offset, 0);
    HPT_TRY(need(f, -1, "wpe.weight", 2, s->P, C, &t));
    if (P) copy_in(f, t, P + model_tensor(m, "wpe")->offset, 0);
    for (int l = 0; l < L; l++)
        for (int r = 0; r < NLAYER_ROWS; r++) {
            const hf_row *row = &layer_rows[r];
            HPT_TRY(need(f, l, row->hf, row->d1 ? 2 : 1, (int64_t)row->d0 * C, (int64_t)row->d1 * C, &t));
            if (!P) continue;
            const hpt_tensor_info *ti = model_tensor(m, row->hpt);
            HPT_ASSERT(ti && ti->numel % (size_t)L == 0);
            copy_in(f, t, P + ti->offset + (size_t)l * (ti->numel / (size_t)L), row->transpose);
        }
    for (int r = 0; r < 2; r++) {
        HPT_TRY(need(f, -1, final_rows[r].hf, 1, C, 0, &t));
        if (P) copy_in(f, t, P + model_tensor(m, final_rows[r].hpt)->offset, 0);
    }
    return HPT_OK;
}

/* After map_params: a tied LM head, value for value the matrix wte holds
 * (compared in the file, as floats: the two may be stored in different
 * dtypes), and nothing else but the mask buffers, which is a tensor hpt
 * would silently drop. */
static hpt_status check_rest(st_file *f, const hf_shape *s) {
    st_tensor *head = st_find(f, "lm_head.weight"), *wte = st_find(f, "wte.weight");
    if (head) {
        if (head->dtype > DT_BF16 || !shape_is(head, 2, s->V, s->C))
            BAD("'%s': lm_head.weight's dtype or shape differs from wte.weight's", f->path);
        for (size_t i = 0; i < (size_t)s->V * (size_t)s->C; i++) {
            float h = st_get(f->data + head->begin, head->dtype, i), w = st_get(f->data + wte->begin, wte->dtype, i);
            if (memcmp(&h, &w, 4))
                BAD("'%s': lm_head.weight differs from wte.weight at element %zu: hpt's GPT-2 ties them (an untied "
                    "head cannot be imported)", f->path, i);
        }
        head->used = 1;
    }
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        if (!t->used && !is_mask_buffer(t->bare))
            BAD("'%s' has tensor '%s', which is not part of hpt's GPT-2", f->path, t->name);
    }
    return HPT_OK;
}

/* After check_rest: every value hpt will take is finite. A NaN or inf
 * weight imports as a model that eval refuses and sample draws one constant
 * token from; refused here, naming the tensor, before anything is written.
 * The element count is the data's: the dtypes have 2 or 4 bytes. */
static hpt_status check_finite(const st_file *f) {
    for (int k = 0; k < f->n; k++) {
        const st_tensor *t = &f->t[k];
        if (!t->used) continue;  /* the mask buffers: dropped, never read */
        const size_t n = (size_t)(t->end - t->begin) / (t->dtype == DT_F32 ? 4 : 2);
        for (size_t i = 0; i < n; i++) {
            float v = st_get(f->data + t->begin, t->dtype, i);
            if (!isfinite(v))
                BAD("'%s': tensor '%s' holds a non-finite value (%s at element %zu): hpt imports finite weights only",
                    f->path, t->name, isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf", i);
        }
    }
    return HPT_OK;
}

/* __metadata__'s string value for key, NULL when absent */
static hpt_status meta_string(const st_file *f, const char *key, const char **out) {
    *out = NULL;
    const cJSON *v = f->meta ? cJSON_GetObjectItemCaseSensitive(f->meta, key) : NULL;
    if (!v) return HPT_OK;
    if (!cJSON_IsString(v)) BAD("'%s': __metadata__ %s is not a string", f->path, key);
    *out = v->valuestring;
    return HPT_OK;
}

/* The char table hpt export wrote (hpt_chars: V codepoints in hex,
 * space-separated), into cps (V). */
static hpt_status read_char_table(const st_file *f, int V, uint32_t *cps) {
    const char *s;
    HPT_TRY(meta_string(f, "hpt_chars", &s));
    if (!s)
        return hpt_fail(HPT_ERR_ARG, "'%s' carries no character table (hpt_chars in its __metadata__): a char "
                        "tokenizer's vocabulary comes from a corpus; import with --tokenizer byte (vocab 256) or gpt2 "
                        "(vocab 50257)", f->path);
    int n = 0;
    while (*s) {
        if (*s == ' ') { s++; continue; }
        char *end;
        errno = 0;
        /* hex digits only, as export writes them: strtoul alone takes a
         * sign, leading blanks and a 0x prefix */
        size_t digits = strspn(s, "0123456789abcdefABCDEF");
        unsigned long c = strtoul(s, &end, 16);
        if (digits == 0 || end != s + digits || errno || c > 0x10FFFF || (*end && *end != ' ') || n >= V)
            BAD("'%s': __metadata__ hpt_chars is not %d hex codepoints", f->path, V);
        cps[n++] = (uint32_t)c;
        s = end;
    }
    if (n != V) BAD("'%s': __metadata__ hpt_chars has %d codepoints, the vocabulary %d tokens", f->path, n, V);
    return HPT_OK;
}

static const char *const tok_names[] = {"byte", "char", "gpt2"};

/* n_head from hpt export's __metadata__ hpt_n_head (1 to 256 in decimal),
 * left 0 when absent: then config.json beside the file says it */
static hpt_status meta_n_head(const st_file *f, int *n_head) {
    const char *v;
    HPT_TRY(meta_string(f, "hpt_n_head", &v));
    if (!v) return HPT_OK;
    size_t digits = strspn(v, "0123456789");
    long h = digits && digits <= 3 && !v[digits] ? strtol(v, NULL, 10) : 0;
    if (h < 1 || h > 256) BAD("'%s': __metadata__ hpt_n_head '%.32s' is not a head count from 1 to 256", f->path, v);
    *n_head = (int)h;
    return HPT_OK;
}

/* The model file's tokenizer: kind; or (kind < 0) the one the file's
 * __metadata__ names (hpt export's hpt_tokenizer), else the one whose
 * vocabulary has the model's size (256: byte, 50257: gpt2, GPT-2's own). */
static hpt_status import_tokenizer(const st_file *f, const hf_shape *s, hpt_tokenizer_kind kind, hpt_text **tok) {
    const char *named;
    HPT_TRY(meta_string(f, "hpt_tokenizer", &named));
    if (kind < 0 && named) {
        for (int k = 0; k < 3; k++) if (!strcmp(named, tok_names[k])) kind = (hpt_tokenizer_kind)k;
        if (kind < 0) BAD("'%s': __metadata__ names tokenizer '%.32s', which this hpt does not have", f->path, named);
    }
    if (kind < 0 && s->V != 256 && s->V != 50257)
        return hpt_fail(HPT_ERR_DATA, "the model's vocabulary has %d tokens and no tokenizer of this hpt has that "
                        "many (byte: 256, gpt2: 50257)", s->V);
    if (kind < 0) kind = s->V == 256 ? HPT_TOK_BYTE : HPT_TOK_GPT2;
    if (kind == HPT_TOK_GPT2 && s->V != 50257)
        return hpt_fail(HPT_ERR_ARG, "the gpt2 tokenizer has 50257 tokens, the model's vocabulary is %d", s->V);
    if (kind == HPT_TOK_BYTE && s->V != 256)
        return hpt_fail(HPT_ERR_ARG, "the byte tokenizer has 256 tokens, the model's vocabulary is %d", s->V);
    if (kind == HPT_TOK_CHAR) {
        uint32_t *cps = malloc((size_t)s->V * sizeof *cps);
        if (!cps) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
        hpt_status st = read_char_table(f, s->V, cps);
        if (st == HPT_OK) st = hpt_text_from_vocab(tok, HPT_TOK_CHAR, cps, s->V);
        free(cps);
        return st;
    }
    HPT_TRY(hpt_text_from_vocab(tok, (hpt_tokenizer_kind)kind, NULL, s->V));
    if (hpt_text_vocab_size(*tok) != s->V)
        return hpt_fail(HPT_ERR_ARG, "the tokenizer has %d tokens, the model's vocabulary is %d",
                        hpt_text_vocab_size(*tok), s->V);
    return HPT_OK;
}

/* The output of an import or export: never the input itself (the same
 * inode, by any path; a failed write would leave neither), and an existing
 * file only with overwrite, as hpt train refuses a run directory in use. */
static hpt_status check_output(const char *in, const char *out, int overwrite) {
    /* nor a new file among the system's device nodes: /dev is no place for
     * a model, and a mistyped name there is most likely a device's */
    char dir[4200], *real;
    const char *slash = strrchr(out, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
    if ((real = realpath(dir, NULL))) {
        int dev = !strcmp(real, "/dev") || !strncmp(real, "/dev/", 5);
        free(real);
        if (dev) return hpt_fail(HPT_ERR_ARG, "--out '%s' is under /dev: import and export write only regular files", out);
    }
    struct stat si, so;
    if (stat(out, &so) != 0) return HPT_OK;  /* created by the atomic save */
    if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return hpt_fail(HPT_ERR_ARG, "--out '%s' is the input file '%s' itself: choose another --out", out, in);
    /* --overwrite replaces a regular file only: the atomic save renames a
     * new file over --out, which would swap a device node or FIFO (as root,
     * /dev/null itself) for a file */
    if (!S_ISREG(so.st_mode))
        return hpt_fail(HPT_ERR_ARG, "--out '%s' is a %s, not a regular file: import and export write only "
                        "regular files%s", out, hpt_file_kind(so.st_mode),
                        S_ISDIR(so.st_mode) ? "" : " (--overwrite replaces a regular file only)");
    if (!overwrite)
        return hpt_fail(HPT_ERR_ARG, "--out '%s' exists: choose another --out, or replace it with --overwrite", out);
    return HPT_OK;
}

hpt_status hpt_hf_import(const char *st_path, int n_head, hpt_tokenizer_kind tok_kind, const char *out_path, int overwrite,
                         char *desc, size_t desc_n) {
    HPT_TRY(check_output(st_path, out_path, overwrite));
    st_file f;
    HPT_TRY(st_open(&f, st_path));
    hpt_model *m = NULL;
    hpt_text *tok = NULL;
    hf_shape s = {0};
    /* every check first: the file against one config, then the tokenizer
     * and n_head; only then the memory plan and the model */
    hpt_status st = read_shape(&f, &s);
    if (st == HPT_OK) st = map_params(&f, &s, NULL);
    if (st == HPT_OK) st = check_rest(&f, &s);
    if (st == HPT_OK) st = check_finite(&f);
    if (st == HPT_OK) st = import_tokenizer(&f, &s, tok_kind, &tok);
    if (st == HPT_OK && n_head <= 0) st = meta_n_head(&f, &n_head);
    if (st == HPT_OK && n_head <= 0) st = read_config_json(st_path, &s, &n_head);
    if (st == HPT_OK && (n_head > 256 || s.C % n_head))
        st = hpt_fail(HPT_ERR_ARG, "n_embd %d is not a multiple of n_head %d", s.C, n_head);
    hpt_gpt2_config cfg = {.vocab_size = s.V, .block_size = s.P, .n_layer = s.L, .n_head = n_head, .n_embd = s.C};
    const uint32_t conf[6] = {HPT_FAMILY_GPT2, (uint32_t)s.V, (uint32_t)s.P, (uint32_t)s.L, (uint32_t)n_head,
                              (uint32_t)s.C};
    size_t np = 0;
    if (st == HPT_OK) st = hpt_model_conf_params(conf, 6, &np);
    if (st == HPT_OK) {
        /* an import converts: the parameters alone, no gradients or
         * activations (the file's bytes are read already) */
        char pb[32], detail[96];
        hpt_fmt_bytes(pb, sizeof pb, np * sizeof(float));
        snprintf(detail, sizeof detail, "parameters %s; no gradients or activations", pb);
        st = hpt_mem_check("the import", np * sizeof(float), detail);
    }
    if (st == HPT_OK) st = hpt_gpt2_init_params_only(&m, &cfg);
    if (st == HPT_OK) st = map_params(&f, &s, m);
    if (st == HPT_OK) st = hpt_weights_save(out_path, m, tok);
    if (st == HPT_OK && desc) snprintf(desc, desc_n, "%s", hpt_model_describe(m));
    hpt_model_free(m);
    hpt_text_free(tok);
    st_close(&f);
    return st;
}

/* ---------------------------------------------------------------- writing */

typedef struct out_tensor {
    char name[64];
    const float *src;   /* hpt's slice */
    int ndim, d0, d1;   /* HF's shape */
    int transpose;
    uint64_t begin;
} out_tensor;

static int cmp_out(const void *a, const void *b) {
    return strcmp(((const out_tensor *)a)->name, ((const out_tensor *)b)->name);
}

typedef struct export_ctx {
    out_tensor *t;
    int n;
    size_t max_numel;
    const hpt_text *tok;
    int n_head;  /* into __metadata__: the tensors' shapes do not say it */
} export_ctx;

static size_t out_numel(const out_tensor *t) { return (size_t)t->d0 * (t->ndim > 1 ? (size_t)t->d1 : 1); }

/* The header's length bound: the metadata (a char table: up to 7 bytes a
 * codepoint) and each tensor's entry (under 160 bytes). */
static size_t header_cap(const export_ctx *e) {
    const int V = hpt_text_vocab_size(e->tok);
    return 256 + (size_t)e->n * 160 + (hpt_text_kind(e->tok) == HPT_TOK_CHAR ? (size_t)V * 7 : 0);
}

/* The header JSON (tensors in name order, as safetensors writes them),
 * padded with spaces to a multiple of 8 bytes; its length, or 0 on overflow.
 * __metadata__ holds strings only (safetensors' rule): n_head in decimal
 * (hpt_n_head, so that import needs no --n-head or config.json), the
 * tokenizer's name and, for a char tokenizer, its codepoints in hex. */
static size_t header_json(const export_ctx *e, char *buf, size_t cap) {
    hpt_tokenizer_kind kind = hpt_text_kind(e->tok);
    size_t k = (size_t)snprintf(buf, cap, "{\"__metadata__\":{\"format\":\"pt\",\"hpt_n_head\":\"%d\",\"hpt_tokenizer\":\"%s\"",
                                e->n_head, tok_names[kind]);
    if (kind == HPT_TOK_CHAR) {
        const uint32_t *cps = hpt_text_codepoints(e->tok);
        k += (size_t)snprintf(buf + k, cap - k, ",\"hpt_chars\":\"");
        for (int i = 0; i < hpt_text_vocab_size(e->tok) && k < cap; i++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%x", i ? " " : "", cps[i]);
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "\"");
    }
    if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "}");
    for (int i = 0; i < e->n && k < cap; i++) {
        const out_tensor *t = &e->t[i];
        uint64_t end = t->begin + 4 * out_numel(t);
        if (t->ndim > 1)
            k += (size_t)snprintf(buf + k, cap - k, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]}",
                                  t->name, t->d0, t->d1, (unsigned long long)t->begin, (unsigned long long)end);
        else
            k += (size_t)snprintf(buf + k, cap - k, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%llu,%llu]}",
                                  t->name, t->d0, (unsigned long long)t->begin, (unsigned long long)end);
    }
    if (k + 9 >= cap) return 0;
    buf[k++] = '}';
    while (k % 8) buf[k++] = ' ';
    buf[k] = 0;
    return k;
}

static hpt_status write_export(FILE *fp, void *p) {
    export_ctx *e = p;
    size_t cap = header_cap(e);
    char *hdr = malloc(cap);
    float *tmp = malloc(e->max_numel * sizeof(float));
    if (!hdr || !tmp) { free(hdr); free(tmp); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    size_t hlen = header_json(e, hdr, cap);
    HPT_ASSERT(hlen > 0);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(lenb, 1, 8, fp) == 8 && fwrite(hdr, 1, hlen, fp) == hlen;
    for (int i = 0; ok && i < e->n; i++) {
        const out_tensor *t = &e->t[i];
        size_t n = out_numel(t), rows = (size_t)t->d0, cols = t->ndim > 1 ? (size_t)t->d1 : 1;
        /* HF's [rows, cols] from hpt's [cols, rows] when transposed */
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) tmp[r * cols + c] = t->src[t->transpose ? c * rows + r : r * cols + c];
        ok = fwrite(tmp, sizeof(float), n, fp) == n;
    }
    free(hdr);
    free(tmp);
    return ok ? HPT_OK : hpt_fail(HPT_ERR_IO, "write failed");
}

static void add_out(export_ctx *e, const char *name, const float *src, int ndim, int d0, int d1, int transpose) {
    out_tensor *t = &e->t[e->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src = src; t->ndim = ndim; t->d0 = d0; t->d1 = d1; t->transpose = transpose;
    if (out_numel(t) > e->max_numel) e->max_numel = out_numel(t);
}

hpt_status hpt_hf_export(const char *model_path, const char *out_path, int overwrite) {
    HPT_TRY(check_output(model_path, out_path, overwrite));
    hpt_model *m;
    hpt_text *tok;
    HPT_TRY(hpt_weights_load(model_path, 1, 1, NULL, &m, &tok));
    const hpt_tensor_info *wte = model_tensor(m, "wte"), *wpe = model_tensor(m, "wpe"), *ln1 = model_tensor(m, "ln1w");
    if (!wte || !wpe || !ln1 || !tok) {
        hpt_model_free(m);
        hpt_text_free(tok);
        return hpt_fail(HPT_ERR_ARG, "'%s' is not a GPT-2 language model", model_path);
    }
    const int V = hpt_text_vocab_size(tok), C = wte->shape[1], P = wpe->shape[0], L = ln1->shape[0];
    size_t np;
    const float *W = hpt_model_params(m, &np);
    /* a model that import would refuse is not written (its load above
     * leaves the check to the consumer: --init's loader) */
    hpt_status fst = hpt_state_params_finite(model_path, W, np, m);
    if (fst != HPT_OK) { hpt_model_free(m); hpt_text_free(tok); return fst; }
    hpt_gpt2_config gc;
    hpt_tokenizer_kind gk;
    fst = hpt_weights_gpt2_info(model_path, &gc, &gk);
    if (fst != HPT_OK) { hpt_model_free(m); hpt_text_free(tok); return fst; }
    export_ctx e = {.tok = tok, .n_head = gc.n_head};
    e.t = calloc((size_t)(4 + L * NLAYER_ROWS), sizeof *e.t);
    if (!e.t) { hpt_model_free(m); hpt_text_free(tok); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    /* GPT2Model's state-dict names (the hub's bare layout) */
    add_out(&e, "wte.weight", W + wte->offset, 2, V, C, 0);   /* the real rows, not the padding */
    add_out(&e, "wpe.weight", W + wpe->offset, 2, P, C, 0);
    char name[64];
    for (int l = 0; l < L; l++)
        for (int r = 0; r < NLAYER_ROWS; r++) {
            const hf_row *row = &layer_rows[r];
            const hpt_tensor_info *ti = model_tensor(m, row->hpt);
            snprintf(name, sizeof name, "h.%d.%s", l, row->hf);
            add_out(&e, name, W + ti->offset + (size_t)l * (ti->numel / (size_t)L), row->d1 ? 2 : 1, row->d0 * C,
                    row->d1 * C, row->transpose);
        }
    for (int r = 0; r < 2; r++)
        add_out(&e, final_rows[r].hf, W + model_tensor(m, final_rows[r].hpt)->offset, 1, C, 0, 0);
    qsort(e.t, (size_t)e.n, sizeof *e.t, cmp_out);
    uint64_t off = 0;
    for (int i = 0; i < e.n; i++) { e.t[i].begin = off; off += 4 * out_numel(&e.t[i]); }
    hpt_status st = hpt_save_atomic(out_path, write_export, &e);
    free(e.t);
    hpt_text_free(tok);
    hpt_model_free(m);
    return st;
}
