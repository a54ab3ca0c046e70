/*
 * text.c — text corpora: byte- and char-level tokenizers, the 90/10 split,
 * random training windows and fixed validation windows.
 *
 * The char tokenizer works on Unicode codepoints decoded from UTF-8; a byte
 * that is not valid UTF-8 becomes the codepoint 0xDC00 + byte (Python's
 * "surrogateescape"), so any file round-trips exactly through encode/decode.
 * The gpt2 tokenizer is GPT-2's byte-level BPE (bpe.c), any bytes too.
 */
#include "../base/base.h"
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

struct hpt_text {
    hpt_tokenizer_kind kind;
    int V;
    uint32_t *cps;        /* (V) sorted codepoints, char tokenizer only */
    hpt_bpe *bpe;         /* gpt2 tokenizer only (shared by reference) */
    int *tokens;          /* (n) whole corpus */
    size_t n, n_train;    /* tokens [0, n_train) train, [n_train, n) val */
    uint64_t src_bytes;   /* the file's size and CRC-32 (hpt_text_source) */
    uint32_t src_crc;
};

/* The file the corpus came from, while its bytes are at hand: its identity
 * costs one CRC pass instead of a second read at resume. */
static void note_source(hpt_text *t, const unsigned char *buf, size_t len) {
    t->src_bytes = len;
    t->src_crc = hpt_crc32(0, buf, len);
}

void hpt_text_source(const hpt_text *t, uint64_t *bytes, uint32_t *crc) {
    *bytes = t->src_bytes;
    *crc = t->src_crc;
}

/* Decodes one codepoint at s[i] (n bytes total); returns its byte length. */
static int utf8_next(const unsigned char *s, size_t i, size_t n, uint32_t *cp) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 1) { *cp = c; return 1; }
    if (len == 0 || i + len > n) goto bad;
    uint32_t v = c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) goto bad;
        v = v << 6 | (s[i + k] & 0x3F);
    }
    /* reject overlong forms, surrogates and out-of-range values */
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < minv[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xDC00 + c;
    return 1;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int char_id(const hpt_text *t, uint32_t cp) {
    int lo = 0, hi = t->V - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->cps[mid] == cp) return mid;
        if (t->cps[mid] < cp) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* --vocab: where the gpt2 tokenizer's files are (NULL: bpe.c's default). */
static char vocab_dir[4096];

void hpt_set_vocab_dir(const char *dir) { snprintf(vocab_dir, sizeof vocab_dir, "%s", dir ? dir : ""); }
const char *hpt_text_vocab_dir(void) { return vocab_dir; }  /* shard_write.c loads a tokenizer per thread */

void hpt_text_free(hpt_text *t) {
    if (!t) return;
    hpt_bpe_free(t->bpe);
    free(t->cps);
    free(t->tokens);
    free(t);
}

