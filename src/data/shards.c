/*
 * shards.c — token shards read for training and evaluation (see shards.h):
 * what --data names, every file's header and size checked before the first
 * step, the files memory-mapped (never copied: a run's memory does not grow
 * with the corpus, and the page cache serves every run after the first),
 * and training windows drawn uniformly over all shards from the seeded data
 * cursor, so a resume replays them bit for bit.
 *
 * Which files are train and which validation: a manifest says; otherwise
 * their names (llm.c: *_train_*.bin / *_val_*.bin; nanoGPT: train.bin and
 * val.bin). A source without both is refused: training without validation
 * is never what was meant.
 */
#include "shards.h"

#include "../base/base.h"
#include "bpe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const hpt_tokenizer_names[3] = {[HPT_TOK_BYTE] = "byte", [HPT_TOK_CHAR] = "char", [HPT_TOK_GPT2] = "gpt2"};

typedef struct shard_file {
    char *path;
    void *map;              /* the whole file, read-only */
    size_t map_len;
    const uint16_t *ids;    /* into map, past the header */
    size_t n;
    int max_id;             /* -1 until known */
} shard_file;

struct hpt_shards {
    const char *format;     /* "hpt", "llm.c", "nanoGPT" */
    hpt_tokenizer_kind kind;
    int V;
    uint32_t *cps;          /* char: the codepoints, from the manifest */
    shard_file *f[2];       /* train, val */
    int nf[2];
    size_t ntok[2];
    /* hpt_shards_windows: cum[split][i] = window starts in shards [0, i] */
    int T;
    size_t *cum[2];
    size_t starts[2];
};

/* ---------------------------------------------------------------- what --data names */

int hpt_data_is_shards(const char *path) {
    if (!path || !*path) return 0;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return 1;
        size_t n = strlen(path);
        return n >= 4 && !strcmp(path + n - 4, ".bin");
    }
    return strpbrk(path, "*?[") != NULL;
}

/* ---------------------------------------------------------------- headers */

hpt_status hpt_shard_header_check(const char *path, const void *head, size_t head_len, uint64_t file_size,
                                  size_t *ntok) {
    *ntok = 0;
    if (file_size < HPT_SHARD_HEADER_BYTES || head_len < HPT_SHARD_HEADER_BYTES)
        return hpt_fail(HPT_ERR_FORMAT, "shard '%s' is truncated: %llu bytes, shorter than llm.c's %d-byte header",
                        path, (unsigned long long)file_size, HPT_SHARD_HEADER_BYTES);
    int32_t h[3];
    memcpy(h, head, sizeof h);  /* little-endian hosts only (io.c) */
    if (h[0] != HPT_SHARD_MAGIC)
        return hpt_fail(HPT_ERR_FORMAT, "'%s' is not an llm.c token shard: magic %d, expected %d (nanoGPT's bare "
                        "uint16 ids are read from files named train.bin and val.bin)", path, (int)h[0], HPT_SHARD_MAGIC);
    if (h[1] != HPT_SHARD_VERSION)
        return hpt_fail(HPT_ERR_FORMAT, "shard '%s' has version %d: hpt reads version %d (uint16 ids)%s", path,
                        (int)h[1], HPT_SHARD_VERSION, h[1] == 2 ? "; version 2 holds llm.c's uint32 LLaMA 3 ids" : "");
    if (h[2] <= 0)
        return hpt_fail(HPT_ERR_FORMAT, "shard '%s': its header counts %d tokens", path, (int)h[2]);
    uint64_t payload = file_size - HPT_SHARD_HEADER_BYTES, want = 2 * (uint64_t)h[2];
    if (payload < want)
        return hpt_fail(HPT_ERR_FORMAT, "shard '%s' is truncated: its header counts %d tokens (%llu bytes of ids), "
                        "the file holds %llu", path, (int)h[2], (unsigned long long)want, (unsigned long long)payload);
    if (payload > want)
        return hpt_fail(HPT_ERR_FORMAT, "shard '%s': its header counts %d tokens (%llu bytes of ids) but the file "
                        "holds %llu bytes of ids: the count disagrees with the size", path, (int)h[2],
                        (unsigned long long)want, (unsigned long long)payload);
    *ntok = (size_t)h[2];
    return HPT_OK;
}

/* ---------------------------------------------------------------- files */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int is_nanogpt_name(const char *p) {
    return !strcmp(base_name(p), "train.bin") || !strcmp(base_name(p), "val.bin");
}

