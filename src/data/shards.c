/*
 * shards.c — token shards read for training and evaluation (see shards.h):
 * what --data names, every file's header and size checked before the first
 * step, and training windows drawn uniformly over all shards from the
 * seeded data cursor, so a resume replays them bit for bit.
 *
 * The files are read with pread, window by window, not memory-mapped: a
 * mapping turns a file truncated under the run (data regenerated in place)
 * into SIGBUS, which no status can report, and its pages count in the
 * process's resident memory (--rss-limit would trip on the corpus).
 * A window is one system call of T+1 ids, nothing beside a step's matmuls;
 * the page cache still serves every run after the first, and the run's own
 * memory does not grow with the corpus. Each file stays open for the run
 * (its descriptor keeps the inode: the directory may be renamed or deleted
 * meanwhile), and a read that comes back short, or with an id outside the
 * vocabulary, is an error naming the file and the offset.
 *
 * At open every file is read once (in parallel over its blocks): its CRC-32
 * and its largest id. The CRCs make the source's identity (hpt_shards_
 * identity): what a checkpoint records and a resume compares, and what
 * compare's reuse key holds, so a changed shard is noticed the way a changed
 * text file is. The largest id is checked against the vocabulary and against
 * the manifest's max_id, so a bad id is refused before the first step, not
 * met by a random window hundreds of steps in.
 *
 * Which files are train and which validation: a manifest says; otherwise
 * their names (llm.c: *_train_* / *_val_*; nanoGPT: train.bin and
 * val.bin). A source without both is refused: training without validation
 * is never what was meant. A directory holding hpt tokenize's own shard
 * names or part files but no manifest is an unfinished tokenisation and is
 * refused, never read as a partial llm.c corpus.
 */
#include "shards.h"

#include "../base/base.h"
#include "bpe.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

const char *const hpt_tokenizer_names[3] = {[HPT_TOK_BYTE] = "byte", [HPT_TOK_CHAR] = "char", [HPT_TOK_GPT2] = "gpt2"};

typedef struct shard_file {
    char *path;
    int fd;                 /* open for the run: -1 until opened */
    size_t size;            /* the file's bytes when opened */
    size_t off;             /* where the ids start: llm.c's header, or 0 */
    size_t n;               /* ids */
    int max_id;             /* the manifest's, -1 when it has none */
    int seen_max;           /* the largest id read at open, and its first position */
    size_t seen_at;
    uint32_t crc;           /* the whole file's CRC-32 */
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
    int *win;               /* (T+1) ids of one window */
    int manifest_vocab;     /* kind, V and cps came from a manifest: part of the identity */
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

/* Appends path to split; a path already added is skipped (a glob and its
 * sibling pattern may both match) by a scan of every file, so a manifest's
 * shards, which no two patterns match, come through append_file and are
 * checked for repeats once, sorted (no_repeats): the scan was quadratic,
 * 8.8 s for 40,000 entries. */
static hpt_status append_file(hpt_shards *s, int split, const char *path) {
    shard_file *f = realloc(s->f[split], (size_t)(s->nf[split] + 1) * sizeof *f);
    if (!f) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    s->f[split] = f;
    f += s->nf[split];
    *f = (shard_file){.path = strdup(path), .fd = -1, .max_id = -1};
    if (!f->path) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    s->nf[split]++;
    return HPT_OK;
}

static hpt_status add_file(hpt_shards *s, int split, const char *path) {
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->nf[k]; i++)
            if (!strcmp(s->f[k][i].path, path)) return HPT_OK;
    return append_file(s, split, path);
}

