/*
 * shard_write.c — `hpt tokenize --out DIR`: text files into llm.c token
 * shards and a manifest (include/hpt.h, hpt_tokenize_shards), so that a big
 * corpus is tokenised once instead of at the start of every run.
 *
 * Threads: the input is cut into chunks of about CHUNK bytes, at document
 * boundaries or at points where the tokenizer's output cannot depend on the
 * cut (below), by one sequential scan that does not depend on the thread
 * count. Rounds of chunks are encoded in parallel, each into its own buffer,
 * then appended in chunk order: the shards are the same bytes at any
 * --threads. gpt2's encoder keeps a piece cache, so each thread has its own.
 *
 * Validation: the first N tokens (the val shard), then train shards. With
 * the default N (a tenth, at most one shard) the total must be known first:
 * the tokens stream into numbered part files, and at the end the first part
 * is split in two (at most one shard rewritten) and the others renamed.
 *
 * Complete or unfinished: the manifest is written last and marks the
 * directory complete; the reader refuses a directory holding tokenize's
 * names without it (shards.c). A failed tokenize removes what it wrote; one
 * killed leaves its files, and running it again clears them (only names of
 * its own, in a directory without a manifest) and starts over. A lock on
 * the directory keeps a second tokenize from clearing a running one's.
 *
 * Inputs are mapped. A file truncated while mapped raises SIGBUS on the next
 * read past its new end; every read of a mapping runs under a guard
 * (bus_guard below) that turns it into an error naming the file, so the
 * part files are removed and the exit is a status, not a signal. The
 * tokenizers read a private copy of each chunk: the guard never jumps out
 * of the encoder's own state.
 */
#include "shards.h"

#include "../base/base.h"
#include "bpe.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define CHUNK (256u << 10)          /* bytes per chunk: enough rounds for 2 threads on 1 MB */
#define SEP_LOOKAHEAD (64u << 10)   /* a document boundary this close past a chunk's target is preferred */
#define WBUF 65536                  /* ids buffered per write */
/* At most this many shards from one tokenize: training holds every shard
 * open, and each is a 1 KiB header and an fsync (--shard-tokens 2 had
 * made 150,000 files of 300 KB and not finished in a minute). */
#define MAX_SHARDS 10000

void hpt_tokenize_options_default(hpt_tokenize_options *o) {
    *o = (hpt_tokenize_options){.tokenizer = HPT_TOK_GPT2, .shard_tokens = 100000000, .val_tokens = -1};
}

typedef struct src_file { char *path; const unsigned char *m; size_t n; struct timespec mtime; dev_t dev; ino_t ino; } src_file;
/* bytes [a, b) of a file; cont: it starts inside a document (no EOT before it) */
typedef struct chunk { int file, cont; size_t a, b; } chunk;

typedef struct out_ids { int *ids; size_t n, cap; int bad; uint32_t crc; int docs; } out_ids;

typedef struct part { size_t n; int max_id; } part;

typedef struct job {
    const hpt_tokenize_options *o;
    src_file *files;
    int nfiles;
    chunk *chunks;
    size_t nchunks, chunks_cap;
    unsigned char *sep;
    size_t seplen;
    int eot;                  /* -1: the tokenizer has none */
    hpt_bpe **bpe;            /* gpt2: one per thread */
    int32_t *char_id;         /* char: codepoint -> id (-1 absent), 0x110000 entries */
    uint32_t *cps;
    int V;
    /* the part files */
    char dir[4096];
    int fd, nparts;
    part *parts;
    uint16_t buf[WBUF];
    size_t nbuf;
} job;

static void part_path(const job *j, int k, char *p, size_t n) { snprintf(p, n, "%s/.part-%06d.tmp", j->dir, k); }

/* ---------------------------------------------------------------- SIGBUS guard */

/* The guarded region of this thread (NULL: none). Only plain loads of a
 * mapping, memcpy, memmem and zlib's crc32 run inside one: none holds a
 * lock or leaves state half-made when the handler jumps out of it. */
static _Thread_local sigjmp_buf *bus_jmp;
static struct sigaction bus_prev;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    sigjmp_buf *jb = bus_jmp;
    if (jb && si->si_code > 0) {  /* a fault in a guarded read (not a kill -BUS) */
        bus_jmp = NULL;
        siglongjmp(*jb, 1);
    }
    /* not ours: the disposition before ours; a fault re-runs its load and
     * meets it, a signal sent is sent again */
    sigaction(SIGBUS, &bus_prev, NULL);
    if (si->si_code <= 0) raise(sig);
    (void)uc;
}

/* Installed while any tokenize runs in the process (two from two threads
 * share one installation: the first saves the disposition before, the
 * last puts it back, so bus_prev is never the handler itself). */
static pthread_mutex_t bus_lock = PTHREAD_MUTEX_INITIALIZER;
static int bus_users;

static void bus_install(void) {
    pthread_mutex_lock(&bus_lock);
    if (bus_users++ == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &bus_prev);
    }
    pthread_mutex_unlock(&bus_lock);
}

