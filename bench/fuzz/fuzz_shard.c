/*
 * fuzz_shard.c — libFuzzer target for the token shard reader (src/data/
 * shards.c): the input after a selector byte becomes the train shard of a
 * directory whose validation shard is valid, an llm.c shard (selector bit 0
 * clear: its header is what is fuzzed) or nanoGPT's train.bin (set). The
 * directory is opened with the byte tokenizer, so ids past 255 must be
 * refused; a source that opens gives windows and a batch from each split.
 * Any status is fine; a crash or sanitizer report is a bug.
 */
#include "hpt.h"
#include "../../src/data/shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int put(const char *path, const void *head, size_t nh, const void *body, size_t nb) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    if (nh) fwrite(head, 1, nh, f);
    if (nb) fwrite(body, 1, nb, f);
    return fclose(f);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char dir[2][64];
    if (!dir[0][0]) {
        /* dir 0: llm.c names; dir 1: nanoGPT's. Each with a valid val shard */
        uint16_t ids[64];
        for (int i = 0; i < 64; i++) ids[i] = (uint16_t)(i * 7 % 256);
        int32_t h[256] = {HPT_SHARD_MAGIC, HPT_SHARD_VERSION, 64};
        char p[128];
        for (int k = 0; k < 2; k++) {
            snprintf(dir[k], sizeof dir[k], "/tmp/hpt-fuzz-shard-%d-%d", (int)getpid(), k);
            mkdir(dir[k], 0777);
        }
        snprintf(p, sizeof p, "%s/f_val_000000.bin", dir[0]);
        put(p, h, sizeof h, ids, sizeof ids);
        snprintf(p, sizeof p, "%s/val.bin", dir[1]);
        put(p, NULL, 0, ids, sizeof ids);
    }
    if (size < 1) return 0;
    int nano = data[0] & 1;
    char p[128];
    snprintf(p, sizeof p, nano ? "%s/train.bin" : "%s/f_train_000001.bin", dir[nano]);
    if (put(p, NULL, 0, data + 1, size - 1) != 0) return 0;
    hpt_shards *s = NULL;  /* the open checks every header and reads every id */
    if (hpt_shards_open(&s, dir[nano], HPT_TOK_BYTE, 0) != HPT_OK) return 0;
    int x[2 * 4], y[2 * 4];
    uint64_t rng = 88172645463325252ull;
    if (hpt_shards_windows(s, 4) == HPT_OK) {
        hpt_shards_train_batch(s, &rng, 2, 4, x, y);
        hpt_shards_val_batch(s, 0, 2, 2, 4, x, y);
        for (int i = 0; i < 8; i++) if (x[i] < 0 || x[i] > 255 || y[i] < 0 || y[i] > 255) abort();
    }
    hpt_shards_free(s);
    return 0;
}
