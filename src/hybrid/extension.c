/*
 * extension.c — the table of the hybrid driver's extensions (extension.h):
 * each row a design that runs predictors of its own. A build without a
 * row's sources has NULL there (phased_none.c for the phased design,
 * make PHASED=0) and the driver goes on without it.
 */
#include "extension.h"

#include <string.h>

static const hpt_hyb_ext *const *const table[] = {&hpt_hyb_ext_phased_row};
#define NEXT ((int)(sizeof table / sizeof table[0]))

const hpt_pred_ops *hpt_hyb_ext_predictor(const char *name) {
    for (int i = 0; name && i < NEXT; i++)
        for (int j = 0; *table[i] && (*table[i])->predictors[j]; j++)
            if (!strcmp((*table[i])->predictors[j]->name, name)) return (*table[i])->predictors[j];
    return NULL;
}

const hpt_hyb_ext *hpt_hyb_ext_for_predictor(const char *name) {
    for (int i = 0; name && i < NEXT; i++)
        for (int j = 0; *table[i] && (*table[i])->predictors[j]; j++)
            if (!strcmp((*table[i])->predictors[j]->name, name)) return *table[i];
    return NULL;
}

const hpt_hyb_ext *hpt_hyb_ext_gate(void) {
    for (int i = 0; i < NEXT; i++)
        if (*table[i] && (*table[i])->gate_confidence) return *table[i];
    return NULL;
}

hpt_status hpt_hyb_ext_config_check(const hpt_hybrid_config *c) {
    for (int i = 0; i < NEXT; i++)
        if (*table[i] && (*table[i])->config_check) HPT_TRY((*table[i])->config_check(c));
    return HPT_OK;
}
