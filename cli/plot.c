/*
 * plot.c — the line charts of plot.h, drawn with cairo.
 *
 * Design. layout_compute() turns an hpt_plot into geometry once: data
 * ranges, ticks and their labels, the margins those labels need (measured
 * in the real font), the plot rectangle and the legend box, put in the
 * corner of the plot where it hides the least data. draw_chart() then paints
 * that layout on a cairo context, and hpt_plot_write runs it twice: on an
 * SVG surface and on an RGB image surface saved as PNG, so the two files are
 * the same figure.
 *
 * Text. DejaVu Sans through cairo's toy font API, with hinted metrics off so
 * that text measures the same on both surfaces (cairo's SVG surface turns
 * them off anyway). Labels are made valid UTF-8 first: cairo refuses a
 * malformed string and would put the whole drawing into an error state.
 *
 * SVG metadata. Cairo writes text as glyph outlines, not <text>, so the SVG
 * also gets a <title> (the chart title) and a <desc> that lists the axes and
 * the legend entries one per line ("legend: val loss"): a reader, a screen
 * reader or a test can find what the chart shows without OCR.
 *
 * Coordinates are pixels, origin top left, y down. Rules (grid, ticks,
 * frame) sit on pixel centres (n + 0.5) so that 1 px lines are crisp in the
 * PNG; curves are anti-aliased by cairo.
 */
#include "plot.h"
#include "../src/base/base.h"

#include <cairo.h>
#include <cairo-svg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ style */

/* Okabe-Ito (minus yellow, which vanishes on white), then Paul Tol's
 * "muted" set (minus its pale sand and cyan): distinguishable under the
 * common color vision deficiencies, and dark enough for 2 px lines on
 * white; the last two (Tol's dark brown, and steel blue) take the 15th
 * and 16th series, which the dashes tell apart as well. */
static const uint32_t palette[HPT_PLOT_MAX_SERIES] = {
    0x0072B2, /* blue */
    0xE69F00, /* orange */
    0x009E73, /* bluish green */
    0xD55E00, /* vermillion */
    0xCC79A7, /* reddish purple */
    0x56B4E9, /* sky blue */
    0x000000, /* black */
    0x332288, /* indigo */
    0x117733, /* green */
    0x882255, /* wine */
    0x999933, /* olive */
    0x44AA99, /* teal */
    0xCC6677, /* rose */
    0xAA4499, /* purple */
    0x661100, /* dark brown */
    0x6699CC, /* steel blue */
};

#define COL_BG     0xFFFFFFu
#define COL_TEXT   0x222222u
#define COL_FRAME  0x555555u
#define COL_GRID   0xE3E3E3u
#define COL_HLINE  0x444444u
#define COL_LEGEND 0xBBBBBBu   /* legend border */
#define COL_BAND   0x332288u   /* bands: indigo at 10% over what is below, a tint the grey grid lines do not have */
#define BAND_ALPHA 0.10
#define LEGEND_ALPHA 0.85      /* legend fill: white at 85%, so curves show through faintly */
#define FONT "DejaVu Sans"

/* Sizes in pixels of an 800 x 500 chart; they grow with the scale (L->s) so
 * that a large chart keeps its proportions. */
#define FS_TICK 11.0
#define FS_LABEL 12.0          /* axis labels and legend */
#define FS_TITLE 15.0
#define LINE_W 2.0             /* series */
#define DOT_R 2.5              /* radius of a lone point */
#define DASH_ON 8.0            /* dashed series: 8 px on, 5 px off */
#define DASH_OFF 5.0
#define HLINE_W 1.5            /* reference line: 1.5 px, 6 on 4 off */
#define HLINE_ON 6.0
#define HLINE_OFF 4.0
#define TICK_LEN 5.0
#define SWATCH 24.0            /* legend sample line */
#define MAX_TICKS 24
#define MAX_TEXT 256           /* bytes kept of a label */

#ifdef __SANITIZE_ADDRESS__
/* LeakSanitizer: fontconfig, under cairo's toy font API, keeps what it
 * allocates for the life of the process (not a leak of hpt's). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }   /* stderr stays the program's */
#endif

uint32_t hpt_plot_color(int i) {
    int k = i % HPT_PLOT_MAX_SERIES;
    return palette[k < 0 ? k + HPT_PLOT_MAX_SERIES : k];
}

void hpt_plot_init(hpt_plot *p) {
    memset(p, 0, sizeof *p);
    p->hline = NAN;
}

/* ------------------------------------------------------------ text */

/* Length of the valid UTF-8 character at s, or 0 when it is malformed (stray
 * continuation byte, overlong form, surrogate, beyond U+10FFFF, cut short).
 * A continuation check fails on the NUL, so it never reads past the end. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0)      { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    return v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? 0 : len;
}

/* Copies s (NULL: "") into out[MAX_TEXT] as text cairo and XML accept:
 * malformed bytes become '?', control characters spaces; cut at a
 * character boundary. */
