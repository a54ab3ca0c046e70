/*
 * main.c — the hpt command line: `hpt train`, `hpt sample`, and the
 * dispatch to `hpt compare` (compare.c).
 *
 * The only place that prints to the terminal or exits: the library returns
 * statuses and messages, this file turns them into text and exit codes
 * (0 success, 1 runtime failure, 2 usage error).
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VERSION_STRING "hpt 0.1.0"

void die_usage(const char *fmt, const char *a) {
    fprintf(stderr, "hpt: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\nRun 'hpt --help' for usage.\n");
    exit(2);
}

void die_status(hpt_status st) {
    fprintf(stderr, "hpt: error: %s (%s)\n", hpt_errmsg(), hpt_status_str(st));
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

/* hpt train's hybrid-only flags (hpt compare passes them to hybrid arms only) */
static const char *const hybrid_flags[] = {
    "--warmup-steps", "--full-steps", "--min-predict-steps", "--max-predict-steps", "--correct-steps",
    "--max-consecutive-predict", "--confidence-threshold", "--predictor", "--backoff-after", "--max-backoff",
    "--predict-waste-budget", "--correction-interval", "--probe-batches", "--whole-phase", "--cost-by-time",
    "--ensemble", "--hidden", "--bptt", "--div-window", "--div-loss-z", "--div-grad-explode", "--div-grad-vanish"};

