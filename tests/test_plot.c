/* tier: fast (make test; tests/run.sh) */
/*
 * test_plot.c — the chart writer (cli/plot.c), read back as a viewer
 * would: the PNG through cairo's own PNG reader (size, the series' palette
 * colors present, the Predict-band tint where the bands are, a white
 * background), the SVG through a small XML well-formedness check plus its
 * <title>/<desc> metadata (the legend entries, escaped). Then degenerate
 * inputs (no series, one point, all NaN, a clipping y range, extreme
 * magnitudes, the smallest and a large size) must still give both files, and
 * bad arguments and an unwritable path must give an error naming the path,
 * leaving no file behind.
 *
 * Files go to a mkdtemp directory under /tmp, removed at the end. With
 * HPT_PLOT_KEEP=DIR they go to DIR and stay, to look at them.
 */
#include "../cli/plot.h"
#include "../src/base/base.h"
#include "test.h"

#include <cairo.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[4096];

static const char *path_of(const char *base, const char *ext) {
    static char buf[4][4400];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s%s", g_dir, base, ext);
    return p;
}

/* ---------------------------------------------------------------- readers */

/* The PNG as a cairo image (NULL, after a failed CHECK, when unreadable or
 * not W x H). */
static cairo_surface_t *read_png(const char *base, int W, int H) {
    cairo_surface_t *s = cairo_image_surface_create_from_png(path_of(base, ".png"));
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        CHECK(0, "%s.png: %s", base, cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return NULL;
    }
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    CHECK(w == W && h == H, "%s.png is %d x %d, want %d x %d", base, w, h, W, H);
    if (w == W && h == H) return s;
    cairo_surface_destroy(s);
    return NULL;
}

static uint32_t pixel(cairo_surface_t *s, int x, int y) {
    const unsigned char *row = cairo_image_surface_get_data(s) + (size_t)y * cairo_image_surface_get_stride(s);
    uint32_t v;
    memcpy(&v, row + 4 * (size_t)x, 4);
    return v & 0xFFFFFF;   /* cairo's native xRGB */
}

static long count_color(cairo_surface_t *s, uint32_t rgb) {
    long n = 0;
    for (int y = 0; y < cairo_image_surface_get_height(s); y++)
        for (int x = 0; x < cairo_image_surface_get_width(s); x++) n += pixel(s, x, y) == rgb;
    return n;
}

static char *read_text(const char *path) {
    unsigned char *buf;
    size_t n;
    if (hpt_read_file(path, &buf, &n) != HPT_OK) { CHECK(0, "cannot read %s: %s", path, hpt_errmsg()); return NULL; }
    char *s = realloc(buf, n + 1);
    if (!s) { free(buf); return NULL; }
    s[n] = 0;
    return s;
}

/* XML well-formedness, enough for what cairo and plot.c write: one root,
 * every start tag closed by the matching end tag, no raw '<' in text,
 * every '&' an entity. Returns 1 when well formed. */
static int xml_ok(const char *s) {
    char stack[64][64];
    int depth = 0, roots = 0;
    if (strncmp(s, "<?xml", 5) != 0) return 0;
    while (*s) {
        if (*s == '&') {
            const char *e = strchr(s, ';');
            if (!e || e - s > 8 || strspn(s + 1, "#abcdefghijklmnopqrstuvwxyz0123456789") != (size_t)(e - s - 1)) return 0;
            s = e + 1;
        } else if (*s != '<') {
            s++;
        } else if (s[1] == '?' || s[1] == '!') {   /* declaration or comment */
            const char *e = strstr(s, s[1] == '?' ? "?>" : ">");
            if (!e) return 0;
            s = e + 1;
        } else {
            int close = s[1] == '/';
            const char *name = s + 1 + close, *e = strchr(s, '>');
            size_t n = strcspn(name, " \t\n/>");
            if (!e || n == 0 || n >= 64 || memchr(s + 1, '<', (size_t)(e - s - 1))) return 0;
            if (close) {
                if (depth == 0 || strlen(stack[depth - 1]) != n || strncmp(stack[depth - 1], name, n) != 0) return 0;
                depth--;
            } else if (e[-1] != '/') {
                if (depth == 64) return 0;
                roots += depth == 0;
                memcpy(stack[depth], name, n);
                stack[depth++][n] = 0;
            }
            s = e + 1;
        }
    }
    return depth == 0 && roots == 1;
}

/* Writes p as base.svg/.png and checks both; returns the PNG (caller
 * destroys) or NULL, and the SVG text in *svg when svg is not NULL. */
