/*
 * cli.h — what the command-line files share: exits with a message, flag
 * parsing, and the list of hybrid-only flags. The library never exits;
 * everything here may.
 */
#ifndef HPT_CLI_H
#define HPT_CLI_H

#include "hpt.h"

#include <stdio.h>

/* Prints "hpt: <fmt with a>" and a hint to stderr, exits 2. */
void die_usage(const char *fmt, const char *a) __attribute__((noreturn));
/* Prints the library's last error, exits 2 for HPT_ERR_ARG, else 1. */
void die_status(hpt_status st) __attribute__((noreturn));
long parse_int(const char *flag, const char *v, long lo, long hi);
float parse_float(const char *flag, const char *v);

/* Flag iterator over argv accepting "--name value" and "--name=value". */
typedef struct args { int argc, i; char **argv; const char *name; const char *val; char buf[128]; } args;
int next_flag(args *a);
const char *flag_value(args *a);

/* 1 if `name` is one of hpt train's hybrid-only flags; *takes_value says
 * whether a value follows it (--whole-phase and --cost-by-time have none). */
int hpt_cli_hybrid_flag(const char *name, int *takes_value);

void fmt_eta(char *buf, size_t n, double s);

/* runlog.c */
void *cli_xrealloc(void *p, size_t n);                      /* exits on OOM */
char *cli_read_text(const char *path);                      /* NUL-terminated; NULL on error */
/* DIR/loss.{svg,png} (and accuracy.{svg,png}) from DIR/metrics.jsonl */
hpt_status cli_plot_run(const char *dir);

/* hpt plot (runlog.c) */
int cmd_plot(int argc, char **argv);
void usage_plot(FILE *f);

/* hpt compare (compare.c) */
int cmd_compare(int argc, char **argv);
void usage_compare(FILE *f);

/* hpt import, export, eval (hf.c) */
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
void usage_tokenize(FILE *f);
void usage_hf(FILE *f);

#endif /* HPT_CLI_H */