static void bus_uninstall(void) {
    pthread_mutex_lock(&bus_lock);
    if (--bus_users == 0) sigaction(SIGBUS, &bus_prev, NULL);
    pthread_mutex_unlock(&bus_lock);
}

/* Arms the guard with jb: 0 now, 1 when a guarded read faulted (then
 * disarmed). A macro: sigsetjmp must run in the frame the jump returns to. */
#define BUS_GUARD(jb) (bus_jmp = &(jb), sigsetjmp(jb, 1))
#define BUS_UNGUARD() (bus_jmp = NULL)

/* the error for input f, truncated while it was read */
static hpt_status input_changed(const src_file *f);

/* An input whose size or mtime moved since it was mapped: its error, else
 * OK. A file truncated inside its last page reads as zeros there, not
 * SIGBUS, and looks like bad text: this names the real cause. */
static hpt_status inputs_unchanged(const job *j) {
    for (int i = 0; i < j->nfiles; i++) {
        struct stat sb;
        const src_file *f = &j->files[i];
        if (stat(f->path, &sb) != 0 || (size_t)sb.st_size != f->n || sb.st_mtim.tv_sec != f->mtime.tv_sec ||
            sb.st_mtim.tv_nsec != f->mtime.tv_nsec)
            return input_changed(f);
    }
    return HPT_OK;
}

static hpt_status input_changed(const src_file *f) {
    struct stat sb;
    long long now = stat(f->path, &sb) == 0 ? (long long)sb.st_size : -1;
    return hpt_fail(HPT_ERR_DATA, "input '%s' changed while hpt tokenize read it: it is now %lld bytes, %zu when "
                    "opened (truncated or rewritten in place); nothing was written", f->path, now, f->n);
}

/* ---------------------------------------------------------------- input */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static hpt_status add_input(job *j, const char *path) {
    src_file *f = realloc(j->files, (size_t)(j->nfiles + 1) * sizeof *f);
    if (!f) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    j->files = f;
    f += j->nfiles++;
    *f = (src_file){.path = strdup(path)};
    if (!f->path) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    int fd;
    HPT_TRY(hpt_open_regular(path, &fd, &f->n));
    struct stat sb;
    if (fstat(fd, &sb) == 0) { f->mtime = sb.st_mtim; f->dev = sb.st_dev; f->ino = sb.st_ino; }
    if (f->n) {
        void *m = mmap(NULL, f->n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) { int e = errno; close(fd); return hpt_fail(HPT_ERR_IO, "cannot map '%s': %s", path, strerror(e)); }
        madvise(m, f->n, MADV_SEQUENTIAL);
        f->m = m;
    }
    close(fd);
    return HPT_OK;
}