static void clean_text(char *out, const char *s) {
    size_t o = 0;
    for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u;) {
        int len = utf8_len(u);
        if (o + (len ? len : 1) >= MAX_TEXT) break;
        if (len == 0) { out[o++] = '?'; u++; continue; }
        if (len == 1) out[o++] = *u < 0x20 || *u == 0x7F ? ' ' : (char)*u;
        else memcpy(out + o, u, (size_t)len), o += (size_t)len;
        u += len;
    }
    out[o] = 0;
}

/* Hinted metrics off: advances are the font's own, the same on the image
 * and the SVG surface, so the layout measured once fits both. */
static void set_font(cairo_t *cr, double size) {
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
}

static double text_width(cairo_t *cr, double size, const char *s) {
    cairo_text_extents_t e;
    set_font(cr, size);
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* Height of a line of text (ascent + descent) and its ascent. */
static double line_height(cairo_t *cr, double size, double *ascent) {
    cairo_font_extents_t e;
    set_font(cr, size);
    cairo_font_extents(cr, &e);
    if (ascent) *ascent = e.ascent;
    return e.ascent + e.descent;
}

/* Draws s with its line box's top at `top`; align 0 left, 0.5 centred,
 * 1 right of x. */
static void text_at(cairo_t *cr, double size, const char *s, double x, double top, double align) {
    double asc;
    line_height(cr, size, &asc);
    cairo_move_to(cr, x - align * text_width(cr, size, s), top + asc);
    cairo_show_text(cr, s);
}

/* ------------------------------------------------------------ layout */

typedef struct axis {
    double lo, hi;                 /* data range shown, lo < hi */
    int nticks;
    double tick[MAX_TICKS];        /* (nticks,) ascending values */
    char label[MAX_TICKS][32];     /* (nticks,) formatted values */
    double label_w;                /* widest label, pixels */
} axis;

enum { LEG_SERIES, LEG_BAND, LEG_HLINE };
typedef struct legend_entry { int kind, series; char text[MAX_TEXT]; } legend_entry;

typedef struct layout {
    const hpt_plot *p;
    int W, H;                 /* image size, pixels */
    double s;                 /* size scale: 1 at 800 x 500 */
    double fs_tick, fs_label, fs_title;
    char title[MAX_TEXT], xlabel[MAX_TEXT], ylabel[MAX_TEXT];
    int x0, y0, x1, y1;       /* plot area: columns [x0, x1), rows [y0, y1) */
    axis x, y;
    int hline_on;             /* a finite hline inside the y range */
    int nleg;
    legend_entry leg[HPT_PLOT_MAX_SERIES + 2];   /* (nleg,) */
    double lx, ly, lw, lh;    /* legend box, pixels */
    double lrow;              /* legend row height */
} layout;

/* Data to pixels. The x range maps onto [x0, x1] and the y range onto
 * [y1, y0] (up is smaller y). Clamped far outside the image but inside
 * cairo's fixed-point range, so that an extreme value under a user-given
 * y range stays drawable; the clip then cuts it, with a negligible change
 * of slope. */
static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }
static double map_x(const layout *L, double v) {
    return clampd(L->x0 + (v - L->x.lo) / (L->x.hi - L->x.lo) * (L->x1 - L->x0), -1e5, 1e5);
}
static double map_y(const layout *L, double v) {
    return clampd(L->y1 - (v - L->y.lo) / (L->y.hi - L->y.lo) * (L->y1 - L->y0), -1e5, 1e5);
}
/* The pixel centre of the 1 px rule for a value, kept inside the plot area
 * so that the rule at the top of the range is not drawn on the frame. */
static double rule_x(const layout *L, double v) { return clampd(floor(map_x(L, v)), L->x0, L->x1 - 1) + 0.5; }
static double rule_y(const layout *L, double v) { return clampd(floor(map_y(L, v)), L->y0, L->y1 - 1) + 0.5; }

static double point_x(const hpt_plot_series *s, int i) { return s->x ? s->x[i] : (double)i; }
static int point_ok(const hpt_plot_series *s, int i) {
    return isfinite(point_x(s, i)) && isfinite(s->y[i]);
}

/* Widens [lo, hi] into a range the axis can show. No data (lo > hi, as left
 * by the min/max scan): 0..1. Constant data, or a spread below what tick
 * labels can resolve: +-10% around it (+-1 around 0). Otherwise add margin
 * (a fraction of the span) on each side. */
