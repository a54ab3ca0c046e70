/*
 * comm.c — the process group (see comm.h): a group of one, or MPI through
 * the plugin's table (src/mpi/comm_mpi.c) when mpirun started the process.
 * The rest of hpt sees an opaque handle and status codes.
 */
#include "comm.h"
#include "base.h"
#include "plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#ifndef HPT_MPI_PLUGIN_DIR
#define HPT_MPI_PLUGIN_DIR "build"
#endif

struct hpt_comm {
    int rank, size;
    const hpt_comm_mpi *mpi;   /* the plugin's table once MPI_Init ran (MPI_Finalize is owed), else NULL */
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

/* MPI's table from libhpt_mpi.so, opened global: OpenMPI's own components,
 * which it dlopens in turn, resolve libmpi's symbols in the process. */
static hpt_status open_mpi(const hpt_comm_mpi **out) {
    char why[1024];
    *out = hpt_plugin_open("libhpt_mpi.so", "HPT_MPI_PLUGIN", HPT_MPI_PLUGIN_DIR, "hpt_comm_mpi_impl",
                           RTLD_NOW | RTLD_GLOBAL, why, sizeof why);
    if (!*out) return hpt_fail(HPT_ERR_IO, "started by mpirun, but MPI is not available: %s", why);
    return HPT_OK;
}

hpt_status hpt_comm_init(hpt_comm **out) {
    *out = NULL;
    HPT_ASSERT(!world);  /* one group per process */
    hpt_comm *c = calloc(1, sizeof *c);
    if (!c) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    c->size = 1;
    if (launched_by_mpirun()) {
        const hpt_comm_mpi *mpi;
        hpt_status st = open_mpi(&mpi);
        if (st == HPT_OK && mpi->init(&c->rank, &c->size) != 0)
            st = hpt_fail(HPT_ERR_IO, "MPI_Init failed (started by mpirun, but MPI could not start)");
        if (st != HPT_OK) {
            free(c);
            return st;
        }
        c->mpi = mpi;
    }
    world = c;
    *out = c;
    return HPT_OK;
}

void hpt_comm_free(hpt_comm *c) {
    if (!c) return;
    if (c->mpi) c->mpi->finalize();
    if (world == c) world = NULL;
    free(c);
}

hpt_comm *hpt_comm_world(void) { return world; }
int hpt_comm_rank(const hpt_comm *c) { return c ? c->rank : 0; }
int hpt_comm_size(const hpt_comm *c) { return c ? c->size : 1; }
hpt_comm_stats hpt_comm_stats_of(const hpt_comm *c) { return c ? c->stats : (hpt_comm_stats){0}; }

/* MPI counts are ints: a piece of at most INT_MAX of the n - off left */
static int piece(size_t n, size_t off) { return n - off > (size_t)INT_MAX ? INT_MAX : (int)(n - off); }

hpt_status hpt_comm_allreduce_sum(hpt_comm *c, float *buf, size_t n) {
    if (!c || c->size == 1) return HPT_OK;
    double t0 = hpt_now();
    /* arenas past 2^31 floats go in pieces (element sums, so the pieces
     * change no bits) */
    for (size_t off = 0; off < n;) {
        int k = piece(n, off);
        if (c->mpi->allreduce_sum(buf + off, k) != 0) return hpt_fail(HPT_ERR_IO, "MPI_Allreduce of %d floats failed", k);
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
        int k = piece(n, off);
        if (c->mpi->bcast((char *)buf + off, k, root) != 0) return hpt_fail(HPT_ERR_IO, "MPI_Bcast of %d bytes failed", k);
        off += (size_t)k;
    }
    return HPT_OK;
}

hpt_status hpt_comm_send(hpt_comm *c, const float *buf, size_t n, int to) {
    if (!c || c->size == 1) return HPT_OK;
    for (size_t off = 0; off < n;) {
        int k = piece(n, off);
        if (c->mpi->send(buf + off, k, to) != 0)
            return hpt_fail(HPT_ERR_IO, "MPI_Send of %d floats to rank %d failed", k, to);
        off += (size_t)k;
    }
    return HPT_OK;
}

hpt_status hpt_comm_recv(hpt_comm *c, float *buf, size_t n, int from) {
    if (!c || c->size == 1) return HPT_OK;
    for (size_t off = 0; off < n;) {
        int k = piece(n, off);
        if (c->mpi->recv(buf + off, k, from) != 0)
            return hpt_fail(HPT_ERR_IO, "MPI_Recv of %d floats from rank %d failed", k, from);
        off += (size_t)k;
    }
    return HPT_OK;
}

int hpt_comm_all_ok(hpt_comm *c, int ok) {
    if (!c || c->size == 1) return ok != 0;
    int all = ok != 0;
    if (c->mpi->allreduce_min(&all) != 0) hpt_comm_abort(c, 1);
    return all;
}

int hpt_comm_differ(hpt_comm *c, uint32_t v, int *rank, uint32_t *value) {
    if (!c || c->size == 1) return 0;
    uint32_t ref = v;
    if (c->mpi->bcast(&ref, sizeof ref, 0) != 0) hpt_comm_abort(c, 1);
    /* the lowest rank that differs (size where none does), and how many do */
    int first = v != ref ? c->rank : c->size, total = v != ref;
    if (c->mpi->allreduce_min(&first) != 0 || c->mpi->allreduce_isum(&total) != 0) hpt_comm_abort(c, 1);
    if (total == 0) return 0;
    uint32_t theirs = v;
    if (c->mpi->bcast(&theirs, sizeof theirs, first) != 0) hpt_comm_abort(c, 1);
    if (rank) *rank = first;
    if (value) *value = theirs;
    return total;
}

void hpt_comm_abort(hpt_comm *c, int code) {
    if (c && c->mpi) c->mpi->abort(code);
    exit(code);
}
