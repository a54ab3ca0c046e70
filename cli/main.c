/*
 * main.c — the hpt command line: `hpt train`, `hpt sample`, and the
 * dispatch to the other subcommands (compare: compare.c; import, export,
 * eval: hf.c; tokenize: tokenize.c; plot: runlog.c).
 *
 * The CLI (cli/) is the only place that prints to the terminal or exits:
 * the library returns statuses and messages, the CLI turns them into text
 * and exit codes (0 success, 1 runtime failure, 2 usage error).
 */
#include "cli.h"
#include "../src/base/base.h"   /* hpt_fail */
#include "../src/base/comm.h"   /* mpirun: the process group of a data-parallel run */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void die_usage(const char *fmt, const char *a) {
    fprintf(stderr, "hpt: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\nRun 'hpt --help' for usage.\n");
    exit(2);
}

void die_status(hpt_status st) {
    hpt_comm *comm = hpt_comm_world();
    if (hpt_comm_rank(comm) > 0) fprintf(stderr, "hpt[rank %d]: error: %s (%s)\n", hpt_comm_rank(comm), hpt_errmsg(),
                                         hpt_status_str(st));
    else fprintf(stderr, "hpt: error: %s (%s)\n", hpt_errmsg(), hpt_status_str(st));
    /* under mpirun: the whole job ends (a rank still in a collective would
     * wait for this one forever) */
    if (hpt_comm_size(comm) > 1) hpt_comm_abort(comm, st == HPT_ERR_ARG ? 2 : 1);
    exit(st == HPT_ERR_ARG ? 2 : 1);
}

/* ---------------------------------------------------------------- flags */

long parse_int(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end) {
        fprintf(stderr, "hpt: %s expects an integer, got '%s'\n", flag, v);
        exit(2);
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "hpt: %s must be in [%ld, %ld], got %ld\n", flag, lo, hi, x);
        exit(2);
    }
    return x;
}

float parse_float(const char *flag, const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) {
        fprintf(stderr, "hpt: %s expects a finite number, got '%s'\n", flag, v);
        exit(2);
    }
    return (float)x;
}

int next_flag(args *a) {
    if (a->i >= a->argc) return 0;
    const char *s = a->argv[a->i++];
    if (strncmp(s, "--", 2) != 0) die_usage("unexpected argument '%s'", s);
    const char *eq = strchr(s, '=');
    if (eq) {
        snprintf(a->buf, sizeof a->buf, "%.*s", (int)(eq - s), s);
        a->name = a->buf;
        a->val = eq + 1;
    } else {
        a->name = s;
        a->val = NULL;
    }
    return 1;
}

const char *flag_value(args *a) {
    if (a->val) return a->val;
    if (a->i >= a->argc) die_usage("%s needs a value", a->name);
    return a->val = a->argv[a->i++];
}

/* Sets a row's field from the flag in hand: exits 2 with the library's
 * message (naming the flag) on a bad value. */
static void set_flag(args *a, const hpt_setting *s, void *cfg) {
    const char *v = s->type == HPT_SET_SWITCH ? a->val : flag_value(a);
    if (hpt_setting_parse(s, cfg, v) != HPT_OK) die_usage("%s", hpt_errmsg());
}

int hpt_cli_hybrid_flag(const char *name, int *takes_value) {
    const hpt_setting *s = hpt_setting_find(name);
    if (!s || s->group != HPT_SET_HYBRID) return 0;
    if (takes_value) *takes_value = s->type != HPT_SET_SWITCH;
    return 1;
}

/* ---------------------------------------------------------------- help */

/* One option of the help: "  --flag META", its text wrapped from column
 * HELP_COL, and its default in brackets from column DEFAULT_COL. */
#define HELP_COL 25
#define DEFAULT_COL 83

