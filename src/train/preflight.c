/*
 * preflight.c — what a training run checks before it touches anything.
 *
 * A run directory holds one run: metrics.jsonl, summary.json, model.bin,
 * checkpoints/, phases.jsonl and the plots belong together (a resume cuts the
 * log back to its checkpoint's length, restores that checkpoint and rewrites
 * the model). A fresh run into a directory that holds one would mix two runs
 * (and a later --resume would restore the old run's checkpoint over the new
 * model), so it is refused unless asked to continue it (--resume) or replace
 * it (--overwrite); replacing happens only after every check of the new run
 * passed, so a refused or failed start leaves the old run as it was.
 */
#include "preflight.h"
#include "../base/comm.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The files a run writes into its directory (checkpoints/ is a directory). */
static const char *const run_files[] = {
    "metrics.jsonl", "summary.json", "model.bin", "phases.jsonl", "checkpoints",
    "loss.png", "loss.svg", "accuracy.png", "accuracy.svg",
};
#define NRUN_FILES (sizeof run_files / sizeof run_files[0])

/* "metrics.jsonl, model.bin, checkpoints/": what of a run DIR holds ("" if none) */
static void list_run_files(const char *dir, char *buf, size_t n) {
    buf[0] = 0;
    size_t len = 0;
    for (size_t i = 0; i < NRUN_FILES; i++) {
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, run_files[i]);
        if (lstat(path, &sb) != 0) continue;
        int w = snprintf(buf + len, n - len, "%s%s%s", len ? ", " : "", run_files[i], S_ISDIR(sb.st_mode) ? "/" : "");
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
}

hpt_status hpt_rundir_check(const char *dir, hpt_rundir_mode mode) {
    if (mode == HPT_RUNDIR_CONTINUE) return HPT_OK;  /* hpt_trainer_resume holds the lock already */
    struct stat sb;
    if (stat(dir, &sb) != 0) return HPT_OK;          /* created when the run starts */
    if (!S_ISDIR(sb.st_mode)) return hpt_fail(HPT_ERR_IO, "--out '%s' exists and is not a directory", dir);
    HPT_TRY(hpt_dir_lock_probe(dir));                /* a live run is never replaced */
    char found[512];
    list_run_files(dir, found, sizeof found);
    if (!found[0] || mode == HPT_RUNDIR_OVERWRITE) return HPT_OK;
    return hpt_fail(HPT_ERR_ARG, "'%s' already holds a run (%s): continue it with 'hpt train --resume %s', "
                    "replace it with --overwrite (its logs, checkpoints and model are deleted), or choose another --out",
                    dir, found, dir);
}

/* Removes DIR/NAME, and NAME's leftover temporary files (NAME.tmp.<pid>). */
static hpt_status remove_entry(const char *dir, const char *name) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (unlink(path) != 0 && errno != ENOENT)
        return hpt_fail(HPT_ERR_IO, "--overwrite: cannot remove '%s': %s", path, strerror(errno));
    return HPT_OK;
}

/* Every file in DIR whose name starts with one of the run files' names
 * followed by ".tmp." (an interrupted atomic save), or, with all set, every
 * file (the checkpoints directory: ckpt-*.bin, *.corrupt and their tmp files). */
static hpt_status remove_files(const char *dir, int all) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? HPT_OK : hpt_fail(HPT_ERR_IO, "--overwrite: cannot read '%s': %s", dir, strerror(errno));
    hpt_status st = HPT_OK;
    struct dirent *e;
    while (st == HPT_OK && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int match = all;
        for (size_t i = 0; !match && i < NRUN_FILES; i++) {
            size_t k = strlen(run_files[i]);
            match = !strncmp(e->d_name, run_files[i], k) && !strncmp(e->d_name + k, ".tmp.", 5);
        }
        if (match) st = remove_entry(dir, e->d_name);
    }
    closedir(d);
    return st;
}

static hpt_status clear_run(const char *dir) {
    char ck[4400];
    snprintf(ck, sizeof ck, "%s/checkpoints", dir);
    HPT_TRY(remove_files(ck, 1));
    if (rmdir(ck) != 0 && errno != ENOENT)
        return hpt_fail(HPT_ERR_IO, "--overwrite: cannot remove '%s': %s", ck, strerror(errno));
    HPT_TRY(remove_files(dir, 0));
    for (size_t i = 0; i < NRUN_FILES; i++)
        if (strcmp(run_files[i], "checkpoints")) HPT_TRY(remove_entry(dir, run_files[i]));
    return HPT_OK;
}

hpt_status hpt_rundir_prepare(const char *dir, hpt_rundir_mode mode, int *lock_fd) {
    if (mode != HPT_RUNDIR_OVERWRITE) return HPT_OK;
    char found[512];
    list_run_files(dir, found, sizeof found);
    if (!found[0]) return HPT_OK;  /* nothing to replace: the run creates what it needs */
    HPT_TRY(hpt_dir_lock(dir, lock_fd));
    hpt_status st = clear_run(dir);
    if (st != HPT_OK) { hpt_dir_unlock(*lock_fd); *lock_fd = -1; }
    return st;
}

hpt_status hpt_train_check_memory(const hpt_train_config *c, const hpt_device *dev, const uint32_t *conf, int nconf,
                                  int B, int T) {
    size_t n;
    if (hpt_model_conf_params(conf, nconf, &n) != HPT_OK) return HPT_OK;  /* the model's init refuses it */
    int ema = c->ema_decay > 0.0f;
    /* more than one micro-batch per step (--grad-accum, or ranks): the
     * trainer sums their gradients in an arena of its own */
    int sum = (int64_t)c->grad_accum * hpt_comm_size(hpt_comm_world()) > 1;
    /* local-step mode: the anchor and the outer momentum */
    int outer = c->sync_interval > 0 ? 2 : 0;
    /* schedule-free: its z and x beside the moments */
    int sf = c->optimizer && !strcmp(c->optimizer, "schedule-free") ? 2 : 0;
    /* muon: its momentum is the moments' m; the Newton-Schulz scratch beside them */
    const size_t muon = c->optimizer && !strcmp(c->optimizer, "muon") ? hpt_model_conf_muon_floats(conf, nconf) : 0;
    const size_t extra = ((size_t)((ema ? 3 : 2) + sf + sum + outer) * n + muon) * sizeof(float);
    if (dev->mem_info) {
        /* a device with memory of its own: the whole plan against it, the
         * host keeps only the data and the loss read-back */
        size_t pb, ab;
        if (!hpt_model_conf_bytes(conf, nconf, B, T, dev, &pb, &ab)) return HPT_OK;  /* init refuses it */
        char detail[256], pbs[32], abs_[32], ebs[32];
        hpt_fmt_bytes(pbs, sizeof pbs, pb);
        hpt_fmt_bytes(abs_, sizeof abs_, ab);
        hpt_fmt_bytes(ebs, sizeof ebs, extra);
        snprintf(detail, sizeof detail, "parameters %s, gradients %s, activations %s, optimizer state %s", pbs, pbs,
                 abs_, ebs);
        return hpt_device_check_plan(dev, 2 * pb + ab + extra, detail);
    }
    return hpt_model_check_memory(conf, nconf, B, T, ema ? "AdamW moments and weight average" : "AdamW moments",
                                  extra);
}
