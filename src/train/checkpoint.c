/*
 * checkpoint.c — whole-training-state checkpoints and resume.
 *
 * A checkpoint is a model.bin (CONF, TOKN, PARM: `hpt sample` reads it as a
 * model) plus four sections in the same container (docs/format.md):
 *   TCFG  the resolved training config (strings length-prefixed)
 *   TRST  step counters, clocks, the run loop's evaluation state
 *   ADAM  the AdamW moments, m then v; under --optimizer muon m holds, on
 *         the hidden matrices, Muon's momentum buffer (their v stays 0)
 *   DATA  the task's data cursor (opaque bytes, see task.h)
 *   LOGS  metrics.jsonl's length at the save (resume cuts it back to that)
 *   DSRC  the data's identity (task.h): u64 size, u32 CRC-32. A resume
 *         whose data differs is refused unless allowed (a resume must
 *         not train on silently on other data); absent in checkpoints of an older hpt,
 *         and 0 bytes / CRC 0 in an older hpt's checkpoints of token
 *         shards: both resume with a note
 *   EMAW  (TCFG ema_decay > 0) the weight average, like PARM
 *   SFRE  (TCFG optimizer schedule-free) n, lr_max and the weight sum
 *         (f64 each), then z and x; PARM holds its gradient point y
 *   HYBR  (TCFG mode 1) the layer above's state, written and read by its
 *         run hooks (state_bytes/save_state/load_state, trainer.h)
 *   RANK  (runs under mpirun with more than one rank) the rank count, u32:
 *         a resume must use the same (another split of the step's
 *         micro-batches adds the gradients in another order). Absent: 1.
 *   LSTP  (TCFG sync_interval > 0, local-step mode) the rank count R (u32)
 *         and n (u64), the outer momentum u, then ranks 1..R-1's own AdamW
 *         moments (m then v each; rank 0's are ADAM), gathered by rank 0.
 *         Saved only right after a sync, where the ranks' weights are equal
 *         and are the anchor (PARM): what each rank needs to go on alone.
 * Files: DIR/checkpoints/ckpt-<step, 8 digits>.bin, written atomically; the
 * keep_last newest are kept. Resume picks the newest that passes every check
 * and falls back to older ones, so a torn or flipped file costs progress,
 * never the run.
 */
#include "../io/state.h"
#include "../model/model.h"
#include "settings.h"
#include "trainer_impl.h"

#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hpt_trainer_resumed_hybrid(const hpt_trainer *tr) { return tr->resumed && tr->resume_mode == 1; }

/* TCFG versions: 1 (session 1) ends at keep_last; 2 appends ema_decay; 3
 * appends schedule, decay_frac and cooldown; 4 appends optimizer; 5 appends init_path; 6 appends sync_interval,
 * sync_outer_lr and sync_outer_momentum (older: off); 7 precision (older: fp32); 8 adam_lr,
 * muon_momentum, muon_ns_steps and muon_scale (--optimizer muon). All load:
 * a version-1 checkpoint resumes with the average off, versions 1 and 2
 * with the cosine schedule (the only one they knew), 1 to 3 with adamw. */
#define TCFG_VERSION 8u
#define TCFG_MAX 4 * (4 + 4096) + 256
#define TRST_SIZE 56u
#define SFRE_LEN(n) (8 + 16 + 2 * (uint64_t)(n) * sizeof(float))
#define LSTP_LEN(ranks, n) (4 + 8 + (1 + 2 * ((uint64_t)(ranks) - 1)) * (uint64_t)(n) * sizeof(float))
#define LSTP_MAX_RANKS 65536u
#define DSRC_LEN 12u

/* ---------------------------------------------------------------- encoding */

typedef struct membuf { unsigned char *p; size_t n, cap; } membuf;

