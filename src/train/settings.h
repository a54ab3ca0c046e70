/*
 * settings.h — the one table of hpt's settings: every field of
 * hpt_train_config, hpt_run_options and hpt_hybrid_config is one row here,
 * and everything else is generated from the rows (settings.c):
 *   - the defaults (hpt_train_config_default/_for, hpt_run_options_default,
 *     hpt_hybrid_config_default) and the range checks (*_check);
 *   - the checkpoint encoding: TCFG (train rows, in row order) and the HYBR
 *     config words (hybrid rows, in row order), decoding included, which
 *     validates every value against its row;
 *   - the command line: hpt_setting_find / hpt_setting_parse, and the help.
 * All three lists are expanded in src/train/settings.c, the rows and the
 * lookup (hpt_settings, hpt_setting_find): the structs are public (hpt.h,
 * hpt_hybrid.h), so the hybrid's rows are plain data here and the layer
 * above (src/hybrid/hybrid_config.c) reads them down through hpt_settings.
 * Adding a setting: its field in the struct (include/hpt.h) and one row here.
 * A train or hybrid row appended at the end of its list is stored in
 * checkpoints: give it SINCE(n) with the bumped TCFG version (checkpoint.c),
 * or bump HYBR_VERSION (hybrid_internal.h). Never reorder stored rows: the
 * row order IS the byte layout of TCFG and HYBR.
 *
 * Columns:
 *   field    the struct member
 *   flag     the command-line flag without its "--"
 *   TYPE     INT (int), U64 (uint64_t, up to 2^63-1), FLOAT (float), STR
 *            (const char *, min/max bound its length), ENUM (int: the index
 *            of a name), NAME (const char *: one of the names), SWITCH (an
 *            int in [min, max]: a flag without a value, setting the opposite
 *            of the default)
 *   min,max  the range (inclusive unless flagged open); ENUM/NAME: 0, 0
 *   flags    MIN_OPEN, MAX_OPEN, RESUME_OK (may be given with --resume),
 *            NOT_STORED (operational, not in checkpoints), NO_FLAG (stored,
 *            set through another row's flag), SINCE(n) (the TCFG version
 *            that first stored it; default 1)
 *   default  a C value of the field's type; train rows give three: text
 *            (GPT-2), fashion-mnist with mlp, fashion-mnist with cnn
 *   meta     the value's name in the help (N, X, PATH); ENUM/NAME:
 *            CHOICES("a", "b") in stored order (the index is what HYBR and
 *            TCFG's tokenizer store), or NAMES_FROM(f), f(i) the i-th name
 *            of another table (the predictors')
 *   help     one line for `hpt --help`; a "[...]" in it replaces the
 *            default the help would print
 */
#ifndef HPT_SETTINGS_H
#define HPT_SETTINGS_H

#include "../base/base.h"

#include <math.h>
#include <stddef.h>

#define HPT_STEPS_MAX 100000000  /* the most optimizer steps a run may plan (step counters are ints) */