static void help_option(FILE *f, const char *left, const char *text, size_t text_len, const char *dflt) {
    char line[512];
    int len = snprintf(line, sizeof line, "  %s", left);
    const char *w = text, *end = text + text_len;
    int words = 0;  /* on this line */
    while (w < end) {
        while (w < end && *w == ' ') w++;
        const char *e = w;
        while (e < end && *e != ' ') e++;
        if (w == e) break;
        int pad = words ? 1 : len < HELP_COL ? HELP_COL - len : 2;
        if (words && len + pad + (e - w) > DEFAULT_COL - 2) {
            fprintf(f, "%s\n", line);
            len = snprintf(line, sizeof line, "%*s", HELP_COL, "");
            words = 0;
            pad = 0;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, "%*s%.*s", pad, "", (int)(e - w), w);
        words++;
        w = e;
    }
    if (dflt[0]) {
        if (len > DEFAULT_COL - 2) {
            fprintf(f, "%s\n", line);
            len = 0;
        }
        snprintf(line + len, sizeof line - (size_t)len, "%*s%s", DEFAULT_COL - len, "", dflt);
    }
    fprintf(f, "%s\n", line);
}

/* "[4]", "[12; fashion-mnist 128]", "[0; fashion-mnist mlp 10, cnn 5]":
 * s's value in the defaults for text, mlp and cnn (the same struct thrice
 * where a group has one default). */
static void help_default(const hpt_setting *s, const void *const dflt[3], char *buf, size_t n) {
    char d[3][64];
    buf[0] = 0;
    if (s->type == HPT_SET_SWITCH) return;
    for (int i = 0; i < 3; i++) hpt_setting_format(s, dflt[i], d[i], sizeof d[i]);
    if (!d[0][0]) return;
    if (!strcmp(d[0], d[1]) && !strcmp(d[0], d[2])) snprintf(buf, n, "[%s]", d[0]);
    else if (!strcmp(d[1], d[2])) snprintf(buf, n, "[%s; fashion-mnist %s]", d[0], d[1]);
    else snprintf(buf, n, "[%s; fashion-mnist mlp %s, cnn %s]", d[0], d[1], d[2]);
}

/* The options of a list of rows, in order. */
static void help_rows(FILE *f, const hpt_setting *rows, int n, const void *const dflt[3]) {
    for (int i = 0; i < n; i++) {
        const hpt_setting *s = &rows[i];
        char left[256], def[256];
        int k = snprintf(left, sizeof left, "%s", s->flag);
        if (s->type == HPT_SET_ENUM || s->type == HPT_SET_NAME)
            for (int j = 0; hpt_setting_name(s, j); j++)
                k += snprintf(left + k, sizeof left - (size_t)k, "%c%s", j ? '|' : ' ', hpt_setting_name(s, j));
        else if (s->meta)
            snprintf(left + k, sizeof left - (size_t)k, " %s", s->meta);
        /* a "[...]" at the end of the help stands for the default */
        const char *br = strrchr(s->help, '[');
        size_t text_len = strlen(s->help);
        if (br && s->help[text_len - 1] == ']') {
            snprintf(def, sizeof def, "%s", br);
            text_len = (size_t)(br - s->help);
        } else {
            help_default(s, dflt, def, sizeof def);
        }
        help_option(f, left, s->help, text_len, def);
    }
}

/* The options of one group of the settings table: its rows with
 * HPT_SET_PHASED as `phased` says (the phased design's own heading). */
static void help_settings(FILE *f, hpt_setting_group g, unsigned phased) {
    hpt_train_config t[3];
    hpt_run_options r;
    hpt_hybrid_config h;
    hpt_train_config_default_for(&t[0], "text", "gpt2");
    hpt_train_config_default_for(&t[1], "fashion-mnist", "mlp");
    hpt_train_config_default_for(&t[2], "fashion-mnist", "cnn");
    hpt_run_options_default(&r);
    hpt_hybrid_config_default(&h);
    const void *const train[3] = {&t[0], &t[1], &t[2]}, *const run[3] = {&r, &r, &r}, *const hyb[3] = {&h, &h, &h};
    int n;
    const hpt_setting *rows = hpt_settings(g, &n);
    for (int i = 0; i < n; i++)
        if ((rows[i].flags & HPT_SET_PHASED) == phased && !(rows[i].flags & HPT_SET_NO_FLAG))
            help_rows(f, &rows[i], 1, g == HPT_SET_TRAIN ? train : g == HPT_SET_RUN ? run : hyb);
}