/* A directory: its regular files (not hidden), in name order, not recursing. */
static hpt_status add_dir(job *j, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return hpt_fail(HPT_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    hpt_status st = HPT_OK;
    for (struct dirent *e; st == HPT_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[4400];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (nn) names = nn;
        if (!nn || !(names[n++] = strdup(p))) st = hpt_fail(HPT_ERR_NOMEM, "out of memory");
    }
    closedir(d);
    if (st == HPT_OK && n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (st == HPT_OK && names[i]) st = add_input(j, names[i]);
        free(names[i]);
    }
    free(names);
    if (st == HPT_OK && n == 0) st = hpt_fail(HPT_ERR_DATA, "directory '%s' holds no files to tokenize", dir);
    return st;
}

/* --doc-sep's C escapes */
static hpt_status unescape(const char *s, unsigned char **out, size_t *n) {
    *out = malloc(strlen(s) + 1);
    if (!*out) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (const char *p = s; *p; p++) {
        if (*p != '\\') { (*out)[k++] = (unsigned char)*p; continue; }
        p++;
        if (*p == 'n') (*out)[k++] = '\n';
        else if (*p == 't') (*out)[k++] = '\t';
        else if (*p == 'r') (*out)[k++] = '\r';
        else if (*p == '\\') (*out)[k++] = '\\';
        else return hpt_fail(HPT_ERR_ARG, "--doc-sep '%s': unknown escape (\\n \\t \\r \\\\ are known)", s);
    }
    *n = k;
    return HPT_OK;
}

/* ---------------------------------------------------------------- chunks */

static int ascii_word(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? 1 : c >= '0' && c <= '9'; }

/* A cut at p changes no token: gpt2's pre-tokenizer ends every piece at a
 * space that follows a printable ASCII byte, and a space before an ASCII
 * letter or digit starts one (" word") whatever came before (bpe.c's
 * piece_end only looks forward); char and byte need whole codepoints only.
 * No separator may straddle it. */
static int cut_ok(const job *j, const unsigned char *m, size_t n, size_t p) {
    if (p == 0 || p + 1 >= n) return 0;
    if (j->o->tokenizer == HPT_TOK_GPT2 && !(m[p] == ' ' && m[p - 1] > ' ' && m[p - 1] < 0x7F && ascii_word(m[p + 1])))
        return 0;
    if (j->o->tokenizer == HPT_TOK_CHAR && (m[p] & 0xC0) == 0x80) return 0;
    if (j->seplen) {
        size_t lo = p >= j->seplen ? p - j->seplen + 1 : 0, hi = p + j->seplen < n ? p + j->seplen : n;
        if (hi > lo && memmem(m + lo, hi - lo, j->sep, j->seplen)) return 0;
    }
    return 1;
}

static hpt_status push_chunk(job *j, int file, int cont, size_t a, size_t b) {
    if (j->nchunks == j->chunks_cap) {
        size_t cap = j->chunks_cap ? 2 * j->chunks_cap : 1024;
        chunk *c = realloc(j->chunks, cap * sizeof *c);
        if (!c) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
        j->chunks = c;
        j->chunks_cap = cap;
    }
    j->chunks[j->nchunks++] = (chunk){.file = file, .cont = cont, .a = a, .b = b};
    return HPT_OK;
}

static hpt_status make_chunks(job *j) {
    volatile int cur = 0;  /* the file being read, for the message after a fault */
    sigjmp_buf jb;
    if (BUS_GUARD(jb)) return input_changed(&j->files[cur]);
    for (int fi = 0; fi < j->nfiles; fi++) {
        cur = fi;
        const unsigned char *m = j->files[fi].m;
        size_t n = j->files[fi].n, a = 0;
        int cont = 0;
        while (a < n) {
            size_t t = a + CHUNK, b = n;
            int next_cont = 0;
            if (t < n) {
                const unsigned char *q = j->seplen ? memmem(m + t, (n - t < SEP_LOOKAHEAD ? n - t : SEP_LOOKAHEAD),
                                                            j->sep, j->seplen) : NULL;
                if (q) b = (size_t)(q - m) + j->seplen;  /* after a separator: a new document */
                else {
                    for (b = t; b < n && !cut_ok(j, m, n, b); b++) {}
                    next_cont = b < n;
                }
            }
            hpt_status st = push_chunk(j, fi, cont, a, b);
            if (st != HPT_OK) { BUS_UNGUARD(); return st; }
            a = b;
            cont = next_cont;
        }
    }
    BUS_UNGUARD();
    return HPT_OK;
}

/* ---------------------------------------------------------------- encoding */

static int text_ok(const job *j, const unsigned char *m, size_t a, size_t b, size_t n) {
    if (j->o->tokenizer == HPT_TOK_BYTE) return 1;
    for (size_t i = a; i < b;) {
        uint32_t cp;
        int len = hpt_utf8_valid_at(m, n, i, &cp);
        if (len == 0 || cp == 0) return 0;
        i += (size_t)len;
    }
    return 1;
}

static int push(out_ids *o, int id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 4096;
        int *p = realloc(o->ids, cap * sizeof *p);
        if (!p) return 0;
        o->ids = p;
        o->cap = cap;
    }
    o->ids[o->n++] = id;
    return 1;
}

/* One chunk's ids into o (o->bad: 1 not text, 2 out of memory, 3 the
 * input truncated under its mapping), encoded from a private copy of the
 * chunk (*copy, grown as needed): only the copy reads the mapping. */
static void encode_chunk(const job *j, const chunk *c, int tid, out_ids *o, unsigned char **copy, size_t *copy_cap) {
    const src_file *f = &j->files[c->file];
    o->n = 0; o->bad = 0; o->docs = 0;
    const size_t len = c->b - c->a;
    if (len > *copy_cap) {
        unsigned char *p = realloc(*copy, len);
        if (!p) { o->bad = 2; return; }
        *copy = p;
        *copy_cap = len;
    }
    sigjmp_buf jb;
    if (BUS_GUARD(jb)) { o->bad = 3; return; }
    memcpy(*copy, f->m + c->a, len);
    BUS_UNGUARD();
    const unsigned char *m = *copy;
    o->crc = hpt_crc32(0, m, len);
    /* chunks end at whole codepoints (make_chunks' cuts): a copy's end is
     * the file's end for the checks */
    if (!text_ok(j, m, 0, len, len)) { o->bad = 1; return; }
    for (size_t pos = 0; pos < len;) {
        const unsigned char *q = j->seplen ? memmem(m + pos, len - pos, j->sep, j->seplen) : NULL;
        size_t e = q ? (size_t)(q - m) : len;
        if (e > pos) {
            int starts = !(pos == 0 && c->cont);  /* a document's first piece */
            o->docs += starts;
            if (starts && j->eot >= 0 && !push(o, j->eot)) { o->bad = 2; return; }
            if (j->o->tokenizer == HPT_TOK_GPT2) {
                if (hpt_bpe_encode(j->bpe[tid], m + pos, e - pos, &o->ids, &o->n, &o->cap) != HPT_OK) {
                    o->bad = 2;
                    return;
                }
            } else if (j->o->tokenizer == HPT_TOK_BYTE) {
                for (size_t i = pos; i < e; i++) if (!push(o, m[i])) { o->bad = 2; return; }
            } else {
                for (size_t i = pos; i < e;) {
                    uint32_t cp;
                    i += (size_t)hpt_utf8_valid_at(m, len, i, &cp);
                    if (!push(o, j->char_id[cp])) { o->bad = 2; return; }
                }
            }
        }
        pos = q ? e + j->seplen : len;
    }
}

