/*
 * train_args.c — `hpt train`'s argument list, turned into the three configs
 * (train, run, hybrid) by the settings table, with the checks between flags,
 * and the run they describe. The command line (cli/main.c) and the Python
 * binding (python/hpt) both come here, so a run asked for in either is the
 * same run; what only one of them does around it (the CLI's progress line,
 * signal handlers and plots) comes in as its callbacks.
 *
 * src/run is the library's top room: it fills the hybrid's config and runs
 * the hybrid driver as well as the plain trainer, so it stands above both
 * src/train and src/hybrid (and reads a model file's architecture through
 * src/io); nothing in the library calls it, only cli/ and the bindings.
 */
#include "../train/settings.h"
#include "../train/trainer.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a row of the settings table is a given field */
#define IS(s, grp, type, field) ((s)->group == (grp) && (s)->offset == offsetof(type, field))

enum { GIVEN_LAYER = 1, GIVEN_HEAD = 2, GIVEN_EMBD = 4, GIVEN_BLOCK = 8, GIVEN_TOK = 16 };

/* --task and --model choose the defaults, so they are read first */
static void defaults(hpt_train_args *a, int argc, char *const *argv) {
    const char *task = "text", *model = NULL;
    for (int i = 0; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--task")) task = argv[i + 1];
        if (i + 1 < argc && !strcmp(argv[i], "--model")) model = argv[i + 1];
        if (!strncmp(argv[i], "--task=", 7)) task = argv[i] + 7;
        if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
    }
    memset(a, 0, sizeof *a);
    hpt_train_config_default_for(&a->train, task, model);
    a->train.data_path = NULL;
    hpt_hybrid_config_default(&a->hybrid);
    hpt_run_options_default(&a->run);
    a->threads_given = -1;
}

void *hpt_train_args_group(hpt_train_args *a, hpt_setting_group g) {
    return g == HPT_SET_TRAIN ? (void *)&a->train : g == HPT_SET_RUN ? (void *)&a->run : (void *)&a->hybrid;
}

/* What a given flag tells beyond its value. */
typedef struct seen {
    int iters, epochs, warmup;
    const char *hybrid_flag;  /* the first hybrid-only flag */
    const char *train_flag;   /* the first flag --resume excludes */
    const char *sched_flag;   /* the first learning-rate decay flag (schedule-free ignores them) */
    const char *muon_flag;    /* the first of Muon's own flags (--adam-lr, --muon-*) */
    const char *outer_flag;   /* the first of the outer step's rate and momentum (hybrid or local steps) */
} seen;

/* --outer-lr and --outer-momentum: the one outer step's, whichever of its
 * two users runs (the hybrid's jumps, or local-step training's sync) */
static int outer_row(const hpt_setting *s) {
    return IS(s, HPT_SET_HYBRID, hpt_hybrid_config, outer_lr) || IS(s, HPT_SET_HYBRID, hpt_hybrid_config, outer_momentum);
}

static void note(hpt_train_args *a, const hpt_setting *s, seen *w) {
    if (!(s->flags & HPT_SET_RESUME_OK) && !w->train_flag) w->train_flag = s->flag;
    if (outer_row(s)) { if (!w->outer_flag) w->outer_flag = s->flag; }
    else if (s->group == HPT_SET_HYBRID && !w->hybrid_flag) w->hybrid_flag = s->flag;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, max_iters)) w->iters = 1;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, epochs)) w->epochs = 1;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, warmup_iters)) w->warmup = 1;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, threads)) a->threads_given = a->train.threads;
    if (IS(s, HPT_SET_RUN, hpt_run_options, hybrid)) a->mode_given = 1;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, n_layer)) a->arch_given |= GIVEN_LAYER;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, n_head)) a->arch_given |= GIVEN_HEAD;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, n_embd)) a->arch_given |= GIVEN_EMBD;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, block_size)) a->arch_given |= GIVEN_BLOCK;
    if (IS(s, HPT_SET_TRAIN, hpt_train_config, tokenizer)) a->arch_given |= GIVEN_TOK;
    if (!w->sched_flag && (IS(s, HPT_SET_TRAIN, hpt_train_config, schedule) ||
                           IS(s, HPT_SET_TRAIN, hpt_train_config, min_lr) ||
                           IS(s, HPT_SET_TRAIN, hpt_train_config, decay_frac) ||
                           IS(s, HPT_SET_TRAIN, hpt_train_config, cooldown)))
        w->sched_flag = s->flag;
    if (!w->muon_flag && (IS(s, HPT_SET_TRAIN, hpt_train_config, adam_lr) ||
                          IS(s, HPT_SET_TRAIN, hpt_train_config, muon_momentum) ||
                          IS(s, HPT_SET_TRAIN, hpt_train_config, muon_ns_steps) ||
                          IS(s, HPT_SET_TRAIN, hpt_train_config, muon_scale)))
        w->muon_flag = s->flag;
}