int hpt_cli_hybrid_flag(const char *name, int *takes_value) {
    for (size_t i = 0; i < sizeof hybrid_flags / sizeof hybrid_flags[0]; i++)
        if (!strcmp(name, hybrid_flags[i])) {
            if (takes_value) *takes_value = strcmp(name, "--whole-phase") && strcmp(name, "--cost-by-time");
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- help */

static void usage(FILE *f) {
    fprintf(f,
"hpt — hybrid predictive training of GPT-2-family models on the CPU\n"
"\n"
"Usage:\n"
"  hpt train --data PATH [options]     train a model, write DIR/{metrics.jsonl,summary.json,model.bin,loss.png}\n"
"  hpt train --task fashion-mnist --model mlp|cnn [options]   train an image classifier\n"
"  hpt sample --model FILE [options]   generate text from a trained model\n"
"  hpt compare [train options] --lrs LIST --seeds N --out DIR   time to the same val loss:\n"
"                         tuned baseline vs hybrid vs controls ('hpt compare --help')\n"
"  hpt plot DIR           redraw a run's DIR/loss.{svg,png} (hpt train draws it at the end)\n"
"  hpt --help | --version\n"
"\n"
"train options (defaults: nanoGPT's CPU shakespeare_char recipe):\n"
"  --task text|fashion-mnist   what to train                                     [text]\n"
"  --model gpt2|mlp|cnn   gpt2 for text; mlp or cnn for fashion-mnist           [gpt2]\n"
"  --data PATH            text file to train on (90%% train / 10%% validation), or\n"
"                         the Fashion-MNIST directory [/usr/share/datasets/fashion-mnist]\n"
"  --epochs N             image tasks: passes over the 60k training images; sets --max-iters\n"
"  --tokenizer byte|char  byte: vocab 256; char: the corpus's distinct characters  [char]\n"
"  --n-layer N            transformer blocks                                        [4]\n"
"  --n-head N             attention heads                                           [4]\n"
"  --n-embd N             channels, divisible by n-head                             [128]\n"
"  --block-size N         context length                                            [64]\n"
"  --batch-size N         sequences per micro-batch                                 [12]\n"
"  --grad-accum N         micro-batches per optimizer step                          [1]\n"
"  --max-iters N          optimizer steps                                           [2000]\n"
"  --lr X                 peak learning rate                                        [1e-3]\n"
"  --min-lr X             learning rate at the end of the cosine decay              [1e-4]\n"
"  --warmup-iters N       linear warmup steps                                       [100]\n"
"  --weight-decay X       AdamW decoupled decay, matrices only                      [0.1]\n"
"  --grad-clip X          global gradient-norm clip, 0 = off                        [1.0]\n"
"  --beta1 X, --beta2 X   AdamW betas                                               [0.9, 0.99]\n"
"  --eval-interval N      evaluate every N steps, 0 = only at the end               [250]\n"
"  --eval-iters N         validation batches per evaluation                         [20]\n"
"  --seed N               seed for init and data order                              [1337]\n"
"  --threads N            OpenMP and OpenBLAS threads, 0 = all cores                [0]\n"
"  --out DIR              output directory                                          [runs/latest]\n"
"  --overwrite            replace a run already in --out (its logs, checkpoints, model);\n"
"                         without it such a directory is refused (continue it with --resume)\n"
"  --log-interval N       progress line every N steps when not on a terminal        [auto]\n"
"  --rss-warn MIB         warn once when resident memory passes MIB                 [off]\n"
"  --rss-limit MIB        past MIB resident, save an emergency checkpoint and stop  [off]\n"
"  --mode baseline|hybrid plain training, or the hybrid predictive controller        [baseline]\n"
"  --save-interval N      checkpoint to DIR/checkpoints/ckpt-<step>.bin every N steps,\n"
"                         0 = only when stopped by Ctrl-C / SIGTERM                  [0]\n"
"  --keep-last N          checkpoints kept; older ones are deleted                   [2]\n"
"  --ema DECAY            also average the weights (EMA, decay per step) and report\n"
"                         ema_val_loss beside val_loss; a control for hpt compare    [0 = off]\n"
"  --resume DIR           continue the run in DIR from its newest valid checkpoint,\n"
"                         with its stored configuration (only --threads, equal to the\n"
"                         stored one, --log-interval, --rss-warn and --rss-limit may be given)\n"
"\n"
"hybrid options (with --mode hybrid; see docs/hybrid.md):\n"
"  --warmup-steps N       full steps before any Predict phase                       [100]\n"
"  --full-steps N         length of a Full phase                                    [20]\n"
"  --min-predict-steps N, --max-predict-steps N   Predict horizon range             [5, 40]\n"
"  --correct-steps N      real steps after each Predict phase                       [5]\n"
"  --max-consecutive-predict N   Predict phases between two Full phases             [4]\n"
"  --confidence-threshold X   Predict when confidence >= X; above 1 disables it     [0.75]\n"
"  --backoff-after N, --max-backoff N   failed Predict phases before the Full phases\n"
"                         between attempts double, and the cap on that factor       [2, 64]\n"
"  --predict-waste-budget X   share of steps that failed Predict phases may cost    [0.01]\n"
"  --predictor NAME       coast | shrink | stale-adam | linear                      [coast]\n"
"  --correction-interval N   predicted steps between probe-loss checks              [4]\n"
"  --probe-batches N      training batches per verification                         [2]\n"
"  --whole-phase          apply a Predict phase's steps as one jump, then verify\n"
"  --cost-by-time         value a Predict phase's cost by wall time instead of counted\n"
"                         passes (truer, but the run is no longer reproducible bit for bit)\n""  --ensemble N, --hidden N, --bptt N   dynamics model size                         [3, 32, 16]\n"
"  --div-window N, --div-loss-z X, --div-grad-explode X, --div-grad-vanish X   divergence thresholds\n"
"\n"
"sample options:\n"
"  --model FILE           model.bin written by hpt train (or --run DIR)\n"
"  --tokens N             tokens to generate                                        [500]\n"
"  --temperature X        softmax temperature, > 0                                  [1.0]\n"
"  --top-k N              sample among the k most likely tokens, 0 = all            [0]\n"
"  --prompt TEXT          text to continue                                          [newline]\n"
"  --seed N, --threads N\n"
"\n"
"Exit status: 0 success, 1 runtime error, 2 usage error.\n");
}

/* ---------------------------------------------------------------- train */

typedef struct progress {
    int tty, log_interval;
    double ema_step_s;
} progress;

static void on_log(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

void fmt_eta(char *buf, size_t n, double s) {
    if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%ds", (int)s);
}

static void on_step(void *ctx, const hpt_step_info *in) {
    progress *p = ctx;
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

/* The run's curves as DIR/loss.{svg,png}: a convenience, so a failure to
 * draw them is a warning, never a failed run. */
static void plot_or_warn(const char *dir) {
    if (cli_plot_run(dir) == HPT_OK) fprintf(stderr, "plot: %s/loss.png (and .svg)\n", dir);
    else fprintf(stderr, "hpt: warning: no loss plot: %s\n", hpt_errmsg());
}

/* Runs a built trainer to the end (hc: hybrid mode), prints and exits. An
 * interrupted baseline run exits 0 after saying where its checkpoint is. */
static int run_to_end(hpt_trainer *tr, const hpt_hybrid_config *hc, int log_interval) {
    progress p = {.tty = isatty(2), .log_interval = log_interval};
    const hpt_train_config *rc = hpt_trainer_config(tr);  /* max_iters resolved from --epochs */
    if (!p.log_interval) p.log_interval = rc->max_iters >= 20 ? rc->max_iters / 20 : 1;
    hpt_status st = hc ? hpt_trainer_run_hybrid(tr, hc, on_log, on_step, &p) : hpt_trainer_run(tr, on_log, on_step, &p);
    if (st != HPT_OK && p.tty) fputc('\n', stderr);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", rc->out_dir);
    if (st == HPT_ERR_INTERRUPTED) {
        fprintf(stderr, "hpt: %s\nhpt: continue with: hpt train --resume %s\n", hpt_errmsg(), dir);
        hpt_trainer_free(tr);
        plot_or_warn(dir);
        return 0;
    }
    hpt_trainer_free(tr);
    if (st != HPT_OK) die_status(st);
    plot_or_warn(dir);
    return 0;
}

/* --rss-warn / --rss-limit in MiB: operational limits, also with --resume */
static double g_rss_warn_mib, g_rss_limit_mib;

static void apply_memory_limits(hpt_trainer *tr) {
    hpt_trainer_set_memory_limits(tr, (size_t)(g_rss_warn_mib * 1048576.0), (size_t)(g_rss_limit_mib * 1048576.0));
}

/* hpt train --resume DIR: the stored configuration, nothing else but
 * --threads (checked against the stored count) and --log-interval. */
static int resume_train(const char *dir, const char *train_flag, int hybrid, int threads, int log_interval) {
    if (train_flag)
        die_usage("--resume DIR continues the run with its stored configuration: %s cannot be given with it "
                  "(only --threads, equal to the stored count, and --log-interval can)", train_flag);
    hpt_trainer *tr;
    install_stop_handlers();
    hpt_set_memory_ceiling((size_t)(g_rss_limit_mib * 1048576.0));
    hpt_status st = hpt_trainer_resume(&tr, dir, threads, on_log, NULL);
    if (st != HPT_OK) die_status(st);
    apply_memory_limits(tr);
    if (hybrid >= 0 && hybrid != hpt_trainer_resumed_hybrid(tr)) {
        hpt_trainer_free(tr);
        die_usage("%s", hybrid ? "--resume: --mode hybrid, but the run is a --mode baseline run (the mode comes "
                                 "from the checkpoint)"
                               : "--resume: --mode baseline, but the run is a --mode hybrid run (the mode comes "
                                 "from the checkpoint)");
    }
    if (!hpt_trainer_resumed_hybrid(tr)) return run_to_end(tr, NULL, log_interval);
    /* a hybrid run: its hybrid config comes from the checkpoint too */
    hpt_hybrid_config hc;
    if ((st = hpt_hybrid_config_resumed(tr, &hc)) != HPT_OK) { hpt_trainer_free(tr); die_status(st); }
    return run_to_end(tr, &hc, log_interval);
}

static int cmd_train(int argc, char **argv) {
    /* --task and --model choose the defaults, so read them first */
    const char *task = "text", *model = NULL;
    for (int i = 0; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--task")) task = argv[i + 1];
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        if (!strncmp(argv[i], "--task=", 7)) task = argv[i] + 7;
        if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
    }
    hpt_train_config c;
    hpt_train_config_default_for(&c, task, model);
    c.data_path = NULL;
    int log_interval = 0, set_iters = 0, set_epochs = 0, hybrid = 0;
    const char *hybrid_flag = NULL;  /* the first hybrid-only flag seen */
    int mode_given = 0;
    const char *resume_dir = NULL;
    char train_flag[128] = "";       /* the first flag --resume excludes */
    int threads_flag = -1;
    hpt_hybrid_config hc;
    hpt_hybrid_config_default(&hc);
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        const char *n = a.name;
        if (!strcmp(n, "--help") || !strcmp(n, "-h")) { usage(stdout); return 0; }
        if (strcmp(n, "--resume") && strcmp(n, "--threads") && strcmp(n, "--log-interval") &&
            strcmp(n, "--mode") && strcmp(n, "--rss-warn") && strcmp(n, "--rss-limit") && !train_flag[0])
            snprintf(train_flag, sizeof train_flag, "%s", n);
        if (!strcmp(n, "--resume")) resume_dir = flag_value(&a);
        else if (!strcmp(n, "--data")) c.data_path = flag_value(&a);
        else if (!strcmp(n, "--task")) c.task = flag_value(&a);
        else if (!strcmp(n, "--model")) c.model = flag_value(&a);
        else if (!strcmp(n, "--epochs")) { c.epochs = (int)parse_int(n, flag_value(&a), 0, 100000); set_epochs = 1; }
        else if (!strcmp(n, "--tokenizer")) {
            const char *v = flag_value(&a);
            if (!strcmp(v, "byte")) c.tokenizer = HPT_TOK_BYTE;
            else if (!strcmp(v, "char")) c.tokenizer = HPT_TOK_CHAR;
            else die_usage("--tokenizer must be 'byte' or 'char', got '%s'", v);
        }
        else if (!strcmp(n, "--n-layer")) c.n_layer = (int)parse_int(n, flag_value(&a), 1, 256);
        else if (!strcmp(n, "--n-head")) c.n_head = (int)parse_int(n, flag_value(&a), 1, 256);
        else if (!strcmp(n, "--n-embd")) c.n_embd = (int)parse_int(n, flag_value(&a), 1, 16384);
        else if (!strcmp(n, "--block-size")) c.block_size = (int)parse_int(n, flag_value(&a), 1, 8192);
        else if (!strcmp(n, "--batch-size")) c.batch_size = (int)parse_int(n, flag_value(&a), 1, 65536);
        else if (!strcmp(n, "--grad-accum")) c.grad_accum = (int)parse_int(n, flag_value(&a), 1, 65536);
        else if (!strcmp(n, "--max-iters")) { c.max_iters = (int)parse_int(n, flag_value(&a), 1, 100000000); set_iters = 1; }
        else if (!strcmp(n, "--warmup-iters")) c.warmup_iters = (int)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--lr")) c.lr = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--min-lr")) c.min_lr = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--weight-decay")) c.weight_decay = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--grad-clip")) c.grad_clip = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--beta1")) c.beta1 = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--beta2")) c.beta2 = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--eps")) c.eps = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--eval-interval")) c.eval_interval = (int)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--eval-iters")) c.eval_iters = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (!strcmp(n, "--seed")) c.seed = (uint64_t)parse_int(n, flag_value(&a), 0, LONG_MAX);
        else if (!strcmp(n, "--threads")) c.threads = threads_flag = (int)parse_int(n, flag_value(&a), 0, 1024);
        else if (!strcmp(n, "--save-interval")) c.save_interval = (int)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--keep-last")) c.keep_last = (int)parse_int(n, flag_value(&a), 1, 1000);
        else if (!strcmp(n, "--ema")) c.ema_decay = parse_float(n, flag_value(&a));
        else if (!strcmp(n, "--out")) c.out_dir = flag_value(&a);
        else if (!strcmp(n, "--overwrite")) c.existing_run = HPT_RUNDIR_OVERWRITE;
        else if (!strcmp(n, "--log-interval")) log_interval = (int)parse_int(n, flag_value(&a), 1, 100000000);
        else if (!strcmp(n, "--rss-warn")) g_rss_warn_mib = (double)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--rss-limit")) g_rss_limit_mib = (double)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--mode")) {
            const char *v = flag_value(&a);
            mode_given = 1;
            if (!strcmp(v, "hybrid")) hybrid = 1;
            else if (!strcmp(v, "baseline")) hybrid = 0;
            else die_usage("--mode must be 'baseline' or 'hybrid', got '%s'", v);
        }
        /* hybrid knobs: every one live, validated by hpt_hybrid_config_check */