/* One chunk's codepoints into the set s: 0, or 1 not text, 3 the input
 * truncated under its mapping. */
static int chunk_chars(const job *j, const chunk *c, uint64_t *s) {
    const src_file *f = &j->files[c->file];
    sigjmp_buf jb;
    if (BUS_GUARD(jb)) return 3;
    if (!text_ok(j, f->m, c->a, c->b, f->n)) { BUS_UNGUARD(); return 1; }
    for (size_t i = c->a; i < c->b;) {
        uint32_t cp;
        i += (size_t)hpt_utf8_valid_at(f->m, f->n, i, &cp);
        s[cp / 64] |= 1ull << (cp % 64);
    }
    BUS_UNGUARD();
    return 0;
}

/* char: the corpus's codepoints (every chunk checked as text on the way) */
static hpt_status char_vocab(job *j, int nt) {
    size_t words = 0x110000 / 64;
    uint64_t *seen = calloc((size_t)nt * words, sizeof *seen);
    j->char_id = malloc(0x110000 * sizeof *j->char_id);
    if (!seen || !j->char_id) { free(seen); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    long long bad = LLONG_MAX;  /* the first chunk that is not text */
    long long gone = LLONG_MAX;  /* the first chunk whose input was truncated under its mapping */
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(min: bad, gone)
    for (long long ci = 0; ci < (long long)j->nchunks; ci++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        int r = chunk_chars(j, &j->chunks[ci], seen + (size_t)tid * words);
        if (r == 1 && ci < bad) bad = ci;
        if (r == 3 && ci < gone) gone = ci;
    }
    if (gone != LLONG_MAX) {
        free(seen);
        return input_changed(&j->files[j->chunks[gone].file]);
    }
    if (bad != LLONG_MAX) {
        free(seen);
        HPT_TRY(inputs_unchanged(j));
        const char *path = j->files[j->chunks[bad].file].path;
        hpt_status st = hpt_text_file_check(path, HPT_TOK_CHAR);
        return st != HPT_OK ? st : hpt_fail(HPT_ERR_DATA, "'%s' is not text", path);
    }
    int V = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        int on = 0;
        for (int t = 0; t < nt; t++) on |= (int)(seen[(size_t)t * words + cp / 64] >> (cp % 64) & 1);
        j->char_id[cp] = on ? V++ : -1;
    }
    free(seen);
    if (V > 65535) return hpt_fail(HPT_ERR_DATA, "the corpus has %d distinct characters: shards hold uint16 ids, "
                                   "at most 65535 (use --tokenizer gpt2)", V);
    if (V < 2) return hpt_fail(HPT_ERR_DATA, "the corpus has %d distinct character(s): nothing to learn", V);
    j->cps = malloc((size_t)V * sizeof *j->cps);
    if (!j->cps) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    for (uint32_t cp = 0; cp < 0x110000; cp++) if (j->char_id[cp] >= 0) j->cps[j->char_id[cp]] = cp;
    j->V = V;
    return HPT_OK;
}

/* ---------------------------------------------------------------- part files */

static hpt_status write_all(int fd, const void *p, size_t n, const char *path) {
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return hpt_fail(HPT_ERR_IO, "cannot write '%s': %s", path, w < 0 ? strerror(errno) : "short write");
        b += w;
        n -= (size_t)w;
    }
    return HPT_OK;
}

static void header(int32_t h[256], size_t n) {
    memset(h, 0, 256 * sizeof *h);
    h[0] = HPT_SHARD_MAGIC;
    h[1] = HPT_SHARD_VERSION;
    h[2] = (int32_t)n;
}

static hpt_status flush_buf(job *j) {
    if (!j->nbuf) return HPT_OK;
    char p[4200];
    part_path(j, j->nparts - 1, p, sizeof p);
    HPT_TRY(write_all(j->fd, j->buf, j->nbuf * sizeof *j->buf, p));
    j->nbuf = 0;
    return HPT_OK;
}

