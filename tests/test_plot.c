/*
 * test_plot.c — the chart writer (src/report/plot.c), read back as a
 * viewer would: the PNG is parsed chunk by chunk (signature, IHDR, every
 * CRC, IDAT inflated with zlib to exactly H rows of 1 + 3W bytes with
 * filter type 0) and its pixels are checked for the series' palette colors
 * and a mostly white background; the SVG is checked for its series names,
 * one <polyline> per unbroken run of points, and escaped labels. Then the
 * degenerate inputs (no series, one point, constant y, x range zero, all
 * NaN, a clipping y range) must still give both files, and bad arguments
 * and an unwritable path must give an error, not a crash.
 *
 * Files go to a mkdtemp directory under /tmp, removed at the end. With
 * HPT_PLOT_KEEP=DIR they go to DIR and stay, to look at them.
 */
#include "../src/report/plot.h"
#include "../src/base/base.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[4096];

static const char *tmp_path(const char *name) {
    static char buf[4][4200];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

/* Path of base + ext, e.g. file_of("main", ".png"). */
static const char *file_of(const char *base, const char *ext) {
    static char buf[4][4300];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s%s", g_dir, base, ext);
    return p;
}

/* PNG stores every integer big-endian. */
static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int count_str(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* ---------------------------------------------------------------- PNG reader */

typedef struct png_img {
    int W, H;
    unsigned char *raw;   /* (H, 1 + 3W) scanlines as stored, NULL if unreadable */
} png_img;

static const unsigned char *pixel(const png_img *im, int x, int y) {
    return im->raw + (size_t)y * (1 + 3 * (size_t)im->W) + 1 + 3 * (size_t)x;
}

/* Reads path as a PNG and checks its structure; the image comes back with
 * raw = NULL when the pixels cannot be trusted (checks already failed). */
static png_img read_png(const char *path, int want_w, int want_h) {
    png_img im = { 0, 0, NULL };
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) {
        CHECK(0, "cannot read %s: %s", path, hpt_errmsg());
        return im;
    }
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
    CHECK(n >= 8 && memcmp(buf, sig, 8) == 0, "%s: bad PNG signature", path);
    size_t pos = 8;
    int nchunks = 0, crc_ok = 1, have_ihdr = 0, have_iend = 0, depth = 0, ctype = -1, interlace = -1;
    unsigned char *idat = NULL;
    size_t nidat = 0;
    while (pos + 12 <= n && !have_iend) {
        uint32_t len = be32(buf + pos);
        if (len > n - pos - 12) { CHECK(0, "%s: chunk %d overruns the file", path, nchunks); break; }
        const unsigned char *type = buf + pos + 4, *data = buf + pos + 8;
        uint32_t want = (uint32_t)crc32(crc32(0L, type, 4), data, len);
        if (be32(data + len) != want) {
            crc_ok = 0;
            fprintf(stderr, "%s: chunk %.4s: CRC %08x, want %08x\n", path, (const char *)type, be32(data + len), want);
        }
        if (memcmp(type, "IHDR", 4) == 0 && len == 13) {
            CHECK(nchunks == 0, "%s: IHDR is not the first chunk", path);
            have_ihdr = 1;
            im.W = (int)be32(data);
            im.H = (int)be32(data + 4);
            depth = data[8]; ctype = data[9]; interlace = data[12];
        } else if (memcmp(type, "IDAT", 4) == 0) {
            unsigned char *grown = realloc(idat, nidat + len + 1);
            if (!grown) { fprintf(stderr, "out of memory\n"); exit(2); }
            idat = grown;
            memcpy(idat + nidat, data, len);
            nidat += len;
        } else if (memcmp(type, "IEND", 4) == 0) {
            have_iend = 1;
        }
        pos += 12 + (size_t)len;
        nchunks++;
    }
    CHECK(crc_ok, "%s: a chunk CRC is wrong", path);
    CHECK(have_ihdr && have_iend && nidat > 0, "%s: missing IHDR, IDAT or IEND", path);
    CHECK(pos == n, "%s: %zu bytes after IEND or a cut chunk", path, n - pos);
    CHECK(im.W == want_w && im.H == want_h, "%s: IHDR says %d x %d, want %d x %d", path, im.W, im.H, want_w, want_h);
    CHECK(depth == 8 && ctype == 2 && interlace == 0, "%s: depth %d, color type %d, interlace %d (want 8, 2, 0)",
          path, depth, ctype, interlace);
    if (crc_ok && have_ihdr && nidat > 0 && im.W == want_w && im.H == want_h && depth == 8 && ctype == 2) {
        /* One spare byte: uncompress must stop at exactly H * (1 + 3W). */
        uLongf want_len = (uLongf)im.H * (1 + 3 * (uLongf)im.W), got = want_len + 1;
        im.raw = malloc(got);
        if (!im.raw) { fprintf(stderr, "out of memory\n"); exit(2); }
        int zr = uncompress(im.raw, &got, idat, (uLong)nidat);
        CHECK(zr == Z_OK && got == want_len, "%s: IDAT inflates to %lu bytes (zlib %d), want %lu", path,
              (unsigned long)got, zr, (unsigned long)want_len);
        int filters_ok = 1;
        for (int y = 0; zr == Z_OK && y < im.H; y++) filters_ok &= im.raw[(size_t)y * (1 + 3 * (size_t)im.W)] == 0;
        CHECK(filters_ok, "%s: a row has a filter type other than 0", path);
        if (zr != Z_OK || got != want_len || !filters_ok) { free(im.raw); im.raw = NULL; }
    }
    free(idat);
    free(buf);
    return im;
}

/* Pixels of exactly this color: anti-aliased edges blend, but the middle of
 * a 2 px line is at full coverage and keeps the palette color unchanged. */
static long count_color(const png_img *im, uint32_t rgb) {
    long n = 0;
    for (int y = 0; y < im->H; y++)
        for (int x = 0; x < im->W; x++) {
            const unsigned char *p = pixel(im, x, y);
            n += p[0] == (rgb >> 16 & 255) && p[1] == (rgb >> 8 & 255) && p[2] == (rgb & 255);
        }
    return n;
}

/* ---------------------------------------------------------------- SVG reader */

static char *read_text(const char *path) {
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) { CHECK(0, "cannot read %s: %s", path, hpt_errmsg()); return NULL; }
    return (char *)buf;   /* hpt_read_file NUL-terminates */
}

