/*
 * task_text.c — the text task: a GPT-2 over a tokenised text file or token
 * shards (shards.c, read window by window), random training windows from a seeded
 * RNG (the data cursor is its one u64 state, whichever the source), and
 * fixed validation windows.
 */
#include "../data/shards.h"
#include "preflight.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text_task {
    hpt_text *text;        /* the corpus; with shards, only the vocabulary */
    hpt_shards *shards;    /* NULL: a text file */
    int B, T, eval_iters;
    int *x, *y;            /* (B, T) */
    uint64_t rng;          /* the data cursor */
} text_task;

static hpt_status text_train_batch(hpt_task *t, hpt_batch *b) {
    text_task *tt = t->impl;
    if (tt->shards) HPT_TRY(hpt_shards_train_batch(tt->shards, &tt->rng, tt->B, tt->T, tt->x, tt->y));
    else hpt_text_train_batch(tt->text, &tt->rng, tt->B, tt->T, tt->x, tt->y);
    *b = (hpt_batch){.B = tt->B, .T = tt->T, .tokens = tt->x, .targets = tt->y};
    return HPT_OK;
}

static int text_val_batches(const hpt_task *t) { return ((const text_task *)t->impl)->eval_iters; }

static hpt_status text_val_batch(hpt_task *t, int i, hpt_batch *b) {
    text_task *tt = t->impl;
    if (tt->shards) HPT_TRY(hpt_shards_val_batch(tt->shards, i, tt->eval_iters, tt->B, tt->T, tt->x, tt->y));
    else hpt_text_val_batch(tt->text, i, tt->eval_iters, tt->B, tt->T, tt->x, tt->y);
    *b = (hpt_batch){.B = tt->B, .T = tt->T, .tokens = tt->x, .targets = tt->y};
    return HPT_OK;
}

static void text_describe(const hpt_task *t, char *buf, size_t n) {
    const text_task *tt = t->impl;
    const hpt_shards *sh = tt->shards;
    if (sh)
        snprintf(buf, n, "%s tokenizer, vocab %d: %zu train / %zu val tokens in %d + %d %s shards",
                 hpt_tokenizer_names[hpt_text_kind(tt->text)], hpt_text_vocab_size(tt->text), hpt_shards_tokens(sh, 0),
                 hpt_shards_tokens(sh, 1), hpt_shards_files(sh, 0), hpt_shards_files(sh, 1), hpt_shards_format(sh));
    else
        snprintf(buf, n, "%s tokenizer, vocab %d: %zu train / %zu val tokens", hpt_tokenizer_names[hpt_text_kind(tt->text)],
                 hpt_text_vocab_size(tt->text),
                 hpt_text_tokens(tt->text, 0), hpt_text_tokens(tt->text, 1));
}

static size_t text_data_bytes(const hpt_task *t) {
    const text_task *tt = t->impl;
    /* shards are read window by window, not held: the page cache holds what is read */
    size_t corpus = tt->shards ? 0 : (hpt_text_tokens(tt->text, 0) + hpt_text_tokens(tt->text, 1)) * sizeof(int);
    return corpus + 2 * (size_t)tt->B * tt->T * sizeof(int);
}

/* cursor: the RNG's u64 state */
static size_t text_cursor_save(const hpt_task *t, unsigned char *buf) {
    const text_task *tt = t->impl;
    memcpy(buf, &tt->rng, 8);
    return 8;
}

static int text_cursor_load(hpt_task *t, const unsigned char *buf, size_t n) {
    text_task *tt = t->impl;
    if (n != 8) return 0;
    memcpy(&tt->rng, buf, 8);
    return tt->rng != 0;  /* xorshift never reaches 0 */
}

static void text_free(hpt_task *t) {
    if (!t) return;
    text_task *tt = t->impl;
    if (tt) {
        hpt_text_free(tt->text);
        hpt_shards_free(tt->shards);
        free(tt->x);
        free(tt->y);
        free(tt);
    }
    free(t);
}

/* --init: the model file's tokenizer, checked against the config, and the
 * model itself (reserved for one token: only its weights are used). */
static hpt_status open_init(const hpt_train_config *c, hpt_model **src, hpt_text **vocab) {
    HPT_TRY(hpt_weights_load(c->init_path, 1, 1, NULL, src, vocab));
    hpt_gpt2_config ic;
    hpt_tokenizer_kind kind;
    hpt_status st = hpt_weights_gpt2_info(c->init_path, &ic, &kind);
    if (st == HPT_OK && !*vocab) st = hpt_fail(HPT_ERR_ARG, "--init '%s' has no tokenizer", c->init_path);
    const struct { const char *flag; int given, model; } arch[] = {
        {"--n-layer", c->n_layer, ic.n_layer}, {"--n-head", c->n_head, ic.n_head}, {"--n-embd", c->n_embd, ic.n_embd}};
    for (int i = 0; st == HPT_OK && i < 3; i++)
        if (arch[i].given != arch[i].model)
            st = hpt_fail(HPT_ERR_ARG, "%s %d, but the --init model '%s' has %d (leave the flag out to take the "
                          "model's)", arch[i].flag, arch[i].given, c->init_path, arch[i].model);
    if (st == HPT_OK && c->block_size > ic.block_size)
        st = hpt_fail(HPT_ERR_ARG, "--block-size %d is longer than the --init model's %d positions", c->block_size,
                      ic.block_size);
    if (st == HPT_OK && (int)c->tokenizer != (int)kind)
        st = hpt_fail(HPT_ERR_ARG, "--tokenizer differs from the --init model's own (leave it out to take the "
                      "model's)");
    if (st != HPT_OK) {
        hpt_model_free(*src); hpt_text_free(*vocab);
        *src = NULL; *vocab = NULL;
    }
    return st;
}