/* 0 train, 1 val, -1 neither: a name with "train" is train data, else one
 * with "val" validation (llm.c's *_train_* / *_val_*, nanoGPT's train.bin) */
static int split_of_name(const char *p) {
    const char *b = base_name(p);
    return strstr(b, "train") ? 0 : strstr(b, "val") ? 1 : -1;
}

static hpt_status add_file(hpt_shards *s, int split, const char *path) {
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->nf[k]; i++)
            if (!strcmp(s->f[k][i].path, path)) return HPT_OK;  /* a glob and its sibling pattern may both match */
    shard_file *f = realloc(s->f[split], (size_t)(s->nf[split] + 1) * sizeof *f);
    if (!f) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    s->f[split] = f;
    f += s->nf[split];
    *f = (shard_file){.path = strdup(path), .max_id = -1};
    if (!f->path) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    s->nf[split]++;
    return HPT_OK;
}

/* Matches of pattern, sorted, each added to its split by name (split < 0)
 * or to split. *n: how many matched. */
static hpt_status add_glob(hpt_shards *s, const char *pattern, int split, int *n) {
    glob_t g;
    *n = 0;
    int r = glob(pattern, 0, NULL, &g);
    if (r == GLOB_NOMATCH) return HPT_OK;
    if (r != 0) return hpt_fail(HPT_ERR_IO, "cannot expand '%s'", pattern);
    hpt_status st = HPT_OK;
    for (size_t i = 0; st == HPT_OK && i < g.gl_pathc; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        int k = split >= 0 ? split : split_of_name(g.gl_pathv[i]);
        if (k < 0)
            st = hpt_fail(HPT_ERR_DATA, "'%s' (matched by '%s'): cannot tell train from validation data; name "
                          "shards *train*.bin and *val*.bin, or pass hpt tokenize's directory", g.gl_pathv[i], pattern);
        else st = add_file(s, k, g.gl_pathv[i]);
        (*n)++;
    }
    globfree(&g);
    return st;
}

/* Maps one file and checks its header (llm.c) or size (nanoGPT). */
static hpt_status map_file(shard_file *f, int nanogpt, int random_access) {
    int fd;
    size_t size;
    HPT_TRY(hpt_open_regular(f->path, &fd, &size));
    hpt_status st = HPT_OK;
    if (size == 0) st = hpt_fail(HPT_ERR_FORMAT, "shard '%s' is empty", f->path);
    else if (nanogpt && size % 2)
        st = hpt_fail(HPT_ERR_FORMAT, "'%s' holds %zu bytes, an odd count: not nanoGPT's uint16 ids", f->path, size);
    if (st == HPT_OK) {
        f->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            st = hpt_fail(HPT_ERR_IO, "cannot map '%s': %s", f->path, strerror(errno));
        } else f->map_len = size;
    }
    close(fd);
    if (st != HPT_OK) return st;
    if (nanogpt) {
        f->ids = f->map;
        f->n = size / 2;
    } else {
        HPT_TRY(hpt_shard_header_check(f->path, f->map, size, size, &f->n));
        f->ids = (const uint16_t *)((const unsigned char *)f->map + HPT_SHARD_HEADER_BYTES);
    }
    /* training windows land anywhere: readahead would read pages never used */
    if (random_access) madvise(f->map, f->map_len, MADV_RANDOM);
    return HPT_OK;
}

static void scan_max(shard_file *f, size_t *at) {
    unsigned m = 0;
    for (size_t i = 0; i < f->n; i++) m = f->ids[i] > m ? f->ids[i] : m;
    f->max_id = (int)m;
    *at = 0;
    for (size_t i = 0; i < f->n; i++) if (f->ids[i] == m) { *at = i; break; }
}

/* ---------------------------------------------------------------- the manifest */

static hpt_status read_json(const char *path, cJSON **out) {
    unsigned char *buf;
    size_t len;
    HPT_TRY(hpt_read_file(path, &buf, &len));
    *out = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    if (!*out) return hpt_fail(HPT_ERR_FORMAT, "'%s' is not valid JSON", path);
    return HPT_OK;
}

static int json_int(const cJSON *o, const char *key, double lo, double hi, double *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(j) || j->valuedouble < lo || j->valuedouble > hi || j->valuedouble != (double)(long long)j->valuedouble)
        return 0;
    *v = j->valuedouble;
    return 1;
}

/* The manifest's tokenizer into s; with files (a manifest directory), its
 * shards are added; without, the max ids of the files already added are
 * taken from it where it names them. */
