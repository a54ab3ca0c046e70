/* tier: fast (make test; tests/run.sh) */
/*
 * test_train_run.c — the library's run (hpt_train_args_run), the one path
 * `hpt train` and the Python binding's hpt.train take, and its callbacks:
 * start is called once, with the resolved config, before the first step
 * (and for a resumed run after its checkpoint is read, with its hybrid
 * config); step after every step; end once, after the trainer is freed,
 * with the run's status and directory. A start that refuses ends the run
 * unrun, without end. A SIGTERM whose handler start installed (as the CLI
 * does) stops the run with a checkpoint, and the resume through the same
 * call writes the model.bin of the run never stopped, byte for byte. A
 * --mode that differs from the checkpoint's is refused before start.
 */
#include "../include/hpt.h"
#include "../src/base/base.h"  /* hpt_fail: a refusing start's message, as the CLI's */
#include "test.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>

/* What the callbacks saw, in order. */
typedef struct seen {
    int starts, ends, steps;
    int first_step, last_step;   /* the info->step of the first and last step callback */
    int steps_at_start;          /* steps seen when start was called */
    int start_max_iters;         /* the trainer's resolved max_iters at start */
    int start_hybrid;            /* start's hc was not NULL */
    int start_count_cost;        /* hc->count_cost at start */
    int summary_at_end;          /* out_dir/summary.json existed when end was called */
    hpt_status end_st;
    char end_dir[512];
    int stop_at;                 /* raise SIGTERM after this step or the first past it (0: never) */
    int raised;
    int refuse;                  /* start refuses */
} seen;

static void on_sigterm(int sig) {
    (void)sig;
    hpt_request_stop();
}

static void on_log(void *user, const char *line) { (void)user; (void)line; }

static void on_step(void *user, const hpt_step_info *info) {
    seen *s = user;
    if (!s->steps) s->first_step = info->step;
    s->last_step = info->step;
    s->steps++;
    if (s->stop_at && info->step >= s->stop_at && !s->raised) s->raised = raise(SIGTERM) == 0;
}

static hpt_status on_start(void *user, hpt_trainer *tr, const hpt_hybrid_config *hc) {
    seen *s = user;
    s->starts++;
    s->steps_at_start = s->steps;
    s->start_max_iters = hpt_trainer_config(tr)->max_iters;
    s->start_hybrid = hc != NULL;
    s->start_count_cost = hc ? hc->count_cost : -1;
    if (s->refuse) return hpt_fail(HPT_ERR_ARG, "refused by the caller's start");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    return HPT_OK;
}

static void on_end(void *user, hpt_status st, const char *out_dir) {
    seen *s = user;
    char path[600];
    struct stat sb;
    s->ends++;
    s->end_st = st;
    snprintf(s->end_dir, sizeof s->end_dir, "%s", out_dir);
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    s->summary_at_end = stat(path, &sb) == 0;
}

/* `hpt train ARGS...` through the library's run, with s's callbacks (or
 * none: cb NULL). */
static hpt_status run(seen *s, int use_cb, const char *const *argv, int argc) {
    hpt_train_args a;
    hpt_train_callbacks cb = {.user = s, .log = on_log, .step = on_step, .start = on_start, .end = on_end};
    hpt_status st = hpt_train_args_parse(&a, argc, (char *const *)argv);
    if (st != HPT_OK) return st;
    if (!a.run.resume_dir && (st = hpt_train_args_resolve(&a)) != HPT_OK) return st;
    return hpt_train_args_run(&a, use_cb ? &cb : NULL);
}

/* A new run of a tiny model on the scratch text: 6 steps, a checkpoint
 * every 2, in dir; mode "baseline" or "hybrid". */
static hpt_status run_new(seen *s, int use_cb, const char *dir, const char *mode) {
    const char *argv[] = {"--data", test_tmp_path("text.txt"), "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
                          "--block-size", "16", "--batch-size", "4", "--eval-iters", "1", "--eval-interval", "3",
                          "--threads", "1", "--max-iters", "6", "--warmup-iters", "2", "--save-interval", "2",
                          "--seed", "7", "--mode", mode, "--out", dir};
    return run(s, use_cb, argv, (int)(sizeof argv / sizeof argv[0]));
}

static hpt_status run_resume(seen *s, const char *dir, const char *mode) {
    const char *argv[] = {"--resume", dir, "--mode", mode};
    return run(s, 1, argv, mode ? 4 : 2);
}

/* The file's bytes equal (both readable). */
static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca = 0, cb = 0;
    while (same && (ca = fgetc(fa)) == (cb = fgetc(fb)) && ca != EOF) {}
    same = same && ca == cb;
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void write_text(void) {
    FILE *f = fopen(test_tmp_path("text.txt"), "w");
    for (int i = 0; f && i < 400; i++) fputs("to be or not to be that is the question ", f);
    if (f) fclose(f);
}