/* The --init model's weights (host memory) into the training model (its
 * device's): every tensor as it is, but the position table's first T rows
 * only. */
static void copy_init(hpt_model *dst, hpt_model *src) {
    int n, ns;
    const hpt_tensor_info *d = hpt_model_tensors(dst, &n), *s = hpt_model_tensors(src, &ns);
    HPT_ASSERT(n == ns);
    float *pd = hpt_model_params(dst, NULL), *ps = hpt_model_params(src, NULL);
    for (int i = 0; i < n; i++) {
        HPT_ASSERT(!strcmp(d[i].name, s[i].name) && d[i].numel <= s[i].numel);
        dst->dev->upload(pd + d[i].offset, ps + s[i].offset, d[i].numel);
    }
}

hpt_status hpt_task_text_init(hpt_task **out, const hpt_train_config *c, const hpt_device *dev) {
    *out = NULL;
    hpt_task *t = calloc(1, sizeof *t);
    text_task *tt = calloc(1, sizeof *tt);
    if (!t || !tt) { free(t); free(tt); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    t->impl = tt;
    t->free = text_free;
    hpt_model *init = NULL;
    hpt_text *vocab = NULL;
    hpt_status st = HPT_OK;
    /* the gpt2 tokenizer's files: --vocab, else what the process set before
     * (hpt_set_vocab_dir: the Python binding's set_vocab_dir) */
    if (c->vocab_dir && *c->vocab_dir) hpt_set_vocab_dir(c->vocab_dir);
    const int B = c->batch_size, T = c->block_size;
    if (c->init_path && *c->init_path) st = open_init(c, &init, &vocab);
    if (st == HPT_OK && hpt_data_is_shards(c->data_path)) {
        /* the manifest's tokenizer, else --tokenizer (or --init's) for llm.c / nanoGPT ids */
        st = hpt_shards_open(&tt->shards, c->data_path, vocab ? hpt_text_kind(vocab) : c->tokenizer, 0);
        if (st == HPT_OK && vocab) st = hpt_shards_match(tt->shards, vocab, "the --init model");
        if (st == HPT_OK) st = hpt_shards_windows(tt->shards, T);
        if (st == HPT_OK) st = hpt_shards_vocab(tt->shards, &tt->text);
    } else if (st == HPT_OK) {
        /* a binary file is never trained on as if it were text */
        st = hpt_text_file_check(c->data_path, vocab ? hpt_text_kind(vocab) : c->tokenizer);
        if (st == HPT_OK && vocab) st = hpt_text_load_with(&tt->text, c->data_path, vocab);
        else if (st == HPT_OK) st = hpt_text_load(&tt->text, c->data_path, c->tokenizer);
    }
    hpt_text_free(vocab);
    if (st != HPT_OK) { hpt_model_free(init); text_free(t); return st; }
    size_t ntr = tt->shards ? hpt_shards_tokens(tt->shards, 0) : hpt_text_tokens(tt->text, 0);
    size_t nva = tt->shards ? hpt_shards_tokens(tt->shards, 1) : hpt_text_tokens(tt->text, 1);
    if (!tt->shards && (ntr < (size_t)T + 1 || nva < (size_t)T + 2)) {
        hpt_model_free(init);
        text_free(t);
        return hpt_fail(HPT_ERR_DATA, "data file '%s' is too small: %zu train and %zu validation tokens, "
                        "need more than --block-size (%d) in each", c->data_path, ntr, nva, T);
    }
    tt->B = B; tt->T = T; tt->eval_iters = c->eval_iters;
    tt->x = malloc((size_t)B * T * sizeof(int));
    tt->y = malloc((size_t)B * T * sizeof(int));
    if (!tt->x || !tt->y) { hpt_model_free(init); text_free(t); return hpt_fail(HPT_ERR_NOMEM, "out of memory"); }
    /* a data stream independent of the init stream, both from the one seed */
    hpt_rng r;
    hpt_rng_seed(&r, c->seed ^ 0xDA7A5EEDull);
    tt->rng = r.s;

    hpt_gpt2_config mc = {.vocab_size = hpt_text_vocab_size(tt->text), .block_size = T,
                          .n_layer = c->n_layer, .n_head = c->n_head, .n_embd = c->n_embd};
    const uint32_t conf[6] = {HPT_FAMILY_GPT2, (uint32_t)mc.vocab_size, (uint32_t)T, (uint32_t)c->n_layer,
                              (uint32_t)c->n_head, (uint32_t)c->n_embd};
    st = hpt_train_check_memory(c, dev, conf, 6, B, T);  /* before allocating the arenas */
    if (st == HPT_OK) st = hpt_gpt2_init(&t->model, &mc, B, T, c->seed, dev);
    if (st == HPT_OK && init) copy_init(t->model, init);
    hpt_model_free(init);
    if (st != HPT_OK) { text_free(t); return st; }

    t->name = "text";
    t->text = tt->text;
    t->batch_size = B;
    t->tokens_per_sample = T;
    t->train_examples = ntr - (size_t)T;
    /* the data's identity: the text file's, or every shard's (a vocabulary
     * alone has none: shards once recorded 0 bytes, so a resume never
     * noticed them change) */
    if (tt->shards) hpt_shards_identity(tt->shards, &t->data_size, &t->data_crc);
    else hpt_text_source(tt->text, &t->data_size, &t->data_crc);
    t->data_source = c->data_path;
    t->train_batch = text_train_batch;
    t->val_batches = text_val_batches;
    t->val_batch = text_val_batch;
    t->describe = text_describe;
    t->data_bytes = text_data_bytes;
    t->cursor_save = text_cursor_save;
    t->cursor_load = text_cursor_load;
    *out = t;
    return HPT_OK;
}
