/*
 * comm.h — the process group a data-parallel run trains in: MPI (OpenMPI)
 * when the program was started by mpirun, a group of one otherwise. The
 * trainer talks to it through these calls only. MPI itself is a plugin,
 * libhpt_mpi.so (src/mpi/comm_mpi.c, the only file that includes mpi.h),
 * opened by hpt_comm_init under mpirun alone: libmpi and what it loads
 * (hwloc, libevent, OpenMPI's runtime) stay out of every program that links
 * libhpt and out of every run that is not distributed.
 *
 * One group per process (MPI's world is process-wide, as hpt_set_threads'
 * pool is): hpt_comm_init starts it, hpt_comm_world returns it to the
 * layers that need it (NULL before init or after free: a group of one).
 * Every collective is called by every rank in the same order; a failure
 * inside MPI aborts the whole job (MPI's default error handler), so no rank
 * waits forever on one that died.
 */
#ifndef HPT_COMM_H
#define HPT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "hpt.h"

typedef struct hpt_comm hpt_comm;

/* Starts the group: opens the MPI plugin and MPI_Init when launched by
 * mpirun (OpenMPI's OMPI_COMM_WORLD_SIZE, or a PMIx/PMI launcher's size, in
 * the environment), else a group of one without touching MPI (no singleton
 * start-up: a plain ./hpt stays what it was). Sets hpt_comm_world(). The
 * plugin is looked for as hpt_plugin_open says (plugin.h): $HPT_MPI_PLUGIN,
 * beside the binary or library, then the build directory. */
hpt_status hpt_comm_init(hpt_comm **out);
/* MPI_Finalize (when it was initialised) and clears hpt_comm_world(). */
void hpt_comm_free(hpt_comm *c);
/* The process's group, or NULL (a group of one). */
hpt_comm *hpt_comm_world(void);

int hpt_comm_rank(const hpt_comm *c);   /* 0 for NULL */
int hpt_comm_size(const hpt_comm *c);   /* 1 for NULL */

/* buf[i] = the sum over ranks of buf[i], in place, on every rank. With two
 * ranks each element is a single IEEE addition a + b (commutative, so the
 * same bits on both ranks and in a single process that adds the same two);
 * with more, MPI's reduction order. Counted in the statistics below. */
hpt_status hpt_comm_allreduce_sum(hpt_comm *c, float *buf, size_t n);
/* Rank root's n bytes to every rank. */
hpt_status hpt_comm_bcast(hpt_comm *c, void *buf, size_t n, int root);
/* n floats from this rank to rank `to`, and their receipt from rank
 * `from` (blocking; a checkpoint's gather of every rank's own state to the
 * writing rank). Not counted in the statistics below. */
hpt_status hpt_comm_send(hpt_comm *c, const float *buf, size_t n, int to);
hpt_status hpt_comm_recv(hpt_comm *c, float *buf, size_t n, int from);
/* 1 on every rank if every rank passed ok != 0, else 0 on every rank: a
 * check that one rank failed (a refused run directory, a bad checkpoint)
 * ends them all, not only the one that saw it. */
int hpt_comm_all_ok(hpt_comm *c, int ok);
/* The ranks whose v differs from rank 0's: returns their count, and the
 * first such rank and its value in *rank and *value (when non-NULL). */
int hpt_comm_differ(hpt_comm *c, uint32_t v, int *rank, uint32_t *value);
/* Ends every rank of the job with status code (MPI_Abort), or exit(code)
 * in a group of one. */
void hpt_comm_abort(hpt_comm *c, int code) __attribute__((noreturn));

/* The gradient all-reduces so far: calls, bytes per rank sent, seconds. */
typedef struct hpt_comm_stats { uint64_t calls, bytes; double seconds; } hpt_comm_stats;
hpt_comm_stats hpt_comm_stats_of(const hpt_comm *c);

/* The MPI plugin's table (hpt_comm_mpi_impl in libhpt_mpi.so): MPI's calls
 * on MPI_COMM_WORLD with int counts, each returning 0 (MPI_SUCCESS) or MPI's
 * error code. The group above splits counts past INT_MAX, keeps the
 * statistics and words the errors; the plugin calls nothing of hpt's, so it
 * loads beside ./hpt and a libhpt.so alike. */
typedef struct hpt_comm_mpi {
    int (*init)(int *rank, int *size);          /* MPI_Init_thread, FUNNELED */
    void (*finalize)(void);
    int (*allreduce_sum)(float *buf, int n);    /* in place */
    int (*allreduce_min)(int *v);               /* one int, in place */
    int (*allreduce_isum)(int *v);              /* one int, in place */
    int (*bcast)(void *buf, int n, int root);   /* n bytes */
    int (*send)(const float *buf, int n, int to);
    int (*recv)(float *buf, int n, int from);
    void (*abort)(int code);                    /* MPI_Abort: ends every rank */
} hpt_comm_mpi;

#endif /* HPT_COMM_H */
