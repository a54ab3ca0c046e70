/* tier: fast (make test; tests/run.sh) */
/*
 * test_base.c — the layers under the model: CRC-32, the RNG, atomic saves,
 * the text corpus (tokenizers, split, training and validation windows) and
 * the weights file (round trip, forward-compatible sections, and rejection of
 * flipped, truncated, foreign and newer files).
 *
 * Every file lives in a mkdtemp directory under /tmp, removed at the end.
 * Data fixtures follow llm.c's test_dataloader: synthetic tokens whose value
 * says where they come from (letters = train split, digits = validation), so
 * a window check is a range check.
 */
#include "../src/base/base.h"
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(2); }
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    unsigned char *buf;
    if (hpt_read_file(path, &buf, n) != HPT_OK) return NULL;
    return buf;
}

/* ---------------------------------------------------------------- CRC-32 */

static uint32_t crc_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

static void test_crc(void) {
    CHECK(hpt_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32(\"123456789\") = %08x", hpt_crc32(0, "123456789", 9));
    CHECK(hpt_crc32(0, "", 0) == 0, "crc32(\"\") = %08x", hpt_crc32(0, "", 0));
    CHECK(hpt_crc32(0, "The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u, "crc32(quick brown fox)");
    unsigned char buf[1031];
    hpt_rng r;
    hpt_rng_seed(&r, 77);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)hpt_rng_u32(&r);
    /* every length and alignment of the slicing-by-4 loop, against a bitwise
     * CRC and zlib */
    int ok = 1, inc = 1;
    for (size_t off = 0; off < 5; off++)
        for (size_t n = 0; n < 40; n++) {
            uint32_t a = hpt_crc32(0, buf + off, n);
            ok &= a == crc_bitwise(buf + off, n) && a == (uint32_t)crc32(0L, buf + off, (uInt)n);
        }
    uint32_t whole = hpt_crc32(0, buf, sizeof buf);
    ok &= whole == (uint32_t)crc32(0L, buf, sizeof buf);
    for (size_t k = 0; k <= 37; k++) inc &= hpt_crc32(hpt_crc32(0, buf, k), buf + k, sizeof buf - k) == whole;
    CHECK(ok, "hpt_crc32 disagrees with a bitwise CRC-32 / zlib crc32");
    CHECK(inc, "hpt_crc32 is not incremental: crc(crc(a), b) != crc(ab)");
}

/* ---------------------------------------------------------------- RNG */

static void test_rng(void) {
    hpt_rng a, b, c;
    hpt_rng_seed(&a, 1); hpt_rng_seed(&b, 1); hpt_rng_seed(&c, 2);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = hpt_rng_u64(&a), y = hpt_rng_u64(&b), z = hpt_rng_u64(&c);
        same &= x == y;
        differ += x != z;
    }
    CHECK(same, "two RNGs with seed 1 diverge");
    CHECK(differ == 1000, "seeds 1 and 2 share %d of 1000 outputs", 1000 - differ);
    /* nearby seeds give unrelated first outputs; seed 0 gives a live state */
    hpt_rng s0;
    hpt_rng_seed(&s0, 0);
    uint64_t f0 = hpt_rng_u64(&s0), f1 = hpt_rng_u64(&s0);
    CHECK(s0.s != 0 && f0 != f1, "seed 0 gives a stuck generator");
    int bits = 0;
    for (uint64_t sd = 0; sd < 64; sd++) {
        hpt_rng p, q;
        hpt_rng_seed(&p, sd); hpt_rng_seed(&q, sd + 1);
        bits += __builtin_popcountll(hpt_rng_u64(&p) ^ hpt_rng_u64(&q));
    }
    CHECK(bits > 64 * 32 - 300 && bits < 64 * 32 + 300, "adjacent seeds: %d differing bits of %d (want ~half)", bits, 64 * 64);
    /* the state is the whole generator: a copy continues identically */
    hpt_rng_seed(&a, 99);
    for (int i = 0; i < 10; i++) hpt_rng_u64(&a);
    hpt_rng copy = a;
    same = 1;
    for (int i = 0; i < 100; i++) same &= hpt_rng_u64(&a) == hpt_rng_u64(&copy);
    CHECK(same, "a copied RNG state does not continue the stream");

    /* below: range and uniformity */
    hpt_rng_seed(&a, 5);
    int in_range = 1;
    for (int i = 0; i < 1000; i++) in_range &= hpt_rng_below(&a, 1) == 0;
    for (int i = 0; i < 10000; i++) in_range &= hpt_rng_below(&a, 3) < 3;
    const uint64_t huge = (1ull << 63) + 5;
    int high = 0;
    for (int i = 0; i < 1000; i++) { uint64_t x = hpt_rng_below(&a, huge); in_range &= x < huge; high += x >= huge / 2; }
    CHECK(in_range, "hpt_rng_below returned a value out of range");
    CHECK(high > 400 && high < 600, "hpt_rng_below(2^63+5): %d of 1000 in the upper half", high);
    long cnt[7] = {0};
    for (int i = 0; i < 70000; i++) cnt[hpt_rng_below(&a, 7)]++;
    int flat = 1;
    for (int k = 0; k < 7; k++) flat &= labs(cnt[k] - 10000) < 500;  /* ~5 sigma */
    CHECK(flat, "hpt_rng_below(7) counts: %ld %ld %ld %ld %ld %ld %ld", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4], cnt[5], cnt[6]);

    /* uniform in [0, 1), normal ~ N(0, 1) */
    double su = 0, sn = 0, sn2 = 0;
    int uok = 1;
    const int N = 100000;
    for (int i = 0; i < N; i++) {
        float u = hpt_rng_uniform(&a);
        uok &= u >= 0.0f && u < 1.0f;
        su += u;
        double g = hpt_rng_normal(&a);
        uok &= isfinite(g);
        sn += g; sn2 += g * g;
    }
    CHECK(uok, "uniform outside [0, 1) or a non-finite normal");
    CHECK_NEAR(su / N, 0.5, 0.005, 0, "mean of hpt_rng_uniform");
    CHECK_NEAR(sn / N, 0.0, 0.015, 0, "mean of hpt_rng_normal");
    CHECK_NEAR(sn2 / N - (sn / N) * (sn / N), 1.0, 0.02, 0, "variance of hpt_rng_normal");
}