static hpt_status read_manifest(hpt_shards *s, const char *dir, const char *path, int files) {
    cJSON *m;
    HPT_TRY(read_json(path, &m));
    hpt_status st = HPT_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(m, "tokenizer");
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(m, "shards");
    double version = 0, V = 0;
    int kind = -1;
    for (int k = 0; cJSON_IsString(tok) && k < 3; k++) if (!strcmp(tok->valuestring, hpt_tokenizer_names[k])) kind = k;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "hpt-shards") || !json_int(m, "version", 1, 1, &version))
        st = hpt_fail(HPT_ERR_FORMAT, "'%s' is not hpt tokenize's manifest (format \"hpt-shards\", version 1)", path);
    else if (kind < 0)
        st = hpt_fail(HPT_ERR_FORMAT, "'%s': \"tokenizer\" is not byte, char or gpt2", path);
    else if (!json_int(m, "vocab_size", 2, 65535, &V) || (kind == HPT_TOK_BYTE && V != 256) ||
             (kind == HPT_TOK_GPT2 && V != HPT_GPT2_VOCAB))
        st = hpt_fail(HPT_ERR_FORMAT, "'%s': \"vocab_size\" is missing or wrong for its %s tokenizer", path,
                      hpt_tokenizer_names[kind]);
    else if (!cJSON_IsArray(shards))
        st = hpt_fail(HPT_ERR_FORMAT, "'%s' has no \"shards\" list", path);
    if (st == HPT_OK) {
        s->kind = (hpt_tokenizer_kind)kind;
        s->V = (int)V;
    }
    if (st == HPT_OK && kind == HPT_TOK_CHAR) {
        const cJSON *cps = cJSON_GetObjectItemCaseSensitive(m, "codepoints");
        if (!cJSON_IsArray(cps) || cJSON_GetArraySize(cps) != s->V)
            st = hpt_fail(HPT_ERR_FORMAT, "'%s': a char tokenizer needs \"codepoints\", %d of them", path, s->V);
        else if (!(s->cps = malloc((size_t)s->V * sizeof *s->cps))) st = hpt_fail(HPT_ERR_NOMEM, "out of memory");
        int i = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cps) {
            if (st != HPT_OK) break;
            if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble > 0x10FFFF ||
                (i > 0 && (uint32_t)c->valuedouble <= s->cps[i - 1]))
                st = hpt_fail(HPT_ERR_FORMAT, "'%s': \"codepoints\" are not sorted, distinct codepoints", path);
            else s->cps[i++] = (uint32_t)c->valuedouble;
        }
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, shards) {
        if (st != HPT_OK) break;
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
        const cJSON *split = cJSON_GetObjectItemCaseSensitive(e, "split");
        double ntok, max_id;
        int k = cJSON_IsString(split) ? !strcmp(split->valuestring, "val") ? 1 : !strcmp(split->valuestring, "train") ? 0 : -1 : -1;
        if (!cJSON_IsString(file) || strchr(file->valuestring, '/') || k < 0 || !json_int(e, "tokens", 1, 2147483647.0, &ntok) ||
            !json_int(e, "max_id", 0, 65535, &max_id)) {
            st = hpt_fail(HPT_ERR_FORMAT, "'%s': a \"shards\" entry lacks its file, split (train or val), tokens or "
                          "max_id", path);
            break;
        }
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/%s", dir, file->valuestring);
        if (files) {
            st = add_file(s, k, fp);
            if (st == HPT_OK) {
                shard_file *f = &s->f[k][s->nf[k] - 1];
                f->max_id = (int)max_id;
                f->n = (size_t)ntok;  /* checked against the file's header when mapped */
            }
            continue;
        }
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < s->nf[j]; i++)
                if (!strcmp(base_name(s->f[j][i].path), file->valuestring)) s->f[j][i].max_id = (int)max_id;
    }
    cJSON_Delete(m);
    return st;
}

/* ---------------------------------------------------------------- opening */