static int cmp_path(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A manifest that lists a file twice is refused: each entry is a shard with
 * its own count and max id (a repeat had been skipped and its numbers
 * written over the last shard's). */
static hpt_status no_repeats(const hpt_shards *s, const char *manifest) {
    size_t n = (size_t)s->nf[0] + (size_t)s->nf[1], k = 0;
    if (n < 2) return HPT_OK;
    char **p = malloc(n * sizeof *p);
    if (!p) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < s->nf[j]; i++) p[k++] = s->f[j][i].path;
    qsort(p, n, sizeof *p, cmp_path);
    hpt_status st = HPT_OK;
    for (size_t i = 1; i < n && st == HPT_OK; i++)
        if (!strcmp(p[i - 1], p[i])) st = hpt_fail(HPT_ERR_FORMAT, "'%s' lists '%s' twice", manifest, base_name(p[i]));
    free(p);
    return st;
}

/* One name matched by a pattern, added to its split by name (split < 0) or
 * to split. Anything but a regular file (a FIFO, a directory, a dangling
 * link) is refused by name: skipped, it only made the later "no train
 * shards" confusing. */
static hpt_status add_match(hpt_shards *s, const char *path, const char *pattern, int split) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return hpt_fail(HPT_ERR_DATA, "'%s' (matched by '%s') is not a regular file%s%s", path, pattern,
                        stat(path, &sb) != 0 ? ": " : "", stat(path, &sb) != 0 ? strerror(errno) : "");
    int k = split >= 0 ? split : split_of_name(path);
    if (k < 0)
        return hpt_fail(HPT_ERR_DATA, "'%s' (matched by '%s'): cannot tell train from validation data; name "
                        "shards *train*.bin and *val*.bin, or pass hpt tokenize's directory", path, pattern);
    return add_file(s, k, path);
}

/* Matches of a glob pattern the user wrote, sorted. *n: how many matched. */
static hpt_status add_glob(hpt_shards *s, const char *pattern, int split, int *n) {
    glob_t g;
    *n = 0;
    int r = glob(pattern, 0, NULL, &g);
    if (r == GLOB_NOMATCH) return HPT_OK;
    if (r != 0) return hpt_fail(HPT_ERR_IO, "cannot expand '%s'", pattern);
    hpt_status st = HPT_OK;
    for (size_t i = 0; st == HPT_OK && i < g.gl_pathc; i++, (*n)++) st = add_match(s, g.gl_pathv[i], pattern, split);
    globfree(&g);
    return st;
}

/* Names in directory dir (taken literally: a directory called d[1] is not
 * a pattern for d1) that match name_pattern, sorted as glob sorts them. */
static hpt_status add_dir_matches(hpt_shards *s, const char *dir, const char *name_pattern, int split, int *n) {
    struct dirent **names;
    *n = 0;
    int m = scandir(dir, &names, NULL, alphasort);
    if (m < 0) return hpt_fail(HPT_ERR_IO, "cannot list '%s': %s", dir, strerror(errno));
    hpt_status st = HPT_OK;
    char p[4400], pat[4400];
    snprintf(pat, sizeof pat, "%s/%s", dir, name_pattern);
    for (int i = 0; i < m; i++) {
        if (st == HPT_OK && fnmatch(name_pattern, names[i]->d_name, FNM_PERIOD) == 0) {
            snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
            st = add_match(s, p, pat, split);
            (*n)++;
        }
        free(names[i]);
    }
    free(names);
    return st;
}

/* s with glob's special characters escaped: a path taken literally. */
static void glob_escape(char *out, size_t n, const char *s, size_t len) {
    size_t k = 0;
    for (size_t i = 0; i < len && s[i] && k + 2 < n; i++) {
        if (strchr("*?[]\\", s[i])) out[k++] = '\\';
        out[k++] = s[i];
    }
    out[k] = 0;
}

