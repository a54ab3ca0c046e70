/*
 * device.h — where a model's flat arenas live, and the arena-level operations
 * the trainer, the optimizers and the hybrid do on them.
 *
 * The model's own ops (forward, backward) run on whatever memory the model
 * was given; everything else that sweeps a parameter-sized buffer (the
 * optimizer updates, the weight average, the hybrid's snapshots and outer
 * step, the gradient norm) goes through one row of this table, so that a
 * GPU backend is a row and a file (src/cuda/device_cuda.cu), and the code
 * above never tests which device it runs on. The CPU row calls the kernels
 * of src/kernels: the same bits as before the table existed.
 *
 * Pointers passed to a row's operations are that row's memory (from its
 * alloc); upload/download are the only ones that take host memory. Every
 * reduction has a fixed order (the same bits for any thread count), and each
 * row documents where its bits differ from the CPU row's.
 */
#ifndef HPT_DEVICE_H
#define HPT_DEVICE_H

#include "../base/base.h"

#include <stddef.h>

/* One AdamW update over n values (torch.optim.AdamW's arithmetic, kernels.h's
 * adamw_update_scaled): the gradient times gscale (the clipping factor, 1 for
 * none), t the 1-based step. */
typedef struct hpt_dev_adamw {
    float gscale, lr, beta1, beta2, eps, weight_decay;
    int t;
} hpt_dev_adamw;

/* One schedule-free AdamW update (optim.h's hpt_sf_update_scaled): as above
 * plus c, the averaging coefficient of this step. */
typedef struct hpt_dev_sf {
    float gscale, lr, beta1, beta2, eps, weight_decay, c;
    int t;
} hpt_dev_sf;

typedef struct hpt_device {
    const char *name;        /* --device's value: "cpu", "cuda" */
    const char *summary;     /* one line for --help */
    /* NULL when this process can use the device, else why not (built
     * without it, no device found, ...), said in full to the user */
    const char *(*unavailable)(void);

    /* memory: n floats; NULL when it cannot be had */
    float *(*alloc)(size_t n);
    void (*free)(float *p);
    void (*upload)(float *dst, const float *host, size_t n);
    void (*download)(float *host, const float *src, size_t n);
    void (*copy)(float *dst, const float *src, size_t n);

    /* elementwise */
    void (*fill)(float *x, float v, size_t n);
    void (*swap)(float *a, float *b, size_t n);
    void (*scale)(float *x, float s, size_t n);               /* x *= s */
    void (*axpy)(float *y, float a, const float *x, size_t n);  /* y += a x */
    void (*lerp)(float *e, float a, float b, const float *x, size_t n);   /* e = a e + b x */

    /* reductions, in double, fixed order */
    double (*sumsq)(const float *x, size_t n);
    double (*dot)(const float *a, const float *b, size_t n);

    /* optimizers */
    void (*adamw)(float *params, const float *grads, float *m, float *v, size_t n, const hpt_dev_adamw *a);
    void (*sf_adamw)(float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a);
    /* optim.h's hpt_outer_step (DiLoCo's outer Nesterov step) */
    void (*outer_step)(float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b);
    /* optim.h's hpt_sf_outer_step (the outer step under schedule-free AdamW) */
    void (*sf_outer_step)(float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b);
} hpt_device;

/* The row named `name` (NULL: the default, "cpu"), refused with the reason
 * when it is unknown (the message lists the table) or unavailable here. */
hpt_status hpt_device_get(const char *name, const hpt_device **out);

/* hpt_device_get, then the rule of this version: the model families'
 * forward and backward are CPU code, so a run (train, eval, sample) on any
 * other row is refused with the reason. The one check every entry point
 * that takes --device makes (hpt.h's hpt_device_check). */
hpt_status hpt_device_usable(const char *name, const hpt_device **out);

/* The table, in order, for --help and the tests: NULL past the last row. */
const hpt_device *hpt_device_at(int i);

/* The rows, each defined in its own file. */
extern const hpt_device hpt_device_cpu;
extern const hpt_device hpt_device_cuda;

#endif /* HPT_DEVICE_H */
