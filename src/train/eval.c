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
 */
#include "../base/base.h"

#include <math.h>
#include <stdlib.h>

hpt_status hpt_eval_text(const char *model_path, const char *data_path, double *loss, size_t *tokens) {
    *loss = 0; *tokens = 0;
    hpt_model *m;
    hpt_text *tok;
    HPT_TRY(hpt_weights_load(model_path, 1, 0, &m, &tok));
    if (!tok) {
        hpt_model_free(m);
        return hpt_fail(HPT_ERR_ARG, "'%s' is not a language model (it has no tokenizer)", model_path);
    }
    hpt_text *text;
    hpt_status st = hpt_text_load_with(&text, data_path, tok);
    hpt_text_free(tok);
    if (st != HPT_OK) { hpt_model_free(m); return st; }
    size_t n;
    const int *ids = hpt_text_ids(text, &n);
    if (n < 2) st = hpt_fail(HPT_ERR_DATA, "'%s' has %zu token: nothing to predict", data_path, n);
    const size_t bs = (size_t)hpt_model_block_size(m);
    double sum = 0;
    for (size_t pos = 0; st == HPT_OK && pos + 1 < n; ) {
        size_t T = n - 1 - pos < bs ? n - 1 - pos : bs;
        hpt_batch b = {.B = 1, .T = (int)T, .tokens = ids + pos, .targets = ids + pos + 1};
        float mean;
        st = hpt_model_forward(m, &b, &mean);
        sum += (double)mean * (double)T;  /* the window's mean back to its sum */
        pos += T;
    }
    if (st == HPT_OK && !isfinite(sum))
        st = hpt_fail(HPT_ERR_NUMERIC, "'%s': the loss is not finite (weights holding NaN or Inf?)", model_path);
    if (st == HPT_OK) { *loss = sum / (double)(n - 1); *tokens = n - 1; }
    hpt_text_free(text);
    hpt_model_free(m);
    return st;
}
