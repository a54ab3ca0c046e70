/*
 * fuzz_resume.c — libFuzzer target for the resume path, down to the steps
 * that follow it: one section of a real checkpoint (TCFG, TRST, DATA, LOGS
 * or HYBR) is replaced by the input, the section's length, the header's
 * file size and the CRC trailer are repaired (as fuzz_file.h does for whole
 * files), the file becomes the only checkpoint of a run directory beside
 * the run's metrics.jsonl and phases.jsonl, and then
 *   hpt_trainer_resume rebuilds the trainer (TCFG, TRST, DATA, LOGS checks),
 *   a hybrid checkpoint's config comes from hpt_hybrid_config_resumed, and
 *   the run goes on for a few steps (hpt_trainer_run, or
 *   hpt_trainer_run_hybrid, whose load_state restores HYBR), stopped by
 *   hpt_request_stop (which saves a checkpoint: the save path runs too).
 * A load that passes must leave a state the steps can run on: that is what
 * a crafted divergence-monitor ring position broke, which a
 * load-only target missed. Any status is fine; a crash, hang, leak,
 * sanitizer report or out-of-memory is a bug.
 *
 * Input: byte 0 picks the base checkpoint (bit 0: text baseline, text
 * hybrid) and the section ((byte 0 >> 1) modulo the base's fuzzed
 * sections); the rest is that section's new payload. The hybrid base has a
 * sixth choice, a patch of its HYBR payload: u32 offset (modulo the
 * payload's length), then the bytes written there (up to its end): the
 * section is large (model, snapshot and dynamics arenas), so this focuses
 * mutations on small changes of the counters and indices between them
 * (bench/fuzz.sh seeds a patch at the start of every block). The bases are read at
 * start-up from $HPT_FUZZ_BASE (default build-fuzz/base, written by
 * bench/fuzz.sh): text.bin, text.metrics.jsonl, hybrid.bin,
 * hybrid.metrics.jsonl, hybrid.phases.jsonl. Their TCFG names a data file
 * relative to the repository root: run from there (fuzz.sh does). Configs
 * that would make the steps slow (big batches, long evaluations, long
 * Predict phases) are resumed but not run: the target looks for crashes,
 * not for the cost of legal settings.
 */
#include "hpt.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct sec { char tag[5]; const unsigned char *p; uint64_t n; } sec;
typedef struct base {
    unsigned char *file; size_t file_n;
    sec secs[24]; int nsec;
    unsigned char *metrics, *phases; size_t metrics_n, phases_n;
} base;

static base g_base[2];          /* 0: text baseline, 1: text hybrid */
static char g_dir[64], g_ck[128];
static const char *const FUZZED[] = {"TCFG", "TRST", "DATA", "LOGS", "HYBR", "HYBR"};   /* the last: a patch */

static unsigned char *slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        if (*n == cap) {
            unsigned char *p = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!p) { free(buf); fclose(f); return NULL; }
            buf = p;
        }
        size_t got = fread(buf + *n, 1, cap - *n, f);
        *n += got;
        if (got == 0) break;
    }
    fclose(f);
    return buf;
}

/* Splits a state file into its sections (END! excluded); 0 if malformed. */
static int split(base *b) {
    size_t off = 32;
    b->nsec = 0;
    while (off + 16 <= b->file_n) {
        uint64_t n;
        memcpy(&n, b->file + off + 8, 8);
        if (n > b->file_n - off - 16) return 0;
        if (!memcmp(b->file + off, "END!", 4)) return b->nsec > 0;
        if (b->nsec == 24) return 0;
        sec *s = &b->secs[b->nsec++];
        memcpy(s->tag, b->file + off, 4);
        s->tag[4] = 0;
        s->p = b->file + off + 16;
        s->n = n;
        off += 16 + (size_t)n;
    }
    return 0;
}