static hpt_status fix_range(double *lo, double *hi, double margin, const char *name) {
    if (!(*lo <= *hi)) { *lo = 0; *hi = 1; return HPT_OK; }
    double span = *hi - *lo, mag = fmax(fabs(*lo), fabs(*hi));
    if (!isfinite(span) || mag > 1e300)
        return hpt_fail(HPT_ERR_ARG, "plot: %s values span too wide a range (%g to %g)", name, *lo, *hi);
    if (span <= mag * 1e-9 || mag < 1e-200) {
        double mid = *lo + span / 2, d = mag >= 1e-200 ? mag * 0.1 : 1.0;
        *lo = mid - d;
        *hi = mid + d;
    } else {
        *lo -= span * margin;
        *hi += span * margin;
    }
    return HPT_OK;
}

/* A tick step is m * 10^k with m in {1, 2, 5}. Dividing for negative k
 * gives 0.3 for 3 * 10^-1, where multiplying by 0.1 would not. */
static double step_value(long long i, int m, int k) {
    return k >= 0 ? (double)(i * m) * pow(10, k) : (double)(i * m) / pow(10, -k);
}
static void next_step(int *m, int *k) {
    if (*m == 1) *m = 2;
    else if (*m == 2) *m = 5;
    else { *m = 1; (*k)++; }
}

/* Labels: fixed point with as many decimals as the step needs, unless the
 * values are large or the step tiny; then a mantissa with the decimals the
 * step needs and a short exponent ("2.5e-8", "1.0e12"), the same number of
 * decimals on every tick so the column reads evenly. */
static void format_tick(char *buf, size_t size, double v, int k, double mag) {
    if (mag < 1e7 && k >= -6) {
        snprintf(buf, size, "%.*f", k < 0 ? -k : 0, v);
        return;
    }
    if (v == 0) { snprintf(buf, size, "0"); return; }
    int dec = (int)floor(log10(mag)) - k;
    dec = dec < 0 ? 0 : dec > 12 ? 12 : dec;
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.*e", dec, v);
    /* printf writes e+07 / e-08: drop the '+' and the leading zeros */
    char ex[16];
    const char *e = strchr(tmp, 'e');
    snprintf(ex, sizeof ex, "e%d", e ? atoi(e + 1) : 0);
    size_t nm = e ? (size_t)(e - tmp) : strlen(tmp), ne = strlen(ex);
    if (nm + ne >= size) { snprintf(buf, size, "?"); return; }   /* not at 12 decimals in 32 bytes */
    memcpy(buf, tmp, nm);
    memcpy(buf + nm, ex, ne + 1);
}

/* Fills a->tick/label for [a->lo, a->hi] with about `target` ticks, then
 * widens the step until the labels fit in extent pixels (a label's width
 * plus a gap across, or twice the text height up). Stops widening at 2
 * ticks, which always fit on a chart of the minimum size. */
static void make_ticks(cairo_t *m, const layout *L, axis *a, int target, double extent, int across) {
    double span = a->hi - a->lo;
    int k = (int)floor(log10(span / target));
    double f = span / target / pow(10, k);   /* in [1, 10) up to rounding */
    int mm = f <= 1.0 ? 1 : f <= 2.0 ? 2 : f <= 5.0 ? 5 : 10;
    if (mm == 10) { mm = 1; k++; }
    for (int tries = 0; tries < 64; tries++) {
        double step = step_value(1, mm, k);
        long long i0 = (long long)ceil(a->lo / step - 1e-9), i1 = (long long)floor(a->hi / step + 1e-9);
        long long n = i1 - i0 + 1;
        if (n > MAX_TICKS) { next_step(&mm, &k); continue; }
        a->nticks = (int)(n < 0 ? 0 : n);
        double mag = 0;
        for (int t = 0; t < a->nticks; t++) {
            a->tick[t] = step_value(i0 + t, mm, k);
            mag = fmax(mag, fabs(a->tick[t]));
        }
        a->label_w = 0;
        for (int t = 0; t < a->nticks; t++) {
            format_tick(a->label[t], sizeof a->label[t], a->tick[t], k, mag > 0 ? mag : step);
            a->label_w = fmax(a->label_w, text_width(m, L->fs_tick, a->label[t]));
        }
        double need = across ? a->label_w + 12 * L->s : 2 * line_height(m, L->fs_tick, NULL) + 8;
        if (n <= 2 || need * (double)n <= extent) return;
        next_step(&mm, &k);
    }
}

