/*
 * plot.c — the line charts of plot.h: one layout, two writers.
 *
 * Design. layout_compute() turns an hpt_plot into pixel geometry once: data
 * ranges, ticks and their labels, the margins those labels need, the plot
 * rectangle and the legend box. The SVG writer and the PNG rasteriser both
 * draw from that layout, so the two files agree to the pixel except for the
 * fonts. Series go through one walker (walk_series) that maps points to
 * pixels, breaks lines at NaN/Inf gaps and clips segments to the plot
 * rectangle, emitting runs: BEGIN, POINT..., END. A run of one point (BEGIN
 * then END) is a lone point and is drawn as a dot. An SVG run is one
 * <polyline>; a PNG run is a chain of anti-aliased segments.
 *
 * Coordinates are pixels, origin top left, y down. Pixel (i, j) covers
 * [i, i+1) x [j, j+1) and the rasteriser samples coverage at its centre, so
 * a 1 px rule on column i in the PNG is the SVG line at x = i + 0.5.
 *
 * PNG. The canvas is the PNG scanline buffer itself, (H, 1 + 3W) bytes with
 * each row's filter byte (type 0, none) in front, so encoding is a single
 * compress2 call. Lines are drawn as coverage (distance from the pixel
 * centre to the segment, minus the half width), accumulated with max() over
 * a whole series and composited once, so polyline joints and overlapping
 * round caps do not darken.
 *
 * No state outside the arguments: the palette and the font are const tables.
 */
#include "plot.h"
#include "../base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ------------------------------------------------------------ style */

/* Okabe-Ito (minus yellow, which vanishes on white) then Paul Tol's "muted"
 * set: distinguishable under the common color vision deficiencies, and
 * dark enough for 2 px lines on white. */
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
};

#define COL_BG     0xFFFFFFu
#define COL_TEXT   0x222222u
#define COL_FRAME  0x555555u
#define COL_GRID   0xE3E3E3u
#define COL_HLINE  0x444444u
#define COL_LEGEND 0xBBBBBBu   /* legend border */
#define BAND_ALPHA 18          /* bands: black at 18/255 (7%) over what is below */
#define LEGEND_ALPHA 217       /* legend fill: white at 85%, so curves show through faintly */

/* Line sizes in pixels at text scale 1; they grow with the text scale (L->s)
 * so that a large chart keeps its proportions. */
#define LINE_HW 1.0            /* series: half width, so 2 px lines */
#define DOT_R 2.5              /* radius of a lone point */
#define DASH_ON 8.0            /* dashed series: 8 px on, 5 px off */
#define DASH_OFF 5.0
#define HLINE_HW 0.75          /* reference line: 1.5 px, 6 on 4 off */
#define HLINE_ON 6.0
#define HLINE_OFF 4.0
#define TICK_LEN 5
#define MAX_TICKS 24

uint32_t hpt_plot_color(int i) {
    int k = i % HPT_PLOT_MAX_SERIES;
    return palette[k < 0 ? k + HPT_PLOT_MAX_SERIES : k];
}

void hpt_plot_init(hpt_plot *p) {
    memset(p, 0, sizeof *p);
    p->hline = NAN;
}

/* ------------------------------------------------------------ font */

/* A 5x7 bitmap font designed for this file: each glyph is 9 rows of 5 bits
 * (bit 4 = leftmost column), rows 0-6 above the baseline, rows 7-8 for
 * descenders (g j p q y , ; _). Glyphs advance 6 columns, so the text run is
 * monospaced and its width is known without a font file, which is also what
 * lets the SVG (monospace, 0.6 em per character) reserve the same space. */
#define GLYPH_H 9
#define GLYPH_CAP 7
#define ADVANCE 6

