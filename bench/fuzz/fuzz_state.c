/*
 * fuzz_state.c — libFuzzer target for hpt's state-file loader (model.bin and
 * checkpoints share the container): the input is written to a file and
 * loaded; any status is fine, a crash, hang or sanitizer report is a bug.
 * Before writing, the harness makes the header's file size and the CRC
 * trailer agree with the mutated bytes (as a buggy writer would), so that
 * mutations reach the section parsers instead of all dying at the CRC check.
 */
#include "hpt.h"
#include "fuzz_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/hpt-fuzz-state-%d.bin", (int)getpid());
    if (fuzz_write_repaired(path, data, size) != 0) return 0;
    hpt_model *m = NULL;
    hpt_text *t = NULL;
    /* B = 1, T = 4: a forged config cannot make the loader reserve huge
     * activations for a long context */
    if (hpt_weights_load(path, 1, 4, NULL, &m, &t) == HPT_OK) {
        size_t n;
        hpt_model_params(m, &n);
    }
    hpt_model_free(m);
    hpt_text_free(t);
    return 0;
}
