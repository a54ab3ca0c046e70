/*
 * trainer.c — plain training: AdamW with decoupled weight decay on matrices,
 * linear warmup then a decay schedule (schedule.c), global-norm clipping, gradient
 * accumulation, evaluation on fixed validation windows, and the run loop that
 * writes metrics.jsonl, summary.json, model.bin and checkpoints (checkpoint.c).
 *
 * Everything is allocated in hpt_trainer_init; a step allocates nothing (the
 * run loop builds each metrics.jsonl line as a small cJSON object).
 * Determinism: the data RNG, the model init and every kernel depend only on
 * the seed (kernels split work by output, see kernels.h), so a run is
 * reproducible bit for bit for a given seed and thread count.
 */
#include "../kernels/kernels.h"
#include "../model/model.h"
#include "preflight.h"
#include "schedule.h"
#include "settings.h"
#include "trainer_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* hpt_train_config_default, _default_for and _check: settings.c, from the settings table;
 * hpt_lr_at: schedule.c */

void hpt_trainer_free(hpt_trainer *tr) {
    if (!tr) return;
    if (tr->model) {
        /* the buffers beside the model live where its arenas do */
        const hpt_device *dev = tr->model->dev;
        dev->free(dev, tr->opt_arena);
        dev->free(dev, tr->grad_sum);
    }
    hpt_outer_free(&tr->outer);
    hpt_model_free(tr->model);
    if (tr->task_) tr->task_->free(tr->task_);
    hpt_device_close(tr->dev);   /* after everything on it */
    free(tr->keep_steps);
    free(tr->muon_scratch);
    free(tr->slots);
    free(tr->resume_state);
    hpt_dir_unlock(tr->lock_fd);
    free(tr);
}

hpt_model *hpt_trainer_model(hpt_trainer *tr) { return tr->model; }
void hpt_trainer_set_memory_limits(hpt_trainer *tr, size_t warn, size_t limit) {
    tr->rss_warn = warn;
    tr->rss_limit = limit;
}
const hpt_text *hpt_trainer_text(const hpt_trainer *tr) { return tr->task_->text; }
const hpt_train_config *hpt_trainer_config(const hpt_trainer *tr) { return &tr->cfg; }
const char *hpt_trainer_checkpoint(const hpt_trainer *tr) { return tr->ckpt_path; }

static volatile sig_atomic_t stop_requested;
void hpt_request_stop(void) { stop_requested = 1; }
void hpt_trainer_clear_stop(void) { stop_requested = 0; }

int hpt_trainer_writes(const hpt_trainer *tr) { return hpt_trainer_writer(tr); }

hpt_status hpt_trainer_agree(hpt_comm *comm, hpt_status st) {
    if (hpt_comm_all_ok(comm, st == HPT_OK)) return HPT_OK;
    int st0 = (int)st;
    hpt_comm_bcast(comm, &st0, sizeof st0, 0);
    if (st != HPT_OK) return st;
    return hpt_fail(st0 != HPT_OK ? (hpt_status)st0 : HPT_ERR_IO, "stopped: %s failed (its message says why)",
                    st0 != HPT_OK ? "rank 0" : "another rank");
}

/* The step's micro-batches and the buffer their gradients are summed in
 * (the micro-steps of every rank, one process's --grad-accum micro). */
static hpt_status init_micro(hpt_trainer *tr) {
    tr->micro = tr->cfg.grad_accum * tr->ranks;
    /* local-step mode: a rank's gradient is the mean of its own micro-batches */
    tr->share = tr->cfg.sync_interval > 0 ? tr->cfg.grad_accum : tr->micro;
    if (tr->micro == 1) return HPT_OK;  /* the plain step: no sum, no slots */
    /* the summed gradient on the device, with room after it for the host's
     * slots (one per micro-batch's loss, and the stop flag), so that the
     * all-reduce sends both at once; ranks > 1 need a device whose memory
     * is the host's (hpt_trainer_init) */
    tr->grad_sum = tr->model->dev->alloc(tr->model->dev, tr->model->nparams + (size_t)tr->micro + 1);
    tr->slots = calloc((size_t)tr->micro + 1, sizeof(float));
    return tr->grad_sum && tr->slots ? HPT_OK : hpt_fail(HPT_ERR_NOMEM, "out of memory");
}

/* Local-step mode's anchor (the initial weights; a resume overwrites it)
 * and outer momentum (0). The weight average and schedule-free's iterates
 * would be each rank's own between syncs, so they are refused with it. */
static hpt_status init_outer(hpt_trainer *tr) {
    const hpt_train_config *c = &tr->cfg;
    if (c->sync_interval <= 0) return HPT_OK;
    if (c->ema_decay > 0.0f)
        return hpt_fail(HPT_ERR_ARG, "--ema cannot be combined with --sync-interval (the ranks' weights differ "
                        "between syncs, so their average would too)");
    if (hpt_trainer_schedule_free(tr))
        return hpt_fail(HPT_ERR_ARG, "--optimizer schedule-free cannot be combined with --sync-interval "
                        "(local-step mode takes AdamW steps)");
    if (hpt_outer_init(&tr->outer, tr->model, c->sync_outer_lr, c->sync_outer_momentum) != HPT_OK)
        return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    hpt_outer_reset(&tr->outer, tr->model->params);
    return HPT_OK;
}

