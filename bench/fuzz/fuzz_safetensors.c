/*
 * fuzz_safetensors.c — libFuzzer target for `hpt import` (src/io/hf.c):
 * the input becomes DIR/model.safetensors beside a valid config.json (a
 * 2-head GPT-2) and is imported into DIR/model.bin; when that succeeds, the
 * model is exported back and evaluated on a short text, so a header that
 * gets through the checks is used all the way. Any status is fine; a crash
 * or sanitizer report is a bug. Seeds (bench/fuzz.sh): the test fixtures of
 * tools/ref/gpt2_hf_ref.py and tests/hf_files.py's crafted files.
 */
#include "hpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], in[128], out[128], back[128], text[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/hpt-fuzz-st-%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(in, sizeof in, "%s/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/model.bin", dir);
    snprintf(back, sizeof back, "%s/back.safetensors", dir);
    snprintf(text, sizeof text, "%s/text.txt", dir);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "w");
    if (f) { fputs("{\"n_head\": 2, \"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\"}\n", f); fclose(f); }
    f = fopen(text, "w");
    if (f) { fputs("the quick brown fox jumps over the lazy dog\n", f); fclose(f); }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!dir[0]) { setup(); hpt_set_threads(1); }
    FILE *f = fopen(in, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    remove(out);
    if (hpt_hf_import(in, 0, HPT_TOK_BYTE, out, 1, NULL, 0) != HPT_OK) return 0;
    double loss;
    size_t n;
    hpt_hf_export(out, back, 1);
    hpt_eval_text(out, text, NULL, &loss, &n);
    return 0;
}
