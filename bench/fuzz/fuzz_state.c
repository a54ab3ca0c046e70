/*
 * fuzz_state.c — libFuzzer target for hpt's state-file loader (model.bin and
 * checkpoints share the container): the input is written to a file and
 * loaded; any status is fine, a crash, hang or sanitizer report is a bug.
 * Before writing, the harness makes the header's file size and the CRC
 * trailer agree with the mutated bytes (as a buggy writer would), so that
 * mutations reach the section parsers instead of all dying at the CRC check.
 */
#include "hpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/hpt-fuzz-state-%d.bin", (int)getpid());
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    if (size >= 52) {
        uint64_t fs = size;
        memcpy(buf + 24, &fs, 8);
        uint32_t crc = hpt_crc32(0, buf, size - 4);
        memcpy(buf + size - 4, &crc, 4);
    }
    FILE *f = fopen(path, "wb");
    if (!f) { free(buf); return 0; }
    fwrite(buf, 1, size, f);
    fclose(f);
    free(buf);
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