hpt_status hpt_trainer_init(hpt_trainer **out, const hpt_train_config *c) {
    *out = NULL;
    HPT_TRY(hpt_train_config_check(c));
    /* the device first: one that is not here is refused before anything is
     * read or written. Opened once, here, for the run: the task builds the
     * model on it, the trainer closes it last. */
    hpt_device *dev;
    const hpt_device_settings ds = {.precision = c->precision, .mem_limit = (size_t)c->vram_limit_mib << 20};
    HPT_TRY(hpt_device_open(c->device, &ds, &dev));
    hpt_comm *comm = hpt_comm_world();
    /* rank 0 alone owns the run directory; the others learn its verdict */
    int writer = hpt_comm_rank(comm) == 0;
    hpt_status st = hpt_trainer_agree(comm, writer ? hpt_rundir_check(c->out_dir, c->existing_run)   /* preflight.c */
                                                   : HPT_OK);
    hpt_trainer *tr = st == HPT_OK ? calloc(1, sizeof *tr) : NULL;
    if (!tr) {
        hpt_device_close(dev);
        return st != HPT_OK ? st : hpt_fail(HPT_ERR_NOMEM, "out of memory");
    }
    tr->dev = dev;
    tr->lock_fd = -1;
    tr->comm = comm;
    tr->rank = hpt_comm_rank(comm);
    tr->ranks = hpt_comm_size(comm);
    if (tr->ranks > 1 && !dev->host_memory) {
        hpt_trainer_free(tr);
        return hpt_fail(HPT_ERR_ARG, "--device %s: data parallelism (MPI) runs on the CPU in this version (its "
                        "all-reduce reads the gradients in host memory)", dev->name);
    }
    tr->cfg = *c;
    tr->cfg.device = dev->name;
    if (dev->mem_info) dev->mem_info(dev, &tr->dev_free0, &tr->dev_total);
    tr->dev_min_free = tr->dev_free0;
    hpt_abs_path(tr->data_path, sizeof tr->data_path, c->data_path ? c->data_path : "");  /* resumable from any cwd */
    snprintf(tr->out_dir, sizeof tr->out_dir, "%s", c->out_dir);
    snprintf(tr->task_name, sizeof tr->task_name, "%s", c->task);
    snprintf(tr->model_name, sizeof tr->model_name, "%s", c->model);
    tr->cfg.data_path = tr->data_path;
    if (c->init_path && c->init_path[0]) {
        hpt_abs_path(tr->init_path, sizeof tr->init_path, c->init_path);
        tr->cfg.init_path = tr->init_path;
    } else tr->cfg.init_path = NULL;
    tr->cfg.out_dir = tr->out_dir;
    tr->cfg.task = tr->task_name;
    tr->cfg.model = tr->model_name;
    hpt_schedule_intern(&tr->cfg);
    hpt_set_threads(c->threads);

    st = !strcmp(c->task, "text") ? hpt_task_text_init(&tr->task_, &tr->cfg, dev)
                                  : hpt_task_fashion_init(&tr->task_, &tr->cfg, dev);
    if (st != HPT_OK) { hpt_trainer_free(tr); return st; }
    tr->model = tr->task_->model;
    if (c->epochs > 0) {
        /* whole epochs of optimizer steps, the last one possibly short of a batch */
        size_t per_step = (size_t)tr->task_->batch_size * c->grad_accum * tr->ranks;
        int64_t per_epoch = (int64_t)((tr->task_->train_examples + per_step - 1) / per_step);
        if ((int64_t)c->epochs * per_epoch > HPT_STEPS_MAX) {
            st = hpt_fail(HPT_ERR_ARG, "--epochs %d x %lld steps per epoch (%zu training examples / (--batch-size "
                          "%d x --grad-accum %d)) is %lld steps, more than %d: give fewer --epochs or a larger "
                          "--batch-size", c->epochs, (long long)per_epoch, tr->task_->train_examples,
                          tr->task_->batch_size, c->grad_accum, (long long)c->epochs * per_epoch, HPT_STEPS_MAX);
            hpt_trainer_free(tr);
            return st;
        }
        tr->cfg.max_iters = c->epochs * (int)per_epoch;
        if (c->eval_interval < 0) tr->cfg.eval_interval = (int)per_epoch;
    }
    if (tr->cfg.eval_interval < 0) tr->cfg.eval_interval = 0;
    size_t n = tr->model->nparams;
    int ema = c->ema_decay > 0.0f, sf = hpt_trainer_schedule_free(tr);
    tr->opt_arena = dev->alloc(dev, (size_t)(2 + 2 * sf + ema) * n);   /* zeroed: AdamW's moments start at 0 */
    if (!tr->opt_arena) { hpt_trainer_free(tr); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    tr->m = tr->opt_arena;
    tr->v = tr->opt_arena + n;
    if (sf) {
        /* z and x start at the initial weights, as y (a resume overwrites them) */
        tr->sf_z = tr->opt_arena + 2 * n;
        tr->sf_x = tr->opt_arena + 3 * n;
        dev->copy(tr->sf_z, tr->model->params, n);
        dev->copy(tr->sf_x, tr->model->params, n);
    }
    if (ema) {
        /* the average starts at the initial weights (a resume overwrites it) */
        tr->ema = tr->opt_arena + (size_t)(2 + 2 * sf) * n;
        dev->copy(tr->ema, tr->model->params, n);
    }
    if (hpt_trainer_muon(tr)) {
        /* settings.c refused any device but the CPU row: the step runs on the host */
        HPT_ASSERT(dev->host_memory);
        tr->muon_scratch = malloc((hpt_muon_scratch_floats(tr->model) + 1) * sizeof(float));
        if (!tr->muon_scratch) { hpt_trainer_free(tr); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    }
    tr->final_ema_val = NAN;
    tr->keep_steps = malloc((size_t)c->keep_last * sizeof(int));
    if (!tr->keep_steps) { hpt_trainer_free(tr); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    if ((st = init_micro(tr)) != HPT_OK || (st = init_outer(tr)) != HPT_OK) { hpt_trainer_free(tr); return st; }
    tr->final_val = NAN;
    tr->best_val = INFINITY;
    tr->final_acc = NAN;
    tr->metrics_bytes = -1;
    tr->next_eval = tr->cfg.eval_interval > 0 ? tr->cfg.eval_interval : tr->cfg.max_iters;
    /* every check passed: only now may --overwrite remove the old run */
    if (writer) st = hpt_rundir_prepare(tr->cfg.out_dir, c->existing_run, &tr->lock_fd);
    if ((st = hpt_trainer_agree(comm, st)) != HPT_OK) { hpt_trainer_free(tr); return st; }
    *out = tr;
    return HPT_OK;
}

hpt_adamw hpt_trainer_adamw(const hpt_trainer *tr, int it) {
    const hpt_train_config *c = &tr->cfg;
    return (hpt_adamw){.lr = hpt_lr_at(c, it), .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                       .weight_decay = c->weight_decay, .grad_clip = c->grad_clip};
}

float hpt_trainer_lr(const hpt_trainer *tr, int it) { return hpt_lr_at(&tr->cfg, it); }

int hpt_trainer_muon(const hpt_trainer *tr) {
    return tr->cfg.optimizer && !strcmp(tr->cfg.optimizer, "muon");
}

int hpt_trainer_schedule_free(const hpt_trainer *tr) {
    return tr->cfg.optimizer && !strcmp(tr->cfg.optimizer, "schedule-free");
}

/* Swaps the params (y) and the schedule-free average x in place: the
 * evaluation point in, exactly, and back again. */
static void sf_swap(hpt_trainer *tr) {
    tr->model->dev->swap(tr->sf_x, tr->model->params, tr->model->nparams);
}

/* ---------------------------------------------------------------- for the layer above (trainer.h) */

int hpt_trainer_steps(const hpt_trainer *tr) { return tr->step; }
int hpt_trainer_updates(const hpt_trainer *tr) { return tr->updates; }

void hpt_trainer_advance(hpt_trainer *tr, int k) {
    HPT_ASSERT(k >= 0 && tr->step + k <= tr->cfg.max_iters);
    tr->step += k;
}


double hpt_trainer_clock(const hpt_trainer *tr) { return tr->train_s; }
double hpt_trainer_tokens(const hpt_trainer *tr) { return tr->tokens; }
void hpt_trainer_add_time(hpt_trainer *tr, double s) { tr->train_s += s; }

const float *hpt_trainer_moment1(const hpt_trainer *tr) { return tr->m; }
const float *hpt_trainer_moment2(const hpt_trainer *tr) { return tr->v; }

void hpt_trainer_reset_moment1(hpt_trainer *tr) {
    tr->model->dev->fill(tr->m, 0.0f, tr->model->nparams);
}

void hpt_trainer_restore_moments(hpt_trainer *tr, const float *m1, const float *m2, int updates) {
    HPT_ASSERT(updates >= 0 && updates <= tr->updates);
    const hpt_device *dev = tr->model->dev;
    dev->copy(tr->m, m1, tr->model->nparams);
    dev->copy(tr->v, m2, tr->model->nparams);
    tr->updates = updates;
}

float *hpt_trainer_sf_z(hpt_trainer *tr) { return tr->sf_z; }
float *hpt_trainer_sf_x(hpt_trainer *tr) { return tr->sf_x; }
hpt_sf_state hpt_trainer_sf_sums(const hpt_trainer *tr) { return tr->sf; }

void hpt_trainer_restore_sf(hpt_trainer *tr, const float *z, const float *x, hpt_sf_state sums) {
    HPT_ASSERT(tr->sf_z);
    const hpt_device *dev = tr->model->dev;
    dev->copy(tr->sf_z, z, tr->model->nparams);
    dev->copy(tr->sf_x, x, tr->model->nparams);
    tr->sf = sums;
}

void hpt_trainer_batch_shape(const hpt_trainer *tr, int *max_b, int *t, int *x_dim) {
    *max_b = tr->task_->batch_size;
    *t = tr->task_->tokens_per_sample;
    *x_dim = tr->task_->x_dim;
}

hpt_status hpt_trainer_draw_batch(hpt_trainer *tr, hpt_batch *b) { return tr->task_->train_batch(tr->task_, b); }

int hpt_trainer_is_resumed(const hpt_trainer *tr) { return tr->resumed; }

const unsigned char *hpt_trainer_resume_state(const hpt_trainer *tr, size_t *n) {
    *n = tr->resume_state ? tr->resume_state_n : 0;
    return tr->resume_state;
}

hpt_status hpt_trainer_probe(hpt_trainer *tr, const hpt_batch *b, float *loss) {
    hpt_status st = hpt_model_forward(tr->model, b, loss);
    tr->model->have_targets = 0;  /* a probe is never followed by backward */
    return st;
}

static hpt_status bad_loss(const hpt_trainer *tr, float loss) {
    return hpt_fail(HPT_ERR_NUMERIC, "training loss is %f at step %d; try a lower --lr or a smaller --grad-clip",
                    loss, tr->step + 1);
}

/* One micro-batch's forward and backward, its gradient written over the
 * gradient arena (hpt_model_backward_fresh: zero_grad + backward without
 * the zeroing sweep), scaled by 1/share: the mean over the step's
 * micro-batches (this rank's own, in local-step mode). */
static hpt_status micro_step(hpt_trainer *tr, const hpt_batch *b, float *loss) {
    HPT_TRY(hpt_model_forward(tr->model, b, loss));
    if (!isfinite(*loss)) {  /* the caller says so, once every rank knows; a zero gradient meanwhile */
        hpt_model_zero_grad(tr->model);
        return HPT_OK;
    }
    return hpt_model_backward_fresh(tr->model, 1.0f / tr->share);
}

/* The step's gradient (micro > 1) as one fixed sum: each micro-step's
 * gradient is computed alone from zero and added, g = ((g0 + g1) + g2)...,
 * then the ranks' sums are added by one all-reduce. A single process with
 * --grad-accum 2 thus computes g0 + g1 with the same two IEEE additions as
 * 2 ranks with --grad-accum 1 (bit-exact); other splits add the same terms
 * in another order (equal within float rounding). Every rank draws every
 * micro-batch, so the data cursor is the same on all of them. */
static hpt_status summed_gradient(hpt_trainer *tr, double *loss_sum, double *ntok) {
    hpt_model *m = tr->model;
    const size_t n = m->nparams;
    float *sum = tr->grad_sum, *slots = tr->slots;
    const int first = tr->rank * tr->cfg.grad_accum, last = first + tr->cfg.grad_accum;
    memset(slots, 0, ((size_t)tr->micro + 1) * sizeof(float));
    for (int j = 0; j < tr->micro; j++) {
        hpt_batch b;
        HPT_TRY(tr->task_->train_batch(tr->task_, &b));
        *ntok += (double)b.B * b.T;
        if (j < first || j >= last) continue;  /* another rank's */
        HPT_TRY(micro_step(tr, &b, &slots[j]));
        if (!isfinite(slots[j]) && (tr->ranks == 1 || tr->share < tr->micro)) return bad_loss(tr, slots[j]);
        if (j == first) m->dev->copy(sum, m->grads, n);
        else m->dev->axpy(sum, 1.0f, m->grads, n);   /* sum + 1 g: the sum's bits */
    }
    if (tr->share < tr->micro) {
        /* local-step mode: this rank's own mean, no communication (its
         * loss is its own micro-batches': rank 0's is the one logged) */
        m->dev->copy(m->grads, sum, n);
        for (int j = first; j < last; j++) *loss_sum += slots[j];
        return HPT_OK;
    }
    /* a stop request rides along, so that every rank stops after the same step */
    slots[tr->micro] = stop_requested ? 1.0f : 0.0f;
    if (tr->ranks > 1) {
        float *after = sum + n;   /* host memory: ranks > 1 run on a row whose memory is the host's */
        memcpy(after, slots, ((size_t)tr->micro + 1) * sizeof(float));
        HPT_TRY(hpt_comm_allreduce_sum(tr->comm, sum, n + (size_t)tr->micro + 1));
        memcpy(slots, after, ((size_t)tr->micro + 1) * sizeof(float));
    }
    tr->stop_seen = slots[tr->micro] > 0.0f;
    m->dev->copy(m->grads, sum, n);
    /* the losses in micro-step order, as one process adds them */
    for (int j = 0; j < tr->micro; j++) {
        if (!isfinite(slots[j])) return bad_loss(tr, slots[j]);
        *loss_sum += slots[j];
    }
    return HPT_OK;
}

/* The plain step's gradient (one micro-batch in one process): unchanged
 * since before data parallelism, bit for bit. */
static hpt_status single_gradient(hpt_trainer *tr, double *loss_sum, double *ntok) {
    hpt_batch b;
    HPT_TRY(tr->task_->train_batch(tr->task_, &b));
    float loss;
    HPT_TRY(micro_step(tr, &b, &loss));
    if (!isfinite(loss)) return bad_loss(tr, loss);
    *loss_sum += loss;
    *ntok += (double)b.B * b.T;
    return HPT_OK;
}

/* Local-step mode's synchronisation, after every H-th step and the last:
 * the ranks' mean displacement since the anchor (one all-reduce, a stop
 * request riding along), then the outer Nesterov step (outer.h) from
 * values every rank holds alike, so that the ranks leave it with equal
 * parameters, which are the next anchor. In one process the displacement
 * is its own: the step the hybrid's outer path takes. */
static hpt_status local_sync(hpt_trainer *tr) {
    float *th = tr->model->params, *an = tr->outer.anchor;
    const size_t n = tr->model->nparams;
    if (tr->ranks == 1) {
        tr->stop_seen = stop_requested;
        hpt_outer_apply(&tr->outer, th, NULL, 1.0f, NULL);
        return HPT_OK;
    }
    float *d = tr->grad_sum;  /* free between steps: n + micro + 1 >= n + 1 floats */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = th[i] - an[i];
    d[n] = stop_requested ? 1.0f : 0.0f;
    HPT_TRY(hpt_comm_allreduce_sum(tr->comm, d, n + 1));
    tr->stop_seen = d[n] > 0.0f;
    const float ranks = (float)tr->ranks;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) d[i] /= ranks;
    hpt_outer_apply(&tr->outer, th, d, 1.0f, NULL);
    return HPT_OK;
}

hpt_status hpt_trainer_step(hpt_trainer *tr, hpt_step_info *info) {
    const hpt_train_config *c = &tr->cfg;
    hpt_model *m = tr->model;
    double t0 = hpt_now(), ntok = 0;
    double loss_sum = 0.0;
    HPT_TRY(tr->micro > 1 ? summed_gradient(tr, &loss_sum, &ntok) : single_gradient(tr, &loss_sum, &ntok));
    hpt_adamw opt = hpt_trainer_adamw(tr, tr->step);
    float lr = opt.lr, norm;
    /* bias correction counts real updates: predicted steps (hybrid) move
     * the schedule but add nothing to the moments */
    if (tr->sf_z) HPT_TRY(hpt_sf_step(m, tr->sf_z, tr->sf_x, tr->v, &tr->sf, &opt, tr->updates + 1, &norm));
    else if (tr->muon_scratch) {
        /* --lr is Muon's; AdamW's rate follows the same schedule from --adam-lr */
        const hpt_muon mu = {.lr = opt.lr, .momentum = c->muon_momentum, .ns_steps = c->muon_ns_steps,
                             .rms = !strcmp(c->muon_scale, "rms")};
        opt.lr = (float)((double)opt.lr * c->adam_lr / c->lr);
        HPT_TRY(hpt_muon_step(m, tr->m, tr->v, tr->muon_scratch, &opt, &mu, tr->updates + 1, &norm));
    } else HPT_TRY(hpt_optim_step(m, tr->m, tr->v, &opt, tr->updates + 1, &norm));
    tr->updates++;
    tr->step++;
    if (tr->outer.arena && hpt_trainer_synced(tr)) HPT_TRY(local_sync(tr));
    double dt = hpt_now() - t0;
    tr->train_s += dt;
    tr->tokens += ntok;
    if (info) {
        memset(info, 0, sizeof *info);
        info->step = tr->step;
        info->max_iters = c->max_iters;
        info->train_loss = (float)(loss_sum / tr->share);
        info->lr = lr;
        info->grad_norm = norm;
        info->step_s = dt;
        info->time_s = tr->train_s;
        info->tokens = tr->tokens;
        info->val_loss = NAN;
        info->val_accuracy = NAN;
        info->backward = 1;
        info->predicted_loss = info->confidence = info->residual = NAN;
    }
    return HPT_OK;
}

static hpt_status eval_params(hpt_trainer *tr, float *val_loss, float *accuracy);

/* Schedule-free runs are evaluated at their average x (the paper's
 * evaluation point), swapped in for the evaluation and out again. */
hpt_status hpt_trainer_eval(hpt_trainer *tr, float *val_loss, float *accuracy) {
    if (tr->sf_x) sf_swap(tr);
    hpt_status st = eval_params(tr, val_loss, accuracy);
    if (tr->sf_x) sf_swap(tr);
    return st;
}

static hpt_status eval_params(hpt_trainer *tr, float *val_loss, float *accuracy) {
    hpt_task *t = tr->task_;
    hpt_model *m = tr->model;
    double t0 = hpt_now(), s = 0.0, n = 0.0, correct = 0.0;
    int nb = t->val_batches(t);
    for (int i = 0; i < nb; i++) {
        hpt_batch b;
        HPT_TRY(t->val_batch(t, i, &b));
        float loss;
        HPT_TRY(hpt_model_forward(m, &b, &loss));
        /* weight by rows: the last batch of a split may be short */
        double rows = (double)b.B * b.T;
        s += loss * rows;
        n += rows;
        if (t->classify) {
            for (int r = 0; r < b.B * b.T; r++) {
                const float *p = m->logits + (size_t)r * m->out_row;
                int best = 0;
                for (int k = 1; k < m->n_out; k++) if (p[k] > p[best]) best = k;
                correct += best == b.targets[r];
            }
        }
    }
    m->have_targets = 0;  /* an eval forward is not a training forward */
    *val_loss = (float)(s / n);
    if (accuracy) *accuracy = t->classify ? (float)(correct / n) : NAN;
    tr->eval_s += hpt_now() - t0;
    return HPT_OK;
}

/* ---------------------------------------------------------------- the run */

void hpt_logf(hpt_log_fn log, void *ctx, const char *fmt, ...) {
    if (!log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log(ctx, line);
}

/* JSON has no NaN/Inf: null, so every line stays parseable. %.9g: every
 * float round-trips. */
void hpt_json_num(cJSON *obj, const char *key, double v) {
    char buf[32];
    if (isfinite(v)) snprintf(buf, sizeof buf, "%.9g", v);
    cJSON_AddItemToObject(obj, key, isfinite(v) ? cJSON_CreateRaw(buf) : cJSON_CreateNull());
}

void hpt_json_u64(cJSON *obj, const char *key, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    cJSON_AddItemToObject(obj, key, cJSON_CreateRaw(buf));
}

static double mib(size_t b) { return b / 1048576.0; }

/* The weight average after the step counter moved from `before` to
 * tr->step: one decay per step, so a Predict phase that advanced k steps
 * decays the old average k times. */
static void ema_update(hpt_trainer *tr, int before) {
    double keep = 1.0;
    for (int t = before; t < tr->step; t++) {
        double d = tr->cfg.ema_decay, warm = (1.0 + t) / (10.0 + t);
        keep *= d < warm ? d : warm;
    }
    const float a = (float)keep, b = 1.0f - a;
    tr->model->dev->lerp(tr->ema, a, b, tr->model->params, tr->model->nparams);
}

/* Swaps the weights and their average in place (an exact, copy-free way
 * to evaluate the average: swapping twice restores every bit). */
static void ema_swap(hpt_trainer *tr) {
    tr->model->dev->swap(tr->ema, tr->model->params, tr->model->nparams);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* On resume: keep the lines of metrics.jsonl up to the checkpoint's step
 * (a killed run may have logged steps past it), rewritten atomically. */
typedef struct metrics_cut { const char *buf; size_t len; int step; int64_t bytes; } metrics_cut;

/* The "step" of one metrics.jsonl line; INT_MAX when the line is not an
 * object with one (a damaged line is dropped). */
static int line_step(const char *line, size_t n) {
    cJSON *o = cJSON_ParseWithLength(line, n);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "step");
    int step = cJSON_IsNumber(k) ? k->valueint : INT_MAX;
    cJSON_Delete(o);
    return step;
}

static hpt_status write_metrics_cut(FILE *f, void *p) {
    const metrics_cut *mc = p;
    const char *s = mc->buf, *end = mc->buf + mc->len;
    /* the length recorded with the checkpoint: exact even where several
     * lines share a step (a rolled-back Predict phase does not move it) */
    if (mc->bytes >= 0 && (uint64_t)mc->bytes <= mc->len) {
        if (mc->bytes && fwrite(s, 1, (size_t)mc->bytes, f) != (size_t)mc->bytes)
            return hpt_fail(HPT_ERR_IO, "cannot write metrics.jsonl: %s", strerror(errno));
        return HPT_OK;
    }
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) break;  /* a torn last line: dropped */
        size_t n = (size_t)(nl + 1 - s);
        if (line_step(s, n) <= mc->step && fwrite(s, 1, n, f) != n)
            return hpt_fail(HPT_ERR_IO, "cannot write metrics.jsonl: %s", strerror(errno));
        s = nl + 1;
    }
    return HPT_OK;
}

static hpt_status cut_metrics(const char *path, int step, int64_t bytes) {
    unsigned char *buf = NULL;
    size_t len = 0;
    if (access(path, F_OK) == 0) HPT_TRY(hpt_read_file(path, &buf, &len));
    metrics_cut mc = {(const char *)buf, len, step, bytes};
    hpt_status st = hpt_save_atomic(path, write_metrics_cut, &mc);
    free(buf);
    return st;
}

/* One line of metrics.jsonl: the trainer's members, the hooks' (the hybrid's
 * phase fields), then the evaluation's. */
static hpt_status write_metrics_line(FILE *mf, const char *path, const hpt_trainer *tr, const hpt_run_hooks *hooks,
                                     const hpt_step_info *info, size_t rss) {
    if (!mf) return HPT_OK;  /* not the writing rank */
    cJSON *o = cJSON_CreateObject();
    if (!o) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    hpt_json_u64(o, "step", (uint64_t)info->step);
    hpt_json_num(o, "train_loss", info->train_loss);
    hpt_json_num(o, "lr", info->lr);
    hpt_json_num(o, "grad_norm", info->grad_norm);
    hpt_json_num(o, "time_s", info->time_s);
    hpt_json_u64(o, "tokens", (uint64_t)info->tokens);
    hpt_json_u64(o, "rss_bytes", rss);
    if (hooks->metrics) hooks->metrics(hooks->hctx, info, o);
    if (info->evaluated) hpt_json_num(o, "val_loss", info->val_loss);
    if (info->evaluated && tr->ema) hpt_json_num(o, "ema_val_loss", info->ema_val_loss);
    if (info->evaluated && tr->task_->classify) hpt_json_num(o, "val_accuracy", info->val_accuracy);
    char line[4096];
    int ok = cJSON_PrintPreallocated(o, line, sizeof line, 0);
    cJSON_Delete(o);
    if (!ok) return hpt_fail(HPT_ERR_NOMEM, "a metrics.jsonl line did not fit in %zu bytes", sizeof line);
    /* flushed per line: a crash loses at most the step in flight; a failed
     * write (a full disk, a file size limit) ends the run, naming the file */
    errno = 0;
    if (fputs(line, mf) == EOF || fputc('\n', mf) == EOF || fflush(mf) == EOF || ferror(mf))
        return hpt_fail(HPT_ERR_IO, "cannot write '%s': %s", path, errno ? strerror(errno) : "write error");
    return HPT_OK;
}

static hpt_status plain_step(void *hctx, hpt_trainer *tr, hpt_step_info *info) {
    (void)hctx;
    return hpt_trainer_step(tr, info);
}

/* ---------------------------------------------------------------- the run loop */

/* One run of the loop: what its parts share. */
typedef struct run {
    hpt_trainer *tr;
    const hpt_run_hooks *hooks;
    hpt_log_fn log;
    hpt_step_fn on_step;
    void *ctx;
    FILE *mf;              /* metrics.jsonl */
    char mpath[4200];
    double *step_times;    /* one entry per step call (a whole Predict phase is one call) */
    int calls, saved_at;
    int ckpt_ok;           /* checkpoints possible: plain steps, or hooks that save their state */
    double wall0;
} run;

/* The memory ledger: bytes of each arena. */
typedef struct ledger { size_t params, grads, adamw, acts, data; } ledger;

static ledger ledger_of(const hpt_trainer *tr) {
    ledger l;
    hpt_model_bytes(tr->model, &l.params, &l.grads, &l.acts);
    l.adamw = (size_t)(2 + (tr->sf_z ? 2 : 0) + (tr->ema ? 1 : 0) + (tr->outer.arena ? 2 : 0)) * tr->model->nparams *
              sizeof(float);
    if (tr->muon_scratch) l.adamw += (hpt_muon_scratch_floats(tr->model) + 1) * sizeof(float);
    l.data = tr->task_->data_bytes(tr->task_);
    /* the step's gradient sum (micro > 1): gradients too */
    if (tr->grad_sum) l.grads += (tr->model->nparams + (size_t)tr->micro + 1) * sizeof(float);
    return l;
}

/* The resolved configuration, then the memory ledger, before step 0. */
static void log_start(const run *r) {
    const hpt_trainer *tr = r->tr;
    const hpt_train_config *c = &tr->cfg;
    hpt_log_fn log = r->log;
    void *ctx = r->ctx;
    hpt_logf(log, ctx, "model      %s, %zu parameters", hpt_model_describe(tr->model), tr->model->nparams);
    if (c->init_path) hpt_logf(log, ctx, "init       the weights and tokenizer of %s (fine-tuning)", c->init_path);
    char desc[512];
    tr->task_->describe(tr->task_, desc, sizeof desc);
    hpt_logf(log, ctx, "data       %s %s: %s", c->task, c->data_path, desc);
    char sched[128];
    hpt_schedule_describe(c, sched, sizeof sched);
    if (tr->ranks > 1)
        hpt_logf(log, ctx, "ranks      %d (MPI, data-parallel): --batch-size and --grad-accum per rank, %d "
                 "micro-batches per step; rank 0 writes the run", tr->ranks, tr->micro);
    if (c->sync_interval > 0)
        hpt_logf(log, ctx, "local-step every %d steps the ranks' mean displacement takes the outer Nesterov step "
                 "(lr %g, momentum %g); between syncs each rank steps alone on its %d micro-batch%s",
                 c->sync_interval, c->sync_outer_lr, c->sync_outer_momentum, tr->share, tr->share == 1 ? "" : "es");
    if (tr->task_->tokens_per_sample > 1)
        hpt_logf(log, ctx, "training   batch %d x block %d x accum %d, %d iters, lr %g -> %g (warmup %d, %s), "
              "wd %g, clip %g, betas %g/%g, eps %g", c->batch_size, c->block_size, c->grad_accum, c->max_iters,
              c->lr, c->min_lr, c->warmup_iters, sched, c->weight_decay, c->grad_clip, c->beta1, c->beta2, c->eps);
    else
        hpt_logf(log, ctx, "training   batch %d x accum %d, %d iters (%d epochs), lr %g -> %g (warmup %d, %s), "
              "wd %g, clip %g, betas %g/%g, eps %g", c->batch_size, c->grad_accum, c->max_iters, c->epochs,
              c->lr, c->min_lr, c->warmup_iters, sched, c->weight_decay, c->grad_clip, c->beta1, c->beta2, c->eps);
    if (c->max_iters > 0 && c->warmup_iters >= c->max_iters)  /* the default 100 on a short run */
        hpt_logf(log, ctx, "warning    warmup %d is not below the run's %d iters: the rate rises for the whole run, "
                 "never reaching lr %g nor decaying (give --warmup-iters below --max-iters)", c->warmup_iters,
                 c->max_iters, c->lr);
    hpt_logf(log, ctx, "eval       every %d iters (0 = end only), %d batches; seed %llu; out %s",
          c->eval_interval, c->eval_iters, (unsigned long long)c->seed, c->out_dir);
    hpt_logf(log, ctx, "threads    %d (OpenMP kernels + OpenBLAS, %s kernels chosen by %s)", hpt_get_threads(),
             hpt_blas_core(), hpt_blas_origin());
    ledger l = ledger_of(tr);
    const hpt_device *dev = tr->model->dev;
    if (dev->mem_info)
        hpt_logf(log, ctx, "device     %s: %.1f MiB planned on it (all but the data), %.1f MiB of %.1f MiB were free "
                 "before", dev->name, mib(l.params + l.grads + l.adamw + l.acts), mib(tr->dev_free0),
                 mib(tr->dev_total));
    else
        hpt_logf(log, ctx, "device     %s: %s", dev->name, dev->summary);
    hpt_logf(log, ctx, "memory     params %.1f MiB, grads %.1f MiB, adamw %.1f MiB, activations %.1f MiB, "
          "data %.1f MiB: %.1f MiB allocated%s", mib(l.params), mib(l.grads), mib(l.adamw), mib(l.acts), mib(l.data),
          mib(l.params + l.grads + l.adamw + l.acts + l.data), tr->ema ? " (adamw includes the weight average)"
          : tr->outer.arena ? " (adamw includes the anchor and outer momentum)"
          : tr->muon_scratch ? " (adamw includes Muon's momentum and Newton-Schulz scratch)" : "");
    if (r->hooks->log_config) r->hooks->log_config(r->hooks->hctx, log, ctx);
}

/* metrics.jsonl: a fresh run starts it, a resumed one cuts it back to the
 * checkpoint and appends. */
static hpt_status open_metrics(run *r) {
    hpt_trainer *tr = r->tr;
    snprintf(r->mpath, sizeof r->mpath, "%s/metrics.jsonl", tr->cfg.out_dir);
    if (!hpt_trainer_writer(tr)) return HPT_OK;  /* r->mf stays NULL */
    if (tr->resumed) HPT_TRY(cut_metrics(r->mpath, tr->step, tr->metrics_bytes));
    r->mf = fopen(r->mpath, tr->resumed ? "a" : "w");
    if (!r->mf) return hpt_fail(HPT_ERR_IO, "cannot create '%s': %s", r->mpath, strerror(errno));
    return HPT_OK;
}

/* A resumed run hands the checkpoint's state of the layer above to its
 * hooks, once, before the first step. */
static hpt_status load_hooks_state(hpt_trainer *tr, const hpt_run_hooks *hooks) {
    if (!tr->resumed || tr->resume_mode == 0) return HPT_OK;
    hpt_status st = hooks->load_state
        ? hooks->load_state(hooks->hctx, tr->resume_state, tr->resume_state_n)
        : hpt_fail(HPT_ERR_ARG, "'%s' holds a hybrid run's state: resume it in hybrid mode", tr->ckpt_path);
    free(tr->resume_state);
    tr->resume_state = NULL;
    tr->resume_state_n = 0;
    return st;
}

/* The weight average after a step call that moved the counter from
 * `before`; its time is training time. */
static void average_weights(hpt_trainer *tr, int before, hpt_step_info *info) {
    info->ema_val_loss = NAN;
    if (!tr->ema) return;
    double te = hpt_now();
    ema_update(tr, before);
    te = hpt_now() - te;
    tr->train_s += te;
    info->time_s = tr->train_s;
    info->step_s += te;
}

/* Every rank's parameters must be rank 0's, bit for bit: they start
 * equal, and every update is the same arithmetic on the same summed
 * gradient. A difference (a rank with other kernels, threads or a bad
 * memory bit) stops the job rather than train on in disagreement. */
hpt_status hpt_trainer_check_ranks(const hpt_trainer *tr) {
    if (tr->ranks == 1) return HPT_OK;
    const hpt_model *m = tr->model;
    uint32_t crc = hpt_model_crc32(m, m->params, m->nparams), theirs = 0;
    int rank = 0, n = hpt_comm_differ(tr->comm, crc, &rank, &theirs);
    if (n == 0) return HPT_OK;
    return hpt_fail(HPT_ERR_NUMERIC, "the ranks' parameters drifted apart at step %d: %d rank%s differ%s from rank "
                    "0 (rank %d has param_crc32 %08x); data-parallel ranks must run the same build, --threads "
                    "and hardware", tr->step, n, n == 1 ? "" : "s", n == 1 ? "s" : "", rank, theirs);
}

/* Tests only: HPT_TEST_DRIFT_RANK=r makes rank r flip one parameter bit
 * after step 1, so that the drift check above can be seen to fire. In
 * local-step mode the bit is the anchor's (a parameter's would be averaged
 * away by the next sync; the anchor is what the ranks must hold alike). */
static void test_drift(hpt_trainer *tr) {
    const char *r = getenv("HPT_TEST_DRIFT_RANK");
    if (r && tr->ranks > 1 && tr->step == 1 && atoi(r) == tr->rank) {
        float *p = tr->outer.arena ? tr->outer.anchor : tr->model->params;
        uint32_t bits;
        memcpy(&bits, p, 4);
        bits ^= 1u;
        memcpy(p, &bits, 4);
    }
}

/* Evaluates when the step counter reaches or jumps past a multiple of the
 * interval (a Predict phase can move it by several steps), and at the end;
 * in local-step mode at the first sync at or after that (the ranks'
 * weights are one model only there). */
static hpt_status eval_if_due(hpt_trainer *tr, hpt_step_info *info) {
    const hpt_train_config *c = &tr->cfg;
    if (!hpt_trainer_synced(tr)) return HPT_OK;
    if (tr->step < c->max_iters && tr->step < tr->next_eval) return HPT_OK;
    while (tr->next_eval <= tr->step) tr->next_eval += c->eval_interval > 0 ? c->eval_interval : c->max_iters;
    HPT_TRY(hpt_trainer_check_ranks(tr));
    HPT_TRY(hpt_trainer_eval(tr, &info->val_loss, &info->val_accuracy));
    info->evaluated = 1;
    tr->final_val = info->val_loss;
    tr->final_acc = info->val_accuracy;
    if (info->val_loss < tr->best_val) tr->best_val = info->val_loss;
    if (!tr->ema) return HPT_OK;
    ema_swap(tr);
    hpt_status st = hpt_trainer_eval(tr, &info->ema_val_loss, NULL);
    ema_swap(tr);
    if (st == HPT_OK) tr->final_ema_val = info->ema_val_loss;
    return st;
}

/* After a step's metrics line (so that a resume from a checkpoint finds
 * every line up to its step): the interval's checkpoint, the memory guard
 * rails, a requested stop. A non-OK status ends the run. */
static hpt_status after_step(run *r, int before, size_t rss) {
    hpt_trainer *tr = r->tr;
    const hpt_train_config *c = &tr->cfg;
    /* every time the counter reaches or jumps past a multiple of the
     * interval; in local-step mode at the first sync at or after that (a
     * checkpoint holds the synced weights, the anchor, and every rank's
     * own moments) */
    const int H = c->sync_interval, since = H > 0 ? (tr->step - 1) / H * H : before;
    if (r->ckpt_ok && c->save_interval > 0 && hpt_trainer_synced(tr) &&
        tr->step / c->save_interval > since / c->save_interval) {
        HPT_TRY(hpt_trainer_check_ranks(tr));
        HPT_TRY(hpt_trainer_save_checkpoint(tr));
        r->saved_at = tr->step;
    }
    if (tr->rss_warn && rss > tr->rss_warn && !tr->rss_warned) {
        tr->rss_warned = 1;
        hpt_logf(r->log, r->ctx, "warning    resident memory %.1f MiB passed --rss-warn %.1f MiB at step %d",
              mib(rss), mib(tr->rss_warn), tr->step);
    }
    int more = tr->step < c->max_iters;
    if (tr->rss_limit && rss > tr->rss_limit && more) {
        /* an emergency save while the process can still write one */
        /* (local-step mode saves with every rank, at a sync: one rank alone cannot) */
        int can = r->ckpt_ok && (H <= 0 || (tr->ranks == 1 && hpt_trainer_synced(tr)));
        if (can && r->saved_at != tr->step) HPT_TRY(hpt_trainer_save_checkpoint(tr));
        return hpt_fail(HPT_ERR_NOMEM, "resident memory %.1f MiB passed --rss-limit %.1f MiB at step %d; "
                        "emergency checkpoint %s'%s'", mib(rss), mib(tr->rss_limit), tr->step,
                        can ? "saved to " : "not possible: ",
                        can ? tr->ckpt_path : r->ckpt_ok ? "between local-step mode's syncs" : "no state");
    }
    /* ranks stop together, after the step whose all-reduce carried a
     * request (in local-step mode: the next sync's) */
    int stop = H > 0 ? hpt_trainer_synced(tr) && tr->stop_seen : tr->ranks > 1 ? tr->stop_seen : stop_requested;
    if (r->ckpt_ok && stop && more) {
        stop_requested = 0;  /* consumed: a later run in this process starts afresh */
        tr->stop_seen = 0;
        if (r->saved_at != tr->step) HPT_TRY(hpt_trainer_save_checkpoint(tr));
        return hpt_fail(HPT_ERR_INTERRUPTED, "interrupted after step %d of %d; checkpoint saved to '%s'",
                        tr->step, c->max_iters, tr->ckpt_path);
    }
    return HPT_OK;
}

/* The device's free memory now, for summary.json's peak (a device with
 * memory of its own: cudaMemGetInfo, microseconds). */
static void sample_device_memory(hpt_trainer *tr) {
    const hpt_device *dev = tr->model->dev;
    if (!dev->mem_info) return;
    size_t f, t;
    dev->mem_info(dev, &f, &t);
    if (f < tr->dev_min_free) tr->dev_min_free = f;
}

/* One call of the step hook and everything after it. */
static hpt_status run_one(run *r) {
    hpt_trainer *tr = r->tr;
    hpt_step_info info;
    int before = tr->step;
    HPT_TRY(r->hooks->step(r->hooks->hctx, tr, &info));
    sample_device_memory(tr);
    test_drift(tr);
    average_weights(tr, before, &info);
    if (r->calls < tr->cfg.max_iters) r->step_times[r->calls++] = info.step_s;
    HPT_TRY(eval_if_due(tr, &info));
    size_t rss = hpt_rss_bytes();
    HPT_TRY(write_metrics_line(r->mf, r->mpath, tr, r->hooks, &info, rss));
    long mpos = r->mf ? ftell(r->mf) : -1;
    tr->metrics_bytes = mpos >= 0 ? mpos : -1;
    if (r->on_step) r->on_step(r->ctx, &info);
    return after_step(r, before, rss);
}

/* summary.json: what the run was, what it reached, what it cost; the
 * hooks add their members after the trainer's counters. */
static cJSON *summary_of(const run *r, double med, double flops, uint32_t crc, double wall) {
    const hpt_trainer *tr = r->tr;
    const hpt_model *m = tr->model;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "task", tr->cfg.task);
    cJSON_AddStringToObject(o, "model", hpt_model_describe(m));
    hpt_json_u64(o, "params", m->nparams);
    hpt_json_u64(o, "steps", (uint64_t)tr->step);
    hpt_schedule_summary(&tr->cfg, o);
    hpt_json_num(o, "final_val_loss", tr->final_val);
    if (tr->task_->classify) hpt_json_num(o, "test_accuracy", tr->final_acc);
    hpt_json_num(o, "best_val_loss", tr->best_val);
    if (tr->ema) hpt_json_num(o, "final_ema_val_loss", tr->final_ema_val);
    hpt_json_num(o, "train_s", tr->train_s);
    hpt_json_num(o, "wall_s", wall);
    hpt_json_num(o, "eval_s", tr->eval_s);
    hpt_json_num(o, "tokens_per_s", tr->tokens / tr->train_s);
    hpt_json_num(o, "median_step_ms", med * 1e3);
    hpt_json_num(o, "gflops_per_s", flops / med * 1e-9);
    cJSON_AddStringToObject(o, "blas_core", hpt_blas_core());
    cJSON_AddStringToObject(o, "blas_core_origin", hpt_blas_origin());
    hpt_json_u64(o, "optimizer_updates", (uint64_t)tr->updates);
    hpt_json_u64(o, "model_backward_calls", m->backward_calls);
    if (r->hooks->summary) r->hooks->summary(r->hooks->hctx, o);
    if (tr->cfg.sync_interval > 0) {
        hpt_json_u64(o, "sync_interval", (uint64_t)tr->cfg.sync_interval);
        hpt_json_num(o, "sync_outer_lr", tr->cfg.sync_outer_lr);
        hpt_json_num(o, "sync_outer_momentum", tr->cfg.sync_outer_momentum);
    }
    if (tr->ranks > 1) {
        /* the all-reduces: one per real step, or per sync in local-step mode */
        hpt_comm_stats cs = hpt_comm_stats_of(tr->comm);
        hpt_json_u64(o, "ranks", (uint64_t)tr->ranks);
        hpt_json_u64(o, "allreduce_calls", cs.calls);
        hpt_json_u64(o, "allreduce_bytes", cs.bytes);
        hpt_json_num(o, "comm_s", cs.seconds);
    }
    hpt_json_u64(o, "threads", (uint64_t)hpt_get_threads());
    hpt_json_u64(o, "peak_rss_bytes", hpt_peak_rss_bytes());
    ledger l = ledger_of(tr);
    cJSON_AddStringToObject(o, "device", m->dev->name);
    if (m->dev->mem_info) {
        /* the ledger's plan beside what the driver saw this process hold
         * (the context and cuBLAS's workspace are outside the plan) */
        cJSON *dm = cJSON_AddObjectToObject(o, "device_memory_bytes");
        if (dm) {
            hpt_json_u64(dm, "plan", l.params + l.grads + l.adamw + l.acts);
            hpt_json_u64(dm, "peak_used", tr->dev_free0 - tr->dev_min_free);
            hpt_json_u64(dm, "total", tr->dev_total);
        }
    }
    cJSON *mb = cJSON_AddObjectToObject(o, "memory_bytes");
    if (mb) {
        hpt_json_u64(mb, "params", l.params);
        hpt_json_u64(mb, "grads", l.grads);
        hpt_json_u64(mb, "adamw", l.adamw);
        hpt_json_u64(mb, "activations", l.acts);
    }
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", crc);
    cJSON_AddStringToObject(o, "param_crc32", hex);
    return o;
}

