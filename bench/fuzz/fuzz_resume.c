/*
 * fuzz_resume.c — libFuzzer target for the resume path: the input becomes
 * the only checkpoint of a run directory and hpt_trainer_resume rebuilds a
 * trainer from it (TCFG, TRST, ADAM, DATA, HYBR parsing, the config checks,
 * the data cursor); a hybrid checkpoint's HYBR section is then parsed by
 * hpt_hybrid_config_resumed and its body by hpt_hybrid_state_roundtrip. Any status is fine; a crash, hang, sanitizer
 * report or out-of-memory is a bug. Like fuzz_state, the harness repairs
 * the header's size and the CRC trailer so mutations reach the parsers.
 * Seeds are real checkpoints whose TCFG names a data file relative to the
 * repository root, so run it from there (bench/fuzz.sh does).
 */
#include "hpt.h"
#include "fuzz_file.h"
#include "../../src/train/trainer.h"  /* hpt_hybrid_state_roundtrip */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void quiet(void *ctx, const char *line) { (void)ctx; (void)line; }

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char dir[64], ck[128], path[160];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/hpt-fuzz-resume-%d", (int)getpid());
        snprintf(ck, sizeof ck, "%s/checkpoints", dir);
        mkdir(dir, 0755);
        mkdir(ck, 0755);
        snprintf(path, sizeof path, "%s/ckpt-00000002.bin", ck);
    }
    /* a failed resume renames the file to *.corrupt only when an older one
     * loads; there is none, so the path is rewritten every time */
    if (fuzz_write_repaired(path, data, size) != 0) return 0;
    hpt_trainer *tr = NULL;
    if (hpt_trainer_resume(&tr, dir, -1, quiet, NULL) == HPT_OK) {
        if (hpt_trainer_resumed_hybrid(tr)) {
            hpt_hybrid_config hc;
            if (hpt_hybrid_config_resumed(tr, &hc) == HPT_OK && hpt_hybrid_config_check(&hc) == HPT_OK) {
                /* the whole HYBR body: controller, encoder, dynamics, snapshot */
                unsigned char *st = NULL;
                size_t n = 0;
                hpt_hybrid_state_roundtrip(tr, &st, &n);
                free(st);
            }
        }
        hpt_trainer_free(tr);
    }
    return 0;
}
