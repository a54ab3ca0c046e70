/*
 * plugin.c — a plugin found and opened (see plugin.h).
 */
#include "plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *open_at(const char *path, const char *sym, int dl_flags, char *why, size_t why_size) {
    void *h = dlopen(path, dl_flags);
    if (!h) {
        snprintf(why, why_size, "the plugin cannot be loaded (%s)", dlerror());
        return NULL;
    }
    void *p = dlsym(h, sym);
    if (!p) snprintf(why, why_size, "'%s' has no %s", path, sym);
    return p;
}

void *hpt_plugin_open(const char *file, const char *env, const char *build_dir, const char *sym, int dl_flags,
                      char *why, size_t why_size) {
    const char *named = getenv(env);
    if (named && *named) return open_at(named, sym, dl_flags, why, why_size);
    char path[4096];
    Dl_info self = {0};
    if (dladdr((void *)hpt_plugin_open, &self) && self.dli_fname) {
        snprintf(path, sizeof path, "%s", self.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash) {
            snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", file);
            FILE *f = fopen(path, "rb");
            if (f) {
                fclose(f);
                return open_at(path, sym, dl_flags, why, why_size);
            }
        }
    }
    snprintf(path, sizeof path, "%s/%s", build_dir, file);
    return open_at(path, sym, dl_flags, why, why_size);
}