/* Opens f and checks its header (llm.c) or size (nanoGPT). */
static hpt_status open_file(shard_file *f, int nanogpt) {
    errno = 0;
    hpt_status st = hpt_open_regular(f->path, &f->fd, &f->size);
    if (st != HPT_OK && errno == EMFILE) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hpt_errmsg());  /* not formatted into itself */
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        return hpt_fail(HPT_ERR_IO, "%s: every shard stays open for the run, and the limit on open files is %llu "
                        "(ulimit -n; its hard limit bounds what hpt can raise it to): raise it, or use fewer, larger "
                        "shards", msg, (unsigned long long)rl.rlim_cur);
    }
    HPT_TRY(st);
    if (f->size == 0) return hpt_fail(HPT_ERR_FORMAT, "shard '%s' is empty", f->path);
    if (nanogpt) {
        if (f->size % 2)
            return hpt_fail(HPT_ERR_FORMAT, "'%s' holds %zu bytes, an odd count: not nanoGPT's uint16 ids", f->path,
                            f->size);
        f->off = 0;
        f->n = f->size / 2;
        return HPT_OK;
    }
    unsigned char head[HPT_SHARD_HEADER_BYTES];
    ssize_t got = pread(f->fd, head, sizeof head, 0);
    HPT_TRY(hpt_shard_header_check(f->path, head, got > 0 ? (size_t)got : 0, f->size, &f->n));
    f->off = HPT_SHARD_HEADER_BYTES;
    return HPT_OK;
}

/* pread of exactly n bytes at off, or 0 */
static int read_at(int fd, void *buf, size_t n, size_t off) {
    unsigned char *b = buf;
    while (n) {
        ssize_t r = pread(fd, b, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        b += r; n -= (size_t)r; off += (size_t)r;
    }
    return 1;
}

static hpt_status changed_under(const shard_file *f, size_t off, size_t n) {
    struct stat sb;
    long long now = fstat(f->fd, &sb) == 0 ? (long long)sb.st_size : -1;
    return hpt_fail(HPT_ERR_DATA, "shard '%s' changed while hpt read it: %zu bytes at offset %zu could not be read "
                    "(the file is now %lld bytes, %zu when it was opened): token shards must not be rewritten in "
                    "place while a run reads them", f->path, n, off, now, f->size);
}

/* The whole file once, in parallel over ranges of its ids: its CRC-32 (the
 * header's combined with the ids'), its largest id and where that first
 * occurs. pread, not a mapping: nothing of it stays resident. */
static hpt_status scan_file(shard_file *f) {
    enum { BLK = 1 << 19 };  /* ids per read: 1 MiB */
    uint32_t crc = 0;
    if (f->off) {
        unsigned char head[HPT_SHARD_HEADER_BYTES];
        if (!read_at(f->fd, head, sizeof head, 0)) return changed_under(f, 0, sizeof head);
        crc = hpt_crc32(0, head, sizeof head);
    }
    int nt = f->n >= 8u * BLK ? hpt_get_threads() : 1;
    if (nt < 1) nt = 1;
    if (nt > 64) nt = 64;
    uint32_t rcrc[64];
    unsigned rmax[64];
    size_t rat[64], rbad[64];
    int nomem = 0;
    #pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (int t = 0; t < nt; t++) {
        size_t a = f->n / (size_t)nt * (size_t)t, b = t == nt - 1 ? f->n : f->n / (size_t)nt * (size_t)(t + 1);
        uint16_t *buf = malloc(BLK * sizeof *buf);
        uint32_t c = 0;
        unsigned m = 0;
        size_t at = 0, bad = (size_t)-1;
        if (!buf) {
            #pragma omp atomic write
            nomem = 1;
        }
        for (size_t i = a; buf && i < b; i += BLK) {
            size_t k = b - i < BLK ? b - i : BLK;
            if (!read_at(f->fd, buf, 2 * k, f->off + 2 * i)) { bad = i; break; }
            c = hpt_crc32(c, buf, 2 * k);
            unsigned bm = 0;
            for (size_t j = 0; j < k; j++) bm = buf[j] > bm ? buf[j] : bm;  /* vectorised */
            if (bm > m || i == a) {  /* a new largest id: where it first occurs (rare: a second look) */
                size_t j = 0;
                while (buf[j] != bm) j++;
                m = bm;
                at = i + j;
            }
        }
        free(buf);
        rcrc[t] = c; rmax[t] = m; rat[t] = at; rbad[t] = bad;
    }
    if (nomem) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    f->seen_max = -1;
    for (int t = 0; t < nt; t++) {
        size_t a = f->n / (size_t)nt * (size_t)t, b = t == nt - 1 ? f->n : f->n / (size_t)nt * (size_t)(t + 1);
        if (rbad[t] != (size_t)-1)
            return changed_under(f, f->off + 2 * rbad[t], 2 * (b - rbad[t] < BLK ? b - rbad[t] : BLK));
        if (b > a && (int)rmax[t] > f->seen_max) { f->seen_max = (int)rmax[t]; f->seen_at = rat[t]; }
        crc = (uint32_t)crc32_combine(crc, rcrc[t], (z_off_t)(2 * (b - a)));
    }
    f->crc = crc;
    return HPT_OK;
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
        s->manifest_vocab = 1;
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
            st = append_file(s, k, fp);
            if (st == HPT_OK) {
                shard_file *f = &s->f[k][s->nf[k] - 1];
                f->max_id = (int)max_id;
                f->n = (size_t)ntok;  /* checked against the file's header when opened */
            }
            continue;
        }
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < s->nf[j]; i++)
                if (!strcmp(base_name(s->f[j][i].path), file->valuestring)) s->f[j][i].max_id = (int)max_id;
    }
    if (st == HPT_OK && files) st = no_repeats(s, path);
    cJSON_Delete(m);
    return st;
}