/* X(field, flag, TYPE, min, max, flags, text default, mlp default, cnn default, meta, help) */
#define HPT_TRAIN_SETTINGS(X)                                                                                  \
    X(task, "task", NAME, 0, 0, 0, "text", "fashion-mnist", "fashion-mnist",                                    \
      CHOICES("text", "fashion-mnist"), "what to train [text]")                                                       \
    X(model, "model", NAME, 0, 0, 0, "gpt2", "mlp", "cnn", CHOICES("gpt2", "mlp", "cnn"),                       \
      "gpt2 for text; mlp or cnn for fashion-mnist [gpt2]")                                                           \
    X(data_path, "data", STR, 0, 4095, 0, NULL, NULL, NULL, "PATH",                                            \
      "text file to train on (90% train / 10% validation), token shards (hpt tokenize --out's DIR, llm.c "     \
      "*.bin or a glob of them, nanoGPT's train.bin), or the Fashion-MNIST directory "                          \
      "[fashion-mnist: /usr/share/datasets/fashion-mnist]")                                                    \
    X(out_dir, "out", STR, 1, 4095, 0, "runs/latest", "runs/latest", "runs/latest", "DIR", "output directory") \
    X(existing_run, "overwrite", SWITCH, 0, 2, NOT_STORED, HPT_RUNDIR_REFUSE, HPT_RUNDIR_REFUSE, HPT_RUNDIR_REFUSE, \
      "", "replace a run already in --out (its logs, checkpoints, model); without it such a directory is "       \
      "refused (continue it with --resume)")                                                                   \
    X(tokenizer, "tokenizer", ENUM, 0, 0, 0, HPT_TOK_CHAR, HPT_TOK_CHAR, HPT_TOK_CHAR,                         \
      CHOICES("byte", "char", "gpt2"),                                                                         \
      "byte: vocab 256; char: the corpus's distinct characters; gpt2: GPT-2's BPE (vocab 50257)")               \
    X(vocab_dir, "vocab", STR, 0, 4095, NOT_STORED | RESUME_OK, NULL, NULL, NULL, "DIR",                       \
      "the gpt2 tokenizer's encoder.json and vocab.bpe [$HPT_VOCAB, else /usr/local/share/hpt/gpt2]")          \
    X(n_layer, "n-layer", INT, 1, 256, 0, 4, 4, 4, "N", "transformer blocks")                                  \
    X(n_head, "n-head", INT, 1, 256, 0, 4, 4, 4, "N", "attention heads")                                       \
    X(n_embd, "n-embd", INT, 1, 16384, 0, 128, 128, 128, "N", "channels, divisible by --n-head")               \
    X(block_size, "block-size", INT, 1, 8192, 0, 64, 64, 64, "N", "context length")                            \
    X(batch_size, "batch-size", INT, 1, 65536, 0, 12, 128, 128, "N", "sequences (images) per micro-batch")      \
    X(grad_accum, "grad-accum", INT, 1, 65536, 0, 1, 1, 1, "N", "micro-batches per optimizer step")            \
    X(max_iters, "max-iters", INT, 1, HPT_STEPS_MAX, 0, 2000, 2000, 2000, "N",                                 \
      "optimizer steps (with --epochs: set by it) [2000]")                                                     \
    X(warmup_iters, "warmup-iters", INT, 0, HPT_STEPS_MAX, 0, 100, 100, 100, "N", "linear warmup steps")       \
    X(epochs, "epochs", INT, 0, 100000, 0, 0, 10, 5, "N",                                                      \
      "passes over the training set; sets --max-iters (0 = off)")                                              \
    X(lr, "lr", FLOAT, 1e-9, 10, 0, 1e-3f, 1e-3f, 1e-3f, "X",                                                  \
      "peak learning rate (--optimizer muon: Muon's, on the hidden matrices)")                                 \
    X(min_lr, "min-lr", FLOAT, 0, 10, 0, 0.0f, 0.0f, 0.0f, "X",                                                \
      "learning rate at the end of the decay (--schedule), <= --lr")                                                 \
    X(weight_decay, "weight-decay", FLOAT, 0, 10, 0, 0.1f, 0.1f, 0.1f, "X",                                    \
      "AdamW decoupled decay, matrices only")                                                                  \
    X(grad_clip, "grad-clip", FLOAT, 0, 1e9, 0, 1.0f, 1.0f, 1.0f, "X", "global gradient-norm clip, 0 = off")  \
    X(beta1, "beta1", FLOAT, 0, 0.999999, 0, 0.9f, 0.9f, 0.9f, "X", "AdamW beta1")                             \
    X(beta2, "beta2", FLOAT, 0, 1, MAX_OPEN, 0.99f, 0.999f, 0.999f, "X", "AdamW beta2")                     \
    X(eps, "eps", FLOAT, 1e-12, 1, 0, 1e-8f, 1e-8f, 1e-8f, "X", "AdamW epsilon")                               \
    X(eval_interval, "eval-interval", INT, -1, HPT_STEPS_MAX, 0, 250, -1, -1, "N",                             \
      "evaluate every N steps, 0 = only at the end, -1 = every epoch")                                         \
    X(eval_iters, "eval-iters", INT, 1, 100000, 0, 20, 20, 20, "N", "validation batches per evaluation")       \
    X(seed, "seed", U64, 0, 9223372036854775807.0, 0, 1337, 1337, 1337, "N", "seed for init and data order")   \
    X(threads, "threads", INT, 0, 1024, RESUME_OK, 0, 0, 0, "N",                                               \
      "OpenMP and OpenBLAS threads, 0 = all cores (with --resume: the run's own count)")                       \
    X(device, "device", NAME, 0, 0, NOT_STORED | RESUME_OK, "cpu", "cpu", "cpu", CHOICES("cpu", "cuda", "guard"), \
      "where the model's arenas live and train: cpu, cuda (an NVIDIA GPU; the GPT-2 family), or guard (a test "  \
      "device: the CPU's kernels on memory the host may not touch between them) [cpu]")                         \
    X(vram_limit_mib, "vram-limit", INT, 0, 100000000, NOT_STORED | RESUME_OK, 0, 0, 0, "MIB",                 \
      "--device with memory of its own (cuda): refuse a run whose plan is over MIB [off; always: over the "     \
      "device's free memory]")                                                                                 \
    X(save_interval, "save-interval", INT, 0, HPT_STEPS_MAX, 0, 0, 0, 0, "N",                                  \
      "checkpoint to DIR/checkpoints/ckpt-<step>.bin every N steps, 0 = only when stopped by Ctrl-C / SIGTERM") \
    X(keep_last, "keep-last", INT, 1, 1000, 0, 2, 2, 2, "N", "checkpoints kept; older ones are deleted")        \
    X(ema_decay, "ema", FLOAT, 0, 1, MAX_OPEN | SINCE(2), 0.0f, 0.0f, 0.0f, "DECAY",                          \
      "also average the weights (EMA, decay per step) and report ema_val_loss beside val_loss; "               \
      "a control for hpt compare [0 = off]")                                                                  \
    X(schedule, "schedule", NAME, 0, 0, SINCE(3), "linear", "linear", "linear", NAMES_FROM(hpt_schedule_name),  \
      "learning rate after the warmup, down to --min-lr: linear (with --min-lr 0, the default: decay to zero, "  \
      "D2Z), cosine, constant, or wsd (constant, then a cooldown over the last --decay-frac of the steps) "      \
      "[linear]")                                                                                                \
    X(decay_frac, "decay-frac", FLOAT, 0, 1, SINCE(3), 0.2f, 0.2f, 0.2f, "F",                                  \
      "--schedule wsd: the share of the run's steps spent in the cooldown (rounded to whole steps, at least 2 " \
      "when > 0: the fewest whose last step decays)")                                                          \
    X(cooldown, "cooldown", NAME, 0, 0, SINCE(3), "sqrt", "sqrt", "sqrt", CHOICES("linear", "sqrt"),            \
      "--schedule wsd: the cooldown's shape, linear or 1 - sqrt(progress) (Hagele et al. 2024) [sqrt]")      \
    X(optimizer, "optimizer", NAME, 0, 0, SINCE(4), "adamw", "adamw", "adamw",                                 \
      CHOICES("adamw", "schedule-free", "muon"),                                                               \
      "adamw, schedule-free AdamW (Defazio et al. 2024: evaluated and saved at its averaged weights; "         \
      "the learning rate is the warmup then constant --lr, --schedule and --min-lr do not apply), or muon "    \
      "(Muon at --lr on the hidden weight matrices, AdamW at --adam-lr on the rest; --device cpu) [adamw]")    \
    X(init_path, "init", STR, 0, 4095, SINCE(5), NULL, NULL, NULL, "FILE",                                       \
      "fine-tune: start from this model file's weights and tokenizer (hpt import's, or a model.bin); "         \
      "--n-layer, --n-head, --n-embd are taken from it, --block-size up to its positions [none]")              \
    X(sync_interval, "sync-interval", INT, 0, HPT_STEPS_MAX, SINCE(6), 0, 0, 0, "H",                             \
      "local-step mode (DiLoCo): H steps per rank without communicating, then the ranks' displacements are "   \
      "averaged and take the outer Nesterov step (0 = off: every step's gradients are all-reduced)")           \
    /* the local steps' outer step: set by --outer-lr / --outer-momentum (the \
     * hybrid rows: one flag family for the one outer step), stored in TCFG */ \
    X(sync_outer_lr, "sync-outer-lr", FLOAT, 0, 100, MIN_OPEN | NO_FLAG | SINCE(6), 1.0f, 1.0f, 1.0f, "X",      \
      "--sync-interval: the outer step's rate (--outer-lr)")                                                    \
    X(sync_outer_momentum, "sync-outer-momentum", FLOAT, 0, 1, MAX_OPEN | NO_FLAG | SINCE(6), 0.5f, 0.5f, 0.5f, \
      "X", "--sync-interval: the outer Nesterov momentum (--outer-momentum)")                                  \
    X(precision, "precision", NAME, 0, 0, SINCE(7), "fp32", "fp32", "fp32",                                    \
      CHOICES("fp32", "tf32", "bf16"),                                                                         \
      "the device's arithmetic: fp32 (IEEE single, TF32 off), tf32 (a GPU's TF32 tensor cores, fp32 "        \
      "storage) or bf16 (a GPU's bf16 tensor cores and bf16 activations, fp32 weights and optimizer) [fp32]")  \
    X(adam_lr, "adam-lr", FLOAT, 1e-9, 10, SINCE(8), 1e-3f, 1e-3f, 1e-3f, "X",                                 \
      "--optimizer muon: AdamW's peak rate on the embeddings, the output head, biases and gains (--lr is "     \
      "Muon's; both follow the schedule) [1e-3, AdamW's default --lr]")                                        \
    X(muon_momentum, "muon-momentum", FLOAT, 0, 1, MAX_OPEN | SINCE(8), 0.95f, 0.95f, 0.95f, "X",              \
      "--optimizer muon: Muon's Nesterov momentum")                                                            \
    X(muon_ns_steps, "muon-ns-steps", INT, 1, 20, SINCE(8), 5, 5, 5, "N",                                      \
      "--optimizer muon: Newton-Schulz steps per update (coefficients 3.4445, -4.7750, 2.0315)")               \
    X(muon_scale, "muon-scale", NAME, 0, 0, SINCE(8), "spectral", "spectral", "spectral",                      \
      CHOICES("spectral", "rms"),                                                                              \
      "--optimizer muon: the update's scale, spectral (max(1, rows/cols)^0.5, Keller Jordan's) or rms "        \
      "(0.2 sqrt(max(rows, cols)), Moonlight's: AdamW's update RMS, so that --lr can be AdamW's) [spectral]")