static hpt_status check_plot(const hpt_plot *p) {
    if (p->nseries < 0 || p->nseries > HPT_PLOT_MAX_SERIES)
        return hpt_fail(HPT_ERR_ARG, "plot: %d series (at most %d)", p->nseries, HPT_PLOT_MAX_SERIES);
    if (p->nseries > 0 && !p->series) return hpt_fail(HPT_ERR_ARG, "plot: nseries = %d but series is NULL", p->nseries);
    for (int i = 0; i < p->nseries; i++) {
        const hpt_plot_series *s = &p->series[i];
        if (s->n < 0) return hpt_fail(HPT_ERR_ARG, "plot: series %d has n = %d", i, s->n);
        if (s->n > 0 && !s->y) return hpt_fail(HPT_ERR_ARG, "plot: series %d has n = %d but y is NULL", i, s->n);
    }
    if (p->nbands < 0 || (p->nbands > 0 && !p->bands))
        return hpt_fail(HPT_ERR_ARG, "plot: nbands = %d with bands %s", p->nbands, p->bands ? "set" : "NULL");
    if (p->width < 0 || (p->width > 0 && p->width < 160) || p->width > HPT_PLOT_MAX_SIDE ||
        p->height < 0 || (p->height > 0 && p->height < 120) || p->height > HPT_PLOT_MAX_SIDE)
        return hpt_fail(HPT_ERR_ARG, "plot: size %d x %d (want 160..%d x 120..%d, or 0 for 800 x 500)",
                        p->width, p->height, HPT_PLOT_MAX_SIDE, HPT_PLOT_MAX_SIDE);
    if (p->ymin != 0 || p->ymax != 0) {
        double span = p->ymax - p->ymin, mag = fmax(fabs(p->ymin), fabs(p->ymax));
        if (!isfinite(p->ymin) || !isfinite(p->ymax) || !(p->ymin < p->ymax) || !isfinite(span) ||
            mag > 1e300 || span <= mag * 1e-9)
            return hpt_fail(HPT_ERR_ARG, "plot: bad y range [%g, %g] (want finite ymin < ymax, or both 0 for auto)",
                            p->ymin, p->ymax);
    }
    return HPT_OK;
}

/* The x and y ranges: the drawn points (and the reference line), or the
 * caller's y range. Bands set the x range only when there is no data; with
 * data they are clipped to it, so an open-ended phase does not stretch the
 * axis. */
static hpt_status data_ranges(const hpt_plot *p, layout *L) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < p->nseries; i++) {
        const hpt_plot_series *se = &p->series[i];
        for (int j = 0; j < se->n; j++) {
            if (!point_ok(se, j)) continue;
            double xv = point_x(se, j), yv = se->y[j];
            xlo = fmin(xlo, xv); xhi = fmax(xhi, xv);
            ylo = fmin(ylo, yv); yhi = fmax(yhi, yv);
        }
    }
    if (!(xlo <= xhi)) {
        for (int i = 0; i < p->nbands; i++) {
            const hpt_plot_band *b = &p->bands[i];
            if (!isfinite(b->x0) || !isfinite(b->x1)) continue;
            xlo = fmin(xlo, fmin(b->x0, b->x1));
            xhi = fmax(xhi, fmax(b->x0, b->x1));
        }
    }
    HPT_TRY(fix_range(&xlo, &xhi, 0.0, "x"));   /* x tight: curves start and end at the frame */
    L->x.lo = xlo; L->x.hi = xhi;
    if (p->ymin != 0 || p->ymax != 0) {
        L->y.lo = p->ymin; L->y.hi = p->ymax;
    } else {
        if (isfinite(p->hline)) { ylo = fmin(ylo, p->hline); yhi = fmax(yhi, p->hline); }
        HPT_TRY(fix_range(&ylo, &yhi, 0.05, "y"));
        L->y.lo = ylo; L->y.hi = yhi;
    }
    L->hline_on = isfinite(p->hline) && p->hline >= L->y.lo && p->hline <= L->y.hi;
    return HPT_OK;
}

/* The plot rectangle inside the margins that title, tick labels and axis
 * labels need, and the ticks themselves. */
static hpt_status plot_area(cairo_t *m, layout *L) {
    double lh_tick = line_height(m, L->fs_tick, NULL), lh_label = line_height(m, L->fs_label, NULL);
    double top = 10 * L->s + (L->title[0] ? line_height(m, L->fs_title, NULL) + 8 * L->s : 0);
    double bottom = 1 + TICK_LEN * L->s + 3 + lh_tick + (L->xlabel[0] ? 4 + lh_label : 0) + 6 * L->s;
    L->y0 = (int)ceil(top);
    L->y1 = L->H - (int)ceil(bottom);
    if (L->y1 - L->y0 < 40) return hpt_fail(HPT_ERR_ARG, "plot: height %d leaves no room for the plot", L->H);
    int ty = (L->y1 - L->y0) / (int)(50 * L->s);
    make_ticks(m, L, &L->y, ty < 3 ? 3 : ty, L->y1 - L->y0, 0);

    /* Horizontal: y label (rotated), y tick labels, plot, room for half of
     * the last x tick label. The x ticks depend on the plot width, whose
     * right margin depends on the x labels: two passes settle it. */
    double left = 8 * L->s + (L->ylabel[0] ? lh_label + 6 * L->s : 0) + L->y.label_w + 4 + TICK_LEN * L->s + 1;
    double right = 16 * L->s;
    for (int pass = 0; pass < 2; pass++) {
        L->x0 = (int)ceil(left);
        L->x1 = L->W - (int)ceil(right);
        if (L->x1 - L->x0 < 40) return hpt_fail(HPT_ERR_ARG, "plot: width %d leaves no room for the plot", L->W);
        int tx = (L->x1 - L->x0) / (int)(90 * L->s);
        make_ticks(m, L, &L->x, tx < 3 ? 3 : tx > 12 ? 12 : tx, L->x1 - L->x0, 1);
        double need = 0;
        if (L->x.nticks > 0) {
            const char *last = L->x.label[L->x.nticks - 1];
            need = rule_x(L, L->x.tick[L->x.nticks - 1]) + text_width(m, L->fs_tick, last) / 2 + 4 - L->W;
        }
        if (need <= 0) break;
        right += need;
    }
    return HPT_OK;
}

