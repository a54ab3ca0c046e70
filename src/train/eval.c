/*
 * eval.c — `hpt eval`: a language model's mean next-token cross-entropy over
 * a whole text file.
 *
 * The file is tokenised with the model's own tokenizer and cut into
 * consecutive windows of bs = the model's block size inputs: window k feeds
 * tokens k*bs .. k*bs+bs-1 and predicts k*bs+1 .. k*bs+bs, so every token but
 * the first is predicted exactly once, each with the context back to its
 * window's start (as the model was trained: no sliding overlap). The last
 * window is shorter when the tokens do not divide evenly: it feeds what is
 * left (T < bs, still causal) and predicts its tokens. The result is the sum
 * of every position's loss over the count, summed in double.
 *
 * Token shards (hpt_data_is_shards): their validation split only (the
 * train files are not opened), each shard cut into windows as a text file
 * is, each window read from its file.
 */
#include "../base/base.h"
#include "../data/shards.h"

#include <math.h>
#include <stdlib.h>

hpt_status hpt_eval_text(const char *model_path, const char *data_path, const char *device, double *loss,
                         size_t *tokens) {
    *loss = 0; *tokens = 0;
    hpt_model *m;
    hpt_text *tok;
    HPT_TRY(hpt_weights_load(model_path, 1, 0, device ? device : "cpu", &m, &tok));   /* named: checked */
    if (!tok) {
        hpt_model_free(m);
        return hpt_fail(HPT_ERR_ARG, "'%s' is not a language model (it has no tokenizer)", model_path);
    }
    hpt_text *text = NULL;
    hpt_shards *sh = NULL;
    hpt_status st;
    if (hpt_data_is_shards(data_path)) {
        /* the validation files only: the train files are never read here */
        st = hpt_shards_open(&sh, data_path, hpt_text_kind(tok), 1);
        if (st == HPT_OK) st = hpt_shards_match(sh, tok, "the model");
    } else {
        st = hpt_text_file_check(data_path, hpt_text_kind(tok));
        if (st == HPT_OK) st = hpt_text_load_with(&text, data_path, tok);
    }
    hpt_text_free(tok);
    const size_t bs = (size_t)hpt_model_block_size(m);
    /* a window's ids: hpt_shards_read widens them in place (2 halves) */
    int *buf = sh && st == HPT_OK ? malloc(2 * (bs + 1) * sizeof *buf) : NULL;
    if (sh && st == HPT_OK && !buf) st = hpt_fail(HPT_ERR_NOMEM, "out of memory");
    double sum = 0;
    size_t count = 0;
    for (int f = 0; st == HPT_OK && f < (sh ? hpt_shards_files(sh, 1) : 1); f++) {
        size_t n;
        const int *ids = NULL;
        if (sh) n = hpt_shards_file_tokens(sh, 1, f);
        else ids = hpt_text_ids(text, &n);
        for (size_t pos = 0; st == HPT_OK && pos + 1 < n; ) {
            size_t T = n - 1 - pos < bs ? n - 1 - pos : bs;
            if (sh && (st = hpt_shards_read(sh, 1, f, pos, T + 1, buf)) != HPT_OK) break;
            const int *w = sh ? buf : ids + pos;
            hpt_batch b = {.B = 1, .T = (int)T, .tokens = w, .targets = w + 1};
            float mean;
            st = hpt_model_forward(m, &b, &mean);
            sum += (double)mean * (double)T;  /* the window's mean back to its sum */
            pos += T;
            count += T;
        }
    }
    if (st == HPT_OK && count == 0) st = hpt_fail(HPT_ERR_DATA, "'%s' has fewer than 2 tokens: nothing to predict", data_path);
    if (st == HPT_OK && !isfinite(sum))
        st = hpt_fail(HPT_ERR_NUMERIC, "'%s': the loss is not finite (weights holding NaN or Inf?)", model_path);
    if (st == HPT_OK) { *loss = sum / (double)count; *tokens = count; }
    free(buf);
    hpt_text_free(text);
    hpt_shards_free(sh);
    hpt_model_free(m);
    return st;
}