/* A file encoded with GPT-2's BPE (bpe, one more owner taken). */
static hpt_status load_gpt2(hpt_text **out, const char *path, hpt_bpe *bpe) {
    unsigned char *buf;
    size_t len, n = 0, cap = 0;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    if (len == 0) { free(buf); return hpt_fail(HPT_ERR_DATA, "data file '%s' is empty", path); }
    int *ids = NULL;
    hpt_status st = hpt_bpe_encode(bpe, buf, len, &ids, &n, &cap);
    hpt_text *t = st == HPT_OK ? calloc(1, sizeof *t) : NULL;
    if (t) note_source(t, buf, len);
    free(buf);
    if (!t) {
        free(ids);
        return st != HPT_OK ? st : hpt_fail(HPT_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    t->kind = HPT_TOK_GPT2;
    t->V = HPT_GPT2_VOCAB;
    t->bpe = hpt_bpe_ref(bpe);
    t->tokens = ids;
    t->n = n;
    t->n_train = (size_t)(t->n * 0.9);
    *out = t;
    return HPT_OK;
}

hpt_status hpt_text_load(hpt_text **out, const char *path, hpt_tokenizer_kind kind) {
    *out = NULL;
    if (kind == HPT_TOK_GPT2) {
        hpt_bpe *bpe;
        HPT_TRY(hpt_bpe_load(&bpe, vocab_dir));
        hpt_status st = load_gpt2(out, path, bpe);
        hpt_bpe_free(bpe);
        return st;
    }
    if (kind != HPT_TOK_BYTE && kind != HPT_TOK_CHAR) return hpt_fail(HPT_ERR_ARG, "unknown tokenizer %d", kind);
    unsigned char *buf;
    size_t len;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    if (len == 0) { free(buf); return hpt_fail(HPT_ERR_DATA, "data file '%s' is empty", path); }
    if (kind == HPT_TOK_CHAR && memchr(buf, 0, len)) {
        free(buf);
        return hpt_fail(HPT_ERR_DATA, "data file '%s' contains NUL bytes: it looks binary, not text "
                        "(use --tokenizer byte to train on raw bytes anyway)", path);
    }
    hpt_text *t = calloc(1, sizeof *t);
    if (t) t->tokens = malloc(len * sizeof(int));
    if (!t || !t->tokens) { free(buf); hpt_text_free(t); return hpt_fail(HPT_ERR_NOMEM, "out of memory reading '%s'", path); }
    note_source(t, buf, len);
    t->kind = kind;
    if (kind == HPT_TOK_BYTE) {
        t->V = 256;
        for (size_t i = 0; i < len; i++) t->tokens[i] = buf[i];
        t->n = len;
    } else {
        /* pass 1: codepoints into tokens[]; pass 2: sorted distinct set; pass 3: ids */
        size_t n = 0;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            i += utf8_next(buf, i, len, &cp);
            t->tokens[n++] = (int)cp;
        }
        t->n = n;
        uint32_t *tmp = malloc(n * sizeof(uint32_t));
        if (!tmp) { free(buf); hpt_text_free(t); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
        for (size_t i = 0; i < n; i++) tmp[i] = (uint32_t)t->tokens[i];
        qsort(tmp, n, sizeof(uint32_t), cmp_u32);
        size_t V = 0;
        for (size_t i = 0; i < n; i++) if (V == 0 || tmp[i] != tmp[V - 1]) tmp[V++] = tmp[i];
        t->cps = realloc(tmp, V * sizeof(uint32_t));
        if (!t->cps) t->cps = tmp;
        t->V = (int)V;
        for (size_t i = 0; i < n; i++) t->tokens[i] = char_id(t, (uint32_t)t->tokens[i]);
        if (t->V < 2) {
            free(buf); hpt_text_free(t);
            return hpt_fail(HPT_ERR_DATA, "data file '%s' has only one distinct character", path);
        }
    }
    free(buf);
    t->n_train = (size_t)(t->n * 0.9);
    *out = t;
    return HPT_OK;
}

hpt_status hpt_text_load_with(hpt_text **out, const char *path, const hpt_text *vocab) {
    *out = NULL;
    /* a vocabulary fixed in advance (byte, and any such later kind) encodes
     * the file as a fresh load does; only a char vocabulary is the model's own */
    if (vocab->kind == HPT_TOK_GPT2) return load_gpt2(out, path, vocab->bpe);
    if (vocab->kind != HPT_TOK_CHAR) return hpt_text_load(out, path, vocab->kind);
    unsigned char *buf;
    size_t len;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    if (len == 0) { free(buf); return hpt_fail(HPT_ERR_DATA, "data file '%s' is empty", path); }
    hpt_text *t = calloc(1, sizeof *t);
    if (t) t->tokens = malloc(len * sizeof(int));
    if (t) t->cps = malloc((size_t)vocab->V * sizeof(uint32_t));
    if (!t || !t->tokens || !t->cps) {
        free(buf); hpt_text_free(t);
        return hpt_fail(HPT_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    note_source(t, buf, len);
    t->kind = vocab->kind;
    t->V = vocab->V;
    memcpy(t->cps, vocab->cps, (size_t)vocab->V * sizeof(uint32_t));
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_next(buf, i, len, &cp), id = char_id(t, cp);
        if (id < 0) {
            hpt_status st = hpt_fail(HPT_ERR_DATA, "data file '%s': the character U+%04X at byte %zu is not in the "
                                     "model's vocabulary of %d characters", path, cp, i, t->V);
            free(buf); hpt_text_free(t);
            return st;
        }
        t->tokens[t->n++] = id;
        i += (size_t)k;
    }
    free(buf);
    t->n_train = (size_t)(t->n * 0.9);
    *out = t;
    return HPT_OK;
}

const int *hpt_text_ids(const hpt_text *t, size_t *n) {
    *n = t->n;
    return t->tokens;
}

hpt_status hpt_text_from_vocab(hpt_text **out, hpt_tokenizer_kind kind, const uint32_t *cps, int V) {
    *out = NULL;
    hpt_text *t = calloc(1, sizeof *t);
    if (!t) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    t->kind = kind;
    if (kind == HPT_TOK_BYTE) {
        t->V = 256;
    } else if (kind == HPT_TOK_GPT2) {
        if (V != HPT_GPT2_VOCAB) {
            free(t);
            return hpt_fail(HPT_ERR_FORMAT, "the gpt2 tokenizer has %d tokens, not %d", HPT_GPT2_VOCAB, V);
        }
        hpt_status st = hpt_bpe_load(&t->bpe, vocab_dir);
        if (st != HPT_OK) { free(t); return st; }
        t->V = V;
    } else {
        if (!cps) { free(t); return hpt_fail(HPT_ERR_ARG, "tokenizer kind %d needs a vocabulary", (int)kind); }
        if (V < 2) { free(t); return hpt_fail(HPT_ERR_FORMAT, "char vocabulary of %d entries", V); }
        t->cps = malloc((size_t)V * sizeof(uint32_t));
        if (!t->cps) { free(t); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
        for (int i = 0; i < V; i++) {
            if (cps[i] > 0x10FFFF || (i > 0 && cps[i] <= cps[i - 1])) {
                hpt_text_free(t);
                return hpt_fail(HPT_ERR_FORMAT, "char vocabulary is not sorted, distinct codepoints");
            }
            t->cps[i] = cps[i];
        }
        t->V = V;
    }
    *out = t;
    return HPT_OK;
}

int hpt_text_vocab_size(const hpt_text *t) { return t->V; }
uint32_t hpt_text_vocab_crc(const hpt_text *t) { return t->bpe ? hpt_bpe_crc(t->bpe) : 0; }
hpt_tokenizer_kind hpt_text_kind(const hpt_text *t) { return t->kind; }
const uint32_t *hpt_text_codepoints(const hpt_text *t) { return t->cps; }
size_t hpt_text_tokens(const hpt_text *t, int split) { return split == 0 ? t->n_train : t->n - t->n_train; }

void hpt_text_train_batch(const hpt_text *t, uint64_t *rng_state, int B, int T, int *x, int *y) {
    hpt_rng r = {*rng_state};
    size_t span = t->n_train - (size_t)T;  /* window start in [0, n_train - T - 1] */
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)hpt_rng_below(&r, span);
        for (int i = 0; i < T; i++) {
            x[b * T + i] = t->tokens[off + i];
            y[b * T + i] = t->tokens[off + i + 1];
        }
    }
    *rng_state = r.s;
}

void hpt_text_val_batch(const hpt_text *t, int i, int n, int B, int T, int *x, int *y) {
    /* n*B windows spread evenly over the validation split: a fixed set, so
     * every evaluation of a run (and of every run) sees the same tokens. */
    size_t nv = t->n - t->n_train, span = nv - (size_t)T - 1, W = (size_t)n * B;
    for (int b = 0; b < B; b++) {
        size_t w = (size_t)i * B + b;
        size_t off = t->n_train + (W > 1 ? span * w / (W - 1) : 0);
        for (int k = 0; k < T; k++) {
            x[b * T + k] = t->tokens[off + k];
            y[b * T + k] = t->tokens[off + k + 1];
        }
    }
}

/* GPT-2's BPE of the whole string, the first max ids kept. */
static hpt_status encode_gpt2(const hpt_text *t, const char *s, int *ids, int max, int *count) {
    int *all = NULL;
    size_t n = 0, cap = 0;
    hpt_status st = hpt_bpe_encode(t->bpe, (const unsigned char *)s, strlen(s), &all, &n, &cap);
    if (st != HPT_OK) { free(all); return st; }
    int k = n < (size_t)max ? (int)n : max;
    if (k > 0) memcpy(ids, all, (size_t)k * sizeof *ids);
    free(all);
    *count = k;
    return HPT_OK;
}

hpt_status hpt_text_encode(const hpt_text *t, const char *s, int *ids, int max, int *count, size_t *bad) {
    if (!t || !s || !count || (max > 0 && !ids)) return hpt_fail(HPT_ERR_ARG, "%s", "hpt_text_encode: a NULL argument");
    *count = 0;
    if (t->kind == HPT_TOK_GPT2) return encode_gpt2(t, s, ids, max, count);
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    int k = 0;
    for (size_t i = 0; i < n && k < max;) {
        if (t->kind == HPT_TOK_BYTE) { ids[k++] = u[i++]; continue; }
        uint32_t cp;
        int len = utf8_next(u, i, n, &cp);
        int id = char_id(t, cp);
        if (id < 0) {
            if (bad) *bad = i;
            return hpt_fail(HPT_ERR_DATA, "the character U+%04X at byte %zu is not in the vocabulary", (unsigned)cp, i);
        }
        ids[k++] = id;
        i += len;
    }
    *count = k;
    return HPT_OK;
}

int hpt_text_decode(const hpt_text *t, int id, char *buf) {
    if (id < 0 || id >= t->V) return 0;
    if (t->kind == HPT_TOK_BYTE) { buf[0] = (char)id; return 1; }
    if (t->kind == HPT_TOK_GPT2) return hpt_bpe_decode(t->bpe, id, buf);
    uint32_t c = t->cps[id];
    if (c >= 0xDC80 && c <= 0xDCFF) { buf[0] = (char)(c - 0xDC00); return 1; }  /* escaped raw byte */
    if (c < 0x80) { buf[0] = (char)c; return 1; }
    if (c < 0x800) { buf[0] = (char)(0xC0 | c >> 6); buf[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        buf[0] = (char)(0xE0 | c >> 12); buf[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | c >> 18); buf[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((c >> 6) & 0x3F)); buf[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}
