/*
 * hpt_settings.h — settings reflection: every field of
 * hpt_train_config, hpt_run_options and hpt_hybrid_config as a row of one
 * table (flag, type, range, default, help), and `hpt train`'s argument list
 * parsed into the three configs and run.
 * Included by hpt.h (which it needs: include either).
 */
#include "hpt.h"  /* first, outside the guard: hpt.h includes this header at its end */
#ifndef HPT_INCLUDE_SETTINGS_H
#define HPT_INCLUDE_SETTINGS_H
#include "hpt_hybrid.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- settings */

/* What a run is asked to do beside its configs: operational settings of the
 * command line, never stored in checkpoints. */
typedef struct hpt_run_options {
    int hybrid;               /* --mode: 0 baseline, 1 hybrid */
    const char *resume_dir;   /* --resume DIR, or NULL */
    int log_interval;         /* --log-interval: progress every N steps off a terminal; 0 auto */
    int rss_warn_mib;         /* --rss-warn / --rss-limit in MiB, 0 off (hpt_trainer_set_memory_limits) */
    int rss_limit_mib;
    int allow_data_change;    /* --allow-data-change: a resume goes on when the data changed (else refused) */
} hpt_run_options;

void hpt_run_options_default(hpt_run_options *o);

/* Every field of hpt_train_config, hpt_run_options and hpt_hybrid_config is
 * one row of the settings table (src/train/settings.h) with its flag, type,
 * range, default and help; defaults, checks, checkpoint encoding, the
 * command line's parsing and its help are generated from it. */
typedef enum hpt_setting_group {
    HPT_SET_TRAIN,    /* hpt_train_config */
    HPT_SET_RUN,      /* hpt_run_options */
    HPT_SET_HYBRID    /* hpt_hybrid_config */
} hpt_setting_group;

typedef enum hpt_setting_type {
    HPT_SET_INT,      /* int */
    HPT_SET_U64,      /* uint64_t */
    HPT_SET_FLOAT,    /* float */
    HPT_SET_STR,      /* const char *, not copied; min and max bound its length */
    HPT_SET_ENUM,     /* int: the index of one of names */
    HPT_SET_NAME,     /* const char *: one of names */
    HPT_SET_SWITCH    /* int (an enum) in [min, max]: a flag without a value, which sets `on` */
} hpt_setting_type;

#define HPT_SET_MIN_OPEN   1u   /* the range excludes min */
#define HPT_SET_MAX_OPEN   2u   /* the range excludes max */
#define HPT_SET_RESUME_OK  4u   /* may be given with --resume */
#define HPT_SET_NOT_STORED 8u   /* operational: not in checkpoints (every HPT_SET_RUN row is) */
#define HPT_SET_PHASED    16u   /* a hybrid row of the phased design (src/hybrid/phased/, the hybrid's
                                 * extension): its own heading in the help */
#define HPT_SET_NO_FLAG   32u   /* stored, but set through another row's flag (the run copies it): no
                                 * flag of its own, not in the help; its flag names it in messages */

typedef struct hpt_setting {
    const char *flag;           /* "--n-layer" */
    const char *field;          /* "n_layer" */
    hpt_setting_group group;
    hpt_setting_type type;
    size_t offset;              /* of the field in its group's struct */
    double min, max;            /* the range; STR: of the length; SWITCH: of the field */
    unsigned flags;             /* HPT_SET_*; bits 8..15: the TCFG version that first stored it */
    const char *meta;           /* the value's name in the help ("N", "X", "PATH"), or NULL */
    /* ENUM, NAME: the allowed values in stored order, a NULL-terminated
     * array or a function of the index (NULL past the last); read them
     * through hpt_setting_name */
    const char *const *names;
    const char *(*name_at)(int i);
    int on;                     /* SWITCH: the value the flag sets (the opposite of the default) */
    const char *help;           /* one line; a "[...]" at its end stands for the default */
} hpt_setting;

/* The rows of a group in table order (the order of `hpt --help` and of the
 * checkpoint encoding); *n their count. */