/* ---------------------------------------------------------------- atomic save */

typedef struct wctx { const char *text; int fail; } wctx;

static hpt_status writer(FILE *f, void *p) {
    wctx *c = p;
    fputs(c->text, f);
    if (c->fail) return hpt_fail(HPT_ERR_IO, "writer failed on purpose");
    return HPT_OK;
}

/* Files in dir other than "." and ".." and keep. */
static int stray_files(const char *dir, const char *keep) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep)) n++;
    closedir(d);
    return n;
}

static void test_save_atomic(void) {
    const char *dir = test_tmp_path("save");
    CHECK(hpt_mkdir_p(dir) == HPT_OK, "mkdir_p %s: %s", dir, hpt_errmsg());
    char path[300];
    snprintf(path, sizeof path, "%s/state.bin", dir);
    size_t n;
    unsigned char *got;

    wctx c1 = {"first version", 0};
    CHECK(hpt_save_atomic(path, writer, &c1) == HPT_OK, "save: %s", hpt_errmsg());
    got = read_bytes(path, &n);
    CHECK(got && n == strlen(c1.text) && !memcmp(got, c1.text, n), "saved file content wrong");
    free(got);

    wctx c2 = {"the second, longer version", 0};
    CHECK(hpt_save_atomic(path, writer, &c2) == HPT_OK, "replace: %s", hpt_errmsg());
    got = read_bytes(path, &n);
    CHECK(got && n == strlen(c2.text) && !memcmp(got, c2.text, n), "replaced file content wrong");
    free(got);
    CHECK(stray_files(dir, "state.bin") == 0, "a temporary file was left after a successful save");

    /* a failing writer: the old file intact, no temporary left behind */
    wctx c3 = {"partial garbage", 1};
    hpt_status st = hpt_save_atomic(path, writer, &c3);
    CHECK(st == HPT_ERR_IO, "failing writer: status %d", st);
    got = read_bytes(path, &n);
    CHECK(got && n == strlen(c2.text) && !memcmp(got, c2.text, n), "a failed save damaged the old file");
    free(got);
    CHECK(stray_files(dir, "state.bin") == 0, "a failed save left a temporary file behind");

    /* a directory that does not exist */
    char bad[320];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.bin", dir);
    st = hpt_save_atomic(bad, writer, &c1);
    CHECK(st == HPT_ERR_IO && strstr(hpt_errmsg(), "no/such/dir"), "save into a missing dir: %d '%s'", st, hpt_errmsg());

    /* mkdir_p: nested, idempotent, and refuses a path through a file */
    char nested[320];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    CHECK(hpt_mkdir_p(nested) == HPT_OK && hpt_mkdir_p(nested) == HPT_OK, "mkdir_p nested: %s", hpt_errmsg());
    snprintf(nested, sizeof nested, "%s/state.bin/sub", dir);
    CHECK(hpt_mkdir_p(nested) == HPT_ERR_IO, "mkdir_p through a regular file succeeded");
    CHECK(hpt_read_file(dir, &got, &n) == HPT_ERR_IO, "hpt_read_file of a directory succeeded");
}