/* The open part's header written and synced. */
static hpt_status close_part(job *j) {
    if (j->fd < 0) return HPT_OK;
    char p[4200];
    part_path(j, j->nparts - 1, p, sizeof p);
    hpt_status st = flush_buf(j);
    int32_t h[256];
    header(h, j->parts[j->nparts - 1].n);
    if (st == HPT_OK && pwrite(j->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        st = hpt_fail(HPT_ERR_IO, "cannot write '%s': %s", p, strerror(errno));
    if (st == HPT_OK && fsync(j->fd) != 0) st = hpt_fail(HPT_ERR_IO, "cannot fsync '%s': %s", p, strerror(errno));
    if (close(j->fd) != 0 && st == HPT_OK) st = hpt_fail(HPT_ERR_IO, "cannot close '%s': %s", p, strerror(errno));
    j->fd = -1;
    return st;
}

static hpt_status too_many_shards(const job *j) {
    return hpt_fail(HPT_ERR_ARG, "--shard-tokens %zu makes more than %d shards of this input: give a larger "
                    "--shard-tokens (training holds every shard open)", j->o->shard_tokens, MAX_SHARDS);
}

/* Before any work, where the token count has a floor: a byte is a token
 * under byte, a UTF-8 character (1 to 4 bytes) under char. gpt2's tokens
 * have no useful floor: emit's count is its only check. */
static hpt_status check_shard_count(const job *j) {
    size_t bytes = 0;
    for (int i = 0; i < j->nfiles; i++) bytes += j->files[i].n;
    size_t floor = j->o->tokenizer == HPT_TOK_BYTE ? bytes : j->o->tokenizer == HPT_TOK_CHAR ? bytes / 4 : 0;
    return floor / j->o->shard_tokens > MAX_SHARDS ? too_many_shards(j) : HPT_OK;
}

static hpt_status emit(job *j, int id) {
    if (j->fd < 0 || j->parts[j->nparts - 1].n == j->o->shard_tokens) {
        if (j->nparts >= MAX_SHARDS + 1) return too_many_shards(j);  /* the validation split may take one more */
        HPT_TRY(close_part(j));
        part *pp = realloc(j->parts, (size_t)(j->nparts + 1) * sizeof *pp);
        if (!pp) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
        j->parts = pp;
        j->parts[j->nparts++] = (part){0, 0};
        char p[4200];
        part_path(j, j->nparts - 1, p, sizeof p);
        j->fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (j->fd < 0) return hpt_fail(HPT_ERR_IO, "cannot create '%s': %s", p, strerror(errno));
        int32_t h[256];
        header(h, 0);  /* the count is written when the part closes */
        HPT_TRY(write_all(j->fd, h, sizeof h, p));
    }
    part *pt = &j->parts[j->nparts - 1];
    pt->n++;
    if (id > pt->max_id) pt->max_id = id;
    j->buf[j->nbuf++] = (uint16_t)id;
    return j->nbuf == WBUF ? flush_buf(j) : HPT_OK;
}

/* ---------------------------------------------------------------- the final files */

typedef struct span_ctx { const uint16_t *ids; size_t n; } span_ctx;

static hpt_status write_span(FILE *f, void *ctx) {
    span_ctx *c = ctx;
    int32_t h[256];
    header(h, c->n);
    if (fwrite(h, sizeof h, 1, f) != 1 || fwrite(c->ids, 2, c->n, f) != c->n)
        return hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(errno));
    return HPT_OK;
}

static int span_max(const uint16_t *p, size_t n) {
    unsigned m = 0;
    for (size_t i = 0; i < n; i++) m = p[i] > m ? p[i] : m;
    return (int)m;
}

typedef struct final { char name[64]; int split; size_t n; int max_id; } final;

/* Part 0 split into the val shard and the first train shard (nval of its
 * tokens stay validation), the other parts renamed train shards. *nout:
 * the shards in place so far, also on failure (the caller removes them). */
static hpt_status finish_parts(job *j, size_t nval, final *out, int *nout) {
    char p[4200], q[4300];
    int k = 0;
    *nout = 0;
    if (nval == j->parts[0].n) {
        part_path(j, 0, p, sizeof p);
        out[k] = (final){.split = 1, .n = nval, .max_id = j->parts[0].max_id};
        snprintf(out[k].name, sizeof out[k].name, "shard_val_000000.bin");
        snprintf(q, sizeof q, "%s/%s", j->dir, out[k++].name);
        if (rename(p, q) != 0) return hpt_fail(HPT_ERR_IO, "cannot rename '%s' to '%s': %s", p, q, strerror(errno));
        *nout = k;
    } else {
        part_path(j, 0, p, sizeof p);
        int fd;
        size_t size;
        HPT_TRY(hpt_open_regular(p, &fd, &size));
        unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) return hpt_fail(HPT_ERR_IO, "cannot map '%s': %s", p, strerror(errno));
        const uint16_t *ids = (const uint16_t *)(m + HPT_SHARD_HEADER_BYTES);
        span_ctx sc[2] = {{ids, nval}, {ids + nval, j->parts[0].n - nval}};
        hpt_status st = HPT_OK;
        for (int s = 0; st == HPT_OK && s < 2; s++) {
            out[k] = (final){.split = !s, .n = sc[s].n, .max_id = span_max(sc[s].ids, sc[s].n)};
            snprintf(out[k].name, sizeof out[k].name, s ? "shard_train_000000.bin" : "shard_val_000000.bin");
            snprintf(q, sizeof q, "%s/%s", j->dir, out[k++].name);
            st = hpt_save_atomic(q, write_span, &sc[s]);
            if (st == HPT_OK) *nout = k;
        }
        munmap(m, size);
        if (st != HPT_OK) return st;
        unlink(p);
    }
    for (int i = 1; i < j->nparts; i++) {
        part_path(j, i, p, sizeof p);
        out[k] = (final){.split = 0, .n = j->parts[i].n, .max_id = j->parts[i].max_id};
        snprintf(out[k].name, sizeof out[k].name, "shard_train_%06d.bin", i);
        snprintf(q, sizeof q, "%s/%s", j->dir, out[k++].name);
        if (rename(p, q) != 0) return hpt_fail(HPT_ERR_IO, "cannot rename '%s' to '%s': %s", p, q, strerror(errno));
        *nout = k;
    }
    return HPT_OK;
}