static cairo_surface_t *write_and_read(const hpt_plot *p, const char *base, int W, int H, char **svg) {
    hpt_status st = hpt_plot_write(p, path_of(base, ""));
    CHECK(st == HPT_OK, "%s: hpt_plot_write: %s", base, hpt_errmsg());
    char *text = read_text(path_of(base, ".svg"));
    if (text) CHECK(xml_ok(text), "%s.svg is not well-formed XML", base);
    if (svg) *svg = text;
    else free(text);
    return read_png(base, W, H);
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
    p.title = "GPT-2 tiny \xFF\xFE loss";   /* malformed UTF-8: drawn as '?', not a cairo error */
    p.xlabel = "step";
    p.ylabel = "loss / lr\xC3\x97" "1000";   /* UTF-8 multiplication sign */
    p.series = s; p.nseries = 3;
    p.bands = bands; p.nbands = 2; p.band_label = "predict phase";
    p.hline = 1.5; p.hline_label = "target 1.5";
    CHECK(!xml_ok("<?xml?><svg><g></svg></g>") && !xml_ok("<?xml?><svg>a & b</svg>"), "xml_ok accepts bad XML");
    char *svg = NULL;
    cairo_surface_t *im = write_and_read(&p, "chart", 800, 500, &svg);   /* 0 x 0: the default size */
    if (im) {
        /* every series is drawn at full coverage along its centre: far more
         * pixels of its exact color than its legend swatch has */
        for (int i = 0; i < 3; i++) {
            long n = count_color(im, hpt_plot_color(i));
            CHECK(n >= 150, "series %d: %ld pixels of #%06x", i, n, (unsigned)hpt_plot_color(i));
        }
        long white = count_color(im, 0xFFFFFF);
        CHECK(white * 2 > 800L * 500, "background: only %ld pixels white", white);
        CHECK(pixel(im, 2, 2) == 0xFFFFFF && pixel(im, 797, 497) == 0xFFFFFF, "corners are not white");
        /* the bands span 110 of 400 steps: on a row low in the plot, where
         * no curve runs, about 200 columns carry the indigo tint */
        int tinted = 0;
        for (int x = 0; x < 800; x++) {
            uint32_t c = pixel(im, x, 400);
            int r = c >> 16, g = c >> 8 & 255, b = c & 255;
            tinted += r < 245 && r > 200 && b > r + 5 && b > g;
        }
        CHECK(tinted > 150 && tinted < 260, "band tint on %d columns of row 400, want about 200", tinted);
        cairo_surface_destroy(im);
    }
    if (svg) {
        CHECK(strstr(svg, "<title>GPT-2 tiny ?? loss</title>") != NULL, "SVG <title> missing or not cleaned");
        CHECK(strstr(svg, "\nlegend: train loss\n") != NULL, "SVG <desc> lacks 'train loss'");
        CHECK(strstr(svg, "\nlegend: val &amp; &lt;held-out&gt; \"loss\"\n") != NULL, "SVG <desc> lacks the escaped val name");
        CHECK(strstr(svg, "\nlegend: predict phase\nlegend: target 1.5</desc>") != NULL, "SVG <desc> lacks band/hline");
        CHECK(strstr(svg, "y axis: loss / lr\xC3\x97" "1000") != NULL, "SVG lost the UTF-8 y label");
        CHECK(strstr(svg, "width=\"800px\" height=\"500px\"") != NULL, "SVG size is not 800 x 500 px");
        CHECK(strstr(svg, "stroke-dasharray") != NULL, "the dashed series is not dashed in the SVG");
    }
    free(svg);
}

/* ---------------------------------------------------------------- degenerate */