/* ---------------------------------------------------------------- text */

/* UTF-8 text with 2-, 3- and 4-byte characters, a stray 0xff, an overlong
 * NUL (c0 80) and a truncated 3-byte sequence at the end: 21 characters,
 * 15 distinct (Python's bytes.decode('utf-8', 'surrogateescape') agrees). */
static const char UTF8_TEXT[] = "ab h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80 \xff \xc0\x80 z\xe2\x82";
static const uint32_t UTF8_CPS[15] = {0x20, 0x61, 0x62, 0x68, 0x6c, 0x6f, 0x7a, 0xe9, 0x20ac,
                                      0xdc80, 0xdc82, 0xdcc0, 0xdce2, 0xdcff, 0x1f600};

static void test_tokenizers(void) {
    hpt_text *t = NULL;
    hpt_status st;

    /* byte: vocabulary 256, NUL bytes fine, split 90/10 */
    const char bytes[] = "hello\0world\xff!";
    const char *pb = test_tmp_path("bytes.txt");
    write_bytes(pb, bytes, sizeof bytes - 1);
    st = hpt_text_load(&t, pb, HPT_TOK_BYTE);
    CHECK(st == HPT_OK && t, "byte tokenizer: %s", hpt_errmsg());
    if (t) {
        CHECK(hpt_text_vocab_size(t) == 256 && hpt_text_kind(t) == HPT_TOK_BYTE && !hpt_text_codepoints(t),
              "byte tokenizer: vocab %d", hpt_text_vocab_size(t));
        size_t ntr = hpt_text_tokens(t, 0), nva = hpt_text_tokens(t, 1);
        CHECK(ntr + nva == 13 && ntr == 11, "byte split %zu + %zu of 13", ntr, nva);
        int ids[8];
        int k = -1;
        CHECK(hpt_text_encode(t, "h\xff", ids, 8, &k, NULL) == HPT_OK && k == 2 && ids[0] == 'h' && ids[1] == 255,
              "byte encode");
        char out[4];
        CHECK(hpt_text_decode(t, 255, out) == 1 && (unsigned char)out[0] == 0xff, "byte decode 255");
        CHECK(hpt_text_decode(t, 256, out) == 0 && hpt_text_decode(t, -1, out) == 0, "decode of an invalid id");
        hpt_text_free(t);
        t = NULL;
    }

    /* char: distinct codepoints, sorted; exact round trip of every byte */
    const char *pc = test_tmp_path("utf8.txt");
    write_bytes(pc, UTF8_TEXT, sizeof UTF8_TEXT - 1);
    st = hpt_text_load(&t, pc, HPT_TOK_CHAR);
    CHECK(st == HPT_OK && t, "char tokenizer: %s", hpt_errmsg());
    if (t) {
        int V = hpt_text_vocab_size(t);
        CHECK(V == 15, "char vocabulary %d, want 15", V);
        const uint32_t *cps = hpt_text_codepoints(t);
        CHECK(V == 15 && !memcmp(cps, UTF8_CPS, sizeof UTF8_CPS), "char vocabulary codepoints differ");
        CHECK(hpt_text_tokens(t, 0) + hpt_text_tokens(t, 1) == 21, "char corpus has %zu tokens, want 21",
              hpt_text_tokens(t, 0) + hpt_text_tokens(t, 1));
        int ids[64];
        int n = 0;
        CHECK(hpt_text_encode(t, UTF8_TEXT, ids, 64, &n, NULL) == HPT_OK && n == 21, "encode gave %d ids, want 21", n);
        char back[128];
        size_t len = 0;
        int ids_ok = 1;
        for (int i = 0; i < n; i++) {
            ids_ok &= ids[i] >= 0 && ids[i] < V;
            len += (size_t)hpt_text_decode(t, ids[i], back + len);
        }
        CHECK(ids_ok, "encode gave an id out of range");
        CHECK(len == sizeof UTF8_TEXT - 1 && !memcmp(back, UTF8_TEXT, len), "decode(encode(text)) != text (%zu bytes)", len);
        /* the 4-byte character decodes to 4 bytes */
        char emoji[4];
        CHECK(hpt_text_decode(t, 14, emoji) == 4 && !memcmp(emoji, "\xf0\x9f\x98\x80", 4), "U+1F600 decode");
        size_t bad = 99;
        int k = -1;
        CHECK(hpt_text_encode(t, "ab\xc3\xa9q", ids, 64, &k, &bad) == HPT_ERR_DATA && bad == 4 && k == 0 &&
                  strstr(hpt_errmsg(), "U+0071 at byte 4"),
              "encode of a character outside the vocabulary: bad offset %zu, '%s'", bad, hpt_errmsg());
        CHECK(hpt_text_encode(t, "abab", ids, 3, &k, NULL) == HPT_OK && k == 3, "encode stops at max");
        CHECK(hpt_text_encode(t, "abab", ids, 3, NULL, NULL) == HPT_ERR_ARG, "encode without count: HPT_ERR_ARG");
        /* the vocabulary survives hpt_text_from_vocab */
        hpt_text *t2 = NULL;
        CHECK(hpt_text_from_vocab(&t2, HPT_TOK_CHAR, cps, V) == HPT_OK, "from_vocab: %s", hpt_errmsg());
        if (t2) {
            int k2 = 0;
            CHECK(hpt_text_encode(t2, UTF8_TEXT, ids, 64, &k2, NULL) == HPT_OK && k2 == 21, "from_vocab encode");
            hpt_text_free(t2);
        }
        hpt_text_free(t);
        t = NULL;
    }
    uint32_t unsorted[3] = {0x61, 0x60, 0x62}, dup[3] = {0x61, 0x61, 0x62};
    hpt_text *t3 = (hpt_text *)&t3;
    CHECK(hpt_text_from_vocab(&t3, HPT_TOK_CHAR, unsorted, 3) == HPT_ERR_FORMAT && t3 == NULL, "unsorted vocab accepted");
    CHECK(hpt_text_from_vocab(&t3, HPT_TOK_CHAR, dup, 3) == HPT_ERR_FORMAT, "repeated codepoint accepted");

    /* errors, each naming the file */
    const char *pe = test_tmp_path("empty.txt");
    write_bytes(pe, "", 0);
    t = (hpt_text *)&t;
    st = hpt_text_load(&t, pe, HPT_TOK_CHAR);
    CHECK(st == HPT_ERR_DATA && t == NULL && strstr(hpt_errmsg(), pe), "empty file: %d '%s'", st, hpt_errmsg());
    st = hpt_text_load(&t, pe, HPT_TOK_BYTE);
    CHECK(st == HPT_ERR_DATA, "empty file (byte): %d", st);
    const char *pm = test_tmp_path("missing.txt");
    st = hpt_text_load(&t, pm, HPT_TOK_CHAR);
    CHECK(st == HPT_ERR_IO && strstr(hpt_errmsg(), pm), "missing file: %d '%s'", st, hpt_errmsg());
    st = hpt_text_load(&t, pb, HPT_TOK_CHAR);  /* contains NUL */
    CHECK(st == HPT_ERR_DATA && strstr(hpt_errmsg(), "NUL"), "NUL with char tokenizer: %d '%s'", st, hpt_errmsg());
    const char *p1 = test_tmp_path("one.txt");
    write_bytes(p1, "aaaa", 4);
    st = hpt_text_load(&t, p1, HPT_TOK_CHAR);
    CHECK(st == HPT_ERR_DATA, "one distinct character accepted: %d", st);
    st = hpt_text_load(&t, pc, (hpt_tokenizer_kind)7);
    CHECK(st == HPT_ERR_ARG, "tokenizer kind 7 accepted: %d", st);
    st = hpt_text_load(&t, test_tmpdir(), HPT_TOK_BYTE);
    CHECK(st == HPT_ERR_IO, "a directory as data: %d", st);
}

