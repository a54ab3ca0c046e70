/*
 * device_guard.c — the guard row of the device table: the CPU row's kernels
 * on memory the host cannot touch between the row's own calls.
 *
 * Why: on a GPU, a pointer into device memory read or written by host code
 * is a crash (or, worse, a silent wrong value) that no CPU test would see,
 * since on the CPU row the two memories are one. Here every allocation is
 * its own mapping, kept PROT_NONE; each operation of the row opens them all,
 * runs the CPU row's operation and closes them again. A host access to the
 * row's memory anywhere else (a memcpy of the parameters, a CRC, a loss read
 * in place) faults at once, under `make test`, on a machine without a GPU.
 * The arithmetic is the CPU row's, so a run on this row gives the CPU's
 * bits: tests/cli_device.sh compares the two.
 *
 * It also stands in for a GPU's memory ledger: each instance reports a fixed
 * size (HPT_GUARD_MIB, 4096 by default) as its total and that less what it
 * has mapped as free, so the plan check (hpt_device_check_plan, --vram-limit)
 * and summary.json's device memory are tested on it too.
 *
 * A test device, slow by design (two mprotect sweeps per call); it has no
 * use for training. One host thread drives it (the rows' common rule).
 */
#include "device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { MAX_MAPS = 256 };

/* An instance's memory: its mappings and their bytes (its ledger). */
typedef struct guard_state {
    struct { void *p; size_t bytes; } maps[MAX_MAPS];
    int nmaps;
    size_t mapped;              /* bytes of the live maps */
    struct guard_state *next;   /* the next open instance */
} guard_state;

/* The open instances. The sweeps over memory (copy, fill, the optimizers)
 * are handed pointers, not an instance, so each opens the memory of every
 * open instance: all of it is the guard's own, and none of it is open
 * outside the row's calls. */
static guard_state *open_states;

static guard_state *state_of(const hpt_device *d) { return d->state; }

static void protect_all(int prot) {
    for (guard_state *g = open_states; g; g = g->next)
        for (int i = 0; i < g->nmaps; i++) HPT_ASSERT(mprotect(g->maps[i].p, g->maps[i].bytes, prot) == 0);
}

#define OPEN() protect_all(PROT_READ | PROT_WRITE)
#define CLOSE() protect_all(PROT_NONE)

static const char *guard_unavailable(void) { return NULL; }

static hpt_status guard_open(hpt_device *d) {
    HPT_TRY(hpt_device_cpu_open(d));   /* the CPU row's arithmetic: its precision */
    guard_state *g = calloc(1, sizeof *g);
    if (!g) return hpt_fail(HPT_ERR_NOMEM, "out of memory");
    g->next = open_states;
    open_states = g;
    d->state = g;
    return HPT_OK;
}

static void guard_close(hpt_device *d) {
    guard_state *g = state_of(d);
    HPT_ASSERT(g->nmaps == 0 || !"--device guard: closed with memory still allocated");
    for (guard_state **p = &open_states; *p; p = &(*p)->next)
        if (*p == g) { *p = g->next; break; }
    free(g);
}

static float *guard_alloc(const hpt_device *d, size_t n) {
    guard_state *g = state_of(d);
    if (g->nmaps == MAX_MAPS) {
        hpt_fail(HPT_ERR_NOMEM, "--device guard: more than %d allocations", MAX_MAPS);
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = (n * sizeof(float) + page - 1) / page * page;
    if (!bytes) bytes = page;
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        hpt_fail(HPT_ERR_NOMEM, "--device guard: cannot map %zu bytes (%s)", bytes, strerror(errno));
        return NULL;
    }
    g->maps[g->nmaps].p = p;   /* zeroed by the kernel, as every row's alloc */
    g->maps[g->nmaps].bytes = bytes;
    g->nmaps++;
    g->mapped += bytes;
    return p;
}

static void guard_free(const hpt_device *d, float *p) {
    if (!p) return;
    guard_state *g = state_of(d);
    for (int i = 0; i < g->nmaps; i++) {
        if (g->maps[i].p != p) continue;
        HPT_ASSERT(munmap(g->maps[i].p, g->maps[i].bytes) == 0);
        g->mapped -= g->maps[i].bytes;
        g->maps[i] = g->maps[--g->nmaps];
        return;
    }
    HPT_ASSERT(!"--device guard: free of memory this instance did not allocate");
}

/* Every operation below: open, the CPU row's operation, close (the lists
 * of device.h). */
#define GUARD_V(name, params, args) \
    static void guard_##name params { OPEN(); hpt_device_cpu.name args; CLOSE(); }
#define GUARD_R(type, name, params, args) \
    static type guard_##name params { OPEN(); type r_ = hpt_device_cpu.name args; CLOSE(); return r_; }
#define GUARD_NN_V(name, params, args) \
    static void guard_nn_##name params { OPEN(); hpt_device_cpu.nn->name args; CLOSE(); }
#define GUARD_NN_R(type, name, params, args) \
    static type guard_nn_##name params { return hpt_device_cpu.nn->name args; }   /* sizes: no memory */
HPT_DEV_DATA_OPS(GUARD_V, GUARD_R)
HPT_DEV_NN_OPS(GUARD_NN_V, GUARD_NN_R)

#define NN_FIELD_V(name, params, args) .name = guard_nn_##name,
#define NN_FIELD_R(type, name, params, args) .name = guard_nn_##name,
static const hpt_dev_nn guard_nn = {HPT_DEV_NN_OPS(NN_FIELD_V, NN_FIELD_R)};

static hpt_status guard_sync(const hpt_device *d) { (void)d; return HPT_OK; }

static void guard_mem_info(const hpt_device *d, size_t *free_bytes, size_t *total_bytes) {
    const char *e = getenv("HPT_GUARD_MIB");
    size_t total = (size_t)(e && atol(e) > 0 ? atol(e) : 4096) << 20, mapped = state_of(d)->mapped;
    *total_bytes = total;
    *free_bytes = mapped < total ? total - mapped : 0;
}

#define FIELD_V(name, params, args) .name = guard_##name,
#define FIELD_R(type, name, params, args) .name = guard_##name,
const hpt_device hpt_device_guard = {
    .name = "guard",
    .summary = "a test device: the CPU's kernels on memory the host cannot touch outside the device's own calls "
               "(catches host access to device memory; slow)",
    .unavailable = guard_unavailable,
    .alloc = guard_alloc,
    .free = guard_free,
    HPT_DEV_DATA_OPS(FIELD_V, FIELD_R)
    .nn = &guard_nn,
    .mem_info = guard_mem_info,
    .sync = guard_sync,
    .open = guard_open,
    .close = guard_close,
};
