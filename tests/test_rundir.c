/* tier: fast (make test; tests/run.sh) */
/*
 * test_rundir.c — the run-directory reader (hpt_rundir_*) on hand-made
 * directories: metrics columns with NaN where a line lacks a value, a torn
 * last line and foreign lines skipped, escaped strings, summary fields and
 * phase_steps, a missing or partial summary, the newest checkpoint among
 * other files, the last step of a growing log.
 */
#include "hpt.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void put(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

static void test_metrics(void) {
    put("metrics.jsonl",
        "{\"step\":1,\"train_loss\":3.5,\"lr\":0.001,\"time_s\":0.25,\"phase\":\"warmup\"}\n"
        "not json at all\n"
        "{\"note\":\"a line without a step, with \\\"quotes\\\" and \\\\\"}\n"
        "{\"step\":2,\"train_loss\":null,\"time_s\":0.5,\"phase\":\"predict\",\"val_loss\":3.25}\n"
        "{\"time_s\":0.75,\"ema_val_loss\":3.0,\"step\":3,\"val_accuracy\":0.5}\n"
        "{\"step\":4,\"phase\":\"check\"}\n"
        "{\"step\":5,\"phase\":\"jump\"}\n"
        "{\"step\":6,\"train_loss\":2.9,\"ti");  /* torn: the run was killed mid-line */
    hpt_rundir r;
    CHECK(hpt_rundir_open(&r, dir) == HPT_OK, "open: %s", hpt_errmsg());
    const hpt_run_metrics *m = &r.metrics;
    CHECK(m->n == 5, "5 lines with a step, got %d", m->n);
    if (m->n == 5) {
        CHECK(m->step[0] == 1 && m->step[1] == 2 && m->step[2] == 3, "steps");
        CHECK(m->train_loss[0] == 3.5 && isnan(m->train_loss[1]) && isnan(m->train_loss[2]), "train_loss (null: NaN)");
        CHECK(isnan(m->val_loss[0]) && m->val_loss[1] == 3.25, "val_loss");
        CHECK(m->ema_val_loss[2] == 3.0 && m->val_accuracy[2] == 0.5, "keys in any order");
        CHECK(m->time_s[1] == 0.5, "time_s");
        CHECK(!m->predict[0] && m->predict[1] && !m->predict[2], "predict flags");
        CHECK(!m->predict[3] && m->predict[4], "the outer path's jump is banded like a Predict phase, its check not");
    }
    CHECK(!r.summary.present, "no summary.json: not present");
    hpt_rundir_free(&r);
    CHECK(hpt_rundir_last_step(dir) == 5, "last complete step 5, got %d", hpt_rundir_last_step(dir));
}

static void test_summary(void) {
    put("summary.json", "{\n  \"task\": \"te\\\"xt\",\n  \"steps\": 40,\n  \"final_val_loss\": 2.5,\n"
                        "  \"train_s\": null,\n  \"phase_steps\": {\"warmup\": 10, \"full\": 20, \"predict\": 6, "
                        "\"correct\": 4},\n  \"peak_rss_bytes\": 123456789\n}\n");
    hpt_rundir r;
    CHECK(hpt_rundir_open(&r, dir) == HPT_OK, "open: %s", hpt_errmsg());
    const hpt_run_summary *s = &r.summary;
    CHECK(s->present, "summary present");
    CHECK(s->steps == 40 && s->final_val_loss == 2.5 && s->peak_rss_bytes == 123456789, "numbers");
    CHECK(isnan(s->train_s) && isnan(s->final_ema_val_loss), "null and absent: NaN");
    CHECK(s->phase_steps[0] == 10 && s->phase_steps[1] == 20 && s->phase_steps[2] == 6 && s->phase_steps[3] == 4,
          "phase_steps");
    hpt_rundir_free(&r);
    put("summary.json", "{\n  \"steps\": 40,\n  \"final_val");   /* a partial file */
    CHECK(hpt_rundir_open(&r, dir) == HPT_OK && !r.summary.present, "a partial summary: not present");
    hpt_rundir_free(&r);
}

static void test_checkpoints(void) {
    char path[512];
    CHECK(hpt_rundir_newest_checkpoint(dir, path, sizeof path) == -1, "no checkpoints: -1");
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    mkdir(path, 0755);
    put("checkpoints/ckpt-00000100.bin", "x");
    put("checkpoints/ckpt-00000300.bin", "x");
    put("checkpoints/ckpt-00000500.bin.corrupt", "x");
    put("checkpoints/ckpt-00000700.bin.tmp.123", "x");
    put("checkpoints/ckpt-200.bin", "x");
    int step = hpt_rundir_newest_checkpoint(dir, path, sizeof path);
    CHECK(step == 300, "newest usable checkpoint step 300, got %d", step);
    CHECK(strstr(path, "/checkpoints/ckpt-00000300.bin") != NULL, "its path: %s", path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/hpt_test_rundir.%d", (int)getpid());
    mkdir(dir, 0755);
    hpt_rundir r;
    CHECK(hpt_rundir_open(&r, dir) == HPT_ERR_IO && strstr(hpt_errmsg(), "metrics.jsonl"),
          "no metrics.jsonl: HPT_ERR_IO naming it (%s)", hpt_errmsg());
    test_metrics();
    test_summary();
    test_checkpoints();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: %s failed\n", cmd);
    return TEST_REPORT("test_rundir");
}
