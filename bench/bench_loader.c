/*
 * bench_loader.c — the token shard loader's own throughput (it must
 * never be what a GPU waits on, goal >= 10M tokens/s): training
 * batches of B x T drawn from a shard source as the trainer draws them
 * (hpt_shards_train_batch: random windows over all shards from the seeded
 * cursor, uint16 ids read and widened to the model's ints). Built by `make bench`
 * as build/bench_loader.
 *
 *   build/bench_loader --data SOURCE [--tokenizer gpt2|byte] [--batch 16]
 *                      [--seq 1024] [--seconds 3]
 *
 * SOURCE is anything --data takes as shards. Prints one JSON line: batches
 * and tokens per second, open time (headers checked, every file read once
 * for its CRC and largest id, the vocabulary check: the start-up shards
 * add to a run); the windows are pread from whatever the page cache holds
 * (run it twice to see both).
 * A benchmark, not a test: it never fails on slowness.
 */
#include "hpt.h"
#include "../src/data/shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *data = NULL;
    hpt_tokenizer_kind kind = HPT_TOK_GPT2;
    int B = 16, T = 1024;
    double seconds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data")) data = argv[i + 1];
        else if (!strcmp(argv[i], "--tokenizer")) kind = !strcmp(argv[i + 1], "byte") ? HPT_TOK_BYTE : HPT_TOK_GPT2;
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else { fprintf(stderr, "bench_loader: unknown option '%s'\n", argv[i]); return 2; }
    }
    if (!data || B < 1 || T < 1) { fprintf(stderr, "usage: bench_loader --data SOURCE [--batch B] [--seq T]\n"); return 2; }
    double t0 = hpt_now();
    hpt_shards *s;
    hpt_status st = hpt_shards_open(&s, data, kind, 0);
    if (st == HPT_OK) st = hpt_shards_windows(s, T);
    if (st != HPT_OK) { fprintf(stderr, "bench_loader: %s\n", hpt_errmsg()); return 1; }
    double open_s = hpt_now() - t0;
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    if (!x || !y) return 1;
    uint64_t rng = 0x9E3779B97F4A7C15ull, sum = 0;
    long batches = 0;
    t0 = hpt_now();
    double el;
    do {
        for (int k = 0; k < 16; k++, batches++) {
            if (hpt_shards_train_batch(s, &rng, B, T, x, y) != HPT_OK) {
                fprintf(stderr, "bench_loader: %s\n", hpt_errmsg());
                return 1;
            }
            sum += (uint64_t)x[batches % ((size_t)B * T)];  /* keeps the gather alive */
        }
        el = hpt_now() - t0;
    } while (el < seconds);
    printf("{\"data\": \"%s\", \"train_tokens\": %zu, \"train_shards\": %d, \"batch\": %d, \"seq\": %d, "
           "\"open_s\": %.6f, \"batches\": %ld, \"seconds\": %.3f, \"batches_per_s\": %.1f, \"tokens_per_s\": %.0f, "
           "\"checksum\": %llu, \"peak_rss_bytes\": %zu}\n", data, hpt_shards_tokens(s, 0), hpt_shards_files(s, 0), B, T,
           open_s, batches, el, batches / el, (double)batches * B * T / el, (unsigned long long)sum,
           hpt_peak_rss_bytes());
    free(x); free(y);
    hpt_shards_free(s);
    return 0;
}