static int exists(const char *path, int dir) {
    struct stat sb;
    return stat(path, &sb) == 0 && (dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
}

/* The files spec names, into s (no file opened yet). */
static hpt_status find_files(hpt_shards *s, const char *spec, char *dir, size_t dir_n, int *manifest) {
    char p[4400];
    int n;
    *manifest = 0;
    if (exists(spec, 1)) {
        snprintf(dir, dir_n, "%s", spec);
        snprintf(p, sizeof p, "%s/" HPT_SHARD_MANIFEST, spec);
        if (exists(p, 0)) {
            *manifest = 1;
            s->format = "hpt";
            HPT_TRY(read_manifest(s, spec, p, 1));
            if (!s->nf[0] || !s->nf[1])
                return hpt_fail(HPT_ERR_DATA, "'%s' lists no %s shards", p, s->nf[0] ? "validation" : "train");
            return HPT_OK;
        }
        snprintf(p, sizeof p, "%s/train.bin", spec);
        if (exists(p, 0)) {
            s->format = "nanoGPT";
            HPT_TRY(add_file(s, 0, p));
            snprintf(p, sizeof p, "%s/val.bin", spec);
            if (!exists(p, 0))
                return hpt_fail(HPT_ERR_DATA, "directory '%s' has nanoGPT's train.bin but no val.bin", spec);
            return add_file(s, 1, p);
        }
        s->format = "llm.c";
        snprintf(p, sizeof p, "%s/*train*.bin", spec);
        HPT_TRY(add_glob(s, p, 0, &n));
        snprintf(p, sizeof p, "%s/*val*.bin", spec);
        HPT_TRY(add_glob(s, p, 1, &n));
        if (!s->nf[0] && !s->nf[1])
            return hpt_fail(HPT_ERR_DATA, "directory '%s' holds no token shards: no " HPT_SHARD_MANIFEST " (hpt "
                            "tokenize --out), no nanoGPT train.bin, no llm.c *train*.bin / *val*.bin", spec);
        if (!s->nf[0]) return hpt_fail(HPT_ERR_DATA, "directory '%s' has validation shards but no train shards "
                                       "(*train*.bin)", spec);
        if (!s->nf[1]) return hpt_fail(HPT_ERR_DATA, "directory '%s' has train shards but no validation shards "
                                       "(*val*.bin)", spec);
        return HPT_OK;
    }
    /* a file or a glob: the directory of its (first) file holds the manifest, if any */
    const char *b = base_name(spec);
    snprintf(dir, dir_n, "%.*s", b == spec ? 1 : (int)(b - spec - 1), b == spec ? "." : spec);
    if (b != spec && b - spec == 1) snprintf(dir, dir_n, "/");
    if (exists(spec, 0) && is_nanogpt_name(spec)) {
        s->format = "nanoGPT";
        if (!strcmp(b, "val.bin"))
            return hpt_fail(HPT_ERR_DATA, "'%s' is validation data: pass its train.bin (or their directory)", spec);
        HPT_TRY(add_file(s, 0, spec));
        snprintf(p, sizeof p, "%s/val.bin", dir);
        if (!exists(p, 0)) return hpt_fail(HPT_ERR_DATA, "nanoGPT's '%s' needs val.bin beside it: '%s' is missing",
                                           spec, p);
        return add_file(s, 1, p);
    }
    s->format = "llm.c";
    HPT_TRY(add_glob(s, spec, -1, &n));
    if (n == 0) return hpt_fail(HPT_ERR_DATA, "no file matches '%s'", spec);
    if (!s->nf[0])
        return hpt_fail(HPT_ERR_DATA, "'%s' names validation shards only: pass the train shards (*train*.bin; "
                        "the *val*.bin beside them are found) or their directory", spec);
    if (!s->nf[1]) {
        /* llm.c names a corpus's shards PREFIX_train_N.bin and PREFIX_val_N.bin */
        const char *t = strstr(b, "train");
        if (t) {
            snprintf(p, sizeof p, "%.*sval*.bin", (int)(t - spec), spec);
            HPT_TRY(add_glob(s, p, 1, &n));
        }
        if (!s->nf[1])
            return hpt_fail(HPT_ERR_DATA, "no validation shards for '%s'%s%s%s: llm.c's *val*.bin beside the train "
                            "shards, or a glob matching both", spec, t ? " (looked for '" : "", t ? p : "", t ? "')" : "");
    }
    return HPT_OK;
}

hpt_status hpt_shards_open(hpt_shards **out, const char *spec, hpt_tokenizer_kind kind) {
    *out = NULL;
    hpt_shards *s = calloc(1, sizeof *s);
    if (!s) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    s->V = 0;
    char dir[4200], p[4300];
    int manifest;
    hpt_status st = find_files(s, spec, dir, sizeof dir, &manifest);
    if (st == HPT_OK && !manifest) {
        /* a manifest beside llm.c / nanoGPT files gives their vocabulary */
        snprintf(p, sizeof p, "%s/" HPT_SHARD_MANIFEST, dir);
        if (exists(p, 0)) st = read_manifest(s, dir, p, 0);
        else if (kind == HPT_TOK_GPT2) { s->kind = kind; s->V = HPT_GPT2_VOCAB; }
        else if (kind == HPT_TOK_BYTE) { s->kind = kind; s->V = 256; }
        else st = hpt_fail(HPT_ERR_ARG, "'%s': %s token files carry no vocabulary: pass --tokenizer gpt2 (or byte) "
                           "for the ids they hold, or use hpt tokenize --out's directory (its manifest names it)",
                           spec, s->format);
    }
    for (int k = 0; st == HPT_OK && k < 2; k++)
        for (int i = 0; st == HPT_OK && i < s->nf[k]; i++) {
            shard_file *f = &s->f[k][i];
            size_t listed = f->n;
            st = map_file(f, !strcmp(s->format, "nanoGPT") || is_nanogpt_name(f->path), k == 0);
            if (st == HPT_OK && manifest && f->n != listed)
                st = hpt_fail(HPT_ERR_FORMAT, "shard '%s' holds %zu tokens, its manifest says %zu", f->path, f->n, listed);
            size_t at = 0;
            int scanned = st == HPT_OK && f->max_id < 0;
            if (scanned) scan_max(f, &at);
            if (st == HPT_OK && f->max_id >= s->V) {
                char where[48] = "";
                if (scanned) snprintf(where, sizeof where, " (at token %zu)", at);
                else snprintf(where, sizeof where, " (its manifest's max_id)");
                st = hpt_fail(HPT_ERR_DATA, "shard '%s': token id %d%s is outside the %s tokenizer's vocabulary of %d "
                              "(made with another tokenizer?)", f->path, f->max_id, where, hpt_tokenizer_names[s->kind],
                              s->V);
            }
            s->ntok[k] += f->n;
        }
    if (st != HPT_OK) { hpt_shards_free(s); return st; }
    *out = s;
    return HPT_OK;
}

void hpt_shards_free(hpt_shards *s) {
    if (!s) return;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < s->nf[k]; i++) {
            if (s->f[k][i].map) munmap(s->f[k][i].map, s->f[k][i].map_len);
            free(s->f[k][i].path);
        }
        free(s->f[k]);
        free(s->cum[k]);
    }
    free(s->cps);
    free(s);
}