static const unsigned char font_ascii[95][GLYPH_H] = {   /* code points 32..126 */
    {0x00,0x00,0x00,0x00,0x00,0x00,0x00,0x00,0x00}, /* space */
    {0x04,0x04,0x04,0x04,0x04,0x00,0x04,0x00,0x00}, /* ! */
    {0x0a,0x0a,0x0a,0x00,0x00,0x00,0x00,0x00,0x00}, /* " */
    {0x0a,0x0a,0x1f,0x0a,0x1f,0x0a,0x0a,0x00,0x00}, /* # */
    {0x04,0x0f,0x14,0x0e,0x05,0x1e,0x04,0x00,0x00}, /* $ */
    {0x18,0x19,0x02,0x04,0x08,0x13,0x03,0x00,0x00}, /* % */
    {0x0c,0x12,0x14,0x08,0x15,0x12,0x0d,0x00,0x00}, /* & */
    {0x04,0x04,0x08,0x00,0x00,0x00,0x00,0x00,0x00}, /* quote */
    {0x02,0x04,0x08,0x08,0x08,0x04,0x02,0x00,0x00}, /* ( */
    {0x08,0x04,0x02,0x02,0x02,0x04,0x08,0x00,0x00}, /* ) */
    {0x00,0x04,0x15,0x0e,0x15,0x04,0x00,0x00,0x00}, /* * */
    {0x00,0x04,0x04,0x1f,0x04,0x04,0x00,0x00,0x00}, /* + */
    {0x00,0x00,0x00,0x00,0x00,0x0c,0x0c,0x04,0x08}, /* , */
    {0x00,0x00,0x00,0x1f,0x00,0x00,0x00,0x00,0x00}, /* - */
    {0x00,0x00,0x00,0x00,0x00,0x0c,0x0c,0x00,0x00}, /* . */
    {0x00,0x01,0x02,0x04,0x08,0x10,0x00,0x00,0x00}, /* / */
    {0x0e,0x11,0x13,0x15,0x19,0x11,0x0e,0x00,0x00}, /* 0 */
    {0x04,0x0c,0x04,0x04,0x04,0x04,0x0e,0x00,0x00}, /* 1 */
    {0x0e,0x11,0x01,0x02,0x04,0x08,0x1f,0x00,0x00}, /* 2 */
    {0x1f,0x02,0x04,0x02,0x01,0x11,0x0e,0x00,0x00}, /* 3 */
    {0x02,0x06,0x0a,0x12,0x1f,0x02,0x02,0x00,0x00}, /* 4 */
    {0x1f,0x10,0x1e,0x01,0x01,0x11,0x0e,0x00,0x00}, /* 5 */
    {0x06,0x08,0x10,0x1e,0x11,0x11,0x0e,0x00,0x00}, /* 6 */
    {0x1f,0x01,0x02,0x04,0x08,0x08,0x08,0x00,0x00}, /* 7 */
    {0x0e,0x11,0x11,0x0e,0x11,0x11,0x0e,0x00,0x00}, /* 8 */
    {0x0e,0x11,0x11,0x0f,0x01,0x02,0x0c,0x00,0x00}, /* 9 */
    {0x00,0x0c,0x0c,0x00,0x0c,0x0c,0x00,0x00,0x00}, /* : */
    {0x00,0x0c,0x0c,0x00,0x0c,0x0c,0x04,0x08,0x00}, /* ; */
    {0x02,0x04,0x08,0x10,0x08,0x04,0x02,0x00,0x00}, /* < */
    {0x00,0x00,0x1f,0x00,0x1f,0x00,0x00,0x00,0x00}, /* = */
    {0x08,0x04,0x02,0x01,0x02,0x04,0x08,0x00,0x00}, /* > */
    {0x0e,0x11,0x01,0x02,0x04,0x00,0x04,0x00,0x00}, /* ? */
    {0x0e,0x11,0x01,0x0d,0x15,0x15,0x0e,0x00,0x00}, /* @ */
    {0x0e,0x11,0x11,0x11,0x1f,0x11,0x11,0x00,0x00}, /* A */
    {0x1e,0x11,0x11,0x1e,0x11,0x11,0x1e,0x00,0x00}, /* B */
    {0x0e,0x11,0x10,0x10,0x10,0x11,0x0e,0x00,0x00}, /* C */
    {0x1c,0x12,0x11,0x11,0x11,0x12,0x1c,0x00,0x00}, /* D */
    {0x1f,0x10,0x10,0x1e,0x10,0x10,0x1f,0x00,0x00}, /* E */
    {0x1f,0x10,0x10,0x1e,0x10,0x10,0x10,0x00,0x00}, /* F */
    {0x0e,0x11,0x10,0x17,0x11,0x11,0x0f,0x00,0x00}, /* G */
    {0x11,0x11,0x11,0x1f,0x11,0x11,0x11,0x00,0x00}, /* H */
    {0x0e,0x04,0x04,0x04,0x04,0x04,0x0e,0x00,0x00}, /* I */
    {0x07,0x02,0x02,0x02,0x02,0x12,0x0c,0x00,0x00}, /* J */
    {0x11,0x12,0x14,0x18,0x14,0x12,0x11,0x00,0x00}, /* K */
    {0x10,0x10,0x10,0x10,0x10,0x10,0x1f,0x00,0x00}, /* L */
    {0x11,0x1b,0x15,0x15,0x11,0x11,0x11,0x00,0x00}, /* M */
    {0x11,0x11,0x19,0x15,0x13,0x11,0x11,0x00,0x00}, /* N */
    {0x0e,0x11,0x11,0x11,0x11,0x11,0x0e,0x00,0x00}, /* O */
    {0x1e,0x11,0x11,0x1e,0x10,0x10,0x10,0x00,0x00}, /* P */
    {0x0e,0x11,0x11,0x11,0x15,0x12,0x0d,0x00,0x00}, /* Q */
    {0x1e,0x11,0x11,0x1e,0x14,0x12,0x11,0x00,0x00}, /* R */
    {0x0f,0x10,0x10,0x0e,0x01,0x01,0x1e,0x00,0x00}, /* S */
    {0x1f,0x04,0x04,0x04,0x04,0x04,0x04,0x00,0x00}, /* T */
    {0x11,0x11,0x11,0x11,0x11,0x11,0x0e,0x00,0x00}, /* U */
    {0x11,0x11,0x11,0x11,0x11,0x0a,0x04,0x00,0x00}, /* V */
    {0x11,0x11,0x11,0x15,0x15,0x15,0x0a,0x00,0x00}, /* W */
    {0x11,0x11,0x0a,0x04,0x0a,0x11,0x11,0x00,0x00}, /* X */
    {0x11,0x11,0x0a,0x04,0x04,0x04,0x04,0x00,0x00}, /* Y */
    {0x1f,0x01,0x02,0x04,0x08,0x10,0x1f,0x00,0x00}, /* Z */
    {0x0e,0x08,0x08,0x08,0x08,0x08,0x0e,0x00,0x00}, /* [ */
    {0x00,0x10,0x08,0x04,0x02,0x01,0x00,0x00,0x00}, /* backslash */
    {0x0e,0x02,0x02,0x02,0x02,0x02,0x0e,0x00,0x00}, /* ] */
    {0x04,0x0a,0x11,0x00,0x00,0x00,0x00,0x00,0x00}, /* ^ */
    {0x00,0x00,0x00,0x00,0x00,0x00,0x00,0x1f,0x00}, /* _ */
    {0x08,0x04,0x00,0x00,0x00,0x00,0x00,0x00,0x00}, /* ` */
    {0x00,0x00,0x0e,0x01,0x0f,0x11,0x0f,0x00,0x00}, /* a */
    {0x10,0x10,0x16,0x19,0x11,0x11,0x1e,0x00,0x00}, /* b */
    {0x00,0x00,0x0e,0x10,0x10,0x11,0x0e,0x00,0x00}, /* c */
    {0x01,0x01,0x0d,0x13,0x11,0x11,0x0f,0x00,0x00}, /* d */
    {0x00,0x00,0x0e,0x11,0x1f,0x10,0x0e,0x00,0x00}, /* e */
    {0x06,0x09,0x08,0x1c,0x08,0x08,0x08,0x00,0x00}, /* f */
    {0x00,0x00,0x0f,0x11,0x11,0x11,0x0f,0x01,0x0e}, /* g */
    {0x10,0x10,0x16,0x19,0x11,0x11,0x11,0x00,0x00}, /* h */
    {0x04,0x00,0x0c,0x04,0x04,0x04,0x0e,0x00,0x00}, /* i */
    {0x02,0x00,0x06,0x02,0x02,0x02,0x02,0x12,0x0c}, /* j */
    {0x10,0x10,0x12,0x14,0x18,0x14,0x12,0x00,0x00}, /* k */
    {0x0c,0x04,0x04,0x04,0x04,0x04,0x0e,0x00,0x00}, /* l */
    {0x00,0x00,0x1a,0x15,0x15,0x15,0x15,0x00,0x00}, /* m */
    {0x00,0x00,0x16,0x19,0x11,0x11,0x11,0x00,0x00}, /* n */
    {0x00,0x00,0x0e,0x11,0x11,0x11,0x0e,0x00,0x00}, /* o */
    {0x00,0x00,0x1e,0x11,0x11,0x11,0x1e,0x10,0x10}, /* p */
    {0x00,0x00,0x0f,0x11,0x11,0x11,0x0f,0x01,0x01}, /* q */
    {0x00,0x00,0x16,0x19,0x10,0x10,0x10,0x00,0x00}, /* r */
    {0x00,0x00,0x0f,0x10,0x0e,0x01,0x1e,0x00,0x00}, /* s */
    {0x08,0x08,0x1c,0x08,0x08,0x09,0x06,0x00,0x00}, /* t */
    {0x00,0x00,0x11,0x11,0x11,0x13,0x0d,0x00,0x00}, /* u */
    {0x00,0x00,0x11,0x11,0x11,0x0a,0x04,0x00,0x00}, /* v */
    {0x00,0x00,0x11,0x11,0x15,0x15,0x0a,0x00,0x00}, /* w */
    {0x00,0x00,0x11,0x0a,0x04,0x0a,0x11,0x00,0x00}, /* x */
    {0x00,0x00,0x11,0x11,0x11,0x11,0x0f,0x01,0x0e}, /* y */
    {0x00,0x00,0x1f,0x02,0x04,0x08,0x1f,0x00,0x00}, /* z */
    {0x03,0x04,0x04,0x08,0x04,0x04,0x03,0x00,0x00}, /* { */
    {0x04,0x04,0x04,0x04,0x04,0x04,0x04,0x00,0x00}, /* | */
    {0x18,0x04,0x04,0x02,0x04,0x04,0x18,0x00,0x00}, /* } */
    {0x00,0x00,0x08,0x15,0x02,0x00,0x00,0x00,0x00}, /* ~ */
};