static void put(membuf *b, const void *p, size_t n) {
    HPT_ASSERT(b->n + n <= b->cap);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put_u32(membuf *b, uint32_t v) { put(b, &v, 4); }
/* TCFG: version, mode, then the settings table's train rows in order
 * (settings.h), each as the table's type says. */
static size_t encode_tcfg(const hpt_train_config *c, uint32_t mode, unsigned char *buf, size_t cap) {
    membuf b = {buf, 0, cap};
    put_u32(&b, TCFG_VERSION);
    put_u32(&b, mode);  /* 0 baseline, 1 hybrid (a HYBR section follows) */
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    return b.n + hpt_settings_encode(rows, n, c, TCFG_VERSION, 0, buf + b.n, cap - b.n);
}

/* Strings of a decoded config (the config points into it): --data, --out
 * and --init, at most 4095 bytes each (the table's limit). */
typedef struct tcfg_strings { char buf[3 * 4096]; } tcfg_strings;

/* 0 with the reason in hpt_errmsg() */
static int decode_tcfg(const hpt_state_sec *s, hpt_train_config *c, tcfg_strings *str, uint32_t *mode) {
    hpt_cursor k = {s->p, (size_t)s->n, 0};
    uint32_t version;
    char why[512];
    hpt_train_config_default(c);  /* rows an older TCFG lacks keep their defaults, or get hpt_train_config_legacy's */
    if (!hpt_cur_u32(&k, &version) || version < 1 || version > TCFG_VERSION || !hpt_cur_u32(&k, mode)) {
        hpt_fail(HPT_ERR_FORMAT, "bad TCFG section (version)");
        return 0;
    }
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    if (!hpt_settings_decode(rows, n, c, version, 0, &k, str->buf, sizeof str->buf)) {
        snprintf(why, sizeof why, "%s", hpt_errmsg());
        hpt_fail(HPT_ERR_FORMAT, "bad TCFG section: %s", why);
        return 0;
    }
    if (k.pos != k.n) {
        hpt_fail(HPT_ERR_FORMAT, "bad TCFG section (%zu bytes too long)", k.n - k.pos);
        return 0;
    }
    hpt_train_config_legacy(c, version);
    return 1;
}

/* ---------------------------------------------------------------- saving */

typedef struct ckpt_ctx {
    hpt_trainer *tr;
    const unsigned char *tcfg; size_t tcfg_n;
    const unsigned char *cur; size_t cur_n;
    const hpt_run_hooks *hooks;  /* with save_state: a HYBR section */
    uint64_t hybr_n;
} ckpt_ctx;

static hpt_status write_ckpt(FILE *f, void *p) {
    ckpt_ctx *k = p;
    hpt_trainer *tr = k->tr;
    hpt_model *m = tr->model;
    const hpt_text *tok = tr->task_->text;
    uint64_t n = m->nparams, adam_len = 8 + 2 * n * sizeof(float);
    uint64_t size = HPT_STATE_HEADER_SIZE + hpt_state_model_bytes(m, tok) + (16 + k->tcfg_n) +
                    (16 + TRST_SIZE) + (16 + adam_len) + (16 + k->cur_n) + HPT_STATE_TRAILER_SIZE;
    if (k->hooks) size += 16 + k->hybr_n;
    if (tr->ema) size += 16 + 8 + n * sizeof(float);
    if (tr->sf_z) size += 16 + SFRE_LEN(n);
    size += 16 + 8;  /* LOGS */
    size += 16 + DSRC_LEN;
    if (tr->ranks > 1) size += 16 + 4;
    if (tr->outer.arena) size += 16 + LSTP_LEN(tr->ranks, n);
    hpt_writer w = {.f = f};
    hpt_state_header(&w, size);
    hpt_state_write_model(&w, m, tok);
    hpt_state_section(&w, "TCFG", k->tcfg_n);
    hpt_w_bytes(&w, k->tcfg, k->tcfg_n);
    hpt_state_section(&w, "TRST", TRST_SIZE);
    hpt_w_u32(&w, (uint32_t)tr->step);
    hpt_w_u32(&w, (uint32_t)tr->updates);
    hpt_w_bytes(&w, &tr->train_s, 8);
    hpt_w_bytes(&w, &tr->eval_s, 8);
    hpt_w_bytes(&w, &tr->tokens, 8);
    hpt_w_bytes(&w, &tr->final_val, 4);
    hpt_w_bytes(&w, &tr->best_val, 4);
    hpt_w_bytes(&w, &tr->final_acc, 4);
    hpt_w_u32(&w, (uint32_t)tr->next_eval);
    hpt_w_u64(&w, (uint64_t)m->backward_calls);
    hpt_state_section(&w, "ADAM", adam_len);
    hpt_w_u64(&w, n);
    hpt_model_write(&w, m, tr->m, n);
    hpt_model_write(&w, m, tr->v, n);
    hpt_state_section(&w, "DATA", k->cur_n);
    hpt_w_bytes(&w, k->cur, k->cur_n);
    if (tr->ema) {
        hpt_state_section(&w, "EMAW", 8 + n * sizeof(float));
        hpt_w_u64(&w, n);
        hpt_model_write(&w, m, tr->ema, n);
    }
    if (tr->sf_z) {
        hpt_state_section(&w, "SFRE", SFRE_LEN(n));
        hpt_w_u64(&w, n);
        hpt_w_bytes(&w, &tr->sf.lr_max, 8);
        hpt_w_bytes(&w, &tr->sf.weight_sum, 8);
        hpt_model_write(&w, m, tr->sf_z, n);
        hpt_model_write(&w, m, tr->sf_x, n);
    }
    if (k->hooks) {
        hpt_state_section(&w, "HYBR", k->hybr_n);
        long at = ftell(f);
        k->hooks->save_state(k->hooks->hctx, &w);
        if (!w.err && at >= 0 && ftell(f) - at != (long)k->hybr_n)
            return hpt_fail(HPT_ERR_IO, "HYBR section: %ld bytes written, %llu announced", ftell(f) - at,
                            (unsigned long long)k->hybr_n);
    }
    hpt_state_section(&w, "LOGS", 8);
    hpt_w_u64(&w, (uint64_t)(tr->metrics_bytes >= 0 ? tr->metrics_bytes : -1));
    hpt_state_section(&w, "DSRC", DSRC_LEN);
    hpt_w_u64(&w, tr->task_->data_size);
    hpt_w_u32(&w, tr->task_->data_crc);
    if (tr->ranks > 1) {
        hpt_state_section(&w, "RANK", 4);
        hpt_w_u32(&w, (uint32_t)tr->ranks);
    }
    if (tr->outer.arena) {
        hpt_state_section(&w, "LSTP", LSTP_LEN(tr->ranks, n));
        hpt_w_u32(&w, (uint32_t)tr->ranks);
        hpt_w_u64(&w, n);
        hpt_model_write(&w, m, tr->outer.u, n);
        /* the other ranks' moments, one vector at a time through the free
         * gradient-sum arena (they send them in hpt_trainer_save_checkpoint) */
        for (int r = 1; r < tr->ranks; r++)
            for (int half = 0; half < 2; half++) {
                HPT_TRY(hpt_comm_recv(tr->comm, tr->grad_sum, n, r));
                hpt_w_bytes(&w, tr->grad_sum, n * sizeof(float));
            }
    }
    hpt_state_trailer(&w);
    if (w.err) return hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(w.err));
    return HPT_OK;
}