static void test_degenerate(void) {
    hpt_plot p;
    cairo_surface_t *im;

    hpt_plot_init(&p);   /* no series at all, a title only */
    p.title = "empty";
    if ((im = write_and_read(&p, "empty", 800, 500, NULL))) cairo_surface_destroy(im);

    double one_x = 3, one_y = 0.25;   /* one point: a dot (no name: no legend swatch) */
    hpt_plot_series one = { NULL, &one_x, &one_y, 1, 0 };
    p.series = &one; p.nseries = 1;
    if ((im = write_and_read(&p, "one", 800, 500, NULL))) {
        CHECK(count_color(im, hpt_plot_color(0)) >= 5, "one point: no dot");
        cairo_surface_destroy(im);
    }

    /* All NaN/Inf and an empty series: nothing drawn in their colors; the
     * bands set the x range. At a custom size. */
    double nx[3] = { 0, 1, 2 }, ny[3] = { NAN, INFINITY, -INFINITY };
    hpt_plot_series nan_s[2] = { { "nan", nx, ny, 3, 0 }, { "empty", NULL, NULL, 0, 0 } };
    hpt_plot_band band = { 10, 20 };
    hpt_plot_init(&p);
    p.series = nan_s; p.nseries = 2;
    p.bands = &band; p.nbands = 1; p.band_label = "band";
    p.width = 640; p.height = 400;
    if ((im = write_and_read(&p, "nan", 640, 400, NULL))) {
        /* only the legend swatches: a 2 px line 24 px long each */
        CHECK(count_color(im, hpt_plot_color(0)) < 60 && count_color(im, hpt_plot_color(1)) < 60, "all-NaN: a line drawn");
        cairo_surface_destroy(im);
    }

    /* A user y range that cuts the curve (1e300 must not break cairo's
     * fixed-point coordinates), constant data, tiny and huge magnitudes,
     * the smallest and a large size. */
    double ux[5] = { 0, 1, 2, 3, 4 }, uy[5] = { 0.5, 5, 1e300, 0.5, 0.6 }, cy[5] = { 2, 2, 2, 2, 2 };
    double tyv[3] = { 1e-12, 3e-12, 2e-12 }, hyv[3] = { 1e12, 3e12, 2e12 };
    hpt_plot_series cut = { "cut", ux, uy, 5, 0 }, flat = { "flat", ux, cy, 5, 0 };
    hpt_plot_series tiny = { "tiny", NULL, tyv, 3, 0 }, huge = { "huge", NULL, hyv, 3, 0 };
    struct { const char *name; hpt_plot_series *s; int W, H; double ymin, ymax; } cases[] = {
        { "cut", &cut, 800, 500, 0, 1 }, { "flat", &flat, 800, 500, 0, 0 },
        { "tiny", &tiny, 160, 120, 0, 0 }, { "huge", &huge, 1600, 1000, 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hpt_plot_init(&p);
        p.title = cases[i].name; p.xlabel = "step"; p.ylabel = "value";
        p.series = cases[i].s; p.nseries = 1;
        p.width = cases[i].W; p.height = cases[i].H; p.ymin = cases[i].ymin; p.ymax = cases[i].ymax;
        if ((im = write_and_read(&p, cases[i].name, cases[i].W, cases[i].H, NULL))) {
            CHECK(count_color(im, hpt_plot_color(0)) >= 20, "%s: line not drawn", cases[i].name);
            cairo_surface_destroy(im);
        }
    }
}

/* ---------------------------------------------------------------- errors */

static void expect_fail(const hpt_plot *p, const char *path, hpt_status want, const char *what) {
    hpt_status st = hpt_plot_write(p, path);
    CHECK(st == want, "%s: status %s, want %s", what, hpt_status_str(st), hpt_status_str(want));
    CHECK(hpt_errmsg()[0] != 0, "%s: no message", what);
}

static void test_errors(void) {
    double y[2] = { 1, 2 }, wide[2] = { -1e308, 1e308 };
    hpt_plot_series sover[HPT_PLOT_MAX_SERIES + 1];   /* one over the limit */
    for (int i = 0; i <= HPT_PLOT_MAX_SERIES; i++) sover[i] = (hpt_plot_series){ "s", NULL, y, 2, 0 };
    hpt_plot p;
    const char *path = path_of("bad", "");
    /* each case changes one thing from a valid plot and puts it back */
    expect_fail(NULL, path, HPT_ERR_ARG, "NULL plot");
    hpt_plot_init(&p);
    expect_fail(&p, NULL, HPT_ERR_ARG, "NULL path");
    p.series = sover; p.nseries = HPT_PLOT_MAX_SERIES + 1;
    expect_fail(&p, path, HPT_ERR_ARG, "17 series");
    p.nseries = 1;
    sover[0].n = -1;
    expect_fail(&p, path, HPT_ERR_ARG, "negative n");
    sover[0].n = 2; sover[0].y = NULL;
    expect_fail(&p, path, HPT_ERR_ARG, "NULL y");
    sover[0].y = wide;
    expect_fail(&p, path, HPT_ERR_ARG, "y range overflows");
    sover[0].y = y;
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

    /* The directory does not exist: the temporary file cannot be created.
     * (A read-only directory would not do: tests may run as root.) */
    expect_fail(&p, "/nonexistent-hpt-dir/sub/chart", HPT_ERR_IO, "unwritable path");
    CHECK(strstr(hpt_errmsg(), "/nonexistent-hpt-dir/sub/chart.svg") != NULL, "unwritable path: message '%s' lacks the path",
          hpt_errmsg());
    struct stat sb;
    CHECK(stat(path_of("bad", ".svg"), &sb) != 0 && stat(path_of("bad", ".png"), &sb) != 0, "a failed call wrote files");
}

/* No temporary file survives (the writes are tmp + rename); removes the
 * directory unless kept. */
static void check_no_tmp(int remove) {
    DIR *d = opendir(g_dir);
    if (!d) { CHECK(0, "cannot list %s", g_dir); return; }
    struct dirent *e;
    int stray = 0;
    while ((e = readdir(d)) != NULL) {
        stray += strstr(e->d_name, ".tmp.") != NULL;
        if (remove && e->d_name[0] != '.') unlink(path_of(e->d_name, ""));
    }
    closedir(d);
    CHECK(stray == 0, "%d temporary files left in %s", stray, g_dir);
    if (remove) rmdir(g_dir);
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
    check_no_tmp(!(keep && *keep));
    return TEST_REPORT("test_plot");
}