/* A cheap well-formedness check: every '&' starts one of the entities the
 * writer uses, the document is one <svg> element, and no label leaked a raw
 * '<' into text (every '<' starts a tag name, '/', '?' or '!'). */
static void check_svg_syntax(const char *svg, const char *ctx) {
    int amp_ok = 1, lt_ok = 1;
    for (const char *p = svg; *p; p++) {
        if (*p == '&')
            amp_ok &= strncmp(p, "&amp;", 5) == 0 || strncmp(p, "&lt;", 4) == 0 || strncmp(p, "&gt;", 4) == 0 ||
                      strncmp(p, "&quot;", 6) == 0 || strncmp(p, "&apos;", 6) == 0;
        if (*p == '<')
            lt_ok &= (p[1] >= 'a' && p[1] <= 'z') || p[1] == '/' || p[1] == '?' || p[1] == '!';
    }
    CHECK(amp_ok, "%s: a raw '&' in the SVG", ctx);
    CHECK(lt_ok, "%s: a raw '<' in the SVG", ctx);
    CHECK(strncmp(svg, "<?xml", 5) == 0, "%s: no XML declaration", ctx);
    CHECK(count_str(svg, "<svg ") == 1 && count_str(svg, "</svg>") == 1, "%s: not one <svg> element", ctx);
}

/* Writes p as base.svg/.png and checks both files; returns the SVG text
 * (caller frees) or NULL. */
static char *write_and_check(const hpt_plot *p, const char *base, int W, int H, png_img *img) {
    hpt_status st = hpt_plot_write(p, tmp_path(base));
    CHECK(st == HPT_OK, "%s: hpt_plot_write: %s", base, hpt_errmsg());
    png_img im = read_png(file_of(base, ".png"), W, H);
    if (img) *img = im;
    else free(im.raw);
    char *svg = read_text(file_of(base, ".svg"));
    if (svg) check_svg_syntax(svg, base);
    return svg;
}

/* ---------------------------------------------------------------- the chart */

enum { NTRAIN = 400, NVAL = 20 };