#define HFLAG(name) (!strcmp(n, name) && hpt_cli_hybrid_flag(name, NULL) && (hybrid_flag = hybrid_flag ? hybrid_flag : name))
        else if (HFLAG("--warmup-steps")) hc.warmup_steps = (int)parse_int(n, flag_value(&a), 0, 100000000);
        else if (HFLAG("--full-steps")) hc.full_steps = (int)parse_int(n, flag_value(&a), 1, 100000000);
        else if (HFLAG("--min-predict-steps")) hc.min_predict_steps = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--max-predict-steps")) hc.max_predict_steps = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--correct-steps")) hc.correct_steps = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--max-consecutive-predict")) hc.max_consecutive_predict = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--confidence-threshold")) hc.confidence_threshold = parse_float(n, flag_value(&a));
        else if (HFLAG("--predictor")) hc.predictor = flag_value(&a);
        else if (HFLAG("--backoff-after")) hc.backoff_after = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--max-backoff")) hc.max_backoff = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--predict-waste-budget")) hc.waste_budget = parse_float(n, flag_value(&a));
        else if (HFLAG("--correction-interval")) hc.correction_interval = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--probe-batches")) hc.probe_batches = (int)parse_int(n, flag_value(&a), 1, 64);
        else if (HFLAG("--whole-phase")) hc.whole_phase = 1;
        else if (HFLAG("--cost-by-time")) hc.count_cost = 0;
        else if (HFLAG("--ensemble")) hc.ensemble = (int)parse_int(n, flag_value(&a), 1, 16);
        else if (HFLAG("--hidden")) hc.hidden = (int)parse_int(n, flag_value(&a), 2, 1024);
        else if (HFLAG("--bptt")) hc.bptt = (int)parse_int(n, flag_value(&a), 1, 256);
        else if (HFLAG("--div-window")) hc.div_window = (int)parse_int(n, flag_value(&a), 1, 100000);
        else if (HFLAG("--div-loss-z")) hc.div_loss_z = parse_float(n, flag_value(&a));
        else if (HFLAG("--div-grad-explode")) hc.div_grad_explode = parse_float(n, flag_value(&a));
        else if (HFLAG("--div-grad-vanish")) hc.div_grad_vanish = parse_float(n, flag_value(&a));