/* Operational settings: what a run is asked to do now, never stored.
 * X(field, flag, TYPE, min, max, flags, default, meta, help) */
#define HPT_RUN_SETTINGS(X)                                                                                    \
    X(hybrid, "mode", ENUM, 0, 0, RESUME_OK, 0, CHOICES("baseline", "hybrid"),                                 \
      "plain training, or the hybrid predictive controller (with --resume: the run's own)")                    \
    X(resume_dir, "resume", STR, 1, 4095, RESUME_OK, NULL, "DIR",                                              \
      "continue the run in DIR from its newest valid checkpoint, with its stored configuration "               \
      "(only --threads, --mode, --log-interval, --rss-warn, --rss-limit, --vram-limit, --device and "           \
      "--allow-data-change may be given "                                                                      \
      "with it)")                                                                                              \
    X(log_interval, "log-interval", INT, 1, HPT_STEPS_MAX, RESUME_OK, 0, "N",                                  \
      "progress line every N steps when not on a terminal [auto]")                                             \
    X(rss_warn_mib, "rss-warn", INT, 0, 100000000, RESUME_OK, 0, "MIB",                                        \
      "warn once when resident memory passes MIB [off]")                                                       \
    X(rss_limit_mib, "rss-limit", INT, 0, 100000000, RESUME_OK, 0, "MIB",                                      \
      "past MIB resident, save an emergency checkpoint and stop [off]")                                        \
    X(allow_data_change, "allow-data-change", SWITCH, 0, 1, RESUME_OK, 0, "",                                   \
      "--resume: go on although the data no longer matches the checkpoint's record of it (size and CRC-32), "  \
      "training on the data as it is now; without it such a resume is refused")