typedef struct manifest_ctx {
    const job *j;
    const char *const *inputs;
    int ninputs;
    const final *fin;
    int nfin;
    const hpt_tokenize_result *res;
    uint32_t crc;
} manifest_ctx;

static hpt_status write_manifest(FILE *f, void *ctx) {
    const manifest_ctx *c = ctx;
    const job *j = c->j;
    cJSON *m = cJSON_CreateObject(), *a;
    int max_id = 0;
    for (int i = 0; i < c->nfin; i++) max_id = c->fin[i].max_id > max_id ? c->fin[i].max_id : max_id;
    cJSON_AddStringToObject(m, "format", "hpt-shards");
    cJSON_AddNumberToObject(m, "version", 1);
    cJSON_AddStringToObject(m, "tokenizer", hpt_tokenizer_names[j->o->tokenizer]);
    cJSON_AddNumberToObject(m, "vocab_size", j->V);
    if (j->eot >= 0) cJSON_AddNumberToObject(m, "eot", j->eot); else cJSON_AddNullToObject(m, "eot");
    if (j->cps) {
        a = cJSON_AddArrayToObject(m, "codepoints");
        for (int i = 0; i < j->V; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(j->cps[i]));
    }
    cJSON_AddNumberToObject(m, "max_id", max_id);
    cJSON *t = cJSON_AddObjectToObject(m, "tokens");
    cJSON_AddNumberToObject(t, "train", (double)c->res->tokens[0]);
    cJSON_AddNumberToObject(t, "val", (double)c->res->tokens[1]);
    cJSON_AddNumberToObject(m, "shard_tokens", (double)j->o->shard_tokens);
    cJSON_AddNumberToObject(m, "documents", c->res->documents);
    if (j->seplen) cJSON_AddStringToObject(m, "doc_sep", j->o->doc_sep); else cJSON_AddNullToObject(m, "doc_sep");
    cJSON *s = cJSON_AddObjectToObject(m, "source");
    a = cJSON_AddArrayToObject(s, "inputs");
    for (int i = 0; i < c->ninputs; i++) cJSON_AddItemToArray(a, cJSON_CreateString(c->inputs[i]));
    cJSON_AddNumberToObject(s, "files", j->nfiles);
    cJSON_AddNumberToObject(s, "bytes", (double)c->res->bytes);
    cJSON_AddNumberToObject(s, "crc32", c->crc);
    a = cJSON_AddArrayToObject(m, "shards");
    for (int i = 0; i < c->nfin; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "file", c->fin[i].name);
        cJSON_AddStringToObject(e, "split", c->fin[i].split ? "val" : "train");
        cJSON_AddNumberToObject(e, "tokens", (double)c->fin[i].n);
        cJSON_AddNumberToObject(e, "max_id", c->fin[i].max_id);
        cJSON_AddItemToArray(a, e);
    }
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    if (!text) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    free(text);
    return ok ? HPT_OK : hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(errno));
}

/* ---------------------------------------------------------------- the whole */

/* --out: made if new, locked (*lock: its descriptor, held until the end),
 * and empty but for what an unfinished tokenize left there, which is
 * removed: a tokenize killed part-way is finished by running it again. A
 * directory with a manifest is a finished tokenisation, and anything else
 * in it is the user's: both refused, nothing touched. */