const hpt_setting *hpt_settings(hpt_setting_group g, int *n);
/* The row of a flag ("--n-layer") in any group, or NULL. */
const hpt_setting *hpt_setting_find(const char *flag);
/* ENUM, NAME: the i-th allowed value, NULL past the last. */
const char *hpt_setting_name(const hpt_setting *s, int i);
/* Sets s's field in cfg (a struct of s's group) from text (NULL for a
 * SWITCH), checking the type and range; HPT_ERR_ARG with a message naming
 * the flag. Strings are not copied: text must outlive cfg. */
hpt_status hpt_setting_parse(const hpt_setting *s, void *cfg, const char *text);
/* s's value in cfg as text ("" for a NULL string); returns the length
 * snprintf would write. */
int hpt_setting_format(const hpt_setting *s, const void *cfg, char *buf, size_t n);

/* `hpt train`'s argument list ("--flag value" or "--flag=value", every row
 * of the table above) as the three configs, with the checks between flags
 * (--max-iters or --epochs, hybrid flags only with --mode hybrid, ...). The
 * command line and the Python binding both parse here. */
typedef struct hpt_train_args {
    hpt_train_config train;
    hpt_run_options run;
    hpt_hybrid_config hybrid;
    int help;              /* --help was given: nothing after it was read */
    int threads_given;     /* --threads' value, -1 if not given (a resume checks it against the run's) */
    int mode_given;        /* --mode was given (a resume checks it against the checkpoint) */
    unsigned arch_given;   /* which architecture flags were given (--init takes the others from its model) */
} hpt_train_args;

/* Defaults for --task / --model, then each flag in turn; HPT_ERR_ARG with a
 * message naming the flag. Strings point into argv: it must outlive a. */
hpt_status hpt_train_args_parse(hpt_train_args *a, int argc, char *const *argv);
/* A new run's last step before training (not for --resume): --init's
 * architecture from its model file, then the train and hybrid checks. */
hpt_status hpt_train_args_resolve(hpt_train_args *a);
/* The config struct of group g inside a (for hpt_setting_format). */
void *hpt_train_args_group(hpt_train_args *a, hpt_setting_group g);
/* sizeof(hpt_train_args), for bindings that allocate it without this header. */
size_t hpt_train_args_sizeof(void);
/* What a caller adds around the run hpt_train_args_run drives: its display,
 * its signal handlers, its plots. Every hook may be NULL; each gets user
 * first and is called on the thread that called hpt_train_args_run. */
typedef struct hpt_train_callbacks {
    void *user;
    /* a line of the run's log (its config, the memory table, warnings) */
    hpt_log_fn log;
    /* after every optimizer step (progress) */
    hpt_step_fn step;
    /* the trainer is built (new, or resumed from its checkpoint) and its
     * first step not yet taken: tr's config is resolved (max_iters from
     * --epochs, out_dir), hc is the hybrid config the run uses (a resumed
     * run's from its checkpoint), NULL in a baseline run. A status other
     * than HPT_OK ends the run with it, unrun (the library adds no message
     * of its own: the callback's reason is the callback's to give). */
    hpt_status (*start)(void *user, hpt_trainer *tr, const hpt_hybrid_config *hc);
    /* the run start accepted has ended with st (HPT_OK; HPT_ERR_INTERRUPTED
     * with a checkpoint to resume; else its failure, whose message
     * hpt_errmsg still holds), its trainer freed: out_dir's files are
     * complete and unlocked. Not called when start was not, or refused. */
    void (*end)(void *user, hpt_status st, const char *out_dir);
} hpt_train_callbacks;

/* The run a describes, start to end, in this process (one rank): a new
 * trainer or the --resume DIR one (whose mode, and hybrid config, come from
 * its checkpoint; a --mode that differs is HPT_ERR_ARG), the memory limits,
 * cb's start, hpt_trainer_run or hpt_trainer_run_hybrid, the trainer freed,
 * cb's end. HPT_ERR_INTERRUPTED after hpt_request_stop, with a checkpoint
 * to resume. cb may be NULL. `hpt train` runs here: its progress display,
 * signal handlers and plots are its callbacks, and the mpirun group is
 * started before and ended after the call. */
hpt_status hpt_train_args_run(hpt_train_args *a, const hpt_train_callbacks *cb);

#ifdef __cplusplus
}
#endif
#endif /* HPT_INCLUDE_SETTINGS_H */
