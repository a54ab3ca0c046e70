/*
 * comm_mpi.c — the MPI plugin, libhpt_mpi.so: comm.h's table of MPI calls
 * (hpt_comm_mpi_impl), the only file that includes mpi.h. The group in
 * src/base/comm.c opens it when mpirun started the process; a program that
 * links libhpt never loads libmpi otherwise. It uses nothing of hpt's, only
 * MPI: linked with --no-undefined.
 */
#include "../base/comm.h"

#include <mpi.h>

static int init(int *rank, int *size) {
    /* the OpenMP workers never call MPI: the main thread alone talks */
    int provided, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return MPI_SUCCESS;
}

static void finalize(void) { MPI_Finalize(); }

static int allreduce_sum(float *buf, int n) {
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static int allreduce_min(int *v) { return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); }
static int allreduce_isum(int *v) { return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }
static int bcast(void *buf, int n, int root) { return MPI_Bcast(buf, n, MPI_BYTE, root, MPI_COMM_WORLD); }
static int send(const float *buf, int n, int to) { return MPI_Send(buf, n, MPI_FLOAT, to, 0, MPI_COMM_WORLD); }

static int recv(float *buf, int n, int from) {
    return MPI_Recv(buf, n, MPI_FLOAT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

const hpt_comm_mpi hpt_comm_mpi_impl = {
    .init = init,
    .finalize = finalize,
    .allreduce_sum = allreduce_sum,
    .allreduce_min = allreduce_min,
    .allreduce_isum = allreduce_isum,
    .bcast = bcast,
    .send = send,
    .recv = recv,
    .abort = abort_all,
};