static hpt_status check_out_dir(const job *j, const char *dir, int *lock) {
    *lock = -1;
    struct stat sb;
    if (stat(dir, &sb) != 0 && errno == ENOENT) HPT_TRY(hpt_mkdir_p(dir));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", dir, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? hpt_fail(HPT_ERR_IO, "--out '%s': another hpt tokenize is writing into it", dir)
                                : hpt_fail(HPT_ERR_IO, "cannot lock '%s': %s", dir, strerror(e));
    }
    DIR *d = fdopendir(dup(fd));
    if (!d) { int e = errno; close(fd); return hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", dir, strerror(e)); }
    int finished = 0, other = 0, left = 0;
    char first[300] = "";
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        /* an input inside --out is the user's, whatever its name: never cleared */
        int input = 0;
        struct stat es;
        if (hpt_shard_leftover_name(e->d_name) && fstatat(fd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0)
            for (int i = 0; i < j->nfiles; i++) input |= es.st_dev == j->files[i].dev && es.st_ino == j->files[i].ino;
        if (!strcmp(e->d_name, HPT_SHARD_MANIFEST)) finished = 1;
        else if (hpt_shard_leftover_name(e->d_name) && !input) left++;
        else if (other++ == 0) snprintf(first, sizeof first, "%s", e->d_name);
    }
    hpt_status st = HPT_OK;
    if (finished)
        st = hpt_fail(HPT_ERR_ARG, "--out '%s' already holds a finished tokenisation (" HPT_SHARD_MANIFEST "): pass "
                      "a new or empty directory, or remove it first", dir);
    else if (other)
        st = hpt_fail(HPT_ERR_ARG, "--out '%s' is not empty (it holds '%s'%s): hpt tokenize writes its shards into a "
                      "new or empty directory", dir, first, other > 1 ? " and more" : "");
    if (st == HPT_OK && left) {
        /* an interrupted tokenize's part files and shards: cleared, this run starts over */
        rewinddir(d);
        for (struct dirent *e; st == HPT_OK && (e = readdir(d));)
            if (hpt_shard_leftover_name(e->d_name) && unlinkat(fd, e->d_name, 0) != 0 && errno != ENOENT)
                st = hpt_fail(HPT_ERR_IO, "cannot remove '%s/%s' (left by an unfinished hpt tokenize): %s", dir,
                              e->d_name, strerror(errno));
    }
    closedir(d);
    if (st != HPT_OK) { close(fd); return st; }
    *lock = fd;
    return HPT_OK;
}

/* Every chunk in rounds: encoded in parallel, appended in order. */
static hpt_status encode_all(job *j, int nt, hpt_tokenize_result *res, uint32_t *crc) {
    size_t round = (size_t)nt * 4;
    out_ids *o = calloc(round, sizeof *o);
    unsigned char **copy = calloc((size_t)nt, sizeof *copy);  /* each thread's chunk copy */
    size_t *copy_cap = calloc((size_t)nt, sizeof *copy_cap);
    if (!o || !copy || !copy_cap) { free(o); free(copy); free(copy_cap); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    hpt_status st = HPT_OK;
    *crc = 0;
    for (size_t r0 = 0; st == HPT_OK && r0 < j->nchunks; r0 += round) {
        size_t r1 = r0 + round < j->nchunks ? r0 + round : j->nchunks;
        #pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (long long ci = (long long)r0; ci < (long long)r1; ci++) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            encode_chunk(j, &j->chunks[ci], tid, &o[ci - (long long)r0], &copy[tid], &copy_cap[tid]);
        }
        for (size_t ci = r0; st == HPT_OK && ci < r1; ci++) {
            const out_ids *c = &o[ci - r0];
            const chunk *ch = &j->chunks[ci];
            if (c->bad == 1 && (st = inputs_unchanged(j)) != HPT_OK) break;
            if (c->bad == 1) {
                st = hpt_text_file_check(j->files[ch->file].path, j->o->tokenizer);
                if (st == HPT_OK) st = hpt_fail(HPT_ERR_DATA, "'%s' is not text", j->files[ch->file].path);
                break;
            }
            if (c->bad == 3) { st = input_changed(&j->files[ch->file]); break; }
            if (c->bad) { st = hpt_fail(HPT_ERR_NOMEM, "out of memory tokenizing '%s'", j->files[ch->file].path); break; }
            *crc = (uint32_t)crc32_combine(*crc, c->crc, (z_off_t)(ch->b - ch->a));
            res->bytes += ch->b - ch->a;
            res->documents += c->docs;
            for (size_t i = 0; st == HPT_OK && i < c->n; i++) st = emit(j, c->ids[i]);
        }
    }
    for (size_t i = 0; i < round; i++) free(o[i].ids);
    free(o);
    for (int t = 0; t < nt; t++) free(copy[t]);
    free(copy);
    free(copy_cap);
    if (st == HPT_OK) st = close_part(j);
    /* the shards hold what the inputs were throughout, or nothing */
    if (st == HPT_OK) st = inputs_unchanged(j);
    return st;
}