const char *hpt_shards_format(const hpt_shards *s) { return s->format; }
size_t hpt_shards_tokens(const hpt_shards *s, int split) { return s->ntok[split]; }
int hpt_shards_files(const hpt_shards *s, int split) { return s->nf[split]; }

const uint16_t *hpt_shards_ids(const hpt_shards *s, int split, int i, size_t *n, const char **path) {
    HPT_ASSERT(i >= 0 && i < s->nf[split]);
    *n = s->f[split][i].n;
    if (path) *path = s->f[split][i].path;
    return s->f[split][i].ids;
}

hpt_status hpt_shards_vocab(const hpt_shards *s, hpt_text **out) {
    return hpt_text_from_vocab(out, s->kind, s->cps, s->V);
}

hpt_status hpt_shards_match(const hpt_shards *s, const hpt_text *vocab, const char *whose) {
    const uint32_t *cps = hpt_text_codepoints(vocab);
    int V = hpt_text_vocab_size(vocab);
    hpt_tokenizer_kind k = hpt_text_kind(vocab);
    if (k != s->kind || V != s->V || (k == HPT_TOK_CHAR && memcmp(cps, s->cps, (size_t)V * sizeof *cps)))
        return hpt_fail(HPT_ERR_DATA, "the shards hold %s token ids (vocabulary %d) but %s has the %s tokenizer "
                        "(vocabulary %d): tokenize the corpus with the model's tokenizer", hpt_tokenizer_names[s->kind],
                        s->V, whose, hpt_tokenizer_names[k], V);
    return HPT_OK;
}

/* ---------------------------------------------------------------- windows */

