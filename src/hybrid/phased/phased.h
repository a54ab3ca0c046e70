/*
 * phased.h — the phased controller (--predictor coast|stale-adam|linear|
 * shrink): Warmup -> Full -> Predict -> Correct under the phase machine
 * (phase.h), gated by the learned dynamics' confidence (learner.h), each
 * Predict phase verified with forward-only probes and a line search and
 * rolled back byte for byte when the jump does not pay. It is the hybrid
 * driver's extension (../extension.h; its row is phased_ext.c): the driver
 * creates it only when one of these predictors is selected, runs its steps
 * through the row's step hook and saves its blocks through the row's walk;
 * it reaches the driver only through the services it is handed.
 */
#ifndef HPT_PHASED_H
#define HPT_PHASED_H

#include "../../train/trainer.h"
#include "../extension.h"
#include "learner.h"
#include "phase.h"

#include <stddef.h>

/* The probe batches and the line search's direction: one zeroed arena
 * carved by this size table (4 bytes an element).
 *   dir           (n) the line-search direction
 *   pB            (P) rows of each probe batch, copied out of the task
 *   ptok, ptgt    (P, maxB * T) its tokens and targets
 *   px            (P, maxB * xdim) its images (0 floats for text) */
#define PHASED_BUFS(X)                                   \
    X(float, dir,  n)                                    \
    X(int,   pB,   (size_t)p->P)                         \
    X(int,   ptok, (size_t)p->P * p->maxB * p->T)        \
    X(int,   ptgt, (size_t)p->P * p->maxB * p->T)        \
    X(float, px,   (size_t)p->P * p->maxB * p->xdim)

typedef struct hpt_phased {
    hpt_hyb_services svc;    /* the driver's, as handed */
    hpt_model *m;            /* the trainer's */
    size_t n;                /* its parameters */
    hpt_learner *learn;      /* the learned dynamics (the row's, phased_ext.c) */
    hpt_phase_ctl ph;
    int P, maxB, T, xdim;    /* probe batches, and the task's batch shape */
#define X(type, name, size) type *name;
    PHASED_BUFS(X)
#undef X
    float *buf_arena;
    size_t buf_bytes;
    float accept_ema;        /* acceptance history of verified jumps, in [0, 1] */
} hpt_phased;

/* The controller on the driver's services and the learned dynamics (not
 * its own: the row frees them), every buffer allocated (*out NULL on
 * failure). */
hpt_status hpt_phased_new(const hpt_hyb_services *svc, hpt_learner *learn, hpt_phased **out);
void hpt_phased_free(hpt_phased *p);
/* One call of the step hook: a Predict phase or one real step, as the
 * phase machine decides; t0 is when the call began (its time is training
 * time). */
hpt_status hpt_phased_step(hpt_phased *p, hpt_step_info *info, double t0);
/* After every real step: what the controller learns from it (the acceptance
 * history relaxes, the phase machine counts the step). */
void hpt_phased_real_step_done(hpt_phased *p);
/* A rollback or a divergence: Full steps for twice --full-steps (phase.h). */
void hpt_phased_hold(hpt_phased *p, const char *why);
/* The phase machine's config from the hybrid's (its --full-steps ...
 * --predict-waste-budget rows). */
void hpt_phased_phase_config(const hpt_hybrid_config *c, hpt_phase_config *pc);

#endif /* HPT_PHASED_H */
