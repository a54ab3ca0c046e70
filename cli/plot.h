/*
 * plot.h — line charts of training curves, drawn with cairo by one drawing
 * function onto an SVG and a PNG surface, so the two files are the same
 * figure.
 *
 * Implements: "nice" axis ticks (1/2/5 x 10^k), light gridlines, shaded
 * vertical bands (training phases), a dashed horizontal reference line, up
 * to 16 series from a fixed colorblind-friendly palette, a legend in the
 * corner of the plot where it hides the least data, title and axis labels
 * in DejaVu Sans. The PNG is RGB, anti-aliased; the SVG draws text as glyph
 * outlines and carries it as text in its <title> (the title) and <desc>
 * ("x axis: ...", "y axis: ...", one "legend: ..." line per legend entry).
 *
 *     double x[N], y[N];   ... fill ...
 *     hpt_plot_series s = { .name = "train loss", .x = x, .y = y, .n = N };
 *     hpt_plot p;
 *     hpt_plot_init(&p);                 // sets hline = NaN (no line)
 *     p.title = "loss"; p.xlabel = "step"; p.ylabel = "loss";
 *     p.series = &s; p.nseries = 1;
 *     hpt_status st = hpt_plot_write(&p, "runs/demo/loss");   // loss.svg, loss.png
 *
 * Labels are UTF-8; malformed bytes are drawn as '?', control characters as
 * spaces, and a label is cut at 255 bytes.
 */
#ifndef HPT_PLOT_H
#define HPT_PLOT_H

#include <stdint.h>
#include "hpt.h"

#define HPT_PLOT_MAX_SERIES 16
#define HPT_PLOT_MAX_SIDE 8192   /* largest width or height accepted, pixels */

typedef struct hpt_plot_series {
    const char *name;        /* legend label; NULL or "": not in the legend */
    const double *x, *y;     /* (n,) points; x NULL: x = 0..n-1; a point whose x or y is
                              * NaN/Inf is skipped and breaks the line (a gap) */
    int n;
    int dashed;              /* 1: dashed line */
} hpt_plot_series;

/* A shaded vertical span (e.g. a training phase), clipped to the x range. */
typedef struct hpt_plot_band { double x0, x1; } hpt_plot_band;

typedef struct hpt_plot {
    const char *title, *xlabel, *ylabel;           /* NULL: none */
    const hpt_plot_series *series; int nseries;    /* (nseries,), nseries <= 16; color i = palette[i] */
    const hpt_plot_band *bands; int nbands;        /* (nbands,), drawn first, a light tint */
    const char *band_label;                        /* legend entry for the bands (NULL: none) */
    int width, height;                             /* pixels; 0 = 800 x 500 */
    double ymin, ymax;                             /* both 0: auto from the data with a small margin */
    double hline; const char *hline_label;         /* horizontal reference line; NaN = none.
                                                    * Careful: a zeroed struct has hline = 0, a line
                                                    * at y = 0; hpt_plot_init sets NaN. */
} hpt_plot;

/* Zeroes *p and sets hline = NaN: no title, no series, default size, auto y. */
void hpt_plot_init(hpt_plot *p);

/* Palette color of series i as 0xRRGGBB (i taken modulo 12). */
uint32_t hpt_plot_color(int i);

/* Writes <path_noext>.svg and <path_noext>.png, each atomically (temporary
 * name, fsync, rename), the SVG first. The directory must exist.
 * Errors: HPT_ERR_ARG for a bad argument (NULL, > 16 series, negative n,
 * NULL y, ymin >= ymax, a size below 160 x 120 or above HPT_PLOT_MAX_SIDE,
 * a data range too wide for doubles, labels that leave no room for the plot),
 * HPT_ERR_NOMEM, HPT_ERR_IO; the message is in hpt_errmsg(). Degenerate data
 * (no series, one point, constant y, all-NaN) gives a valid, empty-looking
 * chart and HPT_OK. */
hpt_status hpt_plot_write(const hpt_plot *p, const char *path_noext);

#endif /* HPT_PLOT_H */