/* ---------------------------------------------------------------- opening */

static int exists(const char *path, int dir) {
    struct stat sb;
    return stat(path, &sb) == 0 && (dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
}

/* hpt tokenize's own names: what it leaves in --out before the manifest
 * marks the directory complete (shard_write.c) */
static int six_digits(const char *p) {
    for (int i = 0; i < 6; i++) if (p[i] < '0' || p[i] > '9') return 0;
    return 1;
}

int hpt_shard_leftover_name(const char *name) {
    static const char *const pre[3] = {".part-", "shard_train_", "shard_val_"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(pre[k]);
        if (strncmp(name, pre[k], n) || !six_digits(name + n)) continue;
        const char *t = name + n + 6;
        if (k == 0) return !strcmp(t, ".tmp");
        return !strcmp(t, ".bin") || !strncmp(t, ".bin.tmp.", 9);  /* hpt_save_atomic's temp */
    }
    return !strncmp(name, HPT_SHARD_MANIFEST ".tmp.", strlen(HPT_SHARD_MANIFEST ".tmp."));
}

/* A directory without a manifest that holds hpt tokenize's part files or
 * shard names is an unfinished (interrupted, or still running) tokenize:
 * its shards are only those renamed in so far, and reading them as llm.c
 * shards would train on part of the corpus: refused. */
static hpt_status refuse_unfinished(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return HPT_OK;  /* the listing that follows says why */
    char first[300] = "";
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (hpt_shard_leftover_name(e->d_name) && n++ == 0) snprintf(first, sizeof first, "%s", e->d_name);
    closedir(d);
    if (!n) return HPT_OK;
    return hpt_fail(HPT_ERR_DATA, "directory '%s' is an unfinished hpt tokenize --out: it has no " HPT_SHARD_MANIFEST
                    " (written last, when every shard is in place) but %d of tokenize's files ('%s'%s). Run the same "
                    "hpt tokenize command again to finish it (it clears what the interrupted one left), or remove "
                    "the directory", dir, n, first, n > 1 ? ", ..." : "");
}

/* The files spec names, into s (no file opened yet). val_only (hpt eval):
 * a source of validation files alone is enough. */
static hpt_status find_files(hpt_shards *s, const char *spec, char *dir, size_t dir_n, int *manifest, int val_only) {
    char p[4400], esc[4300];
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
        HPT_TRY(refuse_unfinished(spec));
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
        HPT_TRY(add_dir_matches(s, spec, "*train*.bin", 0, &n));
        HPT_TRY(add_dir_matches(s, spec, "*val*.bin", 1, &n));
        if (!s->nf[0] && !s->nf[1])
            return hpt_fail(HPT_ERR_DATA, "directory '%s' holds no token shards: no " HPT_SHARD_MANIFEST " (hpt "
                            "tokenize --out), no nanoGPT train.bin, no llm.c *train*.bin / *val*.bin", spec);
        if (!s->nf[0] && !val_only) return hpt_fail(HPT_ERR_DATA, "directory '%s' has validation shards but no "
                                                    "train shards (*train*.bin)", spec);
        if (!s->nf[1]) return hpt_fail(HPT_ERR_DATA, "directory '%s' has train shards but no validation shards "
                                       "(*val*.bin)", spec);
        return HPT_OK;
    }
    /* a file or a glob: the directory of its (first) file holds the manifest, if any */
    const char *b = base_name(spec);
    snprintf(dir, dir_n, "%.*s", b == spec ? 1 : (int)(b - spec - 1), b == spec ? "." : spec);
    if (b != spec && b - spec == 1) snprintf(dir, dir_n, "/");
    snprintf(p, sizeof p, "%s/" HPT_SHARD_MANIFEST, dir);
    if (!exists(p, 0)) HPT_TRY(refuse_unfinished(dir));
    struct stat sb;
    int literal = stat(spec, &sb) == 0;  /* a path that exists is that file, whatever its characters */
    if (literal && is_nanogpt_name(spec)) {
        s->format = "nanoGPT";
        if (!strcmp(b, "val.bin") && val_only) return add_file(s, 1, spec);
        if (!strcmp(b, "val.bin"))
            return hpt_fail(HPT_ERR_DATA, "'%s' is validation data: pass its train.bin (or their directory)", spec);
        HPT_TRY(add_file(s, 0, spec));
        snprintf(p, sizeof p, "%s/val.bin", dir);
        if (!exists(p, 0)) return hpt_fail(HPT_ERR_DATA, "nanoGPT's '%s' needs val.bin beside it: '%s' is missing",
                                           spec, p);
        return add_file(s, 1, p);
    }
    s->format = "llm.c";
    if (literal) {
        HPT_TRY(add_match(s, spec, spec, -1));
        n = 1;
    } else HPT_TRY(add_glob(s, spec, -1, &n));
    if (n == 0) return hpt_fail(HPT_ERR_DATA, "no file matches '%s'", spec);
    if (!s->nf[0] && val_only) return HPT_OK;
    if (!s->nf[0])
        return hpt_fail(HPT_ERR_DATA, "'%s' names validation shards only: pass the train shards (*train*.bin; "
                        "the *val*.bin beside them are found) or their directory", spec);
    if (!s->nf[1]) {
        /* llm.c names a corpus's shards PREFIX_train_N.bin and PREFIX_val_N.bin;
         * a literal path's prefix is escaped, so that it names itself only */
        const char *t = strstr(b, "train");
        if (t) {
            if (literal) glob_escape(esc, sizeof esc, spec, (size_t)(t - spec));
            else snprintf(esc, sizeof esc, "%.*s", (int)(t - spec), spec);
            snprintf(p, sizeof p, "%sval*.bin", esc);
            HPT_TRY(add_glob(s, p, 1, &n));
        }
        if (!s->nf[1])
            return hpt_fail(HPT_ERR_DATA, "no validation shards for '%s'%s%s%s: llm.c's *val*.bin beside the train "
                            "shards, or a glob matching both", spec, t ? " (looked for '" : "", t ? p : "", t ? "')" : "");
    }
    return HPT_OK;
}