/* hpt sample's options: rows like the settings table's, of the CLI's own
 * struct (the library parses and describes them the same way). */
typedef struct sample_opts {
    const char *model, *run, *prompt, *vocab, *device;
    int tokens, top_k, threads;
    float temperature;
    uint64_t seed;
} sample_opts;

#define SAMPLE_ROW(field_, type_, lo, hi, fl, meta_, help_)                                                    \
    {.flag = "--" #field_, .field = #field_, .group = HPT_SET_RUN, .type = HPT_SET_##type_,                    \
     .offset = offsetof(sample_opts, field_), .min = lo, .max = hi, .flags = fl, .meta = meta_, .help = help_}
static const hpt_setting sample_rows[] = {
    SAMPLE_ROW(model, STR, 0, 4095, 0, "FILE", "model.bin written by hpt train"),
    SAMPLE_ROW(run, STR, 0, 4095, 0, "DIR", "or the run directory that holds it"),
    SAMPLE_ROW(tokens, INT, 0, 100000000, 0, "N", "tokens to generate"),
    SAMPLE_ROW(temperature, FLOAT, 0, INFINITY, HPT_SET_MIN_OPEN, "X", "softmax temperature, > 0"),
    {.flag = "--top-k", .field = "top_k", .group = HPT_SET_RUN, .type = HPT_SET_INT,
     .offset = offsetof(sample_opts, top_k), .min = 0, .max = 1 << 24, .meta = "N",
     .help = "sample among the k most likely tokens, 0 = all"},
    SAMPLE_ROW(prompt, STR, 0, 10000000, 0, "TEXT", "text to continue [newline]"),
    SAMPLE_ROW(seed, U64, 0, 0, 0, "N", "seed of the draws"),
    SAMPLE_ROW(threads, INT, 0, 1024, 0, "N", "OpenMP and OpenBLAS threads, 0 = all cores"),
    SAMPLE_ROW(vocab, STR, 0, 4095, 0, "DIR", "a gpt2 model's tokenizer files [$HPT_VOCAB, else /usr/local/share/hpt/gpt2]"),
    SAMPLE_ROW(device, STR, 1, 64, 0, "NAME", "where the model runs: cpu, cuda (an NVIDIA GPU; the GPT-2 family) or guard (a test device) [cpu]"),
};
#define NSAMPLE ((int)(sizeof sample_rows / sizeof sample_rows[0]))

static const sample_opts sample_defaults = {.tokens = 500, .temperature = 1.0f, .seed = 1};

