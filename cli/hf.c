/*
 * hf.c — `hpt import`, `hpt export` and `hpt eval`: GPT-2 weights from and to
 * Hugging Face's safetensors layout, and a model's loss over a text file.
 * The work is the library's (src/io/hf.c, src/train/eval.c); this file
 * reads the flags and prints.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void usage_hf(FILE *f) {
    fputs("  hpt import --from FILE.safetensors --out FILE [--n-head N] [--tokenizer NAME] [--vocab DIR] [--overwrite]\n"
          "                         a GPT-2 in Hugging Face's layout (F32/F16/BF16) as an hpt model file;\n"
          "                         n_head: --n-head, else the file's (hpt export's), else config.json beside\n"
          "                         FILE; the\n"
          "                         tokenizer: the one the file's metadata names (hpt export's), else the\n"
          "                         one whose vocabulary has the model's size, unless given\n"
          "  hpt export --model FILE --out FILE.safetensors [--overwrite]\n"
          "                         a GPT-2 model back to Hugging Face's layout (F32, the hub's names)\n"
          "                         (import and export: an existing --out is replaced only with --overwrite,\n"
          "                         and only a regular file; the input never)\n"
          "  hpt eval --model FILE --data PATH [--threads N] [--device cpu]  mean next-token loss over a\n"
          "                         text file, as\n"
          "                         one JSON line {\"loss\", \"ppl\", \"tokens\"}; token shards: their\n"
          "                         validation split\n"
          "                         (each takes --vocab DIR: a gpt2 model's tokenizer files)\n", f);
}

/* --tokenizer's names: the settings table's own choices */
static hpt_tokenizer_kind tokenizer_named(const char *name) {
    const hpt_setting *s = hpt_setting_find("--tokenizer");
    for (int i = 0; s && hpt_setting_name(s, i); i++)
        if (!strcmp(hpt_setting_name(s, i), name)) return (hpt_tokenizer_kind)i;
    die_usage("--tokenizer: unknown tokenizer '%s'", name);
}

int cmd_import(int argc, char **argv) {
    const char *from = NULL, *out = NULL;
    int n_head = 0, overwrite = 0;
    hpt_tokenizer_kind tok = HPT_TOK_AUTO;  /* the file's, else the one of the model's vocabulary size */
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        if (!strcmp(a.name, "--help") || !strcmp(a.name, "-h")) { usage_hf(stdout); return 0; }
        else if (!strcmp(a.name, "--from")) from = flag_value(&a);
        else if (!strcmp(a.name, "--out")) out = flag_value(&a);
        else if (!strcmp(a.name, "--n-head")) n_head = (int)parse_int("--n-head", flag_value(&a), 1, 256);
        else if (!strcmp(a.name, "--tokenizer")) tok = tokenizer_named(flag_value(&a));
        else if (!strcmp(a.name, "--vocab")) hpt_set_vocab_dir(flag_value(&a));
        else if (!strcmp(a.name, "--overwrite")) overwrite = 1;
        else die_usage("unknown option '%s' for 'hpt import'", a.name);
    }
    if (!from || !out) die_usage("%s", "import needs --from FILE.safetensors and --out FILE");
    char desc[256];
    hpt_status st = hpt_hf_import(from, n_head, tok, out, overwrite, desc, sizeof desc);
    if (st != HPT_OK) die_status(st);
    fprintf(stderr, "hpt: imported %s into %s\n", desc, out);
    return 0;
}

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int overwrite = 0;
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        if (!strcmp(a.name, "--help") || !strcmp(a.name, "-h")) { usage_hf(stdout); return 0; }
        else if (!strcmp(a.name, "--model")) model = flag_value(&a);
        else if (!strcmp(a.name, "--out")) out = flag_value(&a);
        else if (!strcmp(a.name, "--vocab")) hpt_set_vocab_dir(flag_value(&a));
        else if (!strcmp(a.name, "--overwrite")) overwrite = 1;
        else die_usage("unknown option '%s' for 'hpt export'", a.name);
    }
    if (!model || !out) die_usage("%s", "export needs --model FILE and --out FILE.safetensors");
    hpt_status st = hpt_hf_export(model, out, overwrite);
    if (st != HPT_OK) die_status(st);
    fprintf(stderr, "hpt: exported %s to %s\n", model, out);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *device = NULL;
    int threads = 0;
    args a = {.argc = argc, .argv = argv, .i = 0};
    while (next_flag(&a)) {
        if (!strcmp(a.name, "--help") || !strcmp(a.name, "-h")) { usage_hf(stdout); return 0; }
        else if (!strcmp(a.name, "--model")) model = flag_value(&a);
        else if (!strcmp(a.name, "--data")) data = flag_value(&a);
        else if (!strcmp(a.name, "--threads")) threads = (int)parse_int("--threads", flag_value(&a), 0, 1024);
        else if (!strcmp(a.name, "--vocab")) hpt_set_vocab_dir(flag_value(&a));
        else if (!strcmp(a.name, "--device")) device = flag_value(&a);
        else die_usage("unknown option '%s' for 'hpt eval'", a.name);
    }
    if (!model || !data) die_usage("%s", "eval needs --model FILE and --data PATH");
    hpt_status dst = hpt_device_check(device);
    if (dst != HPT_OK) die_status(dst);
    hpt_set_threads(threads);
    double loss;
    size_t tokens;
    hpt_status st = hpt_eval_text(model, data, device, &loss, &tokens);
    if (st != HPT_OK) die_status(st);
    /* JSON has no inf or nan: a perplexity past double's range is null */
    char ppl[32];
    if (isfinite(exp(loss))) snprintf(ppl, sizeof ppl, "%.9g", exp(loss));
    else snprintf(ppl, sizeof ppl, "null");
    printf("{\"loss\": %.9g, \"ppl\": %s, \"tokens\": %zu}\n", loss, ppl, tokens);
    return 0;
}