/* The hybrid (--mode hybrid); docs/hybrid.md. The rows marked PHASED are
 * the phased design's (src/hybrid/phased/, the driver's extension: its
 * phase machine, probes and learned dynamics), shown under their own
 * heading in the help; the rest are the driver's. The order is HYBR's
 * config words (one per row), which checkpoints store: rows are only ever
 * appended. The defaults are the phase controller's and the divergence
 * monitor's (tests/test_settings.c checks they agree). --predictor's names
 * are the codes checkpoints store, every predictor's whether this build
 * runs it or not (the default table's, src/hybrid/predict.c, or an
 * extension's): a new predictor's name is appended.
 * X(field, flag, TYPE, min, max, flags, default, meta, help) */
#define HPT_HYBRID_SETTINGS(X)                                                                                 \
    X(warmup_steps, "warmup-steps", INT, 0, HPT_STEPS_MAX, 0, 100, "N",                                       \
      "real steps before the first jump or Predict phase")                                                     \
    X(full_steps, "full-steps", INT, 1, HPT_STEPS_MAX, PHASED, 20, "N", "length of a Full phase")              \
    X(min_predict_steps, "min-predict-steps", INT, 1, 100000, PHASED, 5, "N",                                  \
      "Predict horizon at the confidence threshold")                                                           \
    X(max_predict_steps, "max-predict-steps", INT, 1, 100000, PHASED, 40, "N",                                  \
      "Predict horizon at confidence 1")                                                                       \
    X(correct_steps, "correct-steps", INT, 1, 100000, PHASED, 5, "N", "real steps after each Predict phase")   \
    X(max_consecutive_predict, "max-consecutive-predict", INT, 1, 100000, PHASED, 4, "N",                      \
      "Predict phases between two Full phases")                                                                \
    X(confidence_threshold, "confidence-threshold", FLOAT, 0, INFINITY, PHASED, 0.75f, "X",                    \
      "Predict when confidence >= X; above 1 disables it")                                                     \
    X(backoff_after, "backoff-after", INT, 1, 100000, PHASED, 2, "N",                                          \
      "failed Predict phases before the Full phases between attempts double")                                  \
    X(max_backoff, "max-backoff", INT, 1, 100000, PHASED, 64, "N", "cap on that doubling factor")              \
    X(waste_budget, "predict-waste-budget", FLOAT, 0, 1, PHASED, 0.01f, "X",                                   \
      "share of steps that failed Predict phases may cost")                                                    \
    X(predictor, "predictor", NAME, 0, 0, 0, "outer",                                                          \
      CHOICES("coast", "stale-adam", "linear", "shrink", "outer"),                                             \
      "what moves the weights between real steps: outer's jump, or a phased design's Predict phase")           \
    X(correction_interval, "correction-interval", INT, 1, 100000, PHASED, 4, "N",                              \
      "predicted steps between probe-loss checks")                                                             \
    X(probe_batches, "probe-batches", INT, 1, 64, PHASED, 2, "N", "training batches per verification")         \
    X(whole_phase, "whole-phase", SWITCH, 0, 1, PHASED, 0, "", "apply a Predict phase's steps as one jump, then verify") \
    X(ensemble, "ensemble", INT, 1, 16, PHASED, 3, "N", "dynamics model: ensemble members")                    \
    X(hidden, "hidden", INT, 2, 1024, PHASED, 32, "N", "dynamics model: hidden units")                         \
    X(bptt, "bptt", INT, 1, 256, PHASED, 16, "N", "dynamics model: steps of backpropagation through time")     \
    X(div_window, "div-window", INT, 8, 256, 0, 64, "N", "divergence monitor: steps in its window")            \
    X(div_loss_z, "div-loss-z", FLOAT, 0, INFINITY, MIN_OPEN | MAX_OPEN, 6.0f, "X",                            \
      "divergence monitor: loss z-score for a warning")                                                        \
    X(div_grad_explode, "div-grad-explode", FLOAT, 1, INFINITY, MIN_OPEN | MAX_OPEN, 10.0f, "X",               \
      "divergence monitor: grad norm / its mean for a warning")                                                \
    X(div_grad_vanish, "div-grad-vanish", FLOAT, 0, 1, MAX_OPEN, 0.01f, "X",                                   \
      "divergence monitor: grad norm / its mean below which it warns, 0 = off")                                \
    X(count_cost, "cost-by-time", SWITCH, 0, 1, PHASED, 1, "",                                                 \
      "value a Predict phase's cost by wall time instead of counted passes "                                   \
      "(truer, but the run is no longer reproducible bit for bit)")                                            \
    X(outer_interval, "outer-interval", INT, 1, HPT_STEPS_MAX, 0, 50, "H",                                    \
      "--predictor outer: real steps between two outer jumps")                                                 \
    X(outer_lr, "outer-lr", FLOAT, 0, 100, MIN_OPEN, 1.0f, "X",                                                 \
      "the outer step's rate, of --predictor outer's jumps and of --sync-interval's local steps (1 with "      \
      "momentum 0: no jump; plain averaging); also --sync-outer-lr")                                            \
    X(outer_momentum, "outer-momentum", FLOAT, 0, 1, MAX_OPEN, 0.5f, "X",                                      \
      "the outer Nesterov momentum (--predictor outer, --sync-interval); also --sync-outer-momentum")          \
    X(outer_follow_lr, "outer-follow-lr", SWITCH, 0, 1, 0, 0, "",                                              \
      "--predictor outer: scale the jump by lr(t) / the peak lr, so it fades in the decay")                    \
    X(outer_check, "outer-check", INT, 1, 1000, 0, 8, "K",                                                     \
      "--predictor outer: real steps whose training losses check a jump")                                      \
    X(outer_moments, "outer-moments", ENUM, 0, 0, 0, 0, CHOICES("keep", "reset"),                               \
      "--predictor outer: AdamW's first moment at a jump, kept or reset to 0")                                   \
    X(outer_adapt, "outer-adapt", ENUM, 0, 0, 0, 0, CHOICES("none", "agree"),                                   \
      "--predictor outer: agree scales each tensor's jump by the cosine (clipped to [0, 1]) between its "        \
      "displacement and its outer momentum")                                                                     \
    X(outer_gate, "outer-gate", ENUM, 0, 0, 0, 0, CHOICES("none", "dynamics"),                                  \
      "--predictor outer: dynamics trains the dynamics model and jumps only when its confidence >= "            \
      "--confidence-threshold")