/* How much of the data a legend box at (bx, by) would hide: the points of
 * every series, and samples along its segments every ~2 px, inside the box
 * (grown by 3 px), plus the reference line if it crosses the box. */
static double legend_cover(const layout *L, double bx, double by) {
    double ax0 = bx - 3, ax1 = bx + L->lw + 3, ay0 = by - 3, ay1 = by + L->lh + 3, n = 0;
    for (int i = 0; i < L->p->nseries; i++) {
        const hpt_plot_series *se = &L->p->series[i];
        double px = 0, py = 0;
        int prev = 0;
        for (int j = 0; j < se->n; j++) {
            if (!point_ok(se, j)) { prev = 0; continue; }
            double qx = map_x(L, point_x(se, j)), qy = map_y(L, se->y[j]);
            int k = prev ? 1 + (int)fmin(hypot(qx - px, qy - py) / 2, 1000) : 1;
            for (int t = 1; t <= k; t++) {
                double x = qx + (px - qx) * (k - t) / k * prev, y = qy + (py - qy) * (k - t) / k * prev;
                n += x >= ax0 && x <= ax1 && y >= ay0 && y <= ay1;
            }
            px = qx; py = qy; prev = 1;
        }
    }
    if (L->hline_on && map_y(L, L->p->hline) >= ay0 && map_y(L, L->p->hline) <= ay1) n += L->lw / 2;
    return n;
}

/* Legend entries (series with a name, then the bands, then the reference
 * line), the box's size, and the corner of the plot where it hides least
 * data: top right, top left, bottom right, bottom left, first on a tie. */
static void legend_place(cairo_t *m, layout *L) {
    const hpt_plot *p = L->p;
    for (int i = 0; i < p->nseries; i++)
        if (p->series[i].name && p->series[i].name[0])
            L->leg[L->nleg++] = (legend_entry){ LEG_SERIES, i, "" };
    if (p->band_label && p->band_label[0] && p->nbands > 0) L->leg[L->nleg++] = (legend_entry){ LEG_BAND, -1, "" };
    if (p->hline_label && p->hline_label[0] && L->hline_on) L->leg[L->nleg++] = (legend_entry){ LEG_HLINE, -1, "" };
    double tw = 0;
    for (int i = 0; i < L->nleg; i++) {
        legend_entry *e = &L->leg[i];
        clean_text(e->text, e->kind == LEG_SERIES ? p->series[e->series].name : e->kind == LEG_BAND ? p->band_label
                                                                                                  : p->hline_label);
        tw = fmax(tw, text_width(m, L->fs_label, e->text));
    }
    L->lrow = line_height(m, L->fs_label, NULL) + 3 * L->s;
    L->lw = 8 * L->s + SWATCH * L->s + 6 * L->s + tw + 8 * L->s;
    L->lh = 5 * L->s + L->nleg * L->lrow + 2 * L->s;
    double inset = 8 * L->s, best = INFINITY;
    double xs[2] = { L->x1 - inset - L->lw, L->x0 + inset }, ys[2] = { L->y0 + inset, L->y1 - inset - L->lh };
    for (int c = 0; c < 4 && L->nleg > 0; c++) {
        double bx = fmax(xs[c % 2], L->x0 + 2), by = fmax(ys[c / 2], L->y0 + 2);   /* too big: overflow right, down */
        double cover = legend_cover(L, bx, by);
        if (cover < best) { best = cover; L->lx = bx; L->ly = by; }
    }
}

