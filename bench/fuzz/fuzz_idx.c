/*
 * fuzz_idx.c — libFuzzer target for the Fashion-MNIST IDX loader: the input
 * becomes DIR/train-images-idx3-ubyte.gz (zlib reads a file that is not gzip
 * as raw bytes, so both gzip and plain inputs reach the IDX parser) and a
 * trainer is built on DIR. Any status is fine; a crash or sanitizer report is
 * a bug. Inputs are at most 64 KiB, so a header that promises 60000 images
 * always meets a truncated payload: the checks, not the happy path, are what
 * this exercises.
 */
#include "hpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char dir[64], path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/hpt-fuzz-idx-%d", (int)getpid());
        mkdir(dir, 0777);
        snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    hpt_train_config c;
    hpt_train_config_default_for(&c, "fashion-mnist", "mlp");
    c.data_path = dir;
    c.out_dir = dir;
    c.threads = 1;
    hpt_trainer *tr = NULL;
    if (hpt_trainer_init(&tr, &c) == HPT_OK) hpt_trainer_free(tr);
    return 0;
}