/* ---------------------------------------------------------------- rows to descriptors */

/* ROW(group, struct, field, flag, TYPE, min, max, flags, default, meta, help)
 * is the hpt_setting of a row (settings.c expands the lists with it). */
#define CHOICES(...) .names = ((const char *const[]){__VA_ARGS__, NULL})
#define NAMES_FROM(f) .name_at = f
#define MIN_OPEN HPT_SET_MIN_OPEN
#define MAX_OPEN HPT_SET_MAX_OPEN
#define RESUME_OK HPT_SET_RESUME_OK
#define NOT_STORED HPT_SET_NOT_STORED
#define PHASED HPT_SET_PHASED
#define NO_FLAG HPT_SET_NO_FLAG
#define SINCE(v) ((unsigned)(v) << 8)
#define HPT_META_INT(m) .meta = m
#define HPT_META_U64(m) .meta = m
#define HPT_META_FLOAT(m) .meta = m
#define HPT_META_STR(m) .meta = m
#define HPT_META_SWITCH(m) .meta = NULL
#define HPT_META_ENUM(m) m
#define HPT_META_NAME(m) m
#define HPT_ON_INT(d) .on = 0
#define HPT_ON_U64(d) .on = 0
#define HPT_ON_FLOAT(d) .on = 0
#define HPT_ON_STR(d) .on = 0
#define HPT_ON_ENUM(d) .on = 0
#define HPT_ON_NAME(d) .on = 0
#define HPT_ON_SWITCH(d) .on = !(d)
#define HPT_SETTING_ROW(grp, st, field_, flag_, TYPE, lo, hi, fl, def, meta_, help_)                              \
    {.flag = "--" flag_, .field = #field_, .group = grp, .type = HPT_SET_##TYPE, .offset = offsetof(st, field_), \
     .min = lo, .max = hi, .flags = fl, HPT_META_##TYPE(meta_), HPT_ON_##TYPE(def), .help = help_},

/* ---------------------------------------------------------------- the generic parts */

/* hpt_settings(g) (hpt_settings.h) returns any group's rows, the hybrid's
 * included, and hpt_setting_find looks a flag up among all three. */
/* After decoding a TCFG of `version`: the rows it lacks get the value runs
 * of that version had, where it differs from today's default (a version-2
 * run decayed by cosine; the default is now linear to 0, D2Z). */
void hpt_train_config_legacy(hpt_train_config *c, unsigned version);

/* Each value of cfg against its row. */
hpt_status hpt_settings_check(const hpt_setting *rows, int n, const void *cfg);
/* The stored rows up to `version` (SINCE; NOT_STORED rows never), in row
 * order, appended to out: words = 0 is TCFG's layout (strings and names
 * length-prefixed, ENUM as u32, U64 as 8 bytes), words = 1 HYBR's (every
 * value one 32-bit word, a NAME as its index). Returns the bytes written;
 * asserts they fit cap. */
size_t hpt_settings_encode(const hpt_setting *rows, int n, const void *cfg, unsigned version, int words,
                           unsigned char *out, size_t cap);
/* The reverse, into cfg (rows not stored in `version` keep cfg's values).
 * Strings are copied into strbuf (cfg points into it), names point to the
 * table's. Every value is checked against its row: 0 with the reason (naming
 * the flag) in hpt_errmsg() if one is out of range or the bytes run out. */
int hpt_settings_decode(const hpt_setting *rows, int n, void *cfg, unsigned version, int words, hpt_cursor *k,
                        char *strbuf, size_t strcap);

#endif /* HPT_SETTINGS_H */