/* The files of one source, found, opened and read once (scan_file), the
 * vocabulary left to the caller. val_only: the train files are dropped
 * unopened (hpt eval reads validation only). */
static hpt_status open_files(hpt_shards *s, const char *spec, int val_only, char *dir, size_t dir_n, int *manifest) {
    HPT_TRY(find_files(s, spec, dir, dir_n, manifest, val_only));
    if (val_only) {
        for (int i = 0; i < s->nf[0]; i++) free(s->f[0][i].path);
        s->nf[0] = 0;
    }
    /* every shard stays open for the run: a corpus of more shards than the
     * soft limit on open files takes the hard limit (raising it is every
     * process's right; the default 1024 is a select() era relic) */
    struct rlimit rl;
    rlim_t need = (rlim_t)s->nf[0] + (rlim_t)s->nf[1] + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need &&
        rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->nf[k]; i++) {
            shard_file *f = &s->f[k][i];
            size_t listed = f->n;
            HPT_TRY(open_file(f, !strcmp(s->format, "nanoGPT") || is_nanogpt_name(f->path)));
            if (*manifest && f->n != listed)
                return hpt_fail(HPT_ERR_FORMAT, "shard '%s' holds %zu tokens, its manifest says %zu", f->path, f->n,
                                listed);
            HPT_TRY(scan_file(f));
            s->ntok[k] += f->n;
        }
    return HPT_OK;
}

