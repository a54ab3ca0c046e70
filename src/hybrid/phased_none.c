/*
 * phased_none.c — the phased design's row in a build without it (make
 * PHASED=0 leaves src/hybrid/phased/ out): absent, so --predictor coast,
 * stale-adam, linear and shrink and --outer-gate dynamics are refused with
 * the reason (hybrid_config.c) and the rest of the hybrid runs as before.
 */
#include "extension.h"

const hpt_hyb_ext *const hpt_hyb_ext_phased_row = NULL;