/* The checks between flags, after all were read. */
static hpt_status cross_check(hpt_train_args *a, const seen *w) {
    hpt_train_config *c = &a->train;
    if (a->run.resume_dir) {
        if (w->train_flag)
            return hpt_fail(HPT_ERR_ARG, "--resume DIR continues the run with its stored configuration: %s cannot be "
                            "given with it (only --threads, equal to the stored count, --mode, --log-interval, "
                            "--rss-warn, --rss-limit, --vram-limit, --device and --allow-data-change can)",
                            w->train_flag);
        return HPT_OK;
    }
    if (a->run.allow_data_change)  /* a new run reads its data as it is: nothing to allow */
        return hpt_fail(HPT_ERR_ARG, "--allow-data-change only applies with --resume DIR");
    if (w->iters && w->epochs && c->epochs > 0) return hpt_fail(HPT_ERR_ARG, "give --max-iters or --epochs, not both");
    if (w->iters) c->epochs = 0;  /* an explicit step count replaces the task's default epochs */
    /* a warmup as long as the run: the rate rises the whole way, never
     * reaches --lr and never decays (--max-iters 10 --warmup-iters 50 ended
     * at lr/5). Refused when given; the default's (100) is the trainer's
     * warning, since short runs rely on it. With --epochs the step count is
     * known only once the data is. */
    if (w->warmup && c->epochs <= 0 && c->warmup_iters > 0 && c->warmup_iters >= c->max_iters)
        return hpt_fail(HPT_ERR_ARG, "--warmup-iters %d is not below --max-iters %d: the rate would rise for the "
                        "whole run, never reaching --lr nor decaying; give a --warmup-iters below --max-iters",
                        c->warmup_iters, c->max_iters);
    if (!c->data_path && !strcmp(c->task, "text")) return hpt_fail(HPT_ERR_ARG, "train needs --data PATH (a text file)");
    if (w->hybrid_flag && !a->run.hybrid)
        return hpt_fail(HPT_ERR_ARG, "%s only applies with --mode hybrid", w->hybrid_flag);
    if (w->outer_flag && !a->run.hybrid && c->sync_interval == 0)
        return hpt_fail(HPT_ERR_ARG, "%s only applies with --mode hybrid (its outer jumps) or --sync-interval H "
                        "(local steps)", w->outer_flag);
    if (!a->run.hybrid) {  /* local steps take the outer step's settings from the one flag pair */
        c->sync_outer_lr = a->hybrid.outer_lr;
        c->sync_outer_momentum = a->hybrid.outer_momentum;
    }
    if (!strcmp(c->optimizer, "schedule-free")) {
        if (w->sched_flag)
            return hpt_fail(HPT_ERR_ARG, "%s does not apply with --optimizer schedule-free (its rate is the warmup, "
                            "then constant --lr; its averaging replaces the decay)", w->sched_flag);
        if (a->run.hybrid) HPT_TRY(hpt_hybrid_config_check_sf(&a->hybrid, 1));
    }
    if (w->muon_flag && strcmp(c->optimizer, "muon"))
        return hpt_fail(HPT_ERR_ARG, "%s only applies with --optimizer muon", w->muon_flag);
    if (a->run.hybrid) HPT_TRY(hpt_hybrid_config_check_muon(&a->hybrid, !strcmp(c->optimizer, "muon")));
    return HPT_OK;
}