static hpt_status write_text(FILE *f, void *text) {
    size_t n = strlen(text);
    if (fwrite(text, 1, n, f) != n || fputc('\n', f) == EOF)
        return hpt_fail(HPT_ERR_IO, "write failed: %s", strerror(errno));
    return HPT_OK;
}

/* Writes a JSON document to path atomically, pretty-printed. */
static hpt_status save_json(const char *path, const cJSON *doc) {
    char *text = doc ? cJSON_Print(doc) : NULL;
    if (!text) return hpt_fail(HPT_ERR_NOMEM, "out of memory writing '%s'", path);
    hpt_status st = hpt_save_atomic(path, write_text, text);
    cJSON_free(text);
    return st;
}

static hpt_status write_summary(const run *r, double med, double flops, uint32_t crc, double wall) {
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", r->tr->cfg.out_dir);
    cJSON *doc = summary_of(r, med, flops, crc, wall);
    hpt_status st = save_json(path, doc);
    cJSON_Delete(doc);
    return st;
}

/* After the last step: model.bin, summary.json and the closing log line. */
static hpt_status finish_run(run *r) {
    hpt_trainer *tr = r->tr;
    hpt_model *m = tr->model;
    char path[4200];
    snprintf(path, sizeof path, "%s/model.bin", tr->cfg.out_dir);
    /* schedule-free: the model is the average x (saved, summed, and left in
     * the params for whoever uses the trainer's model after the run) */
    if (tr->sf_x) sf_swap(tr);
    HPT_TRY(hpt_trainer_check_ranks(tr));
    if (hpt_trainer_writer(tr)) HPT_TRY(hpt_weights_save(path, m, tr->task_->text));
    qsort(r->step_times, (size_t)r->calls, sizeof(double), cmp_double);
    double med = r->calls ? r->step_times[r->calls / 2] : NAN;  /* NaN: resumed at the last step */
    double flops = hpt_model_train_flops(m, tr->cfg.batch_size * tr->micro, tr->task_->tokens_per_sample);
    uint32_t crc = hpt_model_crc32(m, m->params, m->nparams);
    double wall = hpt_now() - r->wall0;
    if (hpt_trainer_writer(tr)) HPT_TRY(write_summary(r, med, flops, crc, wall));
    /* no step timed here (a resume of a finished run): no rate to print, not "nan ms/step" */
    char rate[96] = "no step run here";
    if (r->calls) snprintf(rate, sizeof rate, "median %.1f ms/step, %.1f GFLOP/s", med * 1e3, flops / med * 1e-9);
    hpt_logf(r->log, r->ctx, "done       %d steps in %.1f s (train %.1f s, eval %.1f s), %s, final val %.4f, "
          "best val %.4f, param_crc32 %08x", tr->step, wall, tr->train_s, tr->eval_s, rate, tr->final_val,
          tr->best_val, crc);
    return HPT_OK;
}