static void load_base(base *b, const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    b->file = slurp(path, &b->file_n);
    if (!b->file || !split(b)) {
        fprintf(stderr, "fuzz_resume: cannot read the base checkpoint '%s' (run bench/fuzz.sh)\n", path);
        exit(2);
    }
    snprintf(path, sizeof path, "%s/%s.metrics.jsonl", dir, name);
    b->metrics = slurp(path, &b->metrics_n);
    snprintf(path, sizeof path, "%s/%s.phases.jsonl", dir, name);
    b->phases = slurp(path, &b->phases_n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *dir = getenv("HPT_FUZZ_BASE");
    if (!dir) dir = "build-fuzz/base";
    load_base(&g_base[0], dir, "text");
    load_base(&g_base[1], dir, "hybrid");
    /* a tmpfs when there is one: every step's checkpoint is fsynced */
    const char *root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/hpt-fuzz-resume-%d", root, (int)getpid());
    snprintf(g_ck, sizeof g_ck, "%s/checkpoints", g_dir);
    mkdir(g_dir, 0755);
    mkdir(g_ck, 0755);
    return 0;
}

static int put_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* The run directory as the base run left it, but for section `tag`, whose
 * payload is (p, n); the lengths and the CRC repaired. */
static int write_run(const base *b, const char *tag, const unsigned char *p, size_t n) {
    DIR *d = opendir(g_ck);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') { snprintf(path, sizeof path, "%s/%s", g_ck, e->d_name); unlink(path); }
        closedir(d);
    }
    const char *outs[] = {"model.bin", "summary.json"};
    char path[512];
    for (int i = 0; i < 2; i++) { snprintf(path, sizeof path, "%s/%s", g_dir, outs[i]); unlink(path); }
    snprintf(path, sizeof path, "%s/metrics.jsonl", g_dir);
    if (b->metrics && put_file(path, b->metrics, b->metrics_n)) return -1;
    snprintf(path, sizeof path, "%s/phases.jsonl", g_dir);
    if (b->phases && put_file(path, b->phases, b->phases_n)) return -1;

    size_t size = 32 + 20;
    for (int i = 0; i < b->nsec; i++) size += 16 + (strcmp(b->secs[i].tag, tag) ? b->secs[i].n : n);
    unsigned char *buf = malloc(size), *o = buf;
    if (!buf) return -1;
    memcpy(o, b->file, 32);
    uint64_t fs = size;
    memcpy(o + 24, &fs, 8);
    o += 32;
    for (int i = 0; i < b->nsec; i++) {
        int mine = !strcmp(b->secs[i].tag, tag);
        uint64_t len = mine ? n : b->secs[i].n;
        memcpy(o, b->secs[i].tag, 4);
        memset(o + 4, 0, 4);
        memcpy(o + 8, &len, 8);
        if (len) memcpy(o + 16, mine ? p : b->secs[i].p, (size_t)len);
        o += 16 + len;
    }
    uint64_t four = 4;
    memcpy(o, "END!", 4);
    memset(o + 4, 0, 4);
    memcpy(o + 8, &four, 8);
    uint32_t crc = hpt_crc32(0, buf, size - 4);
    memcpy(o + 16, &crc, 4);
    snprintf(path, sizeof path, "%s/ckpt-00000002.bin", g_ck);
    int rc = put_file(path, buf, size);
    free(buf);
    return rc;
}

static void quiet(void *ctx, const char *line) { (void)ctx; (void)line; }

/* Stops the run after its third step call (while steps remain: a stop
 * request the loop never consumed would carry over to the next input). */
static void stop_soon(void *ctx, const hpt_step_info *info) {
    int *calls = ctx;
    if (++*calls >= 3 && info->step < info->max_iters) hpt_request_stop();
}

static int cheap(const hpt_train_config *c) {
    return (long)c->batch_size * c->grad_accum <= 16 && c->eval_iters <= 4;
}
static int cheap_hybrid(const hpt_hybrid_config *h) {
    return h->probe_batches <= 4 && h->max_predict_steps <= 64 && h->ensemble <= 4 && h->hidden <= 32 &&
           h->bptt <= 32;
}

/* The base's HYBR payload with `patch` (n bytes) written at the offset its
 * first 4 bytes name; malloc'd, *out_n bytes. */
static unsigned char *patched_hybr(const base *b, const unsigned char *patch, size_t n, size_t *out_n) {
    const sec *h = NULL;
    for (int i = 0; i < b->nsec; i++)
        if (!strcmp(b->secs[i].tag, "HYBR")) h = &b->secs[i];
    if (!h || h->n == 0 || n < 4) return NULL;
    unsigned char *p = malloc((size_t)h->n);
    if (!p) return NULL;
    memcpy(p, h->p, (size_t)h->n);
    uint32_t at;
    memcpy(&at, patch, 4);
    size_t off = at % (size_t)h->n, k = n - 4 < h->n - off ? n - 4 : (size_t)(h->n - off);
    memcpy(p + off, patch + 4, k);
    *out_n = (size_t)h->n;
    return p;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < 1) return 0;
    const base *b = &g_base[data[0] & 1];
    int nfuzzed = b == &g_base[1] ? 6 : 4;   /* a baseline checkpoint has no HYBR */
    int which = (data[0] >> 1) % nfuzzed;
    const unsigned char *payload = data + 1;
    size_t payload_n = size - 1;
    unsigned char *patched = NULL;
    if (which == 5 && !(payload = patched = patched_hybr(b, data + 1, size - 1, &payload_n))) return 0;
    int wrote = write_run(b, FUZZED[which], payload, payload_n);
    free(patched);
    if (wrote != 0) return 0;
    hpt_trainer *tr = NULL;
    if (hpt_trainer_resume(&tr, g_dir, -1, 0u, NULL, 0, quiet, NULL) != HPT_OK) return 0;
    int calls = 0;
    if (cheap(hpt_trainer_config(tr))) {
        if (!hpt_trainer_resumed_hybrid(tr)) {
            hpt_trainer_run(tr, quiet, stop_soon, &calls);
        } else {
            hpt_hybrid_config hc;
            if (hpt_hybrid_config_resumed(tr, &hc) == HPT_OK && hpt_hybrid_config_check(&hc) == HPT_OK &&
                cheap_hybrid(&hc))
                hpt_trainer_run_hybrid(tr, &hc, quiet, stop_soon, &calls);
        }
    }
    hpt_trainer_free(tr);
    return 0;
}
