/*
 * device.c — the table of devices (device.h). Adding one is a row here and
 * a file defining it.
 */
#include "device.h"

#include <stdio.h>
#include <string.h>

static const hpt_device *const table[] = {&hpt_device_cpu, &hpt_device_cuda, &hpt_device_guard};
enum { NDEV = sizeof table / sizeof table[0] };

const hpt_device *hpt_device_at(int i) { return i >= 0 && i < NDEV ? table[i] : NULL; }

hpt_status hpt_device_get(const char *name, const hpt_device **out) {
    *out = NULL;
    if (!name) name = "cpu";
    for (int i = 0; i < NDEV; i++) {
        if (strcmp(table[i]->name, name)) continue;
        const char *why = table[i]->unavailable();
        if (why) return hpt_fail(HPT_ERR_ARG, "--device %s: %s", name, why);
        *out = table[i];
        return HPT_OK;
    }
    char names[128] = "";
    for (int i = 0; i < NDEV; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", table[i]->name);
    return hpt_fail(HPT_ERR_ARG, "--device '%s': unknown (one of: %s)", name, names);
}

hpt_status hpt_device_usable(const char *name, const hpt_device **out) {
    HPT_TRY(hpt_device_get(name, out));
    if ((*out)->nn) return HPT_OK;
    const char *n = (*out)->name;
    *out = NULL;
    return hpt_fail(HPT_ERR_ARG, "--device %s: this device runs no model (it has no kernels)", n);
}

static size_t g_limit;   /* --vram-limit in bytes; 0: none */

void hpt_set_device_memory_limit(size_t bytes) { g_limit = bytes; }

hpt_status hpt_device_check_plan(const hpt_device *d, size_t need, const char *detail) {
    if (!d->mem_info) return HPT_OK;
    size_t free_b = 0, total_b = 0;
    d->mem_info(&free_b, &total_b);
    char nb[32], fb[32], tb[32], lb[32];
    hpt_fmt_bytes(nb, sizeof nb, need);
    hpt_fmt_bytes(fb, sizeof fb, free_b);
    hpt_fmt_bytes(tb, sizeof tb, total_b);
    if (g_limit && need > g_limit) {
        hpt_fmt_bytes(lb, sizeof lb, g_limit);
        return hpt_fail(HPT_ERR_NOMEM, "--device %s: training needs %s of device memory (%s), more than "
                        "--vram-limit %s allows; nothing was allocated", d->name, nb, detail, lb);
    }
    if (need > free_b)
        return hpt_fail(HPT_ERR_NOMEM, "--device %s: training needs %s of device memory (%s) but only %s of %s is "
                        "free; nothing was allocated: choose a smaller model or batch", d->name, nb, detail, fb, tb);
    return HPT_OK;
}

hpt_status hpt_device_check(const char *name) {
    const hpt_device *d;
    return hpt_device_usable(name, &d);
}