/* The few non-ASCII symbols a training chart tends to use. */
static const struct { uint32_t cp; unsigned char rows[GLYPH_H]; } font_extra[] = {
    {0x00d7, {0x00,0x11,0x0a,0x04,0x0a,0x11,0x00,0x00,0x00}}, /* multiplication sign */
    {0x00b1, {0x04,0x04,0x1f,0x04,0x04,0x00,0x1f,0x00,0x00}}, /* plus-minus */
    {0x00b0, {0x0c,0x12,0x12,0x0c,0x00,0x00,0x00,0x00,0x00}}, /* degree */
    {0x00b5, {0x00,0x00,0x11,0x11,0x11,0x19,0x16,0x10,0x10}}, /* micro */
    {0x00b7, {0x00,0x00,0x00,0x0c,0x0c,0x00,0x00,0x00,0x00}}, /* middle dot */
    {0x2013, {0x00,0x00,0x00,0x1e,0x00,0x00,0x00,0x00,0x00}}, /* en dash */
    {0x2014, {0x00,0x00,0x00,0x1f,0x00,0x00,0x00,0x00,0x00}}, /* em dash */
    {0x2192, {0x00,0x04,0x02,0x1f,0x02,0x04,0x00,0x00,0x00}}, /* right arrow */
    {0x2264, {0x02,0x04,0x08,0x04,0x02,0x00,0x0f,0x00,0x00}}, /* less or equal */
    {0x2265, {0x08,0x04,0x02,0x04,0x08,0x00,0x1e,0x00,0x00}}, /* greater or equal */
    {0x03bb, {0x10,0x08,0x08,0x04,0x0a,0x11,0x11,0x00,0x00}}, /* lambda */
    {0x03b7, {0x00,0x00,0x16,0x19,0x11,0x11,0x11,0x01,0x01}}, /* eta */
};

/* Decodes the UTF-8 sequence at s (NUL-terminated) into *cp and returns its
 * length. A malformed sequence (stray continuation byte, overlong form,
 * surrogate, beyond U+10FFFF, cut short) gives U+FFFD and length 1, so the
 * caller always advances and never reads past the terminator: a continuation
 * check fails on the NUL before the next byte is looked at. */
static int utf8_next(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0)      { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = 0xFFFD; return 1; }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = 0xFFFD; return 1; }
    *cp = v;
    return len;
}

static const unsigned char *glyph_for(uint32_t cp) {
    if (cp >= 32 && cp <= 126) return font_ascii[cp - 32];
    for (size_t i = 0; i < sizeof font_extra / sizeof font_extra[0]; i++)
        if (font_extra[i].cp == cp) return font_extra[i].rows;
    return font_ascii['?' - 32];
}

static int text_chars(const char *s) {
    int n = 0;
    uint32_t cp;
    for (const unsigned char *u = (const unsigned char *)s; *u; u += utf8_next(u, &cp)) n++;
    return n;
}

/* Width in pixels of s drawn at scale sc: no trailing spacing column. */
static int text_width(const char *s, int sc) {
    int n = s ? text_chars(s) : 0;
    return n ? n * ADVANCE * sc - sc : 0;
}

static int has_text(const char *s) { return s && *s; }

/* ------------------------------------------------------------ layout */

typedef struct axis {
    double lo, hi;                 /* data range shown, lo < hi */
    int nticks;
    double tick[MAX_TICKS];        /* (nticks,) ascending values */
    char label[MAX_TICKS][32];     /* (nticks,) formatted values */
    int label_w;                   /* widest label at the text scale, pixels */
} axis;

enum { LEG_SERIES, LEG_BAND, LEG_HLINE };
typedef struct legend_entry { int kind, series; const char *text; } legend_entry;

typedef struct layout {
    const hpt_plot *p;
    int W, H;                 /* image size, pixels */
    int s, ts;                /* text scale of labels and of the title */
    int x0, y0, x1, y1;       /* plot area: columns [x0, x1), rows [y0, y1) */
    axis x, y;
    int hline_on;             /* a finite hline inside the y range */
    int nleg;
    legend_entry leg[HPT_PLOT_MAX_SERIES + 2];   /* (nleg,) */
    int lx, ly, lw, lh;       /* legend box, pixels */
    int lrow;                 /* legend row height */
} layout;

/* Data to pixels. The x range maps onto [x0, x1] and the y range onto
 * [y1, y0] (up is smaller y). Clamped far outside the image so that an
 * extreme value under a user-given y range stays a finite double; the
 * clipper then cuts it, with a negligible change of slope. */
static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }
static double map_x(const layout *L, double v) {
    return clampd(L->x0 + (v - L->x.lo) / (L->x.hi - L->x.lo) * (L->x1 - L->x0), -1e7, 1e7);
}
static double map_y(const layout *L, double v) {
    return clampd(L->y1 - (v - L->y.lo) / (L->y.hi - L->y.lo) * (L->y1 - L->y0), -1e7, 1e7);
}
/* Column (or row) of the 1 px rule for a value, kept inside the plot area
 * so that the rule at the top of the range is not drawn on the frame. */
static int rule_col(const layout *L, double v) {
    int c = (int)floor(map_x(L, v));
    return c < L->x0 ? L->x0 : c > L->x1 - 1 ? L->x1 - 1 : c;
}
static int rule_row(const layout *L, double v) {
    int r = (int)floor(map_y(L, v));
    return r < L->y0 ? L->y0 : r > L->y1 - 1 ? L->y1 - 1 : r;
}

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
 * widens the step until the labels fit in extent pixels (need(label) pixels
 * per tick: label width plus a gap across, or the text height up). Stops
 * widening at 2 ticks, which always fit on a chart of the minimum size. */