static void usage(FILE *f) {
    fputs("hpt — hybrid predictive training of GPT-2-family models on the CPU\n"
          "\n"
          "Usage:\n"
          "  hpt train --data PATH [options]     train a model, write DIR/{metrics.jsonl,summary.json,model.bin,loss.png}\n"
          "  hpt train --task fashion-mnist --model mlp|cnn [options]   train an image classifier\n"
          "  hpt sample --model FILE [options]   generate text from a trained model\n"
          "  hpt compare [train options] --lrs LIST --seeds N --out DIR   time to the same val loss:\n"
          "                         tuned baseline vs hybrid vs controls ('hpt compare --help')\n"
          "  hpt plot DIR           redraw a run's DIR/loss.{svg,png} (hpt train draws it at the end)\n", f);
    usage_hf(f);
    usage_tokenize(f);
    fputs(          "  hpt --help | --version\n"
          "\n"
          "train options (defaults: nanoGPT's CPU shakespeare_char recipe; fashion-mnist's where they differ):\n", f);
    help_settings(f, HPT_SET_TRAIN, 0);
    help_settings(f, HPT_SET_RUN, 0);
    fputs("\nhybrid options (with --mode hybrid; see docs/hybrid.md):\n", f);
    help_settings(f, HPT_SET_HYBRID, 0);
    fputs("\nphased design options (--predictor coast|stale-adam|linear|shrink, and the learned dynamics of\n"
          "--outer-gate dynamics; an extension of the hybrid, docs/hybrid.md):\n", f);
    help_settings(f, HPT_SET_HYBRID, HPT_SET_PHASED);
    fputs("\nsample options:\n", f);
    const void *const sd[3] = {&sample_defaults, &sample_defaults, &sample_defaults};
    help_rows(f, sample_rows, NSAMPLE, sd);
    fputs("\n"
          "Exit status: 0 success, 1 runtime error, 2 usage error.\n", f);
}

/* ---------------------------------------------------------------- train */

/* `hpt train` is the library's run (hpt_train_args_run) with the CLI's
 * callbacks around it: the progress display, the signal handlers, the
 * mpirun group's checks, and at the end the interrupted run's message and
 * the plots. */
typedef struct train_view {
    int tty, log_interval;
    double ema_step_s;
} train_view;

/* Under mpirun rank 0 speaks for the job: the other ranks' logs and
 * progress are the same lines. Their errors are printed (die_status). */
static int quiet_rank(void) { return hpt_comm_rank(hpt_comm_world()) > 0; }

static void on_log(void *ctx, const char *line) {
    (void)ctx;
    if (quiet_rank()) return;
    fprintf(stderr, "%s\n", line);
}

void fmt_eta(char *buf, size_t n, double s) {
    if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%ds", (int)s);
}

static void on_step(void *ctx, const hpt_step_info *in) {
    train_view *p = ctx;
    if (quiet_rank()) return;
    p->ema_step_s = in->step == 1 || p->ema_step_s == 0 ? in->step_s : 0.9 * p->ema_step_s + 0.1 * in->step_s;
    char eta[32];
    fmt_eta(eta, sizeof eta, p->ema_step_s * (in->max_iters - in->step));
    double tps = in->tokens / in->time_s;
    if (p->tty) {
        fprintf(stderr, "\rstep %d/%d | loss %.4f | lr %.2e | %.0f tok/s | %.1f ms/step | ETA %s   ",
                in->step, in->max_iters, in->train_loss, in->lr, tps, p->ema_step_s * 1e3, eta);
        if (in->evaluated) fprintf(stderr, "\n");
    } else if (in->step % p->log_interval == 0 || in->step == 1 || in->step == in->max_iters) {
        fprintf(stderr, "step %d/%d | loss %.4f | lr %.2e | %.0f tok/s | %.1f ms/step | ETA %s\n",
                in->step, in->max_iters, in->train_loss, in->lr, tps, p->ema_step_s * 1e3, eta);
    }
    if (in->evaluated && isfinite(in->val_accuracy))
        fprintf(stderr, "step %d: val loss %.4f, accuracy %.2f%% (train clock %.1f s)\n", in->step, in->val_loss,
                100.0 * in->val_accuracy, in->time_s);
    else if (in->evaluated)
        fprintf(stderr, "step %d: val loss %.4f (train clock %.1f s)\n", in->step, in->val_loss, in->time_s);
}

