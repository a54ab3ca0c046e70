/*
 * comm.c — the process group over MPI (see comm.h). Only this file includes
 * mpi.h: the rest of hpt sees an opaque handle and status codes.
 */
#include "comm.h"
#include "base.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

struct hpt_comm {
    int rank, size;
    int mpi;               /* 1: MPI_Init was called (and MPI_Finalize is owed) */
    hpt_comm_stats stats;
};

static hpt_comm *world;

/* Launched by mpirun? OpenMPI sets OMPI_COMM_WORLD_SIZE in every rank's
 * environment; PMIx and PMI launchers (srun, MPICH's hydra) set theirs. A
 * plain ./hpt has none, and then MPI is never started: OpenMPI's singleton
 * init would spawn its runtime for a group of one. */
static int launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

hpt_status hpt_comm_init(hpt_comm **out) {
    *out = NULL;
    HPT_ASSERT(!world);  /* one group per process */
    hpt_comm *c = calloc(1, sizeof *c);
    if (!c) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    c->size = 1;
    if (launched_by_mpirun()) {
        /* the OpenMP workers never call MPI: the main thread alone talks */
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(c);
            return hpt_fail(HPT_ERR_IO, "MPI_Init failed (started by mpirun, but MPI could not start)");
        }
        c->mpi = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    }
    world = c;
    *out = c;
    return HPT_OK;
}

void hpt_comm_free(hpt_comm *c) {
    if (!c) return;
    if (c->mpi) MPI_Finalize();
    if (world == c) world = NULL;
    free(c);
}

hpt_comm *hpt_comm_world(void) { return world; }
int hpt_comm_rank(const hpt_comm *c) { return c ? c->rank : 0; }
int hpt_comm_size(const hpt_comm *c) { return c ? c->size : 1; }
hpt_comm_stats hpt_comm_stats_of(const hpt_comm *c) { return c ? c->stats : (hpt_comm_stats){0}; }

hpt_status hpt_comm_allreduce_sum(hpt_comm *c, float *buf, size_t n) {
    if (!c || c->size == 1) return HPT_OK;
    double t0 = hpt_now();
    /* MPI counts are ints: arenas past 2^31 floats go in pieces (element
     * sums, so the pieces change no bits) */
    for (size_t off = 0; off < n;) {
        int k = n - off > (size_t)INT_MAX ? INT_MAX : (int)(n - off);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + off, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return hpt_fail(HPT_ERR_IO, "MPI_Allreduce of %d floats failed", k);
        off += (size_t)k;
    }
    c->stats.calls++;
    c->stats.bytes += n * sizeof(float);
    c->stats.seconds += hpt_now() - t0;
    return HPT_OK;
}

hpt_status hpt_comm_bcast(hpt_comm *c, void *buf, size_t n, int root) {
    if (!c || c->size == 1) return HPT_OK;
    for (size_t off = 0; off < n;) {
        int k = n - off > (size_t)INT_MAX ? INT_MAX : (int)(n - off);
        if (MPI_Bcast((char *)buf + off, k, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
            return hpt_fail(HPT_ERR_IO, "MPI_Bcast of %d bytes failed", k);
        off += (size_t)k;
    }
    return HPT_OK;
}

hpt_status hpt_comm_send(hpt_comm *c, const float *buf, size_t n, int to) {
    if (!c || c->size == 1) return HPT_OK;
    for (size_t off = 0; off < n;) {
        int k = n - off > (size_t)INT_MAX ? INT_MAX : (int)(n - off);
        if (MPI_Send(buf + off, k, MPI_FLOAT, to, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return hpt_fail(HPT_ERR_IO, "MPI_Send of %d floats to rank %d failed", k, to);
        off += (size_t)k;
    }
    return HPT_OK;
}

hpt_status hpt_comm_recv(hpt_comm *c, float *buf, size_t n, int from) {
    if (!c || c->size == 1) return HPT_OK;
    for (size_t off = 0; off < n;) {
        int k = n - off > (size_t)INT_MAX ? INT_MAX : (int)(n - off);
        if (MPI_Recv(buf + off, k, MPI_FLOAT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return hpt_fail(HPT_ERR_IO, "MPI_Recv of %d floats from rank %d failed", k, from);
        off += (size_t)k;
    }
    return HPT_OK;
}

int hpt_comm_all_ok(hpt_comm *c, int ok) {
    if (!c || c->size == 1) return ok != 0;
    int mine = ok != 0, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) hpt_comm_abort(c, 1);
    return all;
}

int hpt_comm_differ(hpt_comm *c, uint32_t v, int *rank, uint32_t *value) {
    if (!c || c->size == 1) return 0;
    uint32_t ref = v;
    if (MPI_Bcast(&ref, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) hpt_comm_abort(c, 1);
    /* the lowest rank that differs, with its value: (rank, value) pairs by MINLOC */
    struct { int differs, rank; } mine = {v != ref ? 0 : 1, c->rank}, first;
    int count = v != ref, total = 0;
    if (MPI_Allreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Allreduce(&count, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        hpt_comm_abort(c, 1);
    if (total == 0) return 0;
    uint32_t theirs = v;
    if (MPI_Bcast(&theirs, 1, MPI_UINT32_T, first.rank, MPI_COMM_WORLD) != MPI_SUCCESS) hpt_comm_abort(c, 1);
    if (rank) *rank = first.rank;
    if (value) *value = theirs;
    return total;
}

void hpt_comm_abort(hpt_comm *c, int code) {
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}