static void make_ticks(axis *a, int target, int extent, int across, int sc) {
    double span = a->hi - a->lo;
    int k = (int)floor(log10(span / target));
    double f = span / target / pow(10, k);   /* in [1, 10) up to rounding */
    int m = f <= 1.0 ? 1 : f <= 2.0 ? 2 : f <= 5.0 ? 5 : 10;
    if (m == 10) { m = 1; k++; }
    for (int tries = 0; tries < 64; tries++) {
        double step = step_value(1, m, k);
        long long i0 = (long long)ceil(a->lo / step - 1e-9), i1 = (long long)floor(a->hi / step + 1e-9);
        long long n = i1 - i0 + 1;
        if (n > MAX_TICKS) { next_step(&m, &k); continue; }
        a->nticks = (int)(n < 0 ? 0 : n);
        double mag = 0;
        for (int t = 0; t < a->nticks; t++) {
            a->tick[t] = step_value(i0 + t, m, k);
            mag = fmax(mag, fabs(a->tick[t]));
        }
        a->label_w = 0;
        for (int t = 0; t < a->nticks; t++) {
            format_tick(a->label[t], sizeof a->label[t], a->tick[t], k, mag > 0 ? mag : step);
            int w = text_width(a->label[t], sc);
            if (w > a->label_w) a->label_w = w;
        }
        int need = across ? a->label_w + 12 * sc : GLYPH_CAP * sc * 2 + 8;
        if (n <= 2 || (long long)need * n <= extent) return;
        next_step(&m, &k);
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

static hpt_status layout_compute(const hpt_plot *p, layout *L) {
    memset(L, 0, sizeof *L);
    L->p = p;
    L->W = p->width ? p->width : 800;
    L->H = p->height ? p->height : 500;
    /* 5x7 glyphs read well up to about 1000 px; larger charts get 2x text. */
    L->s = (L->W >= 1400 && L->H >= 800) ? 2 : 1;
    L->ts = L->s + 1;
    int s = L->s;

    /* Data ranges over the points that will be drawn. */
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
    /* Bands set the x range only when there is no data; with data they are
     * clipped to it, so an open-ended phase does not stretch the axis. */
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

    /* Vertical layout: title, plot, tick labels, x label. The frame sits
     * one pixel outside the plot area, the ticks below or left of it. */
    int top = 12 + (has_text(p->title) ? GLYPH_H * L->ts + 10 : 0);
    int bottom = 1 + TICK_LEN + 4 + GLYPH_H * s + (has_text(p->xlabel) ? 6 + GLYPH_H * s : 0) + 8;
    L->y0 = top;
    L->y1 = L->H - bottom;
    if (L->y1 - L->y0 < 40)
        return hpt_fail(HPT_ERR_ARG, "plot: height %d leaves no room for the plot", L->H);
    make_ticks(&L->y, (L->y1 - L->y0) / 50 < 3 ? 3 : (L->y1 - L->y0) / 50, L->y1 - L->y0, 0, s);

    /* Horizontal: y label (rotated), y tick labels, plot, room for half of
     * the last x tick label. The x ticks depend on the plot width, whose
     * right margin depends on the x labels: two passes settle it. */
    int left = 10 + (has_text(p->ylabel) ? GLYPH_H * s + 8 : 0) + L->y.label_w + 4 + TICK_LEN + 1;
    int right = 16;
    for (int pass = 0; pass < 2; pass++) {
        L->x0 = left;
        L->x1 = L->W - right;
        if (L->x1 - L->x0 < 40)
            return hpt_fail(HPT_ERR_ARG, "plot: width %d leaves no room for the plot", L->W);
        int target = (L->x1 - L->x0) / 90;
        make_ticks(&L->x, target < 3 ? 3 : target > 12 ? 12 : target, L->x1 - L->x0, 1, s);
        int need = 0;
        if (L->x.nticks > 0) {
            const char *last = L->x.label[L->x.nticks - 1];
            need = rule_col(L, L->x.tick[L->x.nticks - 1]) + text_width(last, s) / 2 + 4 - (L->W - 1);
        }
        if (need <= 0) break;
        right += need;
    }

    /* Legend: series with a name, then the bands, then the reference line. */
    for (int i = 0; i < p->nseries; i++)
        if (has_text(p->series[i].name))
            L->leg[L->nleg++] = (legend_entry){ LEG_SERIES, i, p->series[i].name };
    if (has_text(p->band_label) && p->nbands > 0)
        L->leg[L->nleg++] = (legend_entry){ LEG_BAND, -1, p->band_label };
    if (has_text(p->hline_label) && L->hline_on)
        L->leg[L->nleg++] = (legend_entry){ LEG_HLINE, -1, p->hline_label };
    int tw = 0;
    for (int i = 0; i < L->nleg; i++) {
        int w = text_width(L->leg[i].text, s);
        if (w > tw) tw = w;
    }
    L->lrow = GLYPH_H * s + 5;
    L->lw = 8 + 24 * s + 6 + tw + 8;
    L->lh = 6 + L->nleg * L->lrow - (L->lrow - GLYPH_H * s) + 4;   /* 6 px above the caps, 4 below the descenders */
    L->lx = L->x1 - 8 - L->lw;
    if (L->lx < L->x0 + 2) L->lx = L->x0 + 2;   /* wider than the plot: overflow right, clipped */
    L->ly = L->y0 + 8;
    return HPT_OK;
}

/* ------------------------------------------------------------ series walk */

enum { RUN_BEGIN, RUN_POINT, RUN_END };
typedef void (*run_fn)(void *ctx, int ev, double x, double y);

/* Liang-Barsky: the part [t0, t1] of P + t (Q - P), t in [0, 1], inside
 * the box. Returns 0 when the segment misses it. */
static int clip_segment(double bx0, double by0, double bx1, double by1,
                        double px, double py, double qx, double qy, double *t0, double *t1) {
    double dx = qx - px, dy = qy - py;
    double pk[4] = { -dx, dx, -dy, dy };
    double qk[4] = { px - bx0, bx1 - px, py - by0, by1 - py };
    double a = 0, b = 1;
    for (int k = 0; k < 4; k++) {
        if (pk[k] == 0) {
            if (qk[k] < 0) return 0;      /* parallel to this edge and outside it */
        } else {
            double r = qk[k] / pk[k];
            if (pk[k] < 0) { if (r > b) return 0; if (r > a) a = r; }
            else           { if (r < a) return 0; if (r < b) b = r; }
        }
    }
    *t0 = a;
    *t1 = b;
    return 1;
}

/* Maps series s to pixels and emits its visible runs to fn. The clip box is
 * the plot area grown by half a pixel, so points exactly on the range ends
 * (x always has some) count as inside. A run stays open while its last
 * point is inside; a segment that leaves the box ends the run, and one that
 * re-enters starts a new run at the entry point. */
static void walk_series(const layout *L, const hpt_plot_series *s, run_fn fn, void *ctx) {
    double bx0 = L->x0 - 0.5, bx1 = L->x1 + 0.5, by0 = L->y0 - 0.5, by1 = L->y1 + 0.5;
    int open = 0;         /* a run is open, and its last point is the previous point */
    int have_prev = 0;    /* the previous point is finite */
    double px = 0, py = 0;
    int pin = 0;          /* the previous point is inside the box */
    for (int i = 0; i < s->n; i++) {
        if (!point_ok(s, i)) {
            if (open) fn(ctx, RUN_END, 0, 0);
            open = have_prev = 0;
            continue;
        }
        double qx = map_x(L, point_x(s, i)), qy = map_y(L, s->y[i]);
        int qin = qx >= bx0 && qx <= bx1 && qy >= by0 && qy <= by1;
        if (!have_prev) {
            /* First point after a gap: the next segment draws it, unless it
             * has no neighbour, in which case it is a lone dot. */
            if (qin && !(i + 1 < s->n && point_ok(s, i + 1))) {
                fn(ctx, RUN_BEGIN, qx, qy);
                fn(ctx, RUN_END, 0, 0);
            }
        } else {
            double t0 = 0, t1 = 1;
            int vis = (pin && qin) || clip_segment(bx0, by0, bx1, by1, px, py, qx, qy, &t0, &t1);
            if (vis) {
                /* An inside end is exact (t = 0 or 1), not a rounded ratio,
                 * so a run continues exactly when its last point is inside. */
                if (pin) t0 = 0;
                if (qin) t1 = 1;
                if (!(open && t0 == 0)) {
                    if (open) fn(ctx, RUN_END, 0, 0);
                    fn(ctx, RUN_BEGIN, px + t0 * (qx - px), py + t0 * (qy - py));
                }
                fn(ctx, RUN_POINT, px + t1 * (qx - px), py + t1 * (qy - py));
                open = qin;
                if (!open) fn(ctx, RUN_END, 0, 0);
            } else if (open) {
                fn(ctx, RUN_END, 0, 0);
                open = 0;
            }
        }
        px = qx; py = qy; pin = qin; have_prev = 1;
    }
    if (open) fn(ctx, RUN_END, 0, 0);
}

/* ------------------------------------------------------------ SVG */

/* Writes s as XML character data / attribute text: & < > " ' escaped,
 * control characters (not allowed in XML 1.0) as spaces, malformed UTF-8 as
 * '?', everything else as the UTF-8 it was. */
static void svg_escape(FILE *f, const char *s) {
    if (!s) return;
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        uint32_t cp;
        int len = utf8_next(u, &cp);
        if (len == 1 && *u >= 0x80) { fputc('?', f); u++; continue; }   /* malformed */
        switch (cp) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (cp < 0x20 || cp == 0x7F || cp == 0xFFFE || cp == 0xFFFF) fputc(cp == 0x7F ? '?' : ' ', f);
            else fwrite(u, 1, (size_t)len, f);
        }
        u += len;
    }
}