#undef HFLAG
        else die_usage("unknown option '%s' for 'hpt train'", n);
    }
    if (resume_dir) return resume_train(resume_dir, train_flag[0] ? train_flag : NULL, mode_given ? hybrid : -1,
                                    threads_flag, log_interval);
    if (set_iters && set_epochs && c.epochs > 0) die_usage("%s", "give --max-iters or --epochs, not both");
    if (set_iters) c.epochs = 0;  /* an explicit step count replaces the task's default epochs */
    if (!c.data_path && !strcmp(c.task, "text")) die_usage("%s", "train needs --data PATH (a text file)");
    if (hybrid_flag && !hybrid) die_usage("%s only applies with --mode hybrid", hybrid_flag);
    hpt_status st = hpt_train_config_check(&c);
    if (st != HPT_OK) die_status(st);
    if (hybrid && (st = hpt_hybrid_config_check(&hc)) != HPT_OK) die_status(st);
    hpt_trainer *tr;
    hpt_set_memory_ceiling((size_t)(g_rss_limit_mib * 1048576.0));  /* refused before allocating, if over */
    st = hpt_trainer_init(&tr, &c);
    if (st != HPT_OK) die_status(st);
    apply_memory_limits(tr);
    install_stop_handlers();
    return run_to_end(tr, hybrid ? &hc : NULL, log_interval);
}