size_t hpt_train_args_sizeof(void) { return sizeof(hpt_train_args); }

hpt_status hpt_train_args_parse(hpt_train_args *a, int argc, char *const *argv) {
    defaults(a, argc, argv);
    seen w = {0};
    char name[128];
    for (int i = 0; i < argc;) {
        const char *arg = argv[i++], *eq = strchr(arg, '='), *val = NULL;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { a->help = 1; return HPT_OK; }
        if (strncmp(arg, "--", 2) != 0) return hpt_fail(HPT_ERR_ARG, "unexpected argument '%s'", arg);
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        if (eq) val = eq + 1;
        if (!strcmp(name, "--help")) { a->help = 1; return HPT_OK; }
        const hpt_setting *s = hpt_setting_find(name);
        if (!s) return hpt_fail(HPT_ERR_ARG, "unknown option '%s' for 'hpt train'", name);
        if (s->type != HPT_SET_SWITCH && !val) {
            if (i >= argc) return hpt_fail(HPT_ERR_ARG, "%s needs a value", name);
            val = argv[i++];
        }
        hpt_status st = hpt_setting_parse(s, hpt_train_args_group(a, s->group), val);
        if (st != HPT_OK) return st;
        note(a, s, &w);
    }
    return cross_check(a, &w);
}

/* A given --tokenizer against the manifest of an hpt shard directory: the
 * manifest's tokenizer is the one the ids were made with and the one the run
 * uses, so a --tokenizer that differs was overridden without a word (a char
 * manifest under --tokenizer gpt2 trained a char model). Without a manifest
 * (llm.c, nanoGPT ids) --tokenizer is the only word on it. */