static void svg_color(char *buf, uint32_t c) { snprintf(buf, 8, "#%06x", (unsigned)(c & 0xFFFFFF)); }

/* Text whose cap height starts at row `top`; the baseline is GLYPH_CAP
 * scaled pixels lower, and font-size 10*sc gives a cap height close to 7*sc.
 * anchor: "start", "middle" or "end". */
static void svg_text(FILE *f, const char *s, double x, double top, int sc, const char *anchor) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, top + GLYPH_CAP * sc, 10 * sc, anchor);
    svg_escape(f, s);
    fputs("</text>\n", f);
}

typedef struct svg_run { FILE *f; int count; double fx, fy; const char *color; double r; } svg_run;

/* One <polyline> per run. The first point is held back until a second one
 * arrives, so that a lone point becomes a <circle> instead of an invisible
 * one-point polyline. */
static void svg_emit(void *ctx, int ev, double x, double y) {
    svg_run *r = ctx;
    if (ev == RUN_BEGIN) {
        r->count = 1; r->fx = x; r->fy = y;
    } else if (ev == RUN_POINT) {
        if (r->count == 1) fprintf(r->f, "<polyline points=\"%.2f,%.2f", r->fx, r->fy);
        /* a line break now and then keeps long runs readable in an editor */
        fprintf(r->f, r->count % 8 == 0 ? "\n%.2f,%.2f" : " %.2f,%.2f", x, y);
        r->count++;
    } else if (r->count == 1) {
        fprintf(r->f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.1f\" fill=\"%s\" stroke=\"none\"/>\n",
                r->fx, r->fy, r->r, r->color);
    } else {
        fputs("\"/>\n", r->f);
    }
}

static hpt_status svg_write(FILE *f, void *ctx) {
    const layout *L = ctx;
    const hpt_plot *p = L->p;
    int s = L->s;
    char col[8];
    double pw = L->x1 - L->x0, ph = L->y1 - L->y0;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\"\n"
               "     font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" fill=\"#%06x\">\n",
            L->W, L->H, L->W, L->H, COL_TEXT);
    if (has_text(p->title)) { fputs("<title>", f); svg_escape(f, p->title); fputs("</title>\n", f); }
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#%06x\"/>\n", L->W, L->H, COL_BG);
    fprintf(f, "<defs><clipPath id=\"plot-area\"><rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\"/></clipPath></defs>\n",
            L->x0, L->y0, pw, ph);

    /* Bands, on the same whole columns as the PNG's. */
    fprintf(f, "<g fill=\"#000000\" fill-opacity=\"%.3f\">\n", BAND_ALPHA / 255.0);
    for (int i = 0; i < p->nbands; i++) {
        const hpt_plot_band *b = &p->bands[i];
        double a = fmin(b->x0, b->x1), c = fmax(b->x0, b->x1);
        if (!isfinite(a) || !isfinite(c) || c < L->x.lo || a > L->x.hi) continue;
        int c0 = (int)floor(map_x(L, fmax(a, L->x.lo)) + 0.5), c1 = (int)floor(map_x(L, fmin(c, L->x.hi)) + 0.5);
        if (c1 <= c0) c1 = c0 + 1;   /* a band thinner than a pixel still shows */
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%.0f\"/>\n", c0, L->y0, c1 - c0, ph);
    }
    fputs("</g>\n", f);

    /* Grid. */
    fprintf(f, "<g stroke=\"#%06x\" stroke-width=\"1\">\n", COL_GRID);
    for (int t = 0; t < L->x.nticks; t++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n",
                rule_col(L, L->x.tick[t]) + 0.5, L->y0, rule_col(L, L->x.tick[t]) + 0.5, L->y1);
    for (int t = 0; t < L->y.nticks; t++)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n",
                L->x0, rule_row(L, L->y.tick[t]) + 0.5, L->x1, rule_row(L, L->y.tick[t]) + 0.5);
    fputs("</g>\n", f);

    if (L->hline_on)
        fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#%06x\" stroke-width=\"%.1f\" "
                   "stroke-dasharray=\"%g %g\"/>\n",
                L->x0, map_y(L, p->hline), L->x1, map_y(L, p->hline), COL_HLINE, 2 * HLINE_HW * s, HLINE_ON * s, HLINE_OFF * s);

    /* Series, one group each. Dashed lines get butt caps: round caps would
     * lengthen every dash by the line width, unlike the PNG's dashes. */
    fprintf(f, "<g clip-path=\"url(#plot-area)\" fill=\"none\" stroke-width=\"%g\" stroke-linejoin=\"round\">\n", 2 * LINE_HW * s);
    for (int i = 0; i < p->nseries; i++) {
        const hpt_plot_series *se = &p->series[i];
        svg_color(col, hpt_plot_color(i));
        fprintf(f, "<g stroke=\"%s\" stroke-linecap=\"%s\"", col, se->dashed ? "butt" : "round");
        if (se->dashed) fprintf(f, " stroke-dasharray=\"%g %g\"", DASH_ON * s, DASH_OFF * s);
        fputs(">", f);
        if (has_text(se->name)) { fputs("<title>", f); svg_escape(f, se->name); fputs("</title>", f); }
        fputs("\n", f);
        svg_run r = { f, 0, 0, 0, col, DOT_R * s };
        walk_series(L, se, svg_emit, &r);
        fputs("</g>\n", f);
    }
    fputs("</g>\n", f);

    /* Frame one pixel outside the plot area, and the ticks. */
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#%06x\" stroke-width=\"1\"/>\n",
            L->x0 - 0.5, L->y0 - 0.5, pw + 1, ph + 1, COL_FRAME);
    fprintf(f, "<g stroke=\"#%06x\" stroke-width=\"1\">\n", COL_FRAME);
    for (int t = 0; t < L->x.nticks; t++) {
        double cx = rule_col(L, L->x.tick[t]) + 0.5;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", cx, L->y1 + 1, cx, L->y1 + 1 + TICK_LEN);
    }
    for (int t = 0; t < L->y.nticks; t++) {
        double cy = rule_row(L, L->y.tick[t]) + 0.5;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", L->x0 - 1 - TICK_LEN, cy, L->x0 - 1, cy);
    }
    fputs("</g>\n", f);

    /* Tick labels, axis labels, title: positions as in the PNG (text_top). */
    for (int t = 0; t < L->x.nticks; t++)
        svg_text(f, L->x.label[t], rule_col(L, L->x.tick[t]) + 0.5, L->y1 + 1 + TICK_LEN + 4, s, "middle");
    for (int t = 0; t < L->y.nticks; t++)
        svg_text(f, L->y.label[t], L->x0 - 1 - TICK_LEN - 4, rule_row(L, L->y.tick[t]) - (GLYPH_CAP * s) / 2, s, "end");
    if (has_text(p->xlabel))
        svg_text(f, p->xlabel, L->x0 + pw / 2, L->y1 + 1 + TICK_LEN + 4 + GLYPH_H * s + 6, s, "middle");
    if (has_text(p->ylabel)) {
        /* Rotated to read upwards: the baseline is the right edge of the run. */
        fprintf(f, "<text transform=\"translate(%d,%.1f) rotate(-90)\" font-size=\"%d\" text-anchor=\"middle\">",
                10 + GLYPH_CAP * s, L->y0 + ph / 2, 10 * s);
        svg_escape(f, p->ylabel);
        fputs("</text>\n", f);
    }
    if (has_text(p->title)) svg_text(f, p->title, L->x0 + pw / 2, 12, L->ts, "middle");

    /* Legend. */
    if (L->nleg > 0) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#ffffff\" fill-opacity=\"%.2f\" "
                   "stroke=\"#%06x\" stroke-width=\"1\"/>\n",
                L->lx + 0.5, L->ly + 0.5, L->lw - 1, L->lh - 1, LEGEND_ALPHA / 255.0, COL_LEGEND);
        for (int i = 0; i < L->nleg; i++) {
            const legend_entry *e = &L->leg[i];
            int rt = L->ly + 6 + i * L->lrow;     /* row top */
            double sy = rt + (GLYPH_CAP * s) / 2 + 0.5, sx0 = L->lx + 8, sx1 = L->lx + 8 + 24 * s;
            if (e->kind == LEG_SERIES) {
                svg_color(col, hpt_plot_color(e->series));
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%g\"",
                        sx0, sy, sx1, sy, col, 2 * LINE_HW * s);
                if (p->series[e->series].dashed) fprintf(f, " stroke-dasharray=\"%g %g\"", DASH_ON * s, DASH_OFF * s);
                fputs("/>\n", f);
            } else if (e->kind == LEG_BAND) {
                fprintf(f, "<rect x=\"%.0f\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#000000\" fill-opacity=\"%.3f\"/>\n",
                        sx0, rt - 1, 24 * s, GLYPH_CAP * s + 2, BAND_ALPHA / 255.0);
            } else {
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#%06x\" stroke-width=\"%.1f\" "
                           "stroke-dasharray=\"%g %g\"/>\n",
                        sx0, sy, sx1, sy, COL_HLINE, 2 * HLINE_HW * s, HLINE_ON * s, HLINE_OFF * s);
            }
            svg_text(f, e->text, sx1 + 6, rt, s, "start");
        }
    }
    fputs("</svg>\n", f);
    if (ferror(f)) return hpt_fail(HPT_ERR_IO, "plot: cannot write the SVG");
    return HPT_OK;
}

