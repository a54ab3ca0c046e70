/*
 * version.c — hpt_version (the one definition of the version: `hpt
 * --version` prints it, the Python binding reports it) and
 * hpt_struct_size, the sizes of the public structs as this library was
 * built, for bindings that mirror them by hand.
 */
#include "hpt.h"

#include <string.h>

const char *hpt_version(int *major, int *minor, int *patch) {
    if (major) *major = HPT_VERSION_MAJOR;
    if (minor) *minor = HPT_VERSION_MINOR;
    if (patch) *patch = HPT_VERSION_PATCH;
    return HPT_VERSION_STRING;
}

size_t hpt_struct_size(const char *name) {
    static const struct { const char *name; size_t size; } sizes[] = {
        {"hpt_tensor_info", sizeof(hpt_tensor_info)},
        {"hpt_batch", sizeof(hpt_batch)},
        {"hpt_gpt2_config", sizeof(hpt_gpt2_config)},
        {"hpt_mlp_config", sizeof(hpt_mlp_config)},
        {"hpt_cnn_config", sizeof(hpt_cnn_config)},
        {"hpt_step_info", sizeof(hpt_step_info)},
        {"hpt_setting", sizeof(hpt_setting)},
        {"hpt_train_config", sizeof(hpt_train_config)},
        {"hpt_hybrid_config", sizeof(hpt_hybrid_config)},
        {"hpt_run_options", sizeof(hpt_run_options)},
        {"hpt_train_callbacks", sizeof(hpt_train_callbacks)},
    };
    if (!name) return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(name, sizes[i].name)) return sizes[i].size;
    return 0;
}