/* 1000 bytes: 900 letters a..z cycling (the train split), then 100 digits
 * 0..9 cycling (validation). next(c) is the token that follows c. */
static int next_tok(int c) {
    if (c >= 'a' && c <= 'z') return c == 'z' ? 'a' : c + 1;
    return c == '9' ? '0' : c + 1;
}

static void test_windows(void) {
    char data[1000];
    for (int i = 0; i < 900; i++) data[i] = (char)('a' + i % 26);
    for (int i = 900; i < 1000; i++) data[i] = (char)('0' + i % 10);
    const char *p = test_tmp_path("windows.txt");
    write_bytes(p, data, sizeof data);
    hpt_text *t = NULL;
    CHECK(hpt_text_load(&t, p, HPT_TOK_BYTE) == HPT_OK, "load: %s", hpt_errmsg());
    if (!t) return;
    CHECK(hpt_text_tokens(t, 0) == 900 && hpt_text_tokens(t, 1) == 100, "split %zu/%zu, want 900/100",
          hpt_text_tokens(t, 0), hpt_text_tokens(t, 1));

    enum { B = 64, T = 16, VB = 4, VT = 10, NV = 3 };
    int x[B * T], y[B * T], x2[B * T], y2[B * T];
    hpt_rng r;
    hpt_rng_seed(&r, 3);
    uint64_t s0 = r.s, s = s0;
    int inside = 1, shifted = 1, starts[26] = {0};
    for (int call = 0; call < 20; call++) {
        hpt_text_train_batch(t, &s, B, T, x, y);
        for (int b = 0; b < B; b++) {
            starts[x[b * T] - 'a' < 26 && x[b * T] >= 'a' ? x[b * T] - 'a' : 0]++;
            for (int i = 0; i < T; i++) {
                int xi = x[b * T + i], yi = y[b * T + i];
                inside &= xi >= 'a' && xi <= 'z' && yi >= 'a' && yi <= 'z';
                shifted &= yi == next_tok(xi);
                if (i + 1 < T) shifted &= x[b * T + i + 1] == yi;
            }
        }
    }
    CHECK(inside, "a training window reaches into the validation split");
    CHECK(shifted, "training targets are not the inputs shifted by one");
    int all_starts = 1;
    for (int k = 0; k < 26; k++) all_starts &= starts[k] > 0;
    CHECK(all_starts, "training windows do not start at every letter (not random?)");
    /* the cursor: the same state gives the same batch, and advances */
    uint64_t sa = s0, sb = s0;
    hpt_text_train_batch(t, &sa, B, T, x, y);
    hpt_text_train_batch(t, &sb, B, T, x2, y2);
    CHECK(sa == sb && sa != s0 && !memcmp(x, x2, sizeof x) && !memcmp(y, y2, sizeof y),
          "train batches are not a function of the RNG state");
    hpt_text_train_batch(t, &sa, B, T, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) != 0, "consecutive training batches are identical");

    /* the longest window that fits: T = n_train - 1, the last target is the
     * last training token */
    static int lx[899], ly[899];
    uint64_t sl = s0;
    hpt_text_train_batch(t, &sl, 1, 899, lx, ly);
    CHECK(lx[0] == 'a' && ly[898] == data[899], "window of 899 tokens: starts '%c', ends '%c'", lx[0], ly[898]);

    /* near the edge: T = 898 leaves exactly two window starts (0 and 1);
     * a third start would put the last target in the validation split */
    enum { EB = 16, ET = 898 };
    static int ex[EB * ET], ey[EB * ET];
    uint64_t se = s0;
    hpt_text_train_batch(t, &se, EB, ET, ex, ey);
    int edge_ok = 1, start1 = 0;
    for (int b = 0; b < EB; b++) {
        edge_ok &= (ex[b * ET] == 'a' || ex[b * ET] == 'b') && ey[b * ET + ET - 1] >= 'a' && ey[b * ET + ET - 1] <= 'z';
        start1 += ex[b * ET] == 'b';
    }
    CHECK(edge_ok, "898-token windows must start at token 0 or 1 and end inside the train split");
    CHECK(start1 > 0 && start1 < EB, "898-token windows: %d of %d start at token 1 (both starts expected)", start1, EB);

    /* validation: fixed windows, inside the split, shifted targets, spread
     * from the first validation token to the last */
    int vx[NV][VB * VT], vy[NV][VB * VT], again[VB * VT], againy[VB * VT];
    inside = shifted = 1;
    for (int i = 0; i < NV; i++) {
        hpt_text_val_batch(t, i, NV, VB, VT, vx[i], vy[i]);
        for (int k = 0; k < VB * VT; k++) {
            inside &= vx[i][k] >= '0' && vx[i][k] <= '9' && vy[i][k] >= '0' && vy[i][k] <= '9';
            shifted &= vy[i][k] == next_tok(vx[i][k]);
            if (k % VT + 1 < VT) shifted &= vx[i][k + 1] == vy[i][k];
        }
    }
    CHECK(inside, "a validation window leaves the validation split");
    CHECK(shifted, "validation targets are not the inputs shifted by one");
    int same = 1;
    for (int i = 0; i < NV; i++) {
        hpt_text_val_batch(t, i, NV, VB, VT, again, againy);
        same &= !memcmp(again, vx[i], sizeof again) && !memcmp(againy, vy[i], sizeof againy);
    }
    CHECK(same, "validation batches differ between calls");
    CHECK(vx[0][0] == data[900] && vy[NV - 1][VB * VT - 1] == data[999],
          "validation windows do not span the split: first '%c', last target '%c'", vx[0][0], vy[NV - 1][VB * VT - 1]);
    hpt_text_free(t);
}