hpt_status hpt_shards_open(hpt_shards **out, const char *spec, hpt_tokenizer_kind kind, int val_only) {
    *out = NULL;
    hpt_shards *s = calloc(1, sizeof *s);
    if (!s) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    char dir[4200], p[4300];
    int manifest;
    hpt_status st = open_files(s, spec, val_only, dir, sizeof dir, &manifest);
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
            const shard_file *f = &s->f[k][i];
            if (f->seen_max >= s->V)
                st = hpt_fail(HPT_ERR_DATA, "shard '%s': token id %d (at token %zu) is outside the %s tokenizer's "
                              "vocabulary of %d (made with another tokenizer?%s)", f->path, f->seen_max, f->seen_at,
                              hpt_tokenizer_names[s->kind], s->V, f->max_id >= 0 ? " its manifest says max_id "
                              "is within it: the shard changed after hpt tokenize wrote it" : "");
            else if (f->max_id >= 0 && f->seen_max > f->max_id)
                st = hpt_fail(HPT_ERR_DATA, "shard '%s' holds token id %d (at token %zu), past its manifest's max_id "
                              "%d: the shard changed after hpt tokenize wrote it, or the manifest is wrong",
                              f->path, f->seen_max, f->seen_at, f->max_id);
        }
    if (st != HPT_OK) { hpt_shards_free(s); return st; }
    *out = s;
    return HPT_OK;
}

void hpt_shards_free(hpt_shards *s) {
    if (!s) return;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < s->nf[k]; i++) {
            if (s->f[k][i].fd >= 0) close(s->f[k][i].fd);
            free(s->f[k][i].path);
        }
        free(s->f[k]);
        free(s->cum[k]);
    }
    free(s->cps);
    free(s->win);
    free(s);
}

/* ---------------------------------------------------------------- identity */

/* Every file in order, train then validation: its split and size (so that
 * a file moved between the splits, or bytes moved between files, differ),
 * then its bytes' CRC-32, combined into one CRC over that stream; then the
 * vocabulary when a manifest gives it (what the ids mean: a char manifest's
 * codepoints edited is other data, as a changed text file is). Without a
 * manifest the ids' tokenizer is --tokenizer, the run's own setting. */
static void identity_of(const hpt_shards *s, uint64_t *bytes, uint32_t *crc) {
    *bytes = 0;
    *crc = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->nf[k]; i++) {
            const shard_file *f = &s->f[k][i];
            unsigned char d[9];
            uint64_t sz = f->size;
            d[0] = (unsigned char)k;
            memcpy(d + 1, &sz, 8);
            *crc = hpt_crc32(*crc, d, sizeof d);
            *crc = (uint32_t)crc32_combine(*crc, f->crc, (z_off_t)f->size);
            *bytes += f->size;
        }
    if (s->manifest_vocab) {
        int32_t v[2] = {(int32_t)s->kind, s->V};
        *crc = hpt_crc32(*crc, v, sizeof v);
        if (s->cps) *crc = hpt_crc32(*crc, s->cps, (size_t)s->V * sizeof *s->cps);
    }
}

