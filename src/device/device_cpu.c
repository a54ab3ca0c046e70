/*
 * device_cpu.c — the CPU row of the device table: host memory (64-byte
 * aligned, zeroed, from the arena allocator) and src/kernels/sweep.c's
 * kernels, OpenMP-parallel. The reference every other row is tested against.
 */
#include "device.h"
#include "../kernels/kernels.h"

#include <string.h>

static const char *cpu_unavailable(void) { return NULL; }

static float *cpu_alloc(size_t n) { return hpt_arena_alloc(n); }
static void cpu_free(float *p) { hpt_arena_free(p); }
/* host and device memory are one here: the three copies are memcpy */
static void cpu_copy(float *dst, const float *src, size_t n) {
    if (n) memcpy(dst, src, n * sizeof(float));
}

static void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, const hpt_dev_adamw *a) {
    adamw_update_scaled(params, grads, m, v, n, a->gscale, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                        a->t);
}

static void cpu_sf_adamw(float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a) {
    sf_adamw_update_scaled(y, g, z, x, v, n, a->gscale, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->c,
                           a->t);
}

const hpt_device hpt_device_cpu = {
    .name = "cpu",
    .summary = "the host's cores (OpenMP, OpenBLAS): the default",
    .unavailable = cpu_unavailable,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .fill = fill_value,
    .swap = swap_inplace,
    .scale = scale_inplace,
    .axpy = axpy_inplace,
    .lerp = lerp_inplace,
    .sumsq = sumsq,
    .dot = dot_product,
    .adamw = cpu_adamw,
    .sf_adamw = cpu_sf_adamw,
    .outer_step = outer_step,
    .sf_outer_step = sf_outer_step,
};