static hpt_status layout_compute(const hpt_plot *p, layout *L) {
    memset(L, 0, sizeof *L);
    L->p = p;
    L->W = p->width ? p->width : 800;
    L->H = p->height ? p->height : 500;
    L->s = clampd(fmin(L->W / 800.0, L->H / 500.0), 0.8, 4.0);
    L->fs_tick = FS_TICK * L->s; L->fs_label = FS_LABEL * L->s; L->fs_title = FS_TITLE * L->s;
    clean_text(L->title, p->title);
    clean_text(L->xlabel, p->xlabel);
    clean_text(L->ylabel, p->ylabel);
    HPT_TRY(data_ranges(p, L));
    /* text is measured on a scratch context with the fonts both surfaces use */
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
    cairo_t *m = cairo_create(sf);
    hpt_status st = cairo_status(m) == CAIRO_STATUS_SUCCESS
                        ? plot_area(m, L) : hpt_fail(HPT_ERR_NOMEM, "plot: cairo: %s", cairo_status_to_string(cairo_status(m)));
    if (st == HPT_OK) legend_place(m, L);
    cairo_destroy(m);
    cairo_surface_destroy(sf);
    return st;
}

/* ------------------------------------------------------------ drawing */

static void set_color(cairo_t *cr, uint32_t c, double alpha) {
    cairo_set_source_rgba(cr, (c >> 16 & 255) / 255.0, (c >> 8 & 255) / 255.0, (c & 255) / 255.0, alpha);
}

static void series_style(cairo_t *cr, const layout *L, int i) {
    set_color(cr, hpt_plot_color(i), 1);
    cairo_set_line_width(cr, LINE_W * L->s);
    double dash[2] = { DASH_ON * L->s, DASH_OFF * L->s };
    cairo_set_dash(cr, dash, L->p->series[i].dashed ? 2 : 0, 0);
    /* dashed: butt caps, as round caps would lengthen every dash */
    cairo_set_line_cap(cr, L->p->series[i].dashed ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
}

static void hline_style(cairo_t *cr, const layout *L) {
    double dash[2] = { HLINE_ON * L->s, HLINE_OFF * L->s };
    set_color(cr, COL_HLINE, 1);
    cairo_set_line_width(cr, HLINE_W * L->s);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
}

/* Bands as one path filled once, so that overlapping bands do not darken;
 * whole pixel columns, at least one wide, so a band thinner than a pixel
 * still shows and neighbours meet without a seam. */
static void draw_bands(cairo_t *cr, const layout *L) {
    for (int i = 0; i < L->p->nbands; i++) {
        const hpt_plot_band *b = &L->p->bands[i];
        double a = fmin(b->x0, b->x1), c = fmax(b->x0, b->x1);
        if (!isfinite(a) || !isfinite(c) || c < L->x.lo || a > L->x.hi) continue;
        double c0 = floor(map_x(L, fmax(a, L->x.lo)) + 0.5), c1 = floor(map_x(L, fmin(c, L->x.hi)) + 0.5);
        if (c1 <= c0) c1 = c0 + 1;
        cairo_rectangle(cr, c0, L->y0, c1 - c0, L->y1 - L->y0);
    }
    set_color(cr, COL_BAND, BAND_ALPHA);
    cairo_fill(cr);
}

static void draw_grid(cairo_t *cr, const layout *L) {
    for (int t = 0; t < L->x.nticks; t++) {
        cairo_move_to(cr, rule_x(L, L->x.tick[t]), L->y0);
        cairo_line_to(cr, rule_x(L, L->x.tick[t]), L->y1);
    }
    for (int t = 0; t < L->y.nticks; t++) {
        cairo_move_to(cr, L->x0, rule_y(L, L->y.tick[t]));
        cairo_line_to(cr, L->x1, rule_y(L, L->y.tick[t]));
    }
    set_color(cr, COL_GRID, 1);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
}

/* Each unbroken run of finite points is one stroked path; a NaN/Inf point
 * ends it (and restarts the dashes). A run of one point has nothing to
 * stroke and is drawn as a dot. */
static void draw_series(cairo_t *cr, const layout *L, int i) {
    const hpt_plot_series *se = &L->p->series[i];
    series_style(cr, L, i);
    int run = 0;
    double x = 0, y = 0;
    for (int j = 0; j <= se->n; j++) {
        if (j < se->n && point_ok(se, j)) {
            x = map_x(L, point_x(se, j)); y = map_y(L, se->y[j]);
            if (run++) cairo_line_to(cr, x, y);
            else cairo_move_to(cr, x, y);
            continue;
        }
        if (run == 1) {
            cairo_new_path(cr);
            cairo_arc(cr, x, y, DOT_R * L->s, 0, 2 * M_PI);
            cairo_fill(cr);
        } else if (run > 1) {
            cairo_stroke(cr);
        }
        run = 0;
    }
}

/* Bands, grid, reference line and series, clipped to the plot area. */
static void draw_data(cairo_t *cr, const layout *L) {
    cairo_save(cr);
    cairo_rectangle(cr, L->x0, L->y0, L->x1 - L->x0, L->y1 - L->y0);
    cairo_clip(cr);
    draw_bands(cr, L);
    draw_grid(cr, L);
    if (L->hline_on) {
        hline_style(cr, L);
        cairo_move_to(cr, L->x0, map_y(L, L->p->hline));
        cairo_line_to(cr, L->x1, map_y(L, L->p->hline));
        cairo_stroke(cr);
    }
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int i = 0; i < L->p->nseries; i++) draw_series(cr, L, i);
    cairo_restore(cr);
}