static void test_chart(void) {
    /* A loss curve with a little deterministic noise, a validation curve
     * every 20 steps with one missing point, and a dashed schedule. */
    double tx[NTRAIN], ty[NTRAIN], vx[NVAL], vy[NVAL], ly[NTRAIN];
    for (int i = 0; i < NTRAIN; i++) {
        tx[i] = i;
        ty[i] = 1.2 + 2.5 * exp(-i / 90.0) + 0.08 * sin(i * 1.7) * sin(i * 0.31);
        ly[i] = 0.5 + 2.0 * (i < 40 ? i / 40.0 : 0.5 * (1 + cos(M_PI * (i - 40) / (NTRAIN - 40))));
    }
    for (int i = 0; i < NVAL; i++) { vx[i] = 20.0 * i; vy[i] = 1.35 + 2.4 * exp(-vx[i] / 100.0); }
    vy[8] = NAN;   /* a skipped evaluation: the line breaks there */
    hpt_plot_series s[3] = {
        { "train loss", tx, ty, NTRAIN, 0 },
        { "val & <held-out> \"loss\"", vx, vy, NVAL, 0 },
        { "lr x1000 (schedule)", NULL, ly, NTRAIN, 1 },   /* x NULL: 0..n-1 */
    };
    hpt_plot_band bands[2] = { { 60, 120 }, { 250, 300 } };
    hpt_plot p;
    hpt_plot_init(&p);
    p.title = "GPT-2 tiny: loss vs step (hybrid, 2 phases)";
    p.xlabel = "step";
    p.ylabel = "loss / lr\xC3\x97" "1000";   /* UTF-8 multiplication sign */
    p.series = s;
    p.nseries = 3;
    p.bands = bands;
    p.nbands = 2;
    p.band_label = "predict phase";
    p.hline = 1.5;
    p.hline_label = "target 1.5";

    /* Timed for information only (fsyncs included), never checked: the
     * machine may be busy. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hpt_status st = hpt_plot_write(&p, tmp_path("chart"));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(st == HPT_OK, "hpt_plot_write: %s", hpt_errmsg());
    struct stat sb;
    long png_bytes = stat(file_of("chart", ".png"), &sb) == 0 ? (long)sb.st_size : -1;
    printf("  800x500 chart: PNG %ld bytes, SVG+PNG written in %.1f ms\n", png_bytes,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);

    /* 0 x 0 asks for the default size */
    png_img im = read_png(file_of("chart", ".png"), 800, 500);
    if (im.raw) {
        /* Each series is drawn in its palette color at full coverage along
         * its centre: far more pixels than its 24 px legend swatch. */
        for (int i = 0; i < 3; i++) {
            long n = count_color(&im, hpt_plot_color(i));
            CHECK(n >= 150, "series %d: %ld pixels of #%06x", i, n, (unsigned)hpt_plot_color(i));
        }
        long white = count_color(&im, 0xFFFFFF), total = (long)im.W * im.H;
        CHECK(white * 2 > total, "background: only %ld of %ld pixels white", white, total);
        /* Bands: black at 7% over white is #EDEDED; the two span 110 of
         * 400 steps over the plot's height, some 10^4 pixels. */
        CHECK(count_color(&im, 0xEDEDED) > 5000, "band grey: %ld pixels", count_color(&im, 0xEDEDED));
        CHECK(count_color(&im, 0x555555) > 2 * 700, "frame color too rare: %ld", count_color(&im, 0x555555));
    }
    free(im.raw);

    char *svg = read_text(file_of("chart", ".svg"));
    if (svg) {
        check_svg_syntax(svg, "chart");
        CHECK(strstr(svg, "train loss") != NULL, "SVG lacks 'train loss'");
        CHECK(strstr(svg, "val &amp; &lt;held-out&gt; &quot;loss&quot;") != NULL, "SVG lacks the escaped val name");
        CHECK(strstr(svg, "val & <") == NULL, "SVG has the val name unescaped");
        CHECK(strstr(svg, "lr x1000 (schedule)") != NULL, "SVG lacks the lr name");
        CHECK(strstr(svg, "predict phase") != NULL && strstr(svg, "target 1.5") != NULL, "SVG lacks band/hline labels");
        CHECK(strstr(svg, "loss / lr\xC3\x97" "1000") != NULL, "SVG lost the UTF-8 y label");
        /* one polyline per unbroken run: train 1, val 2 (the NaN gap), lr 1 */
        CHECK(count_str(svg, "<polyline") == 4, "SVG has %d polylines, want 4", count_str(svg, "<polyline"));
        CHECK(count_str(svg, "stroke-dasharray=\"8 5\"") == 2, "dashed series: want its group and its swatch dashed");
        CHECK(strstr(svg, "width=\"800\" height=\"500\"") != NULL, "SVG size is not 800 x 500");
        for (int i = 0; i < 3; i++) {
            char col[16];
            snprintf(col, sizeof col, "#%06x", (unsigned)hpt_plot_color(i));
            CHECK(strstr(svg, col) != NULL, "SVG lacks the color %s of series %d", col, i);
        }
    }
    free(svg);
}