/* ------------------------------------------------------------ PNG raster */

typedef struct canvas {
    int W, H;
    size_t stride;            /* 1 + 3W: a filter byte, then the row's RGB */
    unsigned char *rows;      /* (H, stride), the PNG scanlines */
    unsigned char *cov;       /* (H, W) coverage of the shape being drawn, 0..255 */
    int dx0, dy0, dx1, dy1;   /* box of cov touched since the last flush; empty if dx0 >= dx1 */
} canvas;

typedef struct box { int x0, y0, x1, y1; } box;   /* [x0, x1) x [y0, y1) */

static unsigned char *px_at(canvas *c, int x, int y) { return c->rows + (size_t)y * c->stride + 1 + 3 * (size_t)x; }

/* out = out + (color - out) * a / 255, rounded; a = 255 gives the exact
 * color, which the test looks for. */
static void blend(unsigned char *px, uint32_t color, int a) {
    int rgb[3] = { (int)(color >> 16) & 255, (int)(color >> 8) & 255, (int)color & 255 };
    for (int k = 0; k < 3; k++) px[k] = (unsigned char)((px[k] * (255 - a) + rgb[k] * a + 127) / 255);
}

static box box_clip(box b, box lim) {
    box r = { b.x0 > lim.x0 ? b.x0 : lim.x0, b.y0 > lim.y0 ? b.y0 : lim.y0,
              b.x1 < lim.x1 ? b.x1 : lim.x1, b.y1 < lim.y1 ? b.y1 : lim.y1 };
    return r;
}

static void fill_box(canvas *c, box b, uint32_t color, int a) {
    b = box_clip(b, (box){ 0, 0, c->W, c->H });
    for (int y = b.y0; y < b.y1; y++)
        for (int x = b.x0; x < b.x1; x++) blend(px_at(c, x, y), color, a);
}

typedef struct dash { double on, off, phase; } dash;   /* phase: arc length at the segment start */

/* Adds a segment A-B of half width hw with round ends to the coverage
 * layer, inside clip. Coverage is hw + 0.5 - distance from the pixel centre
 * to the segment, in [0, 1]: a box filter's edge, good enough for 1-3 px
 * lines. A dashed segment also fades with the distance to the nearest dash
 * edge along the line, measured from the run's start via d->phase. */
static void cov_segment(canvas *c, box clip, double ax, double ay, double bx, double by, double hw, const dash *d) {
    double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy, len = sqrt(len2);
    double r = hw + 1;
    box b = { (int)floor(fmin(ax, bx) - r), (int)floor(fmin(ay, by) - r),
              (int)ceil(fmax(ax, bx) + r) + 1, (int)ceil(fmax(ay, by) + r) + 1 };
    b = box_clip(b, box_clip(clip, (box){ 0, 0, c->W, c->H }));
    if (b.x0 >= b.x1 || b.y0 >= b.y1) return;
    for (int y = b.y0; y < b.y1; y++) {
        for (int x = b.x0; x < b.x1; x++) {
            double cx = x + 0.5 - ax, cy = y + 0.5 - ay;
            double t = len2 > 0 ? (cx * dx + cy * dy) / len2 : 0;
            t = clampd(t, 0, 1);
            double ex = cx - t * dx, ey = cy - t * dy;
            double cv = clampd(hw + 0.5 - sqrt(ex * ex + ey * ey), 0, 1);
            if (cv <= 0) continue;
            if (d) {
                double period = d->on + d->off, u = fmod(d->phase + t * len, period);
                cv *= u < d->on ? clampd(fmin(u, d->on - u) + 0.5, 0, 1)
                                : clampd(0.5 - fmin(u - d->on, period - u), 0, 1);
            }
            int a = (int)(cv * 255 + 0.5);
            unsigned char *cp = &c->cov[(size_t)y * c->W + x];
            if (a > *cp) *cp = (unsigned char)a;
        }
    }
    if (c->dx0 >= c->dx1) { c->dx0 = b.x0; c->dy0 = b.y0; c->dx1 = b.x1; c->dy1 = b.y1; }
    else {
        if (b.x0 < c->dx0) c->dx0 = b.x0;
        if (b.y0 < c->dy0) c->dy0 = b.y0;
        if (b.x1 > c->dx1) c->dx1 = b.x1;
        if (b.y1 > c->dy1) c->dy1 = b.y1;
    }
}