static void on_signal(int sig) {
    (void)sig;
    hpt_request_stop();  /* the run loop finishes the step, saves a checkpoint and returns */
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The trainer is built: from here a signal stops the run with a
 * checkpoint (before, it ends the process: there is nothing to save). The
 * progress interval's default needs the resolved step count. */
static hpt_status on_start(void *ctx, hpt_trainer *tr, const hpt_hybrid_config *hc) {
    train_view *p = ctx;
    /* a new run's clock setting was refused before it was built
     * (start_group); a resumed run's comes from its checkpoint */
    if (hc && !hc->count_cost && hpt_comm_size(hpt_comm_world()) > 1)
        return hpt_fail(HPT_ERR_ARG, "the run uses --cost-by-time, which cannot be resumed under mpirun (each rank's "
                        "clock would choose differently)");
    const hpt_train_config *rc = hpt_trainer_config(tr);  /* max_iters resolved from --epochs */
    if (!p->log_interval) p->log_interval = rc->max_iters >= 20 ? rc->max_iters / 20 : 1;
    install_stop_handlers();
    return HPT_OK;
}

/* The run's curves as DIR/loss.{svg,png}: a convenience, so a failure to
 * draw them is a warning, never a failed run. */
static void plot_or_warn(const char *dir) {
    if (cli_plot_run(dir) == HPT_OK) fprintf(stderr, "plot: %s/loss.png (and .svg)\n", dir);
    else fprintf(stderr, "hpt: warning: no loss plot: %s\n", hpt_errmsg());
}

/* The run has ended: an interrupted one says where its checkpoint is, and a
 * finished or interrupted one is plotted (a failed one is reported by
 * die_status, with the run's own message). */
static void on_end(void *ctx, hpt_status st, const char *dir) {
    train_view *p = ctx;
    if (st != HPT_OK && p->tty) fputc('\n', stderr);  /* after the progress line */
    if (quiet_rank() || (st != HPT_OK && st != HPT_ERR_INTERRUPTED)) return;
    int ranks = hpt_comm_size(hpt_comm_world());
    if (st == HPT_ERR_INTERRUPTED && ranks > 1)
        fprintf(stderr, "hpt: %s\nhpt: continue with: mpirun -np %d hpt train --resume %s\n", hpt_errmsg(), ranks, dir);
    else if (st == HPT_ERR_INTERRUPTED) fprintf(stderr, "hpt: %s\nhpt: continue with: hpt train --resume %s\n", hpt_errmsg(), dir);
    plot_or_warn(dir);
}

/* The process group: MPI when started by mpirun, else one process. Under
 * mpirun the hybrid's choices must be the same on every rank, so they may
 * not depend on each rank's own clock. */
static void start_group(int hybrid, int count_cost) {
    hpt_comm *comm;
    hpt_status st = hpt_comm_init(&comm);
    if (st != HPT_OK) die_status(st);
    if (hpt_comm_size(comm) > 1 && hybrid && !count_cost) {
        if (!quiet_rank())
            fprintf(stderr, "hpt: --cost-by-time cannot be used under mpirun: each rank's clock would choose "
                            "differently and the ranks' parameters would drift apart\n");
        hpt_comm_free(comm);
        exit(2);
    }
}

/* hpt train: a new run, or with --resume DIR the stored one (its mode and
 * configuration from the checkpoint, nothing else but the operational
 * flags). An interrupted run exits 0 after saying where its checkpoint is. */
static int cmd_train(int argc, char **argv) {
    hpt_train_args a;
    hpt_status st = hpt_train_args_parse(&a, argc, argv);
    if (st != HPT_OK) die_usage("%s", hpt_errmsg());
    if (a.help) { usage(stdout); return 0; }
    if (a.run.resume_dir) {
        start_group(0, 1);  /* a resumed hybrid run's clock setting is checked once it is read (on_start) */
        install_stop_handlers();  /* a stop asked while the checkpoint loads is kept for the first step */
    } else {
        if ((st = hpt_train_args_resolve(&a)) != HPT_OK) die_status(st);
        start_group(a.run.hybrid, a.hybrid.count_cost);
    }
    train_view view = {.tty = isatty(2), .log_interval = a.run.log_interval};
    hpt_train_callbacks cb = {.user = &view, .log = on_log, .step = on_step, .start = on_start, .end = on_end};
    st = hpt_train_args_run(&a, &cb);
    if (st != HPT_OK && st != HPT_ERR_INTERRUPTED) die_status(st);
    hpt_comm_free(hpt_comm_world());  /* every rank got here: MPI_Finalize */
    return 0;
}

/* ---------------------------------------------------------------- sample */

/* hpt sample's flags into o; returns the model file (--model, or --run's
 * model.bin: the later of the two wins). */
static const char *parse_sample_flags(int argc, char **argv, sample_opts *o, char *run_path, size_t cap) {
    const char *model_path = NULL;
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        if (!strcmp(a.name, "--help") || !strcmp(a.name, "-h")) { usage(stdout); exit(0); }
        const hpt_setting *s = NULL;
        for (int i = 0; i < NSAMPLE && !s; i++) if (!strcmp(sample_rows[i].flag, a.name)) s = &sample_rows[i];
        if (!s) die_usage("unknown option '%s' for 'hpt sample'", a.name);
        set_flag(&a, s, o);
        if (s->offset == offsetof(sample_opts, model)) model_path = o->model;
        if (s->offset == offsetof(sample_opts, run)) {
            snprintf(run_path, cap, "%s/model.bin", o->run);
            model_path = run_path;
        }
    }
    if (!model_path) die_usage("%s", "sample needs --model FILE (a model.bin from hpt train)");
    return model_path;
}