/* ---------------------------------------------------------------- degenerate */

static void test_degenerate(void) {
    hpt_plot p;
    char *svg;

    /* No series at all, titles only. */
    hpt_plot_init(&p);
    p.title = "empty";
    svg = write_and_check(&p, "empty", 800, 500, NULL);
    if (svg) CHECK(count_str(svg, "<polyline") == 0, "empty: polylines drawn");
    free(svg);

    /* One point: no line, a dot. */
    double one_x = 3, one_y = 0.25;
    hpt_plot_series one = { "one", &one_x, &one_y, 1, 0 };
    hpt_plot_init(&p);
    p.series = &one; p.nseries = 1;
    svg = write_and_check(&p, "one", 800, 500, NULL);
    if (svg) CHECK(count_str(svg, "<circle") == 1 && count_str(svg, "<polyline") == 0, "one point: want one dot");
    free(svg);

    /* Constant y (all equal), at 2 and at 0; and x range zero. */
    double cx[5] = { 0, 1, 2, 3, 4 }, cy[5] = { 2, 2, 2, 2, 2 }, zy[5] = { 0, 0, 0, 0, 0 };
    double sx[5] = { 7, 7, 7, 7, 7 }, sy[5] = { 1, 3, 2, 5, 4 };
    hpt_plot_series flat[3] = { { "two", cx, cy, 5, 0 }, { "zero", cx, zy, 5, 1 }, { "same x", sx, sy, 5, 0 } };
    hpt_plot_init(&p);
    p.series = flat; p.nseries = 1;
    png_img im;
    svg = write_and_check(&p, "flat", 800, 500, &im);
    if (im.raw) CHECK(count_color(&im, hpt_plot_color(0)) >= 100, "constant y: line not drawn");
    free(im.raw);
    free(svg);
    p.series = &flat[1];
    svg = write_and_check(&p, "flat0", 800, 500, NULL);
    if (svg) CHECK(count_str(svg, "<polyline") == 1, "constant 0: want one line");
    free(svg);
    p.series = &flat[2];
    svg = write_and_check(&p, "samex", 800, 500, NULL);
    free(svg);

    /* All NaN, an empty series, Inf; bands without data set the x range. */
    double nx[3] = { 0, 1, 2 }, ny[3] = { NAN, INFINITY, -INFINITY };
    hpt_plot_series nan_s[2] = { { "nan", nx, ny, 3, 0 }, { "empty", NULL, NULL, 0, 0 } };
    hpt_plot_band band = { 10, 20 };
    hpt_plot_init(&p);
    p.series = nan_s; p.nseries = 2;
    p.bands = &band; p.nbands = 1; p.band_label = "band";
    svg = write_and_check(&p, "nan", 800, 500, NULL);
    free(svg);
    /* again at a custom size, over the same files */
    p.width = 640; p.height = 400;
    svg = write_and_check(&p, "nan", 640, 400, NULL);
    if (svg) CHECK(count_str(svg, "<polyline") == 0 && count_str(svg, "<circle") == 0, "all-NaN: something drawn");
    free(svg);

    /* A user y range that cuts the curve: the line leaves and re-enters the
     * plot, which makes two runs; NaN hline means none. */
    double ux[5] = { 0, 1, 2, 3, 4 }, uy[5] = { 0.5, 5, 1e300, 0.5, 0.6 };
    hpt_plot_series cut = { "cut", ux, uy, 5, 0 };
    hpt_plot_init(&p);
    p.series = &cut; p.nseries = 1;
    p.ymin = 0; p.ymax = 1;
    svg = write_and_check(&p, "cut", 800, 500, NULL);
    if (svg) CHECK(count_str(svg, "<polyline") == 2, "clipped: %d polylines, want 2", count_str(svg, "<polyline"));
    free(svg);

    /* Tiny and huge magnitudes get readable tick labels, not a crash. */
    double tyv[3] = { 1e-12, 3e-12, 2e-12 }, hyv[3] = { 1e12, 3e12, 2e12 };
    hpt_plot_series tiny = { "tiny", NULL, tyv, 3, 0 }, huge = { "huge", NULL, hyv, 3, 0 };
    hpt_plot_init(&p);
    p.series = &tiny; p.nseries = 1;
    svg = write_and_check(&p, "tiny", 800, 500, NULL);
    free(svg);
    p.series = &huge;
    p.width = 1600; p.height = 1000;   /* the 2x text scale */
    svg = write_and_check(&p, "huge", 1600, 1000, NULL);
    free(svg);
}