/* Frame one pixel outside the plot area, ticks, their labels, the axis
 * labels and the title. */
static void draw_axes(cairo_t *cr, const layout *L) {
    double tl = TICK_LEN * L->s, pw = L->x1 - L->x0, ph = L->y1 - L->y0;
    cairo_rectangle(cr, L->x0 - 0.5, L->y0 - 0.5, pw + 1, ph + 1);
    for (int t = 0; t < L->x.nticks; t++) {
        cairo_move_to(cr, rule_x(L, L->x.tick[t]), L->y1 + 1);
        cairo_rel_line_to(cr, 0, tl);
    }
    for (int t = 0; t < L->y.nticks; t++) {
        cairo_move_to(cr, L->x0 - 1, rule_y(L, L->y.tick[t]));
        cairo_rel_line_to(cr, -tl, 0);
    }
    set_color(cr, COL_FRAME, 1);
    cairo_set_line_width(cr, 1);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_stroke(cr);

    set_color(cr, COL_TEXT, 1);
    double asc, lh_tick = line_height(cr, L->fs_tick, &asc);
    for (int t = 0; t < L->x.nticks; t++)
        text_at(cr, L->fs_tick, L->x.label[t], rule_x(L, L->x.tick[t]), L->y1 + 1 + tl + 3, 0.5);
    for (int t = 0; t < L->y.nticks; t++)   /* centred on the rule by the digits' height, about 0.72 em */
        text_at(cr, L->fs_tick, L->y.label[t], L->x0 - 1 - tl - 4, rule_y(L, L->y.tick[t]) - asc + 0.36 * L->fs_tick, 1);
    if (L->xlabel[0]) text_at(cr, L->fs_label, L->xlabel, L->x0 + pw / 2, L->y1 + 1 + tl + 3 + lh_tick + 4, 0.5);
    if (L->ylabel[0]) {
        cairo_save(cr);
        cairo_translate(cr, 8 * L->s, L->y0 + ph / 2);
        cairo_rotate(cr, -M_PI / 2);   /* reads upwards; the line's top faces the left edge */
        text_at(cr, L->fs_label, L->ylabel, 0, 0, 0.5);
        cairo_restore(cr);
    }
    if (L->title[0]) text_at(cr, L->fs_title, L->title, L->x0 + pw / 2, 10 * L->s, 0.5);
}

/* Translucent white box, then a swatch and a label per row. */
static void draw_legend(cairo_t *cr, const layout *L) {
    if (L->nleg == 0) return;
    cairo_rectangle(cr, floor(L->lx) + 0.5, floor(L->ly) + 0.5, ceil(L->lw), ceil(L->lh));
    set_color(cr, COL_BG, LEGEND_ALPHA);
    cairo_fill_preserve(cr);
    set_color(cr, COL_LEGEND, 1);
    cairo_set_line_width(cr, 1);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_stroke(cr);
    double lh = line_height(cr, L->fs_label, NULL);
    for (int i = 0; i < L->nleg; i++) {
        const legend_entry *e = &L->leg[i];
        double top = L->ly + 5 * L->s + i * L->lrow, mid = top + lh / 2;
        double sx0 = L->lx + 8 * L->s, sx1 = sx0 + SWATCH * L->s;
        if (e->kind == LEG_BAND) {
            cairo_rectangle(cr, sx0, top + 1, sx1 - sx0, lh - 2);
            set_color(cr, COL_BAND, BAND_ALPHA);
            cairo_fill(cr);
        } else {
            if (e->kind == LEG_SERIES) series_style(cr, L, e->series);
            else hline_style(cr, L);
            cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
            cairo_move_to(cr, sx0, mid);
            cairo_line_to(cr, sx1, mid);
            cairo_stroke(cr);
        }
        set_color(cr, COL_TEXT, 1);
        text_at(cr, L->fs_label, e->text, sx1 + 6 * L->s, top, 0);
    }
}

/* The one drawing function: the whole chart on any cairo surface. */
static hpt_status draw_chart(cairo_surface_t *sf, const layout *L) {
    cairo_t *cr = cairo_create(sf);
    set_color(cr, COL_BG, 1);
    cairo_paint(cr);
    draw_data(cr, L);
    draw_axes(cr, L);
    draw_legend(cr, L);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS) return HPT_OK;
    return hpt_fail(cs == CAIRO_STATUS_NO_MEMORY ? HPT_ERR_NOMEM : HPT_ERR_IO, "plot: cairo: %s", cairo_status_to_string(cs));
}