/* The context's first tokens: the prompt (echoed), or a newline where the
 * vocabulary has one, as nanoGPT starts. Returns their count. */
static int start_context(const hpt_text *tok, const char *prompt, int *ctx, int cap) {
    if (prompt && *prompt) {
        size_t bad = 0;
        int n = 0;
        hpt_status st = hpt_text_encode(tok, prompt, ctx, cap, &n, &bad);
        if (st == HPT_ERR_DATA) {
            fprintf(stderr, "hpt: the prompt's character at byte %zu is not in the model's vocabulary\n", bad);
            exit(2);
        }
        if (st != HPT_OK) { fprintf(stderr, "hpt: encoding the prompt: %s\n", hpt_errmsg()); exit(1); }
        fputs(prompt, stdout);
        return n;
    }
    int n = 0;
    if (hpt_text_encode(tok, "\n", ctx, cap, &n, NULL) != HPT_OK || n != 1) { ctx[0] = 0; n = 1; }
    return n;
}

static int cmd_sample(int argc, char **argv) {
    sample_opts o = sample_defaults;
    char run_path[4200];
    const char *model_path = parse_sample_flags(argc, argv, &o, run_path, sizeof run_path);
    hpt_status st = hpt_device_check(o.device);
    if (st != HPT_OK) die_status(st);
    hpt_set_threads(o.threads);
    hpt_set_vocab_dir(o.vocab);
    hpt_model *m;
    hpt_text *tok;
    st = hpt_weights_load(model_path, 1, 0, o.device ? o.device : "cpu", &m, &tok);   /* named: checked */
    if (st != HPT_OK) die_status(st);
    if (!tok) {
        fprintf(stderr, "hpt: '%s' is not a language model (it has no tokenizer); sample needs one from --task text\n", model_path);
        return 1;
    }
    const int maxT = hpt_model_block_size(m), V = hpt_text_vocab_size(tok);
    /* The model sees the last maxT tokens, so the context is a window of
     * 2 maxT slid back as it fills (or the prompt's length, which it may
     * pass), not --tokens + prompt ints allocated up front (400 MB at 1e8). */
    const int plen = o.prompt ? (int)strlen(o.prompt) : 0, cap = plen + 1 > 2 * maxT ? plen + 1 : 2 * maxT;
    int *ctx = malloc((size_t)cap * sizeof(int));
    float *probs = malloc((size_t)V * sizeof(float));
    float *logits = malloc((size_t)V * sizeof(float));
    int *order = malloc((size_t)V * sizeof(int));
    if (!ctx || !probs || !logits || !order) { fprintf(stderr, "hpt: out of memory\n"); return 1; }
    int n = start_context(tok, o.prompt, ctx, cap);
    uint64_t rs = o.seed * 0x9E3779B97F4A7C15ull + 1;
    for (int k = 0; k < o.tokens; k++) {
        int T = n < maxT ? n : maxT;
        hpt_batch b = {.B = 1, .T = T, .tokens = ctx + n - T};
        st = hpt_model_forward(m, &b, NULL);
        if (st != HPT_OK) die_status(st);
        if ((st = hpt_model_logits_copy(m, T - 1, logits)) != HPT_OK) die_status(st);   /* from the device */
        int pick = hpt_sample_token(logits, V, o.temperature, o.top_k, &rs, probs, order);
        if (pick < 0) {  /* non-finite logits: a constant token would be printed as text */
            fprintf(stderr, "\nhpt: error: the logits for token %d are not finite (NaN or inf): the model '%s' "
                    "overflows; nothing more is drawn\n", k + 1, model_path);
            exit(1);
        }
        if (n == cap) {  /* full: keep the last maxT - 1, the window after this token */
            memmove(ctx, ctx + n - (maxT - 1), (size_t)(maxT - 1) * sizeof(int));
            n = maxT - 1;
        }
        ctx[n++] = pick;
        char out[HPT_TOKEN_MAX_BYTES];
        int len = hpt_text_decode(tok, pick, out);
        fwrite(out, 1, (size_t)len, stdout);
        if (fflush(stdout) != 0) break;  /* nowhere to write the rest: close_stdout reports it at exit */
    }
    fputc('\n', stdout);
    free(ctx); free(probs); free(logits); free(order);
    hpt_model_free(m);
    hpt_text_free(tok);
    return 0;
}