/* Step of a checkpoint file name "ckpt-NNNNNNNN.bin", or -1. */
static int ckpt_step(const char *name) {
    if (strlen(name) != 17 || strncmp(name, "ckpt-", 5) || strcmp(name + 13, ".bin")) return -1;
    int s = 0;
    for (int i = 5; i < 13; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        s = s * 10 + (name[i] - '0');
    }
    return s;
}

/* Deletes the checkpoints older than the keep_last newest up to step `upto`
 * (newer files, which a fallback resume renames away, are left alone). */
static void prune(hpt_trainer *tr, const char *dir, int upto) {
    int K = tr->cfg.keep_last, have = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int s = ckpt_step(e->d_name);
        if (s < 0 || s > upto) continue;
        /* insert into the descending top-K */
        int i = have < K ? have++ : K;
        if (i == K && s <= tr->keep_steps[K - 1]) continue;
        if (i == K) i = K - 1;
        while (i > 0 && tr->keep_steps[i - 1] < s) { tr->keep_steps[i] = tr->keep_steps[i - 1]; i--; }
        tr->keep_steps[i] = s;
    }
    if (have == K) {
        int oldest_kept = tr->keep_steps[K - 1];
        rewinddir(d);
        char path[4500];
        while ((e = readdir(d))) {
            int s = ckpt_step(e->d_name);
            if (s < 0 || s >= oldest_kept) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

/* metrics.jsonl to disk before a checkpoint records its length (LOGS): a
 * crash after the checkpoint must not leave a shorter log than it names.
 * The run loop has flushed its stream; fsync works on any descriptor of the
 * file. A run without the file yet (a test saving by hand) has nothing to
 * sync. */
static hpt_status sync_metrics(const hpt_trainer *tr) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->cfg.out_dir);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno == ENOENT ? HPT_OK : hpt_fail(HPT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    int rc = fsync(fd), e = errno;
    close(fd);
    return rc == 0 ? HPT_OK : hpt_fail(HPT_ERR_IO, "cannot fsync '%s': %s", path, strerror(e));
}

hpt_status hpt_trainer_save_checkpoint(hpt_trainer *tr) {
    if (!hpt_trainer_writer(tr)) {
        /* rank 0 saves every rank's state: equal, but for local-step mode's
         * own moments, which it gathers (write_ckpt) */
        if (tr->outer.arena) {
            HPT_TRY(hpt_comm_send(tr->comm, tr->m, tr->model->nparams, 0));
            HPT_TRY(hpt_comm_send(tr->comm, tr->v, tr->model->nparams, 0));
        }
        return HPT_OK;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", tr->cfg.out_dir);
    HPT_TRY(hpt_mkdir_p(dir));
    HPT_TRY(sync_metrics(tr));
    unsigned char tcfg[TCFG_MAX], cur[HPT_CURSOR_MAX];
    ckpt_ctx k = {.tr = tr, .tcfg = tcfg, .cur = cur};
    if (tr->hooks && tr->hooks->save_state) {
        k.hooks = tr->hooks;
        k.hybr_n = tr->hooks->state_bytes(tr->hooks->hctx);
    }
    k.tcfg_n = encode_tcfg(&tr->cfg, k.hooks ? 1u : 0u, tcfg, sizeof tcfg);
    k.cur_n = tr->task_->cursor_save(tr->task_, cur);
    HPT_ASSERT(k.cur_n <= HPT_CURSOR_MAX);
    char path[4400];
    snprintf(path, sizeof path, "%s/ckpt-%08d.bin", dir, tr->step);
    HPT_TRY(hpt_save_atomic(path, write_ckpt, &k));
    snprintf(tr->ckpt_path, sizeof tr->ckpt_path, "%s", path);
    prune(tr, dir, tr->step);
    return HPT_OK;
}

/* ---------------------------------------------------------------- resume */

static int cmp_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x > y ? -1 : x < y;
}

/* TRST, decoded. */
typedef struct trst {
    uint32_t step, updates, next_eval;
    double train_s, eval_s, tokens;
    float final_val, best_val, final_acc;
    uint64_t backward_calls;
} trst;

static int nonneg(double x) { return x >= 0.0 && isfinite(x); }

/* TRST decoded and checked against the run's length: a reason, or NULL. */
static const char *decode_trst(const hpt_state_sec *r, int max_iters, trst *t) {
    if (r->n != TRST_SIZE) return "bad TRST section (size)";
    hpt_cursor k = {r->p, (size_t)r->n, 0};
    hpt_cur_u32(&k, &t->step); hpt_cur_u32(&k, &t->updates);
    hpt_cur_bytes(&k, &t->train_s, 8); hpt_cur_bytes(&k, &t->eval_s, 8); hpt_cur_bytes(&k, &t->tokens, 8);
    hpt_cur_bytes(&k, &t->final_val, 4); hpt_cur_bytes(&k, &t->best_val, 4); hpt_cur_bytes(&k, &t->final_acc, 4);
    hpt_cur_u32(&k, &t->next_eval); hpt_cur_u64(&k, &t->backward_calls);
    if (t->step > (uint32_t)max_iters || t->updates > t->step || t->next_eval < 1 || t->next_eval > INT32_MAX)
        return "bad TRST section (step counters out of range)";
    if (!nonneg(t->train_s) || !nonneg(t->eval_s) || !nonneg(t->tokens))
        return "bad TRST section (a clock or token count is not a finite non-negative number)";
    /* losses are >= 0 (NaN before the first evaluation, +Inf as the best
     * before it); an accuracy is a fraction (NaN for text) */
    if (t->final_val < 0.0f || t->best_val < 0.0f || t->final_acc < 0.0f || t->final_acc > 1.0f)
        return "bad TRST section (a loss or accuracy out of range)";
    if (t->backward_calls > (1ull << 62)) return "bad TRST section (backward count)";
    return NULL;
}

/* LOGS: metrics.jsonl's length, or -1 (unknown; also when absent). */
static const char *decode_logs(const hpt_state_sec *lg, int64_t *bytes) {
    *bytes = -1;
    if (!lg) return NULL;
    if (lg->n != 8) return "bad LOGS section (size)";
    memcpy(bytes, lg->p, 8);
    if (*bytes < -1) return "bad LOGS section (a negative length)";
    return NULL;
}

/* LSTP against the config: present exactly in local-step mode, for the
 * RANK section's count, saved at a sync. A reason, or NULL. */
static const char *check_lstp(const hpt_state_sec *secs, int nsec, const hpt_train_config *c, uint32_t step,
                              uint64_t n) {
    const hpt_state_sec *ls = hpt_state_find(secs, nsec, "LSTP"), *rk = hpt_state_find(secs, nsec, "RANK");
    if (c->sync_interval <= 0) return ls ? "an LSTP section in a run without --sync-interval" : NULL;
    uint32_t ranks = 0, stored = 1;
    uint64_t ln = 0;
    if (!ls || ls->n < 12) return "bad or missing LSTP section (--sync-interval run)";
    memcpy(&ranks, ls->p, 4);
    memcpy(&ln, ls->p + 4, 8);
    if (rk && rk->n == 4) memcpy(&stored, rk->p, 4);
    if (ranks < 1 || ranks > LSTP_MAX_RANKS || ranks != stored || ln != n || ls->n != LSTP_LEN(ranks, n))
        return "bad LSTP section (its rank count or size does not match)";
    if (step % (uint32_t)c->sync_interval != 0 && step != (uint32_t)c->max_iters)
        return "bad LSTP section (saved between two syncs)";
    return NULL;
}

/* A checkpoint whose container passed its checks: are the training-state
 * sections there and well-formed, every count, index and enum in range,
 * the config one that passes hpt_train_config_check? Returns a reason, or
 * NULL. dir: the run directory (the config's out_dir when resumed). */
static const char *check_sections(const hpt_state_sec *secs, int nsec, const char *dir, hpt_train_config *c,
                                  tcfg_strings *str, uint32_t *mode) {
    const hpt_state_sec *t = hpt_state_find(secs, nsec, "TCFG"), *r = hpt_state_find(secs, nsec, "TRST"),
                        *a = hpt_state_find(secs, nsec, "ADAM"), *d = hpt_state_find(secs, nsec, "DATA");
    if (!t || !r || !a || !d) return "a model file, not a checkpoint (no TCFG/TRST/ADAM/DATA section)";
    uint32_t tv = 0;
    if (t->n >= 4) memcpy(&tv, t->p, 4);
    if (tv > TCFG_VERSION) return "its TCFG section is a newer version than this hpt reads (upgrade hpt)";
    if (!decode_tcfg(t, c, str, mode)) return hpt_errmsg();  /* "bad TCFG section: ..." */
    /* every setting in its range before anything is sized from it */
    c->out_dir = dir;
    if (hpt_train_config_check(c) != HPT_OK) {
        static char why[960];
        snprintf(why, sizeof why, "its training config (TCFG) fails a check: %.900s", hpt_errmsg());
        return why;
    }
    trst tv_;
    const char *bad = decode_trst(r, c->max_iters, &tv_);
    if (bad) return bad;
    int64_t logs;
    if ((bad = decode_logs(hpt_state_find(secs, nsec, "LOGS"), &logs))) return bad;
    uint64_t n = 0;
    memcpy(&n, a->p, a->n >= 8 ? 8 : 0);
    if (a->n < 8 || a->n != 8 + 2 * n * sizeof(float)) return "bad ADAM section";
    if (d->n > HPT_CURSOR_MAX) return "bad DATA section";
    const hpt_state_sec *ds = hpt_state_find(secs, nsec, "DSRC");
    if (ds && ds->n != DSRC_LEN) return "bad DSRC section (size)";
    /* the arenas the config implies must be the ones stored, checked before
     * hpt_trainer_init allocates them: a flipped n_embd must not reserve GBs */
    const hpt_state_sec *cf = hpt_state_find(secs, nsec, "CONF"), *pm = hpt_state_find(secs, nsec, "PARM");
    if (!cf || !pm || cf->n < 8 || (cf->n - 4) % 4 || cf->n > 4 + 4 * 16) return "bad CONF section";
    uint32_t conf[16], nconf = (uint32_t)((cf->n - 4) / 4), stored;
    memcpy(&stored, cf->p, 4);
    if (stored != nconf) return "bad CONF section";
    memcpy(conf, cf->p + 4, 4 * nconf);
    size_t want;
    if (hpt_model_conf_params(conf, (int)nconf, &want) != HPT_OK || want != n || pm->n != 8 + n * sizeof(float))
        return "the model config (CONF) does not match the stored parameters";
    if (conf[0] == HPT_FAMILY_GPT2 && ((int)conf[2] != c->block_size || (int)conf[3] != c->n_layer ||
                                       (int)conf[4] != c->n_head || (int)conf[5] != c->n_embd))
        return "the model config (CONF) does not match the training config (TCFG)";
    if (*mode > 1) return "unknown training mode in TCFG (upgrade hpt)";
    if (*mode == 1 && !hpt_state_find(secs, nsec, "HYBR")) return "a hybrid checkpoint without its HYBR section";
    const hpt_state_sec *ew = hpt_state_find(secs, nsec, "EMAW");
    if (c->ema_decay > 0 && (!ew || ew->n != 8 + n * sizeof(float))) return "bad or missing EMAW section (--ema run)";
    const hpt_state_sec *sf = hpt_state_find(secs, nsec, "SFRE");
    if (!strcmp(c->optimizer, "schedule-free")) {
        if (!sf || sf->n != SFRE_LEN(n)) return "bad or missing SFRE section (--optimizer schedule-free run)";
        double lr_max, wsum;
        memcpy(&lr_max, sf->p + 8, 8);
        memcpy(&wsum, sf->p + 16, 8);
        if (!nonneg(lr_max) || !nonneg(wsum)) return "bad SFRE section (a negative or non-finite rate sum)";
    }
    return check_lstp(secs, nsec, c, tv_.step, n);
}

static hpt_status restore(hpt_trainer *tr, const char *path, const hpt_state_sec *secs, int nsec) {
    hpt_model *m = tr->model;
    const hpt_state_sec *conf = hpt_state_find(secs, nsec, "CONF"), *parm = hpt_state_find(secs, nsec, "PARM"),
                        *r = hpt_state_find(secs, nsec, "TRST"), *a = hpt_state_find(secs, nsec, "ADAM"),
                        *d = hpt_state_find(secs, nsec, "DATA");
    if (!conf || !parm || conf->n != 4 + 4ull * m->nconf || memcmp(conf->p + 4, m->conf, 4ull * m->nconf))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': its model (CONF) does not match its training config (TCFG)", path);
    size_t n = m->nparams;
    if (parm->n != 8 + n * sizeof(float) || a->n != 8 + 2 * n * sizeof(float))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': parameter or moment count does not match the model (%zu)", path, n);
    /* the file's bytes as floats, into the device's memory (the sections
     * are not float-aligned in the file's buffer: upload copies bytes) */
    const hpt_device *dev = m->dev;
    dev->upload(m->params, (const float *)(parm->p + 8), n);
    dev->upload(tr->m, (const float *)(a->p + 8), n);
    dev->upload(tr->v, (const float *)(a->p + 8 + n * sizeof(float)), n);
    if (tr->ema) dev->upload(tr->ema, (const float *)(hpt_state_find(secs, nsec, "EMAW")->p + 8), n);
    if (tr->sf_z) {
        const unsigned char *sf = hpt_state_find(secs, nsec, "SFRE")->p;
        memcpy(&tr->sf.lr_max, sf + 8, 8);
        memcpy(&tr->sf.weight_sum, sf + 16, 8);
        dev->upload(tr->sf_z, (const float *)(sf + 24), n);
        dev->upload(tr->sf_x, (const float *)(sf + 24 + n * sizeof(float)), n);
    }
    /* checked by check_sections against the TCFG; again here against the
     * trainer built from it (max_iters resolved from epochs) */
    trst t;
    const char *bad = decode_trst(r, tr->cfg.max_iters, &t);
    if (bad) return hpt_fail(HPT_ERR_FORMAT, "'%s': %s", path, bad);
    tr->step = (int)t.step;
    tr->updates = (int)t.updates;
    tr->next_eval = (int)t.next_eval;
    tr->train_s = t.train_s; tr->eval_s = t.eval_s; tr->tokens = t.tokens;
    tr->final_val = t.final_val; tr->best_val = t.best_val; tr->final_acc = t.final_acc;
    m->backward_calls = (size_t)t.backward_calls;
    if (!tr->task_->cursor_load(tr->task_, d->p, (size_t)d->n))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': the data cursor (DATA) does not fit this data set", path);
    tr->resumed = 1;
    if ((bad = decode_logs(hpt_state_find(secs, nsec, "LOGS"), &tr->metrics_bytes)))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': %s", path, bad);
    if (tr->outer.arena) {
        /* saved at a sync: the weights are the anchor; u is every rank's,
         * the moments this rank's own */
        const unsigned char *ls = hpt_state_find(secs, nsec, "LSTP")->p;
        uint32_t ranks;
        memcpy(&ranks, ls, 4);
        if ((int)ranks != tr->ranks)
            return hpt_fail(HPT_ERR_FORMAT, "'%s': its LSTP section holds %u ranks' state, not %d", path, ranks, tr->ranks);
        dev->copy(tr->outer.anchor, m->params, n);
        dev->upload(tr->outer.u, (const float *)(ls + 12), n);
        if (tr->rank > 0) {
            const unsigned char *own = ls + 12 + (1 + 2 * (size_t)(tr->rank - 1)) * n * sizeof(float);
            dev->upload(tr->m, (const float *)own, n);
            dev->upload(tr->v, (const float *)(own + n * sizeof(float)), n);
        }
    }
    const hpt_state_sec *hy = hpt_state_find(secs, nsec, "HYBR");
    if (tr->resume_mode == 1 && hy) {
        tr->resume_state = malloc(hy->n ? (size_t)hy->n : 1);
        if (!tr->resume_state) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
        memcpy(tr->resume_state, hy->p, (size_t)hy->n);
        tr->resume_state_n = (size_t)hy->n;
    }
    snprintf(tr->ckpt_path, sizeof tr->ckpt_path, "%s", path);
    return HPT_OK;
}

/* The data against the checkpoint's record of it (DSRC): the same size and
 * CRC-32, or refused naming the file, unless allow; then what goes on
 * differently is logged. A checkpoint without the record is let through
 * with a note: it comes from an hpt that did not keep one. */
static hpt_status data_matches(const hpt_trainer *tr, const hpt_state_sec *secs, int nsec, const char *path,
                               int allow, hpt_log_fn log, void *ctx) {
    const hpt_task *t = tr->task_;
    const char *src = t->data_source && *t->data_source ? t->data_source : "(the data)";
    const hpt_state_sec *ds = hpt_state_find(secs, nsec, "DSRC");
    if (!ds) {
        hpt_logf(log, ctx, "note       '%s' holds no record of its data (an older hpt wrote it): '%s' cannot be "
                 "checked against the data the run began with", path, src);
        return HPT_OK;
    }
    uint64_t size;
    uint32_t crc;
    memcpy(&size, ds->p, 8);  /* size checked by check_sections */
    memcpy(&crc, ds->p + 8, 4);
    if (size == t->data_size && crc == t->data_crc) return HPT_OK;
    if (size == 0 && crc == 0) {
        /* no data is 0 bytes (an empty file is refused): an older hpt
         * recorded this for token shards, whose identity it did
         * not know; like a missing record, it cannot be checked */
        hpt_logf(log, ctx, "note       '%s' holds no identity of its data (an older hpt wrote it for token shards): "
                 "'%s' cannot be checked against the data the run began with; checkpoints from here on record it",
                 path, src);
        return HPT_OK;
    }
    char was[160];
    snprintf(was, sizeof was, "%llu bytes with CRC-32 %08x at the checkpoint, %llu bytes with CRC-32 %08x now",
             (unsigned long long)size, crc, (unsigned long long)t->data_size, t->data_crc);
    if (!allow)
        return hpt_fail(HPT_ERR_DATA, "the data '%s' changed since '%s' was saved (%s): the run would go on "
                        "training on other data than it began with%s. Restore the data, or resume with "
                        "--allow-data-change to go on with it as it is", src, path, was,
                        size != t->data_size ? ", and its train/validation split would move" : "");
    char desc[512];
    t->describe(t, desc, sizeof desc);
    /* the model is built for the data: a char vocabulary is the corpus's
     * characters, so new ones make another model, which no flag can bridge
     * (restore would only say CONF does not match) */
    const hpt_state_sec *cf = hpt_state_find(secs, nsec, "CONF");
    const hpt_model *m = tr->model;
    if (cf && (cf->n != 4 + 4ull * m->nconf || memcmp(cf->p + 4, m->conf, 4ull * m->nconf))) {
        uint32_t v = 0;
        if (cf->n >= 12) memcpy(&v, cf->p + 8, 4);
        if (m->conf[0] == HPT_FAMILY_GPT2 && v != m->conf[1])
            return hpt_fail(HPT_ERR_DATA, "--allow-data-change: the data '%s' changed (%s) and its tokenizer's "
                            "vocabulary with it (%u tokens now, %u in the run's model: a char tokenizer's vocabulary "
                            "is the corpus's distinct characters), so the run's model cannot go on with it",
                            src, was, m->conf[1], v);
        return hpt_fail(HPT_ERR_DATA, "--allow-data-change: the data '%s' changed (%s) and the model built for it "
                        "is not the run's (CONF differs), so the run cannot go on with it", src, was);
    }
    hpt_logf(log, ctx, "data       --allow-data-change: '%s' changed since the checkpoint (%s); the run goes on "
             "with it as it is now (%s). What changes: training draws from the new data%s, val_loss from here on "
             "is measured on the new validation split and is not comparable with the values before, the run is no "
             "longer the uninterrupted one bit for bit, and the checkpoints from here on record the new data",
             src, was, desc, size != t->data_size ? ", the train/validation split moved with the size" : "");
    return HPT_OK;
}

/* A run resumes on as many ranks as it was trained on: each step's
 * micro-batches are split over the ranks, and another split adds their
 * gradients in another order (not bit-exact), so it is refused. */
static hpt_status ranks_match(const hpt_state_sec *secs, int nsec, const char *path) {
    const hpt_state_sec *rk = hpt_state_find(secs, nsec, "RANK");
    uint32_t stored = 1;
    if (rk && (rk->n != 4 || (memcpy(&stored, rk->p, 4), stored < 2)))
        return hpt_fail(HPT_ERR_FORMAT, "'%s': bad RANK section", path);
    int now = hpt_comm_size(hpt_comm_world());
    if ((int)stored == now) return HPT_OK;
    char how[64];
    if (stored == 1) snprintf(how, sizeof how, "one process, without mpirun");
    else snprintf(how, sizeof how, "mpirun -np %u", stored);
    return hpt_fail(HPT_ERR_ARG, "'%s' was trained on %u rank%s, this resume runs on %d: resume it with %s "
                    "(another rank count splits each step's micro-batches differently, so its gradient sums would "
                    "not be bit-exact)", path, stored, stored == 1 ? "" : "s", now, how);
}

hpt_status hpt_trainer_resume(hpt_trainer **out, const char *dir, int threads, unsigned flags, const char *device,
                              int vram_limit_mib,
                              hpt_log_fn log, void *ctx) {
    *out = NULL;
    char cdir[4200], path[4400];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    /* lock before reading or renaming anything: a live run may be writing */
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return hpt_fail(HPT_ERR_IO, "no checkpoints in '%s': no such run directory", dir);
    /* under mpirun rank 0 alone locks, renames and cuts: the others read */
    int lock_fd = -1, writer = hpt_comm_rank(hpt_comm_world()) == 0;
    if (writer) HPT_TRY(hpt_dir_lock(dir, &lock_fd));
    /* the file names, newest first */
    int *steps = NULL, ns = 0, cap = 0;
    DIR *d = opendir(cdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            int s = ckpt_step(e->d_name);
            if (s < 0) continue;
            if (ns == cap) {
                int *p = realloc(steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(int));
                if (!p) { free(steps); closedir(d); hpt_dir_unlock(lock_fd); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
                steps = p;
            }
            steps[ns++] = s;
        }
        closedir(d);
    }
    if (ns == 0) {
        free(steps);
        if (writer) hpt_dir_unlock_discard(dir, lock_fd);  /* no run here: leave no .hpt.lock behind */
        return hpt_fail(HPT_ERR_IO, "no checkpoints in '%s' (train with --save-interval N, or stop a run with "
                        "Ctrl-C / SIGTERM, to write them)", cdir);
    }
    qsort(steps, (size_t)ns, sizeof(int), cmp_desc);

    unsigned char *buf = NULL;
    hpt_state_sec secs[HPT_STATE_MAX_SECTIONS];
    int nsec = 0, found = -1;
    hpt_train_config c;
    tcfg_strings str;
    uint32_t mode = 0;
    char first_err[1024] = "";
    for (int i = 0; i < ns && found < 0; i++) {
        snprintf(path, sizeof path, "%s/ckpt-%08d.bin", cdir, steps[i]);
        const char *why = NULL;
        if (hpt_state_read(path, &buf, secs, &nsec) != HPT_OK) why = hpt_errmsg();
        else if ((why = check_sections(secs, nsec, dir, &c, &str, &mode))) { free(buf); buf = NULL; }
        if (!why) { found = i; break; }
        if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", why);
        hpt_logf(log, ctx, "checkpoint '%s' is unusable: %s%s", path, why,
              i + 1 < ns ? "; falling back to the previous one" : "");
    }
    if (found < 0) {
        hpt_status st = hpt_fail(HPT_ERR_FORMAT, "no valid checkpoint in '%s' (%d tried; the newest: %s)",
                                 cdir, ns, first_err);
        free(steps);
        hpt_dir_unlock(lock_fd);
        return st;
    }
    hpt_status st = ranks_match(secs, nsec, path);
    hpt_trainer *tr = NULL;
    if (st == HPT_OK && threads >= 0 && threads != c.threads)
        st = hpt_fail(HPT_ERR_ARG, "--threads %d differs from the run's --threads %d: resume with the same "
                      "thread count (or without --threads)", threads, c.threads);
    if (st == HPT_OK) {
        c.out_dir = dir;  /* the directory named on the command line, wherever it was first written */
        c.device = device ? device : "cpu";   /* not stored: a run may move between devices */
        c.vram_limit_mib = vram_limit_mib;
        c.existing_run = HPT_RUNDIR_CONTINUE;
        st = hpt_trainer_init(&tr, &c);
        if (st == HPT_OK) { tr->resume_mode = mode; tr->lock_fd = lock_fd; lock_fd = -1; }
    }
    /* the data was read by hpt_trainer_init: compare before anything is restored */
    if (st == HPT_OK) st = data_matches(tr, secs, nsec, path, (flags & HPT_RESUME_ALLOW_DATA_CHANGE) != 0, log, ctx);
    if (st == HPT_OK) st = restore(tr, path, secs, nsec);
    free(buf);
    if (st != HPT_OK) { hpt_trainer_free(tr); free(steps); hpt_dir_unlock(lock_fd); return st; }
    /* every rank must have restored the same state */
    if ((st = hpt_trainer_check_ranks(tr)) != HPT_OK) { hpt_trainer_free(tr); free(steps); return st; }
    /* the newer, unusable files: out of the way of pruning and later resumes */
    for (int i = 0; i < found && writer; i++) {
        char bad[4400], to[4500];
        snprintf(bad, sizeof bad, "%s/ckpt-%08d.bin", cdir, steps[i]);
        snprintf(to, sizeof to, "%s.corrupt", bad);
        if (rename(bad, to) == 0) hpt_logf(log, ctx, "renamed the unusable '%s' to '%s'", bad, to);
    }
    free(steps);
    hpt_logf(log, ctx, "resume     from '%s': step %d of %d", tr->ckpt_path, tr->step, tr->cfg.max_iters);
    *out = tr;
    return HPT_OK;
}

int hpt_rundir_newest_checkpoint(const char *dir, char *path, size_t cap) {
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (!d) return -1;
    int newest = -1;
    for (struct dirent *e; (e = readdir(d));) {
        int s = ckpt_step(e->d_name);
        if (s > newest) newest = s;
    }
    closedir(d);
    if (newest >= 0) snprintf(path, cap, "%s/ckpt-%08d.bin", cdir, newest);
    return newest;
}
