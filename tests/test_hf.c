/* tier: fast (make test; tests/run.sh) */
/*
 * test_hf.c — hpt import's memory, through the library:
 *   (a) a parameters-only GPT-2 (hpt_gpt2_init_params_only, what the import
 *       builds): the tensor table and arena length of hpt_gpt2_init's model,
 *       parameters zeroed, no gradient arena (hpt_model_grads NULL,
 *       hpt_model_bytes 0 for it), no activations, and forward, backward and
 *       zero_grad refuse or do nothing instead of touching what is not there;
 *   (b) the import's memory plan is its parameters alone: under a ceiling
 *       (hpt_set_memory_ceiling) 1.2x the fixture's parameter bytes it
 *       imports (a training model's plan, parameters + gradients, would not
 *       fit), under one below them it refuses with HPT_ERR_NOMEM naming the
 *       figures, having written nothing.
 * Run from the repository root (tests/fixtures/hf, tools/ref/gpt2_hf_ref.py).
 */
#include "test.h"
#include "hpt.h"
#include "../src/model/model.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_params_only(void) {
    const hpt_gpt2_config cfg = {.vocab_size = 11, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};
    hpt_model *full = NULL, *m = NULL;
    CHECK(hpt_gpt2_init(&full, &cfg, 2, 6, 1, NULL) == HPT_OK, "init: %s", hpt_errmsg());
    CHECK(hpt_gpt2_init_params_only(&m, &cfg) == HPT_OK, "params only: %s", hpt_errmsg());
    if (!full || !m) return;
    int n1, n2;
    const hpt_tensor_info *t1 = hpt_model_tensors(full, &n1), *t2 = hpt_model_tensors(m, &n2);
    CHECK(n1 == n2 && hpt_model_num_params(m) == hpt_model_num_params(full), "tables: %d vs %d tensors", n2, n1);
    for (int i = 0; i < n1 && i < n2; i++)
        CHECK(!strcmp(t1[i].name, t2[i].name) && t1[i].offset == t2[i].offset && t1[i].numel == t2[i].numel,
              "tensor %d: %s", i, t2[i].name);
    CHECK(!strcmp(hpt_model_describe(m), hpt_model_describe(full)), "desc '%s'", hpt_model_describe(m));
    size_t n, pb, gb, ab;
    const float *p = hpt_model_params(m, &n);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += p[i] != 0.0f;
    CHECK(nonzero == 0, "%zu of %zu parameters not zero", nonzero, n);
    CHECK(hpt_model_grads(m, NULL) == NULL, "a gradient arena was allocated");
    hpt_model_bytes(m, &pb, &gb, &ab);
    CHECK(pb == n * sizeof(float) && gb == 0 && ab == 0, "bytes: params %zu grads %zu acts %zu", pb, gb, ab);
    int tok[6] = {1, 2, 3, 4, 5, 6}, tgt[6] = {2, 3, 4, 5, 6, 7};
    hpt_batch b = {.B = 1, .T = 6, .tokens = tok, .targets = tgt};
    float loss;
    CHECK(hpt_model_forward(m, &b, &loss) == HPT_ERR_ARG, "forward of a parameters-only model ran");
    CHECK(hpt_model_backward(m, 1.0f) == HPT_ERR_ARG, "backward of a parameters-only model ran");
    hpt_model_zero_grad(m);  /* nothing to zero: must not crash */
    hpt_model_free(m);
    hpt_model_free(full);
}

static void test_import_memory(void) {
    const char *src = "tests/fixtures/hf/model.safetensors";
    char dir[] = "/tmp/hpt_test_hf.XXXXXX", out[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(out, sizeof out, "%s/m.bin", dir);
    /* the fixture: V 256, 48 positions, 2 layers, 32 channels */
    const uint32_t conf[6] = {HPT_FAMILY_GPT2, 256, 48, 2, 2, 32};
    size_t np;
    CHECK(hpt_model_conf_params(conf, 6, &np) == HPT_OK, "conf");
    const size_t bytes = np * sizeof(float);
    struct stat sb;

    hpt_set_memory_ceiling(bytes - 1);
    hpt_status st = hpt_hf_import(src, 0, HPT_TOK_AUTO, out, 0, NULL, 0);
    CHECK(st == HPT_ERR_NOMEM, "import under a ceiling below its parameters: status %d (%s)", (int)st, hpt_errmsg());
    CHECK(strstr(hpt_errmsg(), "the import needs") && strstr(hpt_errmsg(), "no gradients"), "message: %s",
          hpt_errmsg());
    CHECK(stat(out, &sb) != 0, "a refused import wrote '%s'", out);

    hpt_set_memory_ceiling(bytes + bytes / 5);
    st = hpt_hf_import(src, 0, HPT_TOK_AUTO, out, 0, NULL, 0);
    CHECK(st == HPT_OK, "import under 1.2x its parameters: %s", hpt_errmsg());
    CHECK(stat(out, &sb) == 0 && sb.st_size > (off_t)bytes, "the model file");
    hpt_set_memory_ceiling(0);
    unlink(out);
    rmdir(dir);
}

int main(void) {
    hpt_set_threads(1);
    printf("(a) parameters-only GPT-2\n");
    test_params_only();
    printf("(b) the import's memory plan\n");
    test_import_memory();
    return TEST_REPORT("test_hf");
}