hpt_status hpt_shards_windows(hpt_shards *s, int T) {
    s->T = T;
    for (int k = 0; k < 2; k++) {
        if (s->nf[k] == 0) return hpt_fail(HPT_ERR_DATA, "no %s shards", k ? "validation" : "train");
        free(s->cum[k]);
        s->cum[k] = malloc((size_t)s->nf[k] * sizeof(size_t));
        if (!s->cum[k]) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
        size_t c = 0;
        for (int i = 0; i < s->nf[k]; i++) {
            /* a window is T+1 tokens inside one shard: n - T starts */
            if (s->f[k][i].n > (size_t)T) c += s->f[k][i].n - (size_t)T;
            s->cum[k][i] = c;
        }
        s->starts[k] = c;
        if (c == 0)
            return hpt_fail(HPT_ERR_DATA, "no %s shard holds more than --block-size (%d) tokens: %zu tokens in %d "
                            "file(s), the first '%s'", k ? "validation" : "train", T, s->ntok[k], s->nf[k],
                            s->f[k][0].path);
    }
    return HPT_OK;
}

/* the window that starts at global start g of split k */
static void window(const hpt_shards *s, int k, size_t g, int T, int *x, int *y) {
    int lo = 0, hi = s->nf[k] - 1;
    while (lo < hi) {  /* the first shard whose cumulative count passes g */
        int mid = (lo + hi) / 2;
        if (s->cum[k][mid] > g) hi = mid; else lo = mid + 1;
    }
    const shard_file *f = &s->f[k][lo];
    size_t off = g - (lo ? s->cum[k][lo - 1] : 0);
    HPT_ASSERT(off + (size_t)T < f->n);
    const uint16_t *p = f->ids + off;
    for (int i = 0; i < T; i++) {
        x[i] = p[i];
        y[i] = p[i + 1];
    }
}

void hpt_shards_train_batch(const hpt_shards *s, uint64_t *rng_state, int B, int T, int *x, int *y) {
    HPT_ASSERT(T == s->T);
    hpt_rng r = {*rng_state};
    for (int b = 0; b < B; b++)
        window(s, 0, (size_t)hpt_rng_below(&r, s->starts[0]), T, x + (size_t)b * T, y + (size_t)b * T);
    *rng_state = r.s;
}

void hpt_shards_val_batch(const hpt_shards *s, int i, int n, int B, int T, int *x, int *y) {
    HPT_ASSERT(T == s->T);
    /* n*B windows spread evenly over every start of the validation shards,
     * as hpt_text_val_batch spreads them over its split */
    size_t W = (size_t)n * B, last = s->starts[1] - 1;
    for (int b = 0; b < B; b++) {
        size_t w = (size_t)i * B + b;
        size_t g = W > 1 ? (size_t)((unsigned __int128)last * w / (W - 1)) : 0;
        window(s, 1, g, T, x + (size_t)b * T, y + (size_t)b * T);
    }
}

/* ---------------------------------------------------------------- text that is not */

int hpt_utf8_valid_at(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) { *cp = c; return 1; }
    int len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + (size_t)len > n) return 0;
    uint32_t v = c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i + k] & 0x3F);
    }
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < minv[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

hpt_status hpt_text_file_check(const char *path, hpt_tokenizer_kind kind) {
    if (kind == HPT_TOK_BYTE) return HPT_OK;  /* any bytes are byte tokens */
    int fd;
    size_t n;
    HPT_TRY(hpt_open_regular(path, &fd, &n));
    if (n == 0) { close(fd); return HPT_OK; }  /* the loader says it is empty */
    const unsigned char *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return hpt_fail(HPT_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    madvise((void *)m, n, MADV_SEQUENTIAL);
    size_t i = 0;
    int nul = 0;
    while (i < n) {
        uint32_t cp;
        int len = hpt_utf8_valid_at(m, n, i, &cp);
        if (len == 0 || cp == 0) { nul = len != 0; break; }
        i += (size_t)len;
    }
    hpt_status st = HPT_OK;
    if (i < n) {
        int32_t head[3] = {0};
        if (n >= sizeof head) memcpy(head, m, sizeof head);
        const char *hint =
            head[0] == HPT_SHARD_MAGIC ? "; it starts like an llm.c token shard (magic 20240520): pass shards as "
                                         "--data FILE.bin, a glob of them or their directory" :
            nul && n % 2 == 0 ? "; if it holds nanoGPT's uint16 token ids, name it train.bin (val.bin beside it) "
                                "and pass it as --data" : "";
        st = hpt_fail(HPT_ERR_DATA, "data file '%s' is not text for the %s tokenizer: %s at byte %zu%s (--tokenizer "
                      "byte takes any bytes)", path, hpt_tokenizer_names[kind],
                      nul ? "a NUL byte" : "invalid UTF-8", i, hint);
    }
    munmap((void *)m, n);
    return st;
}