static hpt_status tokenizer_matches_manifest(const hpt_train_config *c) {
    char path[4200];
    struct stat sb;
    if (stat(c->data_path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return HPT_OK;
    snprintf(path, sizeof path, "%s/manifest.json", c->data_path);
    if (stat(path, &sb) != 0) return HPT_OK;
    unsigned char *buf;
    size_t len;
    if (hpt_read_file(path, &buf, &len) != HPT_OK) return HPT_OK;  /* the shard reader reports it */
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "tokenizer");
    const char *given = hpt_setting_name(hpt_setting_find("--tokenizer"), (int)c->tokenizer);  /* its choices */
    hpt_status st = HPT_OK;
    if (cJSON_IsString(t) && strcmp(t->valuestring, given))
        st = hpt_fail(HPT_ERR_ARG, "--tokenizer %s differs from the tokenizer of the shards' manifest '%s' (%.32s): "
                      "the ids were made with it; leave --tokenizer out", given, path, t->valuestring);
    cJSON_Delete(j);
    return st;
}

hpt_status hpt_train_args_resolve(hpt_train_args *a) {
    hpt_train_config *c = &a->train;
    if (c->init_path && *c->init_path && !strcmp(c->task, "text")) {
        /* --init FILE: the architecture flags not given come from the model
         * (given ones must match it: the trainer refuses a mismatch with the
         * reason); --block-size, when not given, is capped at its positions */
        hpt_gpt2_config ic;
        hpt_tokenizer_kind kind;
        hpt_status st = hpt_weights_gpt2_info(c->init_path, &ic, &kind);
        if (st != HPT_OK) return st;
        if (!(a->arch_given & GIVEN_LAYER)) c->n_layer = ic.n_layer;
        if (!(a->arch_given & GIVEN_HEAD)) c->n_head = ic.n_head;
        if (!(a->arch_given & GIVEN_EMBD)) c->n_embd = ic.n_embd;
        if (!(a->arch_given & GIVEN_TOK)) c->tokenizer = kind;
        if (!(a->arch_given & GIVEN_BLOCK) && c->block_size > ic.block_size) c->block_size = ic.block_size;
    }
    if ((a->arch_given & GIVEN_TOK) && !strcmp(c->task, "text") && c->data_path) {
        hpt_status st = tokenizer_matches_manifest(c);
        if (st != HPT_OK) return st;
    }
    hpt_status st = hpt_train_config_check(c);
    if (st != HPT_OK) return st;
    return a->run.hybrid ? hpt_hybrid_config_check(&a->hybrid) : HPT_OK;
}

/* The hybrid config a built trainer runs with, NULL for a baseline run: a
 * new run's from a, a resumed run's (and its mode) from its checkpoint. */
static hpt_status run_mode(hpt_train_args *a, hpt_trainer *tr, hpt_hybrid_config *resumed,
                           const hpt_hybrid_config **hc) {
    if (!a->run.resume_dir) {
        *hc = a->run.hybrid ? &a->hybrid : NULL;
        return HPT_OK;
    }
    int hybrid = hpt_trainer_resumed_hybrid(tr);
    if (a->mode_given && a->run.hybrid != hybrid)
        return hpt_fail(HPT_ERR_ARG, "%s", a->run.hybrid ? "--resume: --mode hybrid, but the run is a --mode baseline "
                                                           "run (the mode comes from the checkpoint)"
                                                         : "--resume: --mode baseline, but the run is a --mode hybrid "
                                                           "run (the mode comes from the checkpoint)");
    *hc = NULL;
    if (!hybrid) return HPT_OK;
    HPT_TRY(hpt_hybrid_config_resumed(tr, resumed));
    *hc = resumed;
    return HPT_OK;
}

/* A built trainer's run, between the caller's start and the end: *started
 * says whether start accepted it. */
static hpt_status run_built(hpt_train_args *a, hpt_trainer *tr, const hpt_train_callbacks *cb, int *started) {
    hpt_hybrid_config resumed;
    const hpt_hybrid_config *hc;
    HPT_TRY(run_mode(a, tr, &resumed, &hc));
    if (cb->start) HPT_TRY(cb->start(cb->user, tr, hc));
    *started = 1;
    return hc ? hpt_trainer_run_hybrid(tr, hc, cb->log, cb->step, cb->user)
              : hpt_trainer_run(tr, cb->log, cb->step, cb->user);
}

hpt_status hpt_train_args_run(hpt_train_args *a, const hpt_train_callbacks *cb) {
    static const hpt_train_callbacks none;
    if (!cb) cb = &none;
    const double mib = 1048576.0;
    hpt_set_memory_ceiling((size_t)(a->run.rss_limit_mib * mib));  /* refused before allocating, if over */
    hpt_trainer *tr = NULL;
    unsigned flags = a->run.allow_data_change ? HPT_RESUME_ALLOW_DATA_CHANGE : 0u;
    hpt_status st = a->run.resume_dir ? hpt_trainer_resume(&tr, a->run.resume_dir, a->threads_given, flags, a->train.device,
                                                           a->train.vram_limit_mib, cb->log, cb->user)
                                      : hpt_trainer_init(&tr, &a->train);
    int started = 0;
    char out_dir[4096] = "";
    if (st == HPT_OK) {
        hpt_trainer_set_memory_limits(tr, (size_t)(a->run.rss_warn_mib * mib), (size_t)(a->run.rss_limit_mib * mib));
        snprintf(out_dir, sizeof out_dir, "%s", hpt_trainer_config(tr)->out_dir);  /* the trainer's copy goes with it */
        st = run_built(a, tr, cb, &started);
    }
    hpt_trainer_free(tr);
    if (started && cb->end) cb->end(cb->user, st, out_dir);
    hpt_trainer_clear_stop();    /* a request during the last step (or the end) was this run's */
    hpt_set_memory_ceiling(0);  /* the process goes on (a library caller): the limit was this run's */
    return st;
}
