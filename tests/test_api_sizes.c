/* tier: fast (make test; tests/run.sh) */
/*
 * test_api_sizes.c — the public entry points that read a caller's buffer
 * check its size against the model's. hpt_model_forward reads
 * a classifier's features as (B, x_dim) floats: a batch whose x_dim is not
 * the model's input width was read as (B, n_in) regardless, past the end of
 * a narrower array (SIGSEGV for big batches) or misaligned for a wider one.
 * Each case here gives a buffer of exactly the size the batch declares, so
 * a read past it is also caught by `make SANITIZE=address test`.
 *
 *   (a) MLP: x_dim narrower, wider, 0 with x, x missing: HPT_ERR_ARG naming
 *       both widths, no loss written, no backward allowed after; the right
 *       width works, and hpt_model_input_dim reports it
 *   (b) CNN: the same against in_c * in_h * in_w
 *   (c) GPT-2: features given to a token model are refused (not ignored);
 *       hpt_model_input_dim is 0
 *   (d) hpt_sample_token: V < 1 (it read order[-1]) or a NULL buffer draws
 *       nothing (-1); V = 1 draws token 0
 */
#include "hpt.h"
#include "test.h"

enum { B = 3 };

/* A buffer of exactly B x w floats (heap: ASan sees a read past it). */
static float *features(int w) {
    float *x = malloc((size_t)B * (size_t)w * sizeof(float));
    for (int i = 0; i < B * w; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    return x;
}

/* A forward with x_dim w (x of that width, or NULL when w < 0) must be
 * refused with a message naming w and the model's width. */
static void refuse_width(hpt_model *m, int w, const char *label) {
    const int want = hpt_model_input_dim(m);
    int y[B] = {0, 1, 2};
    float *x = w > 0 ? features(w) : w == 0 ? features(1) : NULL;
    float loss = 123.0f;
    hpt_batch b = {.B = B, .T = 1, .x = x, .x_dim = w < 0 ? 0 : w, .targets = y};
    hpt_status st = hpt_model_forward(m, &b, &loss);
    CHECK(st == HPT_ERR_ARG, "%s: x_dim %d accepted by a model of width %d (status %d)", label, w, want, st);
    char ws[32], wants[32];
    snprintf(ws, sizeof ws, "%d", w < 0 ? 0 : w);
    snprintf(wants, sizeof wants, "%d", want);
    if (w >= 0) CHECK(strstr(hpt_errmsg(), ws) != NULL, "%s: the message does not name x_dim %s: '%s'", label, ws,
                      hpt_errmsg());
    CHECK(strstr(hpt_errmsg(), wants) != NULL, "%s: the message does not name the width %s: '%s'", label, wants,
          hpt_errmsg());
    CHECK(loss == 123.0f, "%s: a refused forward wrote the loss", label);
    CHECK(hpt_model_backward(m, 1.0f) != HPT_OK, "%s: backward after a refused forward succeeded", label);
    free(x);
}

/* Every wrong width is refused, the right one works. */
static void check_classifier(hpt_model *m, int width, const char *label) {
    CHECK(hpt_model_input_dim(m) == width, "%s: hpt_model_input_dim %d, want %d", label, hpt_model_input_dim(m),
          width);
    refuse_width(m, 1, label);            /* the (B, 1) */
    refuse_width(m, width - 1, label);    /* one short: reads one float past each row */
    refuse_width(m, width + 1, label);    /* one too many: rows misread */
    refuse_width(m, 5 * width, label);
    refuse_width(m, 0, label);            /* x given, x_dim 0 */
    refuse_width(m, -1, label);           /* no x at all */
    float *x = features(width);
    int y[B] = {0, 1, 2};
    float loss = NAN;
    hpt_batch b = {.B = B, .T = 1, .x = x, .x_dim = width, .targets = y};
    CHECK(hpt_model_forward(m, &b, &loss) == HPT_OK, "%s: the right width refused: %s", label, hpt_errmsg());
    CHECK(isfinite(loss), "%s: loss %g", label, loss);
    CHECK(hpt_model_backward(m, 1.0f) == HPT_OK, "%s: backward: %s", label, hpt_errmsg());
    free(x);
}

int main(void) {
    hpt_set_threads(1);
    /* (a) */
    hpt_mlp_config mc = {.n_in = 12, .n_hidden = 1, .hidden = {8}, .n_classes = 4};
    hpt_model *mlp = NULL;
    CHECK(hpt_mlp_init(&mlp, &mc, B, 1) == HPT_OK, "mlp init: %s", hpt_errmsg());
    if (mlp) check_classifier(mlp, 12, "mlp");
    hpt_model_free(mlp);

    /* (b) */
    hpt_cnn_config cc = {.in_c = 2, .in_h = 8, .in_w = 6, .c1 = 2, .c2 = 3, .hidden = 5, .n_classes = 4};
    hpt_model *cnn = NULL;
    CHECK(hpt_cnn_init(&cnn, &cc, B, 1) == HPT_OK, "cnn init: %s", hpt_errmsg());
    if (cnn) check_classifier(cnn, 2 * 8 * 6, "cnn");
    hpt_model_free(cnn);

    /* (c) */
    hpt_gpt2_config gc = {.vocab_size = 7, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 8};
    hpt_model *g = NULL;
    CHECK(hpt_gpt2_init(&g, &gc, B, 4, 1, NULL) == HPT_OK, "gpt2 init: %s", hpt_errmsg());
    if (g) {
        CHECK(hpt_model_input_dim(g) == 0, "gpt2: hpt_model_input_dim %d, want 0", hpt_model_input_dim(g));
        int tok[B * 4] = {0}, tgt[B * 4] = {0};
        float *x = features(4), loss = 123.0f;
        hpt_batch b = {.B = B, .T = 4, .tokens = tok, .x = x, .x_dim = 4, .targets = tgt};
        CHECK(hpt_model_forward(g, &b, &loss) == HPT_ERR_ARG, "gpt2: a batch with features accepted");
        CHECK(strstr(hpt_errmsg(), "token model") != NULL, "gpt2: message '%s'", hpt_errmsg());
        CHECK(loss == 123.0f, "gpt2: a refused forward wrote the loss");
        b.x = NULL; b.x_dim = 0;
        CHECK(hpt_model_forward(g, &b, &loss) == HPT_OK, "gpt2: tokens only refused: %s", hpt_errmsg());
        free(x);
    }
    hpt_model_free(g);

    /* (d) */
    float lg[1] = {0.5f}, probs[1];
    int order[1];
    uint64_t rs = 1;
    CHECK(hpt_sample_token(lg, 0, 1.0f, 0, &rs, probs, order) == -1, "sample_token: V 0 drew a token");
    CHECK(hpt_sample_token(lg, -3, 1.0f, 0, &rs, probs, order) == -1, "sample_token: V -3 drew a token");
    CHECK(hpt_sample_token(lg, 1, 1.0f, 0, &rs, NULL, order) == -1, "sample_token: NULL probs drew a token");
    CHECK(hpt_sample_token(lg, 1, 1.0f, 0, &rs, probs, order) == 0, "sample_token: V 1 did not draw token 0");
    return TEST_REPORT("test_api_sizes");
}