/* ---------------------------------------------------------------- weights */

static hpt_status expect_format_error(const char *path, const char *what, const char *needle) {
    hpt_model *m = (hpt_model *)&m;
    hpt_text *tok = (hpt_text *)&tok;
    hpt_status st = hpt_weights_load(path, 1, 0, NULL, &m, &tok);
    CHECK(st == HPT_ERR_FORMAT, "%s: status %d (%s), want HPT_ERR_FORMAT", what, st, hpt_errmsg());
    CHECK(strstr(hpt_errmsg(), path) != NULL, "%s: message does not name the file: '%s'", what, hpt_errmsg());
    if (needle) CHECK(strstr(hpt_errmsg(), needle) != NULL, "%s: message lacks '%s': '%s'", what, needle, hpt_errmsg());
    CHECK(m == NULL && tok == NULL, "%s: outputs not NULL after a failure", what);
    printf("  %-26s -> %s\n", what, hpt_errmsg());
    return st;
}

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static void fix_crc(unsigned char *buf, size_t n) { put_u32(buf + n - 4, hpt_crc32(0, buf, n - 4)); }

static void round_trip(const char *data_path, hpt_tokenizer_kind kind, const char *name) {
    hpt_text *tok = NULL;
    CHECK(hpt_text_load(&tok, data_path, kind) == HPT_OK, "load %s: %s", data_path, hpt_errmsg());
    if (!tok) return;
    hpt_gpt2_config cfg = {.vocab_size = hpt_text_vocab_size(tok), .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};
    hpt_model *m = NULL;
    CHECK(hpt_gpt2_init(&m, &cfg, 2, 8, 17, NULL) == HPT_OK, "init: %s", hpt_errmsg());
    size_t n;
    float *p = hpt_model_params(m, &n);
    for (size_t i = 0; i < n; i++) p[i] += 1e-3f * (float)(i % 13);  /* not just init values */
    const char *path = test_tmp_path(name);
    CHECK(hpt_weights_save(path, m, tok) == HPT_OK, "save %s: %s", path, hpt_errmsg());

    hpt_model *m2 = NULL;
    hpt_text *tok2 = NULL;
    CHECK(hpt_weights_load(path, 1, 0, NULL, &m2, &tok2) == HPT_OK, "load %s: %s", path, hpt_errmsg());
    if (m2 && tok2) {
        size_t n2;
        float *p2 = hpt_model_params(m2, &n2);
        CHECK(n2 == n && !memcmp(p, p2, n * sizeof(float)), "%s: parameters differ after a round trip", name);
        /* the config: description, context, and the whole tensor table */
        CHECK(!strcmp(hpt_model_describe(m), hpt_model_describe(m2)) && hpt_model_block_size(m2) == 8,
              "%s: config differs after a round trip: '%s' vs '%s'", name, hpt_model_describe(m), hpt_model_describe(m2));
        int nt1, nt2;
        const hpt_tensor_info *t1 = hpt_model_tensors(m, &nt1), *t2 = hpt_model_tensors(m2, &nt2);
        int table = nt1 == nt2;
        for (int i = 0; table && i < nt1; i++)
            table &= !strcmp(t1[i].name, t2[i].name) && t1[i].offset == t2[i].offset && t1[i].ndim == t2[i].ndim &&
                     !memcmp(t1[i].shape, t2[i].shape, sizeof t1[i].shape);
        CHECK(table, "%s: tensor table differs after a round trip", name);
        int V = hpt_text_vocab_size(tok);
        CHECK(hpt_text_kind(tok2) == kind && hpt_text_vocab_size(tok2) == V, "%s: tokenizer kind/vocab differ", name);
        if (kind == HPT_TOK_CHAR)
            CHECK(!memcmp(hpt_text_codepoints(tok), hpt_text_codepoints(tok2), (size_t)V * 4), "%s: codepoints differ", name);
        /* T <= 0 means block_size: a full-length forward must work */
        int toks[8] = {0, 1, 0, 1, 0, 1, 0, 1};
        hpt_batch b = {.B = 1, .T = 8, .tokens = toks};
        CHECK(hpt_model_forward(m2, &b, NULL) == HPT_OK, "%s: forward of the loaded model: %s", name, hpt_errmsg());
    }
    hpt_model_free(m2);
    hpt_text_free(tok2);

    /* the trailer is zlib's CRC-32 of everything before it */
    size_t len;
    unsigned char *buf = read_bytes(path, &len);
    CHECK(buf && len > 60 && !memcmp(buf, "HPTSTATE", 8), "%s: no HPTSTATE magic", name);
    if (buf) {
        uint32_t stored;
        memcpy(&stored, buf + len - 4, 4);
        CHECK(stored == (uint32_t)crc32(0L, buf, (uInt)(len - 4)), "%s: trailer is not the CRC-32 of the file", name);
        free(buf);
    }
    hpt_model_free(m);
    hpt_text_free(tok);
}

