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

hpt_status hpt_device_check(const char *name) {
    const hpt_device *d;
    return hpt_device_usable(name, &d);
}