void hpt_shards_identity(const hpt_shards *s, uint64_t *bytes, uint32_t *crc) { identity_of(s, bytes, crc); }

hpt_status hpt_data_identity(const char *spec, uint64_t *bytes, uint32_t *crc) {
    *bytes = 0;
    *crc = 0;
    if (!hpt_data_is_shards(spec)) {
        /* a text file: its size and CRC-32, as hpt_text_load notes them
         * (streamed: the corpus is not held here) */
        int fd;
        size_t n;
        HPT_TRY(hpt_open_regular(spec, &fd, &n));
        enum { BLK = 1 << 20 };
        unsigned char *buf = malloc(BLK);
        hpt_status st = buf ? HPT_OK : hpt_fail(HPT_ERR_NOMEM, "out of memory");
        for (ssize_t r; st == HPT_OK && (r = read(fd, buf, BLK)) != 0;) {
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) st = hpt_fail(HPT_ERR_IO, "cannot read '%s': %s", spec, strerror(errno));
            else { *crc = hpt_crc32(*crc, buf, (size_t)r); *bytes += (uint64_t)r; }
        }
        free(buf);
        close(fd);
        return st;
    }
    hpt_shards *s = calloc(1, sizeof *s);
    if (!s) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    char dir[4200];
    int manifest;
    hpt_status st = open_files(s, spec, 0, dir, sizeof dir, &manifest);
    char p[4300];
    if (st == HPT_OK) snprintf(p, sizeof p, "%s/" HPT_SHARD_MANIFEST, dir);
    /* a manifest beside llm.c files: its vocabulary, as hpt_shards_open reads it */
    if (st == HPT_OK && !manifest && exists(p, 0)) st = read_manifest(s, dir, p, 0);
    if (st == HPT_OK) identity_of(s, bytes, crc);
    hpt_shards_free(s);
    return st;
}

const char *hpt_shards_format(const hpt_shards *s) { return s->format; }
size_t hpt_shards_tokens(const hpt_shards *s, int split) { return s->ntok[split]; }
int hpt_shards_files(const hpt_shards *s, int split) { return s->nf[split]; }

size_t hpt_shards_file_tokens(const hpt_shards *s, int split, int i) {
    HPT_ASSERT(i >= 0 && i < s->nf[split]);
    return s->f[split][i].n;
}

/* n ids from token off of a file into dst (ints), read as uint16 into
 * dst's upper half and widened front to back (dst[i] overwrites halves
 * 2i and 2i+1, never one still to be read: 2i + 1 <= n + i). */
static hpt_status read_ids(const hpt_shards *s, const shard_file *f, size_t off, size_t n, int *dst) {
    uint16_t *h = (uint16_t *)dst + n;
    size_t at = f->off + 2 * off;
    if (off + n > f->n || !read_at(f->fd, h, 2 * n, at)) return changed_under(f, at, 2 * n);
    for (size_t i = 0; i < n; i++) {
        int id = h[i];
        if (id >= s->V)
            return hpt_fail(HPT_ERR_DATA, "shard '%s': token id %d at token %zu is outside the vocabulary of %d: the "
                            "file changed after the run opened it (token shards must not be rewritten in place "
                            "while a run reads them)", f->path, id, off + i, s->V);
        dst[i] = id;
    }
    return HPT_OK;
}

