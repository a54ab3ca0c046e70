/*
 * fuzz_state.c — libFuzzer target for hpt's state-file loader (model.bin and
 * checkpoints share the container): the input is written to a file and
 * loaded; any status is fine, a crash, hang or sanitizer report is a bug.
 */
#include "hpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/hpt-fuzz-state-%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    hpt_model *m = NULL;
    hpt_text *t = NULL;
    /* B = 1, T = 4: a forged config cannot make the loader reserve huge
     * activations for a long context */
    if (hpt_weights_load(path, 1, 4, &m, &t) == HPT_OK) {
        size_t n;
        hpt_model_params(m, &n);
    }
    hpt_model_free(m);
    hpt_text_free(t);
    return 0;
}
