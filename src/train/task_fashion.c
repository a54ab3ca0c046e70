/*
 * task_fashion.c — the Fashion-MNIST task: an MLP or CNN on Debian's
 * dataset-fashion-mnist (gzip IDX files under /usr/share/datasets/fashion-mnist).
 *
 * The IDX files are validated field by field (magic, dimensions, counts,
 * exact payload size) so a wrong or truncated file is named in the error
 * instead of producing garbage. Pixels stay as bytes (55 MB for 70k images)
 * and are normalised per batch. Training order: a seeded shuffle per epoch;
 * the cursor is (position in the epoch, RNG state) and the permutation is
 * rebuilt from the RNG, so it can be saved and restored exactly.
 */
#include "preflight.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define IMG 784
/* mean and standard deviation of Fashion-MNIST's training pixels in [0, 1] */
#define PIX_MEAN 0.2860f
#define PIX_STD 0.3530f

typedef struct split { unsigned char *img; unsigned char *lab; int n; } split;

typedef struct fashion_task {
    split train, test;
    int B;
    float *x;              /* (B, 784) normalised batch */
    int *y;                /* (B) labels */
    int *perm;             /* (60000) this epoch's order */
    int pos;               /* next index into perm */
    int epoch;
    uint64_t rng;          /* state the next permutation is drawn from */
    uint64_t rng_perm;     /* state this epoch's permutation was drawn from */
} fashion_task;

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Opens a gzip IDX file and reads its header: checks magic (type 0x08 =
 * unsigned byte, ndim) and returns the dimensions. The caller checks them
 * before idx_payload allocates anything: a forged header must not make us
 * allocate gigabytes (found by bench/fuzz.sh's fuzz_idx). */
static hpt_status idx_open(const char *path, int ndim, uint32_t dims[3], gzFile *out) {
    *out = NULL;
    int fd;  /* a FIFO or device is refused before gzopen could block on it */
    hpt_status ost = hpt_open_regular(path, &fd, NULL);
    if (ost != HPT_OK && access(path, F_OK) == 0) return ost;  /* there, but not a readable regular file */
    gzFile f = ost == HPT_OK ? gzdopen(fd, "rb") : NULL;
    if (!f && ost == HPT_OK) close(fd);
    if (!f) return hpt_fail(HPT_ERR_IO, "cannot open '%s' (install Debian's dataset-fashion-mnist, "
                            "or point --data at a directory with the four IDX .gz files)", path);
    unsigned char hdr[16];
    int hlen = 4 + 4 * ndim;
    if (gzread(f, hdr, (unsigned)hlen) != hlen) { gzclose(f); return hpt_fail(HPT_ERR_DATA, "'%s' is truncated in its header (or not gzip)", path); }
    if (hdr[0] || hdr[1] || hdr[2] != 0x08 || hdr[3] != ndim) {
        gzclose(f);
        return hpt_fail(HPT_ERR_DATA, "'%s' has magic %02x%02x%02x%02x, expected an IDX file of %d-d unsigned bytes (000008%02x)",
                        path, hdr[0], hdr[1], hdr[2], hdr[3], ndim, ndim);
    }
    for (int d = 0; d < ndim; d++) {
        dims[d] = be32(hdr + 4 + 4 * d);
        if (dims[d] == 0 || dims[d] > 1000000) { gzclose(f); return hpt_fail(HPT_ERR_DATA, "'%s' has dimension %u = %u", path, d, dims[d]); }
    }
    *out = f;
    return HPT_OK;
}

/* Reads exactly `total` payload bytes of an opened IDX file and closes it. */
static hpt_status idx_payload(gzFile f, const char *path, size_t total, unsigned char **payload) {
    *payload = NULL;
    unsigned char *buf = malloc(total + 1);
    if (!buf) { gzclose(f); return hpt_fail(HPT_ERR_NOMEM, "out of memory reading '%s'", path); }
    size_t got = 0;
    while (got < total) {
        unsigned chunk = total - got > (1u << 30) ? (1u << 30) : (unsigned)(total - got);
        int r = gzread(f, buf + got, chunk);
        if (r <= 0) break;
        got += (size_t)r;
    }
    /* exactly the promised payload: one more byte means a wrong header */
    int extra = got == total ? gzread(f, buf + total, 1) : 0;
    int err;
    /* copy zlib's message: it lives in the gzFile that gzclose frees (found
     * by bench/fuzz.sh's fuzz_idx under ASan) */
    char zmsg[128];
    snprintf(zmsg, sizeof zmsg, "%s", gzerror(f, &err));
    gzclose(f);
    if (got != total) { free(buf); return hpt_fail(HPT_ERR_DATA, "'%s' is truncated: %zu of %zu payload bytes (%s)", path, got, total, err ? zmsg : "early end"); }
    if (extra > 0) { free(buf); return hpt_fail(HPT_ERR_DATA, "'%s' is longer than its header says", path); }
    *payload = buf;
    return HPT_OK;
}

static hpt_status load_split(split *s, const char *dir, const char *prefix, int expect) {
    char ip[4200], lp[4200];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    uint32_t di[3] = {0}, dl[3] = {0};
    gzFile f;
    HPT_TRY(idx_open(ip, 3, di, &f));
    if (di[1] != 28 || di[2] != 28) { gzclose(f); return hpt_fail(HPT_ERR_DATA, "'%s' holds %ux%u images, expected 28x28", ip, di[1], di[2]); }
    if ((int)di[0] != expect) { gzclose(f); return hpt_fail(HPT_ERR_DATA, "'%s' holds %u images, expected %d", ip, di[0], expect); }
    HPT_TRY(idx_payload(f, ip, (size_t)di[0] * 28 * 28, &s->img));
    HPT_TRY(idx_open(lp, 1, dl, &f));
    if (dl[0] != di[0]) { gzclose(f); return hpt_fail(HPT_ERR_DATA, "'%s' has %u labels for %u images", lp, dl[0], di[0]); }
    HPT_TRY(idx_payload(f, lp, dl[0], &s->lab));
    if (dl[0] != di[0]) return hpt_fail(HPT_ERR_DATA, "'%s' has %u labels for %u images", lp, dl[0], di[0]);
    for (uint32_t i = 0; i < dl[0]; i++)
        if (s->lab[i] > 9) return hpt_fail(HPT_ERR_DATA, "'%s': label %u of image %u is not a class 0-9", lp, s->lab[i], i);
    s->n = (int)di[0];
    return HPT_OK;
}

static void fill(fashion_task *ft, const split *s, const int *idx, int n, int start) {
    #pragma omp parallel for
    for (int b = 0; b < n; b++) {
        int k = idx ? idx[start + b] : start + b;
        const unsigned char *p = s->img + (size_t)k * IMG;
        float *x = ft->x + (size_t)b * IMG;
        for (int i = 0; i < IMG; i++) x[i] = (p[i] * (1.0f / 255.0f) - PIX_MEAN) * (1.0f / PIX_STD);
        ft->y[b] = s->lab[k];
    }
}

static void shuffle(fashion_task *ft) {
    hpt_rng r = {ft->rng};
    ft->rng_perm = ft->rng;
    for (int i = 0; i < ft->train.n; i++) ft->perm[i] = i;
    for (int i = ft->train.n - 1; i > 0; i--) {
        int j = (int)hpt_rng_below(&r, (uint64_t)i + 1);
        int t = ft->perm[i]; ft->perm[i] = ft->perm[j]; ft->perm[j] = t;
    }
    ft->rng = r.s;
    ft->pos = 0;
}

static hpt_status fashion_train_batch(hpt_task *t, hpt_batch *b) {
    fashion_task *ft = t->impl;
    if (ft->pos >= ft->train.n) { shuffle(ft); ft->epoch++; }
    /* batches never straddle epochs: the last one of an epoch is short */
    int n = ft->train.n - ft->pos < ft->B ? ft->train.n - ft->pos : ft->B;
    fill(ft, &ft->train, ft->perm, n, ft->pos);
    ft->pos += n;
    *b = (hpt_batch){.B = n, .T = 1, .x = ft->x, .x_dim = IMG, .targets = ft->y};
    return HPT_OK;
}

static int fashion_val_batches(const hpt_task *t) {
    const fashion_task *ft = t->impl;
    return (ft->test.n + ft->B - 1) / ft->B;
}

static hpt_status fashion_val_batch(hpt_task *t, int i, hpt_batch *b) {
    fashion_task *ft = t->impl;
    int start = i * ft->B;
    int n = ft->test.n - start < ft->B ? ft->test.n - start : ft->B;
    fill(ft, &ft->test, NULL, n, start);
    *b = (hpt_batch){.B = n, .T = 1, .x = ft->x, .x_dim = IMG, .targets = ft->y};
    return HPT_OK;
}

static void fashion_describe(const hpt_task *t, char *buf, size_t n) {
    const fashion_task *ft = t->impl;
    snprintf(buf, n, "%d train / %d test images of 28x28, 10 classes, normalised (x - %.4f) / %.4f",
             ft->train.n, ft->test.n, PIX_MEAN, PIX_STD);
}

static size_t fashion_data_bytes(const hpt_task *t) {
    const fashion_task *ft = t->impl;
    return (size_t)(ft->train.n + ft->test.n) * (IMG + 1) + (size_t)ft->train.n * sizeof(int) +
           (size_t)ft->B * (IMG * sizeof(float) + sizeof(int));
}

/* cursor: u32 epoch, u32 pos, u64 the RNG state before this epoch's shuffle
 * (loading redraws the same permutation from it) */
static size_t fashion_cursor_save(const hpt_task *t, unsigned char *buf) {
    const fashion_task *ft = t->impl;
    uint32_t e = (uint32_t)ft->epoch, p = (uint32_t)ft->pos;
    memcpy(buf, &e, 4);
    memcpy(buf + 4, &p, 4);
    memcpy(buf + 8, &ft->rng_perm, 8);
    return 16;
}

static int fashion_cursor_load(hpt_task *t, const unsigned char *buf, size_t n) {
    fashion_task *ft = t->impl;
    uint32_t e, p;
    uint64_t r;
    if (n != 16) return 0;
    memcpy(&e, buf, 4);
    memcpy(&p, buf + 4, 4);
    memcpy(&r, buf + 8, 8);
    if (p > (uint32_t)ft->train.n || e > 100000000u || r == 0) return 0;
    ft->rng = r;
    shuffle(ft);
    ft->pos = (int)p;
    ft->epoch = (int)e;
    return 1;
}

static void fashion_free(hpt_task *t) {
    if (!t) return;
    fashion_task *ft = t->impl;
    if (ft) {
        free(ft->train.img); free(ft->train.lab);
        free(ft->test.img); free(ft->test.lab);
        free(ft->x); free(ft->y); free(ft->perm);
        free(ft);
    }
    free(t);
}

/* The classifier named by --model, at its default shape. */
static hpt_status build_model(hpt_model **m, const hpt_train_config *c, const hpt_device *dev) {
    if (strcmp(dev->name, "cpu"))
        return hpt_fail(HPT_ERR_ARG, "--device %s: the classifiers (--model mlp, cnn) run on the CPU only in this "
                        "version; the GPT-2 family runs on every device", dev->name);
    if (!strcmp(c->model, "mlp")) {
        hpt_mlp_config mc;
        hpt_mlp_config_default(&mc);
        const uint32_t conf[8] = {HPT_FAMILY_MLP, (uint32_t)mc.n_in, (uint32_t)mc.n_classes, (uint32_t)mc.n_hidden,
                                  (uint32_t)mc.hidden[0], (uint32_t)mc.hidden[1], (uint32_t)mc.hidden[2], (uint32_t)mc.hidden[3]};
        HPT_TRY(hpt_train_check_memory(c, dev, conf, 8, c->batch_size, 1));  /* before allocating the arenas */
        return hpt_mlp_init(m, &mc, c->batch_size, c->seed);
    }
    hpt_cnn_config cc;
    hpt_cnn_config_default(&cc);
    const uint32_t conf[8] = {HPT_FAMILY_CNN, (uint32_t)cc.in_c, (uint32_t)cc.in_h, (uint32_t)cc.in_w, (uint32_t)cc.c1,
                              (uint32_t)cc.c2, (uint32_t)cc.hidden, (uint32_t)cc.n_classes};
    HPT_TRY(hpt_train_check_memory(c, dev, conf, 8, c->batch_size, 1));
    return hpt_cnn_init(m, &cc, c->batch_size, c->seed);
}

hpt_status hpt_task_fashion_init(hpt_task **out, const hpt_train_config *c, const hpt_device *dev) {
    *out = NULL;
    hpt_task *t = calloc(1, sizeof *t);
    fashion_task *ft = calloc(1, sizeof *ft);
    if (!t || !ft) { free(t); free(ft); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    t->impl = ft;
    t->free = fashion_free;
    const char *dir = c->data_path && *c->data_path ? c->data_path : FMNIST_DIR;
    hpt_status st = load_split(&ft->train, dir, "train", 60000);
    if (st == HPT_OK) st = load_split(&ft->test, dir, "t10k", 10000);
    if (st != HPT_OK) { fashion_free(t); return st; }
    ft->B = c->batch_size;
    ft->x = malloc((size_t)ft->B * IMG * sizeof(float));
    ft->y = malloc((size_t)ft->B * sizeof(int));
    ft->perm = malloc((size_t)ft->train.n * sizeof(int));
    if (!ft->x || !ft->y || !ft->perm) { fashion_free(t); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    hpt_rng r;
    hpt_rng_seed(&r, c->seed ^ 0xDA7A5EEDull);
    ft->rng = r.s;
    shuffle(ft);

    st = build_model(&t->model, c, dev);
    if (st != HPT_OK) { fashion_free(t); return st; }
    t->name = "fashion-mnist";
    t->classify = 1;
    t->batch_size = ft->B;
    t->tokens_per_sample = 1;
    t->x_dim = IMG;
    t->train_examples = (size_t)ft->train.n;
    /* the payloads, as trained on: a file recompressed alike is the same data */
    const split *sp[2] = {&ft->train, &ft->test};
    for (int i = 0; i < 2; i++) {
        t->data_crc = hpt_crc32(t->data_crc, sp[i]->img, (size_t)sp[i]->n * IMG);
        t->data_crc = hpt_crc32(t->data_crc, sp[i]->lab, (size_t)sp[i]->n);
        t->data_size += (uint64_t)sp[i]->n * (IMG + 1);
    }
    t->data_source = dir;
    t->train_batch = fashion_train_batch;
    t->val_batches = fashion_val_batches;
    t->val_batch = fashion_val_batch;
    t->describe = fashion_describe;
    t->data_bytes = fashion_data_bytes;
    t->cursor_save = fashion_cursor_save;
    t->cursor_load = fashion_cursor_load;
    *out = t;
    return HPT_OK;
}