hpt_status hpt_shards_read(const hpt_shards *s, int split, int i, size_t off, size_t n, int *dst) {
    HPT_ASSERT(i >= 0 && i < s->nf[split]);
    return read_ids(s, &s->f[split][i], off, n, dst);
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
    free(s->win);
    s->win = malloc(2 * ((size_t)T + 1) * sizeof *s->win);  /* read_ids widens in place: room for 2 halves */
    if (!s->win) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
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
static hpt_status window(hpt_shards *s, int k, size_t g, int T, int *x, int *y) {
    int lo = 0, hi = s->nf[k] - 1;
    while (lo < hi) {  /* the first shard whose cumulative count passes g */
        int mid = (lo + hi) / 2;
        if (s->cum[k][mid] > g) hi = mid; else lo = mid + 1;
    }
    const shard_file *f = &s->f[k][lo];
    size_t off = g - (lo ? s->cum[k][lo - 1] : 0);
    HPT_ASSERT(off + (size_t)T < f->n);
    HPT_TRY(read_ids(s, f, off, (size_t)T + 1, s->win));
    memcpy(x, s->win, (size_t)T * sizeof *x);
    memcpy(y, s->win + 1, (size_t)T * sizeof *y);
    return HPT_OK;
}

hpt_status hpt_shards_train_batch(hpt_shards *s, uint64_t *rng_state, int B, int T, int *x, int *y) {
    HPT_ASSERT(T == s->T);
    hpt_rng r = {*rng_state};
    for (int b = 0; b < B; b++)
        HPT_TRY(window(s, 0, (size_t)hpt_rng_below(&r, s->starts[0]), T, x + (size_t)b * T, y + (size_t)b * T));
    *rng_state = r.s;
    return HPT_OK;
}

hpt_status hpt_shards_val_batch(hpt_shards *s, int i, int n, int B, int T, int *x, int *y) {
    HPT_ASSERT(T == s->T);
    /* n*B windows spread evenly over every start of the validation shards,
     * as hpt_text_val_batch spreads them over its split */
    size_t W = (size_t)n * B, last = s->starts[1] - 1;
    for (int b = 0; b < B; b++) {
        size_t w = (size_t)i * B + b;
        size_t g = W > 1 ? (size_t)((unsigned __int128)last * w / (W - 1)) : 0;
        HPT_TRY(window(s, 1, g, T, x + (size_t)b * T, y + (size_t)b * T));
    }
    return HPT_OK;
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
    /* read in blocks, not mapped: a file truncated meanwhile ends the check
     * early instead of raising SIGBUS (the loader reads what is there) */
    enum { BLK = 1 << 20 };
    unsigned char *buf = malloc(BLK + 4);
    if (!buf) { close(fd); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    size_t have = 0, base = 0, bad = (size_t)-1;
    int nul = 0, eof = 0;
    hpt_status st = HPT_OK;
    while (st == HPT_OK && bad == (size_t)-1 && !eof) {
        ssize_t r = read(fd, buf + have, BLK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { st = hpt_fail(HPT_ERR_IO, "cannot read '%s': %s", path, strerror(errno)); break; }
        eof = r == 0;
        have += (size_t)r;
        size_t i = 0;
        while (i < have) {
            uint32_t cp;
            int len = hpt_utf8_valid_at(buf, have, i, &cp);
            if (len == 0 && !eof && have - i < 4) break;  /* a sequence the next block completes */
            if (len == 0 || cp == 0) { bad = base + i; nul = len != 0; break; }
            i += (size_t)len;
        }
        memmove(buf, buf + i, have - i);
        base += i;
        have -= i;
    }
    free(buf);
    if (st == HPT_OK && bad != (size_t)-1) {
        int32_t head[3] = {0};
        if (n < sizeof head || pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head) memset(head, 0, sizeof head);
        const char *hint =
            head[0] == HPT_SHARD_MAGIC ? "; it starts like an llm.c token shard (magic 20240520): pass shards as "
                                         "--data FILE.bin, a glob of them or their directory" :
            nul && n % 2 == 0 ? "; if it holds nanoGPT's uint16 token ids, name it train.bin (val.bin beside it) "
                                "and pass it as --data" : "";
        st = hpt_fail(HPT_ERR_DATA, "data file '%s' is not text for the %s tokenizer: %s at byte %zu%s (--tokenizer "
                      "byte takes any bytes)", path, hpt_tokenizer_names[kind],
                      nul ? "a NUL byte" : "invalid UTF-8", bad, hint);
    }
    close(fd);
    return st;
}