static void check_finished(const seen *s, hpt_status st, const char *dir, const char *what) {
    CHECK(st == HPT_OK, "%s: %s", what, hpt_errmsg());
    CHECK(s->starts == 1 && s->steps_at_start == 0, "%s: start called %d times, after %d steps", what, s->starts,
          s->steps_at_start);
    CHECK(s->start_max_iters == 6, "%s: start saw max_iters %d", what, s->start_max_iters);
    CHECK(s->ends == 1 && s->end_st == HPT_OK, "%s: end called %d times, status %d", what, s->ends, (int)s->end_st);
    CHECK(!strcmp(s->end_dir, dir), "%s: end's directory '%s', want '%s'", what, s->end_dir, dir);
    CHECK(s->summary_at_end, "%s: no summary.json when end was called", what);
}

int main(void) {
    if (!test_tmpdir_make("hpt_train_run")) return 1;
    write_text();
    char full[256], stopped[256], refused[256], bare[256], hyb[256];
    snprintf(full, sizeof full, "%s", test_tmp_path("full"));
    snprintf(stopped, sizeof stopped, "%s", test_tmp_path("stopped"));
    snprintf(refused, sizeof refused, "%s", test_tmp_path("refused"));
    snprintf(bare, sizeof bare, "%s", test_tmp_path("bare"));
    snprintf(hyb, sizeof hyb, "%s", test_tmp_path("hybrid"));

    /* a run to the end: start, 6 steps, end */
    seen s = {0};
    hpt_status st = run_new(&s, 1, full, "baseline");
    check_finished(&s, st, full, "baseline run");
    CHECK(s.steps == 6 && s.first_step == 1 && s.last_step == 6, "steps %d (%d..%d), want 6 (1..6)", s.steps,
          s.first_step, s.last_step);
    CHECK(!s.start_hybrid, "a baseline run's start got a hybrid config");

    /* SIGTERM after step 3 (start's handler): a checkpoint, INTERRUPTED to
     * end and the caller; the resume goes on from step 4 to the same model */
    s = (seen){.stop_at = 3};
    st = run_new(&s, 1, stopped, "baseline");
    CHECK(st == HPT_ERR_INTERRUPTED, "SIGTERM at step 3: status %d (%s)", (int)st, hpt_errmsg());
    CHECK(s.steps == 3 && s.ends == 1 && s.end_st == HPT_ERR_INTERRUPTED, "SIGTERM: %d steps, %d ends, end status %d",
          s.steps, s.ends, (int)s.end_st);
    s = (seen){0};
    st = run_resume(&s, stopped, NULL);
    check_finished(&s, st, stopped, "the resume after SIGTERM");
    CHECK(s.steps == 3 && s.first_step == 4 && s.last_step == 6, "resumed steps %d (%d..%d), want 3 (4..6)", s.steps,
          s.first_step, s.last_step);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/model.bin", full);
    snprintf(b, sizeof b, "%s/model.bin", stopped);
    CHECK(same_file(a, b), "the resumed run's model.bin differs from the run never stopped");

    /* a --mode other than the checkpoint's: refused before start */
    s = (seen){0};
    st = run_resume(&s, stopped, "hybrid");
    CHECK(st == HPT_ERR_ARG && strstr(hpt_errmsg(), "the mode comes from the checkpoint"), "--mode hybrid on a "
          "baseline run: status %d (%s)", (int)st, hpt_errmsg());
    CHECK(s.starts == 0 && s.ends == 0 && s.steps == 0, "refused resume: %d starts, %d ends, %d steps", s.starts,
          s.ends, s.steps);

    /* a start that refuses: its status and message, no step, no end */
    s = (seen){.refuse = 1};
    st = run_new(&s, 1, refused, "baseline");
    CHECK(st == HPT_ERR_ARG && !strcmp(hpt_errmsg(), "refused by the caller's start"), "refused: status %d (%s)",
          (int)st, hpt_errmsg());
    CHECK(s.starts == 1 && s.steps == 0 && s.ends == 0, "refused: %d starts, %d steps, %d ends", s.starts, s.steps,
          s.ends);

    /* no callbacks at all: the same run (a stop request consumed above does
     * not leak into it) */
    st = run_new(NULL, 0, bare, "baseline");
    CHECK(st == HPT_OK, "a run without callbacks: %s", hpt_errmsg());
    snprintf(b, sizeof b, "%s/model.bin", bare);
    CHECK(same_file(a, b), "the run without callbacks' model.bin differs");

    /* a hybrid run: start gets its config, new and resumed (from the
     * checkpoint) */
    s = (seen){.stop_at = 3};
    st = run_new(&s, 1, hyb, "hybrid");
    CHECK(st == HPT_ERR_INTERRUPTED, "hybrid, SIGTERM at step 3: status %d (%s)", (int)st, hpt_errmsg());
    CHECK(s.start_hybrid && s.start_count_cost == 1, "a hybrid run's start: config %d, count_cost %d",
          s.start_hybrid, s.start_count_cost);
    s = (seen){0};
    st = run_resume(&s, hyb, NULL);
    CHECK(st == HPT_OK && s.start_hybrid && s.start_count_cost == 1, "the resumed hybrid run: status %d (%s), "
          "start's config %d", (int)st, hpt_errmsg(), s.start_hybrid);
    CHECK(s.ends == 1 && s.summary_at_end, "the resumed hybrid run: %d ends, summary %d", s.ends, s.summary_at_end);

    test_tmpdir_remove();
    return TEST_REPORT("test_train_run");
}
