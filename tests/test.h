/*
 * test.h — a tiny test harness (sds testhelp.h style): CHECK records a
 * failure and goes on, TEST_REPORT prints "N passed, N failed" and returns the
 * exit status, so every test binary exits non-zero on any failure. Also the
 * few helpers several test programs share.
 */
#ifndef HPT_TEST_H
#define HPT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_;

#define CHECK(cond, ...) do {                                              \
    if (cond) test_passed_++;                                              \
    else {                                                                 \
        test_failed_++;                                                    \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
        fprintf(stderr, __VA_ARGS__);                                      \
        fputc('\n', stderr);                                               \
    }                                                                      \
} while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_NEAR(a, b, atol, rtol, what) do {                            \
    double a_ = (a), b_ = (b);                                             \
    CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_),                     \
          "%s: got %.9g, want %.9g", (what), a_, b_);                      \
} while (0)

#define TEST_REPORT(name) (                                                \
    printf("%s: %d passed, %d failed\n", (name), test_passed_, test_failed_), \
    test_failed_ ? 1 : 0)

/* Largest |a[i] - b[i]|, NaN if any difference is NaN. */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

/* A scratch directory for the program's files, /tmp/<prefix>.XXXXXX:
 * test_tmpdir_make at the start, test_tmp_path for the files in it,
 * test_tmpdir_remove at the end. */
static inline char *test_dir_(void) { static char dir[64]; return dir; }
static inline const char *test_tmpdir(void) { return test_dir_(); }

/* Returns 0 (after a message) when the directory cannot be made. */
static inline int test_tmpdir_make(const char *prefix) {
    snprintf(test_dir_(), 64, "/tmp/%s.XXXXXX", prefix);
    if (mkdtemp(test_dir_())) return 1;
    perror("mkdtemp");
    return 0;
}

/* dir/name, in one of 8 rotating buffers: up to 8 results are valid at once. */
static inline const char *test_tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return p;
}

/* Reads "TAG v1 ... vn" from a fixture into v; 0 when the tag or a value
 * is not there. */
static inline int test_read_tagged(FILE *f, const char *tag, float *v, int n) {
    char t[16];
    if (fscanf(f, "%15s", t) != 1 || strcmp(t, tag)) return 0;
    for (int i = 0; i < n; i++) if (fscanf(f, "%f", &v[i]) != 1) return 0;
    return 1;
}

/* Opens a committed fixture (tools/ref writes them) and reads past its first
 * line, a '#' comment naming the command that made it; NULL after a failed
 * CHECK when the file is missing or does not start so. Runs from the repo root. */
static inline FILE *test_fixture_open(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (run from the repo root)", path);
    if (!f) return NULL;
    char comment[256];
    int ok = fgets(comment, sizeof comment, f) && comment[0] == '#';
    CHECK(ok, "%s: first line is not the '#' comment", path);
    if (!ok) { fclose(f); return NULL; }
    return f;
}

static inline void test_tmpdir_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmpdir());
    if (strncmp(test_tmpdir(), "/tmp/", 5) == 0 && system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", test_tmpdir());
}

#ifdef HPT_SETTINGS_H
/* c's TCFG encoded at version ver and decoded into d (reset to the defaults
 * first), as a checkpoint stores and reads it; 1 when the decode succeeds and
 * reads every byte. d's strings point into a static buffer. */
static inline int test_tcfg_round_trip(const hpt_train_config *c, unsigned ver, hpt_train_config *d) {
    static unsigned char buf[20000];
    static char strs[9000];
    int n;
    const hpt_setting *rows = hpt_settings(HPT_SET_TRAIN, &n);
    size_t len = hpt_settings_encode(rows, n, c, ver, 0, buf, sizeof buf);
    hpt_train_config_default(d);
    hpt_cursor k = {buf, len, 0};
    return len > 0 && hpt_settings_decode(rows, n, d, ver, 0, &k, strs, sizeof strs) && k.pos == len;
}
#endif

#ifdef HPT_BASE_H
/* A module's checkpoint bytes, for save/load round trips: save writes into
 * test_writer()'s temporary file, test_writer_take copies what it wrote into
 * buf (at most cap bytes) and closes it. Returns the length, 0 on an error. */
static inline hpt_writer test_writer(void) {
    hpt_writer w = {.f = tmpfile()};
    return w;
}

static inline size_t test_writer_take(hpt_writer *w, unsigned char *buf, size_t cap) {
    if (!w->f) return 0;
    long n = ftell(w->f);
    rewind(w->f);
    size_t got = n > 0 && (size_t)n <= cap ? fread(buf, 1, (size_t)n, w->f) : 0;
    fclose(w->f);
    return w->err ? 0 : got;
}

/* Loads buf through load(obj, cursor): a load that leaves bytes unread is a
 * format error too. */
#define TEST_LOAD_ALL(load, obj, buf, n) __extension__ ({                   \
    hpt_cursor k_ = {(buf), (n), 0};                                        \
    hpt_status st_ = load((obj), &k_);                                      \
    st_ == HPT_OK && k_.pos != (n) ? HPT_ERR_FORMAT : st_;                  \
})
#endif

#endif /* HPT_TEST_H */