/* ---------------------------------------------------------------- sample */

static int cmd_sample(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL;
    char run_path[4200];
    int ntok = 500, topk = 0, threads = 0;
    float temp = 1.0f;
    uint64_t seed = 1;
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        const char *n = a.name;
        if (!strcmp(n, "--help") || !strcmp(n, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(n, "--model")) model_path = flag_value(&a);
        else if (!strcmp(n, "--run")) { snprintf(run_path, sizeof run_path, "%s/model.bin", flag_value(&a)); model_path = run_path; }
        else if (!strcmp(n, "--tokens")) ntok = (int)parse_int(n, flag_value(&a), 0, 100000000);
        else if (!strcmp(n, "--top-k")) topk = (int)parse_int(n, flag_value(&a), 0, 1 << 24);
        else if (!strcmp(n, "--temperature")) {
            temp = parse_float(n, flag_value(&a));
            if (!(temp > 0.0f)) die_usage("%s must be > 0", n);
        }
        else if (!strcmp(n, "--prompt")) prompt = flag_value(&a);
        else if (!strcmp(n, "--seed")) seed = (uint64_t)parse_int(n, flag_value(&a), 0, LONG_MAX);
        else if (!strcmp(n, "--threads")) threads = (int)parse_int(n, flag_value(&a), 0, 1024);
        else die_usage("unknown option '%s' for 'hpt sample'", n);
    }
    if (!model_path) die_usage("%s", "sample needs --model FILE (a model.bin from hpt train)");
    hpt_set_threads(threads);
    hpt_model *m;
    hpt_text *tok;
    hpt_status st = hpt_weights_load(model_path, 1, 0, &m, &tok);
    if (st != HPT_OK) die_status(st);
    if (!tok) {
        fprintf(stderr, "hpt: '%s' is not a language model (it has no tokenizer); sample needs one from --task text\n", model_path);
        return 1;
    }
    const int maxT = hpt_model_block_size(m), V = hpt_text_vocab_size(tok);
    int cap = ntok + (prompt ? (int)strlen(prompt) : 0) + 1;
    int *ctx = malloc((size_t)cap * sizeof(int));
    float *probs = malloc((size_t)V * sizeof(float));
    int *order = malloc((size_t)V * sizeof(int));
    if (!ctx || !probs || !order) { fprintf(stderr, "hpt: out of memory\n"); return 1; }
    int n = 0;
    if (prompt && *prompt) {
        size_t bad = 0;
        n = hpt_text_encode(tok, prompt, ctx, cap, &bad);
        if (n < 0) {
            fprintf(stderr, "hpt: the prompt's character at byte %zu is not in the model's vocabulary\n", bad);
            return 2;
        }
        fputs(prompt, stdout);
    } else {
        /* start from a newline where the vocabulary has one, as nanoGPT does */
        n = hpt_text_encode(tok, "\n", ctx, cap, NULL);
        if (n != 1) { ctx[0] = 0; n = 1; }
    }
    uint64_t rs = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int k = 0; k < ntok; k++) {
        int T = n < maxT ? n : maxT;
        hpt_batch b = {.B = 1, .T = T, .tokens = ctx + n - T};
        st = hpt_model_forward(m, &b, NULL);
        if (st != HPT_OK) die_status(st);
        int nout, row;
        const float *logits = hpt_model_logits(m, &nout, &row) + (size_t)(T - 1) * row;
        /* temperature, then keep the top k by partial selection */
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) { probs[i] = logits[i] / temp; order[i] = i; if (probs[i] > mx) mx = probs[i]; }
        int keep = topk > 0 && topk < V ? topk : V;
        if (keep < V) {
            for (int i = 0; i < keep; i++) {
                int best = i;
                for (int j = i + 1; j < V; j++) if (probs[order[j]] > probs[order[best]]) best = j;
                int tmp = order[i]; order[i] = order[best]; order[best] = tmp;
            }
        }
        double sum = 0.0;
        for (int i = 0; i < keep; i++) sum += exp(probs[order[i]] - mx);
        /* inverse-CDF draw with a 53-bit uniform from a splitmix64 stream */
        rs += 0x9E3779B97F4A7C15ull;
        uint64_t z = rs;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        double u = (z >> 11) / 9007199254740992.0 * sum, acc = 0.0;
        int pick = order[keep - 1];
        for (int i = 0; i < keep; i++) {
            acc += exp(probs[order[i]] - mx);
            if (u < acc) { pick = order[i]; break; }
        }
        ctx[n++] = pick;
        char out[4];
        int len = hpt_text_decode(tok, pick, out);
        fwrite(out, 1, (size_t)len, stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
    free(ctx); free(probs); free(order);
    hpt_model_free(m);
    hpt_text_free(tok);
    return 0;
}

/* Re-executes once with OPENBLAS_CORETYPE set where OpenBLAS picked its
 * generic kernels on a CPU that runs faster ones (hpt_blas_better_core). */
static void choose_blas_kernels(char **argv) {
    const char *core = getenv("HPT_BLAS_REEXEC") ? NULL : hpt_blas_better_core();
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("HPT_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");  /* exec failed: carry on with the generic kernels */
}

int main(int argc, char **argv) {
    choose_blas_kernels(argv);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) { puts(VERSION_STRING); return 0; }
    if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc - 2, argv + 2);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 2, argv + 2);
    if (!strcmp(cmd, "plot")) return cmd_plot(argc - 2, argv + 2);
    die_usage("unknown command '%s' (expected train, sample, compare or plot)", cmd);
    return 2;
}