static hpt_status run_loop(run *r) {
    hpt_trainer *tr = r->tr;
    log_start(r);
    HPT_TRY(open_metrics(r));
    r->step_times = malloc((size_t)tr->cfg.max_iters * sizeof(double));
    hpt_status st = r->step_times ? HPT_OK : hpt_fail(HPT_ERR_NOMEM, "out of memory");
    /* checkpoints: the plain trainer's state, plus the hooks' own when they
     * have any (a step hook with state but no save_state cannot be resumed) */
    r->ckpt_ok = r->hooks->step == plain_step || r->hooks->save_state;
    if (st == HPT_OK) st = load_hooks_state(tr, r->hooks);
    tr->hooks = r->ckpt_ok && r->hooks->save_state ? r->hooks : NULL;
    while (st == HPT_OK && tr->step < tr->cfg.max_iters) st = run_one(r);
    if (r->mf && fclose(r->mf) != 0 && st == HPT_OK)
        st = hpt_fail(HPT_ERR_IO, "cannot write '%s': %s", r->mpath, strerror(errno));
    tr->hooks = NULL;
    if (st == HPT_OK) st = finish_run(r);
    free(r->step_times);
    return st;
}

/* The run holds the directory's lock from its first write to its last
 * (a resume takes it earlier, before reading the checkpoints). */
hpt_status hpt_trainer_run_hooks(hpt_trainer *tr, const hpt_run_hooks *hooks,
                                 hpt_log_fn log, hpt_step_fn on_step, void *ctx) {
    if (hpt_trainer_writer(tr)) {
        HPT_TRY(hpt_mkdir_p(tr->cfg.out_dir));
        if (tr->lock_fd < 0) HPT_TRY(hpt_dir_lock(tr->cfg.out_dir, &tr->lock_fd));
    }
    run r = {.tr = tr, .hooks = hooks, .log = log, .on_step = on_step, .ctx = ctx, .saved_at = -1, .wall0 = hpt_now()};
    hpt_status st = run_loop(&r);
    hpt_dir_unlock(tr->lock_fd);
    tr->lock_fd = -1;
    return st;
}

hpt_status hpt_trainer_run(hpt_trainer *tr, hpt_log_fn log, hpt_step_fn on_step, void *ctx) {
    hpt_run_hooks hooks = {.step = plain_step};
    return hpt_trainer_run_hooks(tr, &hooks, log, on_step, ctx);
}