hpt_status hpt_tokenize_shards(const char *out_dir, const char *const *inputs, int n_inputs,
                               const hpt_tokenize_options *o, hpt_tokenize_result *res) {
    *res = (hpt_tokenize_result){{0, 0}, {0, 0}, 0, 0};
    if (o->tokenizer != HPT_TOK_BYTE && o->tokenizer != HPT_TOK_CHAR && o->tokenizer != HPT_TOK_GPT2)
        return hpt_fail(HPT_ERR_ARG, "unknown tokenizer %d", (int)o->tokenizer);
    if (o->shard_tokens < 2 || o->shard_tokens > 2147483647u)
        return hpt_fail(HPT_ERR_ARG, "--shard-tokens %zu: llm.c's header counts up to 2^31 - 1 tokens (and at "
                        "least 2)", o->shard_tokens);
    if (o->val_tokens > (long long)o->shard_tokens)
        return hpt_fail(HPT_ERR_ARG, "--val-tokens %lld is more than one shard (--shard-tokens %zu)", o->val_tokens,
                        o->shard_tokens);
    if (n_inputs < 1) return hpt_fail(HPT_ERR_ARG, "nothing to tokenize: no input file");
    job *j = calloc(1, sizeof *j);
    if (!j) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    j->o = o;
    j->fd = -1;
    j->eot = o->tokenizer == HPT_TOK_GPT2 ? HPT_GPT2_EOT : -1;
    j->V = o->tokenizer == HPT_TOK_GPT2 ? HPT_GPT2_VOCAB : 256;
    snprintf(j->dir, sizeof j->dir, "%s", out_dir);
    int nt = o->threads > 0 ? o->threads : hpt_get_threads();
    hpt_status st = HPT_OK;
    bus_install();  /* the inputs are mapped from here on: a truncated one is an error, not SIGBUS */
    if (o->doc_sep && *o->doc_sep) st = unescape(o->doc_sep, &j->sep, &j->seplen);
    for (int i = 0; st == HPT_OK && i < n_inputs; i++) {
        struct stat sb;
        if (stat(inputs[i], &sb) == 0 && S_ISDIR(sb.st_mode)) st = add_dir(j, inputs[i]);
        else st = add_input(j, inputs[i]);
    }
    if (st == HPT_OK) st = make_chunks(j);
    if (st == HPT_OK && j->nchunks == 0) st = hpt_fail(HPT_ERR_DATA, "nothing to tokenize: the input is empty");
    if (st == HPT_OK) st = check_shard_count(j);
    if (st == HPT_OK && o->tokenizer == HPT_TOK_GPT2) {
        j->bpe = calloc((size_t)nt, sizeof *j->bpe);
        if (!j->bpe) st = hpt_fail(HPT_ERR_NOMEM, "out of memory");
        for (int t = 0; st == HPT_OK && t < nt; t++) st = hpt_bpe_load(&j->bpe[t], hpt_text_vocab_dir());
    }
    if (st == HPT_OK && o->tokenizer == HPT_TOK_CHAR) st = char_vocab(j, nt);
    int lock = -1;
    if (st == HPT_OK) st = check_out_dir(j, out_dir, &lock);
    uint32_t crc = 0;
    if (st == HPT_OK) st = encode_all(j, nt, res, &crc);
    size_t total = 0;
    for (int i = 0; i < j->nparts; i++) total += j->parts[i].n;
    size_t nval = o->val_tokens >= 0 ? (size_t)o->val_tokens : total / 10;
    if (j->nparts && nval > j->parts[0].n) nval = j->parts[0].n;
    if (st == HPT_OK && (nval == 0 || nval >= total))
        st = hpt_fail(HPT_ERR_DATA, "%zu tokens with %zu of them validation: both splits need some (a corpus of "
                      "at least 10 tokens, or --val-tokens below the total)", total, nval);
    final *fin = st == HPT_OK ? calloc((size_t)j->nparts + 1, sizeof *fin) : NULL;
    int nfin = 0;
    if (st == HPT_OK && !fin) st = hpt_fail(HPT_ERR_NOMEM, "out of memory");
    if (st == HPT_OK) st = finish_parts(j, nval, fin, &nfin);
    if (st == HPT_OK) {
        res->tokens[1] = nval;
        res->tokens[0] = total - nval;
        for (int i = 0; i < nfin; i++) res->shards[fin[i].split]++;
        char p[4200];
        snprintf(p, sizeof p, "%s/" HPT_SHARD_MANIFEST, out_dir);
        manifest_ctx mc = {j, inputs, n_inputs, fin, nfin, res, crc};
        st = hpt_save_atomic(p, write_manifest, &mc);  /* last: it marks the directory complete */
    }
    /* a failed run leaves nothing behind: no part files, and no shards
     * without the manifest that marks them complete */
    if (j->fd >= 0) close(j->fd);
    for (int i = 0; i < j->nparts; i++) {
        char p[4200];
        part_path(j, i, p, sizeof p);
        unlink(p);
    }
    for (int i = 0; st != HPT_OK && i < nfin; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/%s", out_dir, fin[i].name);
        unlink(p);
    }
    if (lock >= 0) close(lock);
    bus_uninstall();
    free(fin);
    for (int i = 0; i < j->nfiles; i++) {
        if (j->files[i].m) munmap((void *)j->files[i].m, j->files[i].n);
        free(j->files[i].path);
    }
    for (int t = 0; j->bpe && t < nt; t++) hpt_bpe_free(j->bpe[t]);
    free(j->bpe);
    free(j->files);
    free(j->chunks);
    free(j->sep);
    free(j->char_id);
    free(j->cps);
    free(j->parts);
    free(j);
    return st;
}
