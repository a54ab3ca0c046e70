/*
 * device.c — the table of devices (device.h) and their instances. Adding
 * one is a row here and a file defining it.
 */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hpt_device *const table[] = {&hpt_device_cpu, &hpt_device_cuda, &hpt_device_guard};
enum { NDEV = sizeof table / sizeof table[0] };

const hpt_device *hpt_device_at(int i) { return i >= 0 && i < NDEV ? table[i] : NULL; }

/* The row named `name` that runs models here (the check every entry point
 * that takes --device makes, hpt.h's hpt_device_check), refused with the
 * reason. Which families run on it is the family's to say (the GPT-2
 * family on every such row; the classifiers on the CPU alone). */
static hpt_status find_row(const char *name, const hpt_device **out) {
    *out = NULL;
    if (!name) name = "cpu";
    for (int i = 0; i < NDEV; i++) {
        if (strcmp(table[i]->name, name)) continue;
        const char *why = table[i]->unavailable();
        if (why) return hpt_fail(HPT_ERR_ARG, "--device %s: %s", name, why);
        const hpt_device *row = table[i]->row ? table[i]->row() : table[i];
        if (!row->nn) return hpt_fail(HPT_ERR_ARG, "--device %s: this device runs no model (it has no kernels)", name);
        *out = row;
        return HPT_OK;
    }
    char names[128] = "";
    for (int i = 0; i < NDEV; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", table[i]->name);
    return hpt_fail(HPT_ERR_ARG, "--device '%s': unknown (one of: %s)", name, names);
}

hpt_status hpt_device_check(const char *name) {
    const hpt_device *row;
    return find_row(name, &row);
}

hpt_status hpt_device_open(const char *name, const hpt_device_settings *s, hpt_device **out) {
    *out = NULL;
    const hpt_device *row;
    HPT_TRY(find_row(name, &row));
    hpt_device *d = malloc(sizeof *d);
    if (!d) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    *d = *row;
    d->precision = s && s->precision ? s->precision : "fp32";
    d->mem_limit = s ? s->mem_limit : 0;
    d->state = NULL;
    hpt_status st = d->open ? d->open(d) : HPT_OK;
    if (st != HPT_OK) { free(d); return st; }
    *out = d;
    return HPT_OK;
}

void hpt_device_close(hpt_device *d) {
    if (!d || d == &hpt_device_cpu) return;
    if (d->close) d->close(d);
    free(d);
}

hpt_status hpt_device_check_plan(const hpt_device *d, size_t need, const char *detail) {
    if (!d->mem_info) return HPT_OK;
    size_t free_b = 0, total_b = 0;
    d->mem_info(d, &free_b, &total_b);
    char nb[32], fb[32], tb[32], lb[32];
    hpt_fmt_bytes(nb, sizeof nb, need);
    hpt_fmt_bytes(fb, sizeof fb, free_b);
    hpt_fmt_bytes(tb, sizeof tb, total_b);
    if (d->mem_limit && need > d->mem_limit) {
        hpt_fmt_bytes(lb, sizeof lb, d->mem_limit);
        return hpt_fail(HPT_ERR_NOMEM, "--device %s: training needs %s of device memory (%s), more than "
                        "--vram-limit %s allows; nothing was allocated", d->name, nb, detail, lb);
    }
    if (need > free_b)
        return hpt_fail(HPT_ERR_NOMEM, "--device %s: training needs %s of device memory (%s) but only %s of %s is "
                        "free; nothing was allocated: choose a smaller model or batch", d->name, nb, detail, fb, tb);
    return HPT_OK;
}