/* ------------------------------------------------------------ files */

static cairo_status_t write_to(void *f, const unsigned char *data, unsigned int n) {
    return fwrite(data, 1, n, f) == n ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static hpt_status cairo_fail(cairo_status_t cs, const char *what) {
    return hpt_fail(cs == CAIRO_STATUS_NO_MEMORY ? HPT_ERR_NOMEM : HPT_ERR_IO, "plot: cannot write the %s: %s", what,
                    cairo_status_to_string(cs));
}

/* XML character data: & < > escaped (the text is already valid UTF-8
 * without control characters). */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
    }
}

/* <title> and <desc> as the first children of <svg>: what the glyph
 * outlines say, as text. */
static void svg_metadata(FILE *f, const layout *L) {
    fputs("\n<title>", f);
    xml_text(f, L->title);
    fputs("</title>\n<desc>x axis: ", f);
    xml_text(f, L->xlabel);
    fputs("\ny axis: ", f);
    xml_text(f, L->ylabel);
    for (int i = 0; i < L->nleg; i++) {
        fputs("\nlegend: ", f);
        xml_text(f, L->leg[i].text);
    }
    fputs("</desc>", f);
}

/* Cairo writes the SVG into memory; it is copied to f with the metadata
 * after the opening <svg ...> tag. */
static hpt_status svg_write(FILE *f, void *ctx) {
    const layout *L = ctx;
    char *buf = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&buf, &n);
    if (!mem) return hpt_fail(HPT_ERR_NOMEM, "plot: cannot allocate the SVG");
    cairo_surface_t *sf = cairo_svg_surface_create_for_stream(write_to, mem, L->W, L->H);
    cairo_svg_surface_set_document_unit(sf, CAIRO_SVG_UNIT_PX);
    hpt_status st = draw_chart(sf, L);
    cairo_surface_finish(sf);
    cairo_status_t cs = cairo_surface_status(sf);
    cairo_surface_destroy(sf);
    if (fclose(mem) != 0 && st == HPT_OK) st = hpt_fail(HPT_ERR_NOMEM, "plot: cannot allocate the SVG");
    if (st == HPT_OK && cs != CAIRO_STATUS_SUCCESS) st = cairo_fail(cs, "SVG");
    const char *svg = st == HPT_OK && buf ? strstr(buf, "<svg") : NULL, *gt = svg ? strchr(svg, '>') : NULL;
    if (st == HPT_OK && !gt) st = hpt_fail(HPT_ERR_IO, "plot: cairo wrote an SVG without an <svg> element");
    if (st == HPT_OK) {
        fwrite(buf, 1, (size_t)(gt + 1 - buf), f);
        svg_metadata(f, L);
        fwrite(gt + 1, 1, n - (size_t)(gt + 1 - buf), f);
        if (ferror(f)) st = hpt_fail(HPT_ERR_IO, "plot: cannot write the SVG");
    }
    free(buf);
    return st;
}

static hpt_status png_write(FILE *f, void *ctx) {
    cairo_status_t cs = cairo_surface_write_to_png_stream(ctx, write_to, f);
    return cs == CAIRO_STATUS_SUCCESS ? HPT_OK : cairo_fail(cs, "PNG");
}

static hpt_status png_save(const layout *L, const char *path) {
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, L->W, L->H);
    hpt_status st = cairo_surface_status(sf) == CAIRO_STATUS_SUCCESS
                        ? draw_chart(sf, L) : hpt_fail(HPT_ERR_NOMEM, "plot: cannot allocate a %d x %d image", L->W, L->H);
    if (st == HPT_OK) st = hpt_save_atomic(path, png_write, sf);
    cairo_surface_destroy(sf);
    return st;
}

/* ------------------------------------------------------------ entry */

hpt_status hpt_plot_write(const hpt_plot *p, const char *path_noext) {
    if (!p || !path_noext || !*path_noext) return hpt_fail(HPT_ERR_ARG, "plot: NULL plot or empty path");
    HPT_TRY(check_plot(p));
    layout *L = malloc(sizeof *L);   /* ~12 KB of label text: not on the stack */
    size_t n = strlen(path_noext);
    char *path = malloc(n + 5);
    hpt_status st = L && path ? layout_compute(p, L) : hpt_fail(HPT_ERR_NOMEM, "plot: out of memory");
    if (st == HPT_OK) {
        memcpy(path, path_noext, n);
        memcpy(path + n, ".svg", 5);
        st = hpt_save_atomic(path, svg_write, L);
    }
    if (st == HPT_OK) {
        memcpy(path + n, ".png", 5);
        st = png_save(L, path);
    }
    free(path);
    free(L);
    return st;
}