/* Standard output is buffered, so a write that fails (a full disk,
 * /dev/full) is often seen only when the buffer is flushed at exit, after
 * the command has run to its "success": tokenize, eval, sample and --help
 * exited 0 having written nothing, or a few thousand of a million lines.
 * Registered first thing in main, this runs on every way out (a return
 * from main or a subcommand, exit() from die_status, die_usage or a
 * subcommand's own), so each subcommand fails alike: status 1 and a message
 * naming standard output. _exit: exit() may not be called again from an
 * atexit handler. An EBADF from fclose alone is stdout closed by the caller
 * (`hpt train >&-`) with nothing written to it: not a failure. */
static void close_stdout(void) {
    int err = 0;
    if (fflush(stdout) != 0) err = errno ? errno : EIO;
    else if (ferror(stdout)) err = -1;  /* an earlier write failed; its errno is gone */
    if (fclose(stdout) != 0 && !err && errno != EBADF) err = errno ? errno : EIO;
    if (!err) return;
    if (err > 0) fprintf(stderr, "hpt: error: cannot write to standard output: %s\n", strerror(err));
    else fprintf(stderr, "hpt: error: cannot write to standard output: a write failed\n");
    _exit(1);
}

/* The subcommands: a new one is a row here and its cmd_ function. */
static const struct { const char *name; int (*run)(int argc, char **argv); } commands[] = {
    {"train", cmd_train}, {"sample", cmd_sample}, {"compare", cmd_compare}, {"plot", cmd_plot},
    {"import", cmd_import}, {"export", cmd_export}, {"eval", cmd_eval}, {"tokenize", cmd_tokenize},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

int main(int argc, char **argv) {
    atexit(close_stdout);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) {
        printf("hpt %s\nblas %s (chosen by %s)\n", hpt_version(NULL, NULL, NULL), hpt_blas_core(), hpt_blas_origin());
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    die_usage("unknown command '%s' (expected train, sample, compare, plot, import, export or eval)", cmd);
    return 2;
}