/* ---------------------------------------------------------------- errors */

static void expect_fail(const hpt_plot *p, const char *path, hpt_status want, const char *what) {
    hpt_status st = hpt_plot_write(p, path);
    CHECK(st == want, "%s: status %s, want %s", what, hpt_status_str(st), hpt_status_str(want));
    CHECK(hpt_errmsg()[0] != 0, "%s: no message", what);
}

static void test_errors(void) {
    double y[2] = { 1, 2 };
    hpt_plot_series s13[13];
    for (int i = 0; i < 13; i++) s13[i] = (hpt_plot_series){ "s", NULL, y, 2, 0 };
    hpt_plot p;
    const char *path = tmp_path("bad");
    /* Each case changes one thing from a valid plot and puts it back, so a
     * failure names the argument that was not caught. */

    expect_fail(NULL, path, HPT_ERR_ARG, "NULL plot");
    hpt_plot_init(&p);
    expect_fail(&p, NULL, HPT_ERR_ARG, "NULL path");
    p.series = s13; p.nseries = 13;
    expect_fail(&p, path, HPT_ERR_ARG, "13 series");
    p.nseries = 1;
    s13[0].n = -1;
    expect_fail(&p, path, HPT_ERR_ARG, "negative n");
    s13[0].n = 2; s13[0].y = NULL;
    expect_fail(&p, path, HPT_ERR_ARG, "NULL y");
    s13[0].y = y;
    p.ymin = 2; p.ymax = 1;
    expect_fail(&p, path, HPT_ERR_ARG, "ymin > ymax");
    p.ymin = 0; p.ymax = NAN;
    expect_fail(&p, path, HPT_ERR_ARG, "NaN ymax");
    p.ymax = 0;
    p.width = 50;
    expect_fail(&p, path, HPT_ERR_ARG, "width 50");
    p.width = 100000;
    expect_fail(&p, path, HPT_ERR_ARG, "width 100000");
    p.width = 0;
    p.nbands = 1;
    expect_fail(&p, path, HPT_ERR_ARG, "nbands without bands");
    p.nbands = 0;
    double wide[2] = { -1e308, 1e308 };
    s13[0].y = wide;
    expect_fail(&p, path, HPT_ERR_ARG, "y range overflows");
    s13[0].y = y;

    /* The directory does not exist: the temporary file cannot be created.
     * (A read-only directory would not do: tests may run as root.) */
    expect_fail(&p, "/nonexistent-hpt-dir/sub/chart", HPT_ERR_IO, "unwritable path");
    CHECK(strstr(hpt_errmsg(), "nonexistent-hpt-dir") != NULL, "unwritable path: message '%s' lacks the path", hpt_errmsg());
    /* nothing written by the failed calls */
    struct stat sb;
    CHECK(stat(file_of("bad", ".svg"), &sb) != 0 && stat(file_of("bad", ".png"), &sb) != 0, "a failed call wrote files");
}

/* No temporary file survives (the writes are tmp + rename). */
static void check_no_tmp(void) {
    DIR *d = opendir(g_dir);
    if (!d) { CHECK(0, "cannot list %s", g_dir); return; }
    struct dirent *e;
    int stray = 0;
    while ((e = readdir(d)) != NULL) stray += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    CHECK(stray == 0, "%d temporary files left in %s", stray, g_dir);
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    const char *keep = getenv("HPT_PLOT_KEEP");
    if (keep && *keep) {
        snprintf(g_dir, sizeof g_dir, "%s", keep);
        if (hpt_mkdir_p(g_dir) != HPT_OK) { fprintf(stderr, "%s\n", hpt_errmsg()); return 2; }
    } else {
        snprintf(g_dir, sizeof g_dir, "/tmp/hpt_test_plot.XXXXXX");
        if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 2; }
    }
    printf("chart\n");
    test_chart();
    printf("degenerate inputs\n");
    test_degenerate();
    printf("errors\n");
    test_errors();
    check_no_tmp();
    if (!(keep && *keep)) remove_dir(g_dir);
    return TEST_REPORT("test_plot");
}