static void test_weights(void) {
    round_trip(test_tmp_path("utf8.txt"), HPT_TOK_CHAR, "char.bin");
    round_trip(test_tmp_path("windows.txt"), HPT_TOK_BYTE, "byte.bin");

    const char *good = test_tmp_path("char.bin");
    size_t len;
    unsigned char *orig = read_bytes(good, &len);
    if (!orig) { CHECK(0, "cannot read %s", good); return; }
    unsigned char *buf = malloc(len + 64);
    const char *bad = test_tmp_path("bad.bin");

    /* a section of a later version is skipped: insert "XTRA" before END! */
    memcpy(buf, orig, len - 20);
    memcpy(buf + len - 20, "XTRA", 4);
    put_u32(buf + len - 16, 0);
    put_u64(buf + len - 12, 8);
    memcpy(buf + len - 4, "12345678", 8);
    memcpy(buf + len + 4, orig + len - 20, 20);
    put_u64(buf + 24, len + 24);
    fix_crc(buf, len + 24);
    write_bytes(bad, buf, len + 24);
    {
        hpt_model *m = NULL;
        hpt_text *tok = NULL;
        hpt_status st = hpt_weights_load(bad, 1, 0, NULL, &m, &tok);
        CHECK(st == HPT_OK, "a file with an unknown section was rejected: %s", hpt_errmsg());
        hpt_model_free(m);
        hpt_text_free(tok);
    }

    /* one flipped bit in the parameters: the CRC */
    memcpy(buf, orig, len);
    buf[len - 100] ^= 0x10;
    write_bytes(bad, buf, len);
    expect_format_error(bad, "flipped parameter bit", "CRC");
    /* a flipped byte in the CRC itself */
    memcpy(buf, orig, len);
    buf[len - 1] ^= 0xFF;
    write_bytes(bad, buf, len);
    expect_format_error(bad, "flipped CRC byte", "CRC");
    /* truncated: at the end, and inside the header */
    write_bytes(bad, orig, len - 7);
    expect_format_error(bad, "truncated by 7 bytes", NULL);
    write_bytes(bad, orig, 20);
    expect_format_error(bad, "truncated to 20 bytes", NULL);
    write_bytes(bad, orig, 0);
    expect_format_error(bad, "empty file", NULL);
    /* appended to */
    memcpy(buf, orig, len);
    memcpy(buf + len, "junk", 4);
    write_bytes(bad, buf, len + 4);
    expect_format_error(bad, "4 bytes appended", NULL);
    /* wrong magic */
    memcpy(buf, orig, len);
    memcpy(buf, "GGUFxxxx", 8);
    fix_crc(buf, len);
    write_bytes(bad, buf, len);
    expect_format_error(bad, "wrong magic", "magic");
    /* a newer version, CRC recomputed so only the version check can fire */
    memcpy(buf, orig, len);
    put_u32(buf + 8, 2);
    fix_crc(buf, len);
    write_bytes(bad, buf, len);
    expect_format_error(bad, "version 2", "newer");
    /* version 0 does not exist */
    put_u32(buf + 8, 0);
    fix_crc(buf, len);
    write_bytes(bad, buf, len);
    expect_format_error(bad, "version 0", NULL);
    /* a parameter count that does not match the config (CRC fixed) */
    memcpy(buf, orig, len);
    {
        /* PARM is the third section: find its tag */
        size_t at = 0;
        for (size_t i = 32; i + 4 <= len; i++) if (!memcmp(buf + i, "PARM", 4)) { at = i; break; }
        CHECK(at > 0, "no PARM section found");
        if (at) {
            /* shrink the section by one float: section length, count, file size */
            uint64_t slen, cnt;
            memcpy(&slen, buf + at + 8, 8);
            memcpy(&cnt, buf + at + 16, 8);
            put_u64(buf + at + 8, slen - 4);
            put_u64(buf + at + 16, cnt - 1);
            memmove(buf + at + 16 + slen - 4, buf + at + 16 + slen, len - (at + 16 + slen));
            put_u64(buf + 24, len - 4);
            fix_crc(buf, len - 4);
            write_bytes(bad, buf, len - 4);
            expect_format_error(bad, "one parameter short", "parameters");
        }
    }
    /* missing file: an I/O error, not a format error */
    hpt_model *m = NULL;
    hpt_text *tok = NULL;
    const char *missing = test_tmp_path("missing.bin");
    hpt_status st = hpt_weights_load(missing, 1, 0, NULL, &m, &tok);
    CHECK(st == HPT_ERR_IO && strstr(hpt_errmsg(), missing), "missing model file: %d '%s'", st, hpt_errmsg());
    free(buf);
    free(orig);
}