/* Composites the coverage layer in one color and clears it. */
static void cov_flush(canvas *c, uint32_t color) {
    for (int y = c->dy0; y < c->dy1; y++) {
        for (int x = c->dx0; x < c->dx1; x++) {
            unsigned char *cp = &c->cov[(size_t)y * c->W + x];
            if (*cp) { blend(px_at(c, x, y), color, *cp); *cp = 0; }
        }
    }
    c->dx0 = c->dy0 = c->dx1 = c->dy1 = 0;
}

/* Draws s with its cap top at row `top`; align -1/0/1 puts x at the left
 * end, the middle or the right end. rotated: the run reads upwards, glyph
 * tops facing left, x is the left edge and `top` is the row where the run
 * is centred (align ignored). Pixels off the image are dropped. */
static void draw_text(canvas *c, const char *s, int x, int top, int sc, uint32_t color, int align, int rotated) {
    if (!s) return;
    int w = text_width(s, sc);
    int ox = align < 0 ? x : align == 0 ? x - w / 2 : x - w;
    int oy = top + w / 2;   /* rotated: the bottom end of the run */
    int pen = 0;
    uint32_t cp;
    for (const unsigned char *u = (const unsigned char *)s; *u; pen++) {
        u += utf8_next(u, &cp);
        const unsigned char *g = glyph_for(cp < 0x20 ? ' ' : cp);
        for (int gy = 0; gy < GLYPH_H; gy++) {
            for (int gx = 0; gx < 5; gx++) {
                if (!(g[gy] & (0x10 >> gx))) continue;
                int along = (pen * ADVANCE + gx) * sc;
                for (int j = 0; j < sc; j++) {
                    for (int i = 0; i < sc; i++) {
                        int px = rotated ? x + gy * sc + j : ox + along + i;
                        int py = rotated ? oy - 1 - (along + i) : top + gy * sc + j;
                        if (px >= 0 && px < c->W && py >= 0 && py < c->H) blend(px_at(c, px, py), color, 255);
                    }
                }
            }
        }
    }
}

typedef struct png_run {
    canvas *c;
    box clip;
    double hw, dot;   /* line half width, radius of a lone point */
    int dashed;
    dash d;
    int count;
    double lx, ly;   /* last point of the run */
} png_run;

static void png_emit(void *ctx, int ev, double x, double y) {
    png_run *r = ctx;
    if (ev == RUN_BEGIN) {
        r->count = 1; r->lx = x; r->ly = y; r->d.phase = 0;   /* dashes restart per run, as in SVG */
    } else if (ev == RUN_POINT) {
        cov_segment(r->c, r->clip, r->lx, r->ly, x, y, r->hw, r->dashed ? &r->d : NULL);
        r->d.phase += hypot(x - r->lx, y - r->ly);
        r->lx = x; r->ly = y;
        r->count++;
    } else if (r->count == 1) {
        cov_segment(r->c, r->clip, r->lx, r->ly, r->lx, r->ly, r->dot, NULL);
    }
}

static void png_render(const layout *L, canvas *c) {
    const hpt_plot *p = L->p;
    int s = L->s;
    box area = { L->x0, L->y0, L->x1, L->y1 };

    /* White, then each row's filter byte (0: none). */
    memset(c->rows, 255, (size_t)c->H * c->stride);
    for (int y = 0; y < c->H; y++) c->rows[(size_t)y * c->stride] = 0;

    for (int i = 0; i < p->nbands; i++) {
        const hpt_plot_band *b = &p->bands[i];
        double a = fmin(b->x0, b->x1), e = fmax(b->x0, b->x1);
        if (!isfinite(a) || !isfinite(e) || e < L->x.lo || a > L->x.hi) continue;
        int c0 = (int)floor(map_x(L, fmax(a, L->x.lo)) + 0.5), c1 = (int)floor(map_x(L, fmin(e, L->x.hi)) + 0.5);
        if (c1 <= c0) c1 = c0 + 1;
        fill_box(c, box_clip((box){ c0, L->y0, c1, L->y1 }, area), 0x000000, BAND_ALPHA);
    }
    for (int t = 0; t < L->x.nticks; t++) {
        int col = rule_col(L, L->x.tick[t]);
        fill_box(c, (box){ col, L->y0, col + 1, L->y1 }, COL_GRID, 255);
    }
    for (int t = 0; t < L->y.nticks; t++) {
        int row = rule_row(L, L->y.tick[t]);
        fill_box(c, (box){ L->x0, row, L->x1, row + 1 }, COL_GRID, 255);
    }
    if (L->hline_on) {
        dash d = { HLINE_ON * s, HLINE_OFF * s, 0 };
        double yy = map_y(L, p->hline);
        cov_segment(c, area, L->x0, yy, L->x1, yy, HLINE_HW * s, &d);
        cov_flush(c, COL_HLINE);
    }
    for (int i = 0; i < p->nseries; i++) {
        png_run r = { c, area, LINE_HW * s, DOT_R * s, p->series[i].dashed, { DASH_ON * s, DASH_OFF * s, 0 }, 0, 0, 0 };
        walk_series(L, &p->series[i], png_emit, &r);
        cov_flush(c, hpt_plot_color(i));
    }

    /* Frame, ticks and their labels. */
    fill_box(c, (box){ L->x0 - 1, L->y0 - 1, L->x1 + 1, L->y0 }, COL_FRAME, 255);
    fill_box(c, (box){ L->x0 - 1, L->y1, L->x1 + 1, L->y1 + 1 }, COL_FRAME, 255);
    fill_box(c, (box){ L->x0 - 1, L->y0, L->x0, L->y1 }, COL_FRAME, 255);
    fill_box(c, (box){ L->x1, L->y0, L->x1 + 1, L->y1 }, COL_FRAME, 255);
    for (int t = 0; t < L->x.nticks; t++) {
        int col = rule_col(L, L->x.tick[t]);
        fill_box(c, (box){ col, L->y1 + 1, col + 1, L->y1 + 1 + TICK_LEN }, COL_FRAME, 255);
        draw_text(c, L->x.label[t], col, L->y1 + 1 + TICK_LEN + 4, s, COL_TEXT, 0, 0);
    }
    for (int t = 0; t < L->y.nticks; t++) {
        int row = rule_row(L, L->y.tick[t]);
        fill_box(c, (box){ L->x0 - 1 - TICK_LEN, row, L->x0 - 1, row + 1 }, COL_FRAME, 255);
        draw_text(c, L->y.label[t], L->x0 - 1 - TICK_LEN - 4, row - (GLYPH_CAP * s) / 2, s, COL_TEXT, 1, 0);
    }
    int pw = L->x1 - L->x0, ph = L->y1 - L->y0;
    if (has_text(p->xlabel))
        draw_text(c, p->xlabel, L->x0 + pw / 2, L->y1 + 1 + TICK_LEN + 4 + GLYPH_H * s + 6, s, COL_TEXT, 0, 0);
    if (has_text(p->ylabel)) draw_text(c, p->ylabel, 10, L->y0 + ph / 2, s, COL_TEXT, 0, 1);
    if (has_text(p->title)) draw_text(c, p->title, L->x0 + pw / 2, 12, L->ts, COL_TEXT, 0, 0);

    /* Legend: translucent white box, then a swatch and a label per row. */
    if (L->nleg > 0) {
        box lb = { L->lx, L->ly, L->lx + L->lw, L->ly + L->lh };
        fill_box(c, (box){ lb.x0 + 1, lb.y0 + 1, lb.x1 - 1, lb.y1 - 1 }, COL_BG, LEGEND_ALPHA);
        fill_box(c, (box){ lb.x0, lb.y0, lb.x1, lb.y0 + 1 }, COL_LEGEND, 255);
        fill_box(c, (box){ lb.x0, lb.y1 - 1, lb.x1, lb.y1 }, COL_LEGEND, 255);
        fill_box(c, (box){ lb.x0, lb.y0 + 1, lb.x0 + 1, lb.y1 - 1 }, COL_LEGEND, 255);
        fill_box(c, (box){ lb.x1 - 1, lb.y0 + 1, lb.x1, lb.y1 - 1 }, COL_LEGEND, 255);
        for (int i = 0; i < L->nleg; i++) {
            const legend_entry *e = &L->leg[i];
            int rt = L->ly + 6 + i * L->lrow;
            double sy = rt + (GLYPH_CAP * s) / 2 + 0.5, sx0 = L->lx + 8, sx1 = L->lx + 8 + 24 * s;
            if (e->kind == LEG_SERIES) {
                dash d = { DASH_ON * s, DASH_OFF * s, 0 };
                /* clipped to the swatch's columns: flat ends, as the SVG's butt caps */
                box sw = { (int)sx0, rt - 2, (int)sx1, rt + GLYPH_CAP * s + 2 };
                cov_segment(c, sw, sx0, sy, sx1, sy, LINE_HW * s, p->series[e->series].dashed ? &d : NULL);
                cov_flush(c, hpt_plot_color(e->series));
            } else if (e->kind == LEG_BAND) {
                fill_box(c, (box){ (int)sx0, rt - 1, (int)sx1, rt + GLYPH_CAP * s + 1 }, 0x000000, BAND_ALPHA);
            } else {
                dash d = { HLINE_ON * s, HLINE_OFF * s, 0 };
                box sw = { (int)sx0, rt - 2, (int)sx1, rt + GLYPH_CAP * s + 2 };
                cov_segment(c, sw, sx0, sy, sx1, sy, HLINE_HW * s, &d);
                cov_flush(c, COL_HLINE);
            }
            draw_text(c, e->text, (int)sx1 + 6, rt, s, COL_TEXT, -1, 0);
        }
    }
}

