/*
 * prof.c — see prof.h.
 */
#include "prof.h"
#include "base.h"

#include <string.h>

int hpt_prof_on = 0;
void (*hpt_prof_sync)(void);
hpt_prof_slot hpt_prof_acc[HPT_PROF_NSLOTS];

#define HPT_PROF_NAME_(id, name) name,
static const char *const prof_names[HPT_PROF_NSLOTS] = { HPT_PROF_SLOTS(HPT_PROF_NAME_) };
#undef HPT_PROF_NAME_

void hpt_prof_enable(int on) { hpt_prof_on = on != 0; }
void hpt_prof_reset(void) { memset(hpt_prof_acc, 0, sizeof hpt_prof_acc); }
double hpt_prof_clock(void) { return hpt_now(); }

const char *hpt_prof_name(int slot) {
    return slot >= 0 && slot < HPT_PROF_NSLOTS ? prof_names[slot] : "?";
}

int hpt_prof_is_gemm(int slot) {
    return slot >= 0 && slot < HPT_PROF_NSLOTS && !strncmp(prof_names[slot], "gemm ", 5);
}
