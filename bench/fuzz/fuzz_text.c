/*
 * fuzz_text.c — libFuzzer target for the text loader and tokenizers: load
 * the input as a corpus with both tokenizers, draw windows, and round-trip
 * every token through decode and encode.
 */
#include "hpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/hpt-fuzz-text-%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    for (int kind = 0; kind < 2; kind++) {
        hpt_text *t = NULL;
        if (hpt_text_load(&t, path, (hpt_tokenizer_kind)kind) != HPT_OK) continue;
        int V = hpt_text_vocab_size(t);
        size_t ntr = hpt_text_tokens(t, 0), nva = hpt_text_tokens(t, 1);
        int x[8], y[8];
        uint64_t rng = 1;
        if (ntr > 5) hpt_text_train_batch(t, &rng, 1, 4, x, y);
        if (nva > 6) hpt_text_val_batch(t, 0, 1, 1, 4, x, y);
        for (int id = 0; id < V; id++) {
            char buf[8] = {0};
            int len = hpt_text_decode(t, id, buf);
            int back[8], nb = 0;
            if (len > 0 && buf[0] != 0 && hpt_text_encode(t, buf, back, 8, &nb, NULL) != HPT_OK) abort();
        }
        hpt_text_free(t);
    }
    return 0;
}