/* ------------------------------------------------------------ PNG file */

static void put_be32(unsigned char *b, uint32_t v) {
    b[0] = (unsigned char)(v >> 24); b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);  b[3] = (unsigned char)v;
}

/* A chunk: length (big-endian), type, data, CRC-32 of type and data. */
static int png_chunk(FILE *f, const char *type, const unsigned char *data, uint32_t len) {
    unsigned char hdr[8], crcb[4];
    put_be32(hdr, len);
    memcpy(hdr + 4, type, 4);
    uLong crc = crc32(0L, (const Bytef *)type, 4);
    if (len) crc = crc32(crc, data, len);
    put_be32(crcb, (uint32_t)crc);
    return fwrite(hdr, 1, 8, f) == 8 && (len == 0 || fwrite(data, 1, len, f) == len) && fwrite(crcb, 1, 4, f) == 4;
}

typedef struct png_file { int W, H; const unsigned char *z; uint32_t zlen; } png_file;

static hpt_status png_write(FILE *f, void *ctx) {
    const png_file *pf = ctx;
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
    unsigned char ihdr[13];
    put_be32(ihdr, (uint32_t)pf->W);
    put_be32(ihdr + 4, (uint32_t)pf->H);
    ihdr[8] = 8;    /* bits per channel */
    ihdr[9] = 2;    /* color type: RGB */
    ihdr[10] = 0;   /* compression: deflate */
    ihdr[11] = 0;   /* filter method 0 (each row then says type 0) */
    ihdr[12] = 0;   /* no interlace */
    int ok = fwrite(sig, 1, 8, f) == 8 && png_chunk(f, "IHDR", ihdr, 13) &&
             png_chunk(f, "IDAT", pf->z, pf->zlen) && png_chunk(f, "IEND", NULL, 0);
    return ok ? HPT_OK : hpt_fail(HPT_ERR_IO, "plot: cannot write the PNG");
}

static hpt_status png_save(const layout *L, const char *path) {
    canvas c = { L->W, L->H, 1 + 3 * (size_t)L->W, NULL, NULL, 0, 0, 0, 0 };
    size_t nraw = (size_t)c.H * c.stride;
    uLongf zlen = compressBound((uLong)nraw);
    c.rows = malloc(nraw);
    c.cov = calloc((size_t)c.W * c.H, 1);
    unsigned char *z = malloc(zlen);
    hpt_status st = HPT_OK;
    if (!c.rows || !c.cov || !z) {
        st = hpt_fail(HPT_ERR_NOMEM, "plot: cannot allocate a %d x %d canvas", L->W, L->H);
    } else {
        png_render(L, &c);
        int zr = compress2(z, &zlen, c.rows, (uLong)nraw, Z_DEFAULT_COMPRESSION);
        if (zr != Z_OK)
            st = hpt_fail(zr == Z_MEM_ERROR ? HPT_ERR_NOMEM : HPT_ERR_IO, "plot: zlib compress2 failed (%d)", zr);
        else if (zlen > 0x7FFFFFFF)   /* a PNG chunk holds at most 2^31 - 1 bytes */
            st = hpt_fail(HPT_ERR_ARG, "plot: compressed image too large for one IDAT chunk");
        else {
            png_file pf = { L->W, L->H, z, (uint32_t)zlen };
            st = hpt_save_atomic(path, png_write, &pf);
        }
    }
    free(c.rows);
    free(c.cov);
    free(z);
    return st;
}

/* ------------------------------------------------------------ entry */

hpt_status hpt_plot_write(const hpt_plot *p, const char *path_noext) {
    if (!p || !path_noext || !*path_noext) return hpt_fail(HPT_ERR_ARG, "plot: NULL plot or empty path");
    HPT_TRY(check_plot(p));
    layout L;
    HPT_TRY(layout_compute(p, &L));
    size_t n = strlen(path_noext);
    char *path = malloc(n + 5);
    if (!path) return hpt_fail(HPT_ERR_NOMEM, "plot: cannot allocate a path");
    memcpy(path, path_noext, n);
    memcpy(path + n, ".svg", 5);
    hpt_status st = hpt_save_atomic(path, svg_write, &L);
    if (st == HPT_OK) {
        memcpy(path + n, ".png", 5);
        st = png_save(&L, path);
    }
    free(path);
    return st;
}