/* ---------------------------------------------------------------- main */

/* hpt_set_threads flushes denormals on the caller and on every OpenMP
 * worker: 1e-30 * 1e-10 is 1e-40 (a denormal) unless flushed to 0. NaN and
 * Inf stay what they are (this is not fast-math). */
static void test_denormals(void) {
    hpt_set_threads(2);
    volatile float a = 1e-30f, b = 1e-10f;
    CHECK(a * b == 0.0f, "denormal product on the main thread: %g", (double)(a * b));
    int flushed = 1, n = 0;
    #pragma omp parallel reduction(&&:flushed) reduction(+:n)
    {
        volatile float x = 1e-30f, y = 1e-10f;
        flushed = x * y == 0.0f;
        n = 1;
    }
    CHECK(flushed, "denormal product on an OpenMP worker (%d threads)", n);
    volatile float z = 0.0f, big = 3e38f;
    CHECK(isnan(z / z) && isinf(big * 10.0f), "NaN and Inf survive");
    volatile float small = 2e-38f;
    CHECK(small * 1.0f == small, "normal floats untouched");
}

int main(void) {
    test_denormals();
    if (!test_tmpdir_make("hpt_test_base")) return 2;
    hpt_set_threads(1);
    printf("crc32\n");
    test_crc();
    printf("rng\n");
    test_rng();
    printf("atomic save\n");
    test_save_atomic();
    printf("tokenizers\n");
    test_tokenizers();
    printf("windows\n");
    test_windows();
    printf("weights\n");
    test_weights();
    test_tmpdir_remove();
    return TEST_REPORT("test_base");
}
