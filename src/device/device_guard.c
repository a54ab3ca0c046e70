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
 * It also stands in for a GPU's memory ledger: it reports a fixed size
 * (HPT_GUARD_MIB, 4096 by default) as its total and that less what it has
 * mapped as free, so the plan check (hpt_device_check_plan, --vram-limit)
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

static struct { void *p; size_t bytes; } maps[MAX_MAPS];
static int nmaps;
static size_t mapped;   /* bytes of the live maps */

static void protect_all(int prot) {
    for (int i = 0; i < nmaps; i++)
        HPT_ASSERT(mprotect(maps[i].p, maps[i].bytes, prot) == 0);
}

#define OPEN() protect_all(PROT_READ | PROT_WRITE)
#define CLOSE() protect_all(PROT_NONE)

static const char *guard_unavailable(void) { return NULL; }

static float *guard_alloc(size_t n) {
    if (nmaps == MAX_MAPS) {
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
    maps[nmaps].p = p;   /* zeroed by the kernel, as every row's alloc */
    maps[nmaps].bytes = bytes;
    nmaps++;
    mapped += bytes;
    return p;
}

static void guard_free(float *p) {
    if (!p) return;
    for (int i = 0; i < nmaps; i++) {
        if (maps[i].p != p) continue;
        HPT_ASSERT(munmap(maps[i].p, maps[i].bytes) == 0);
        mapped -= maps[i].bytes;
        maps[i] = maps[--nmaps];
        return;
    }
    HPT_ASSERT(!"--device guard: free of memory this row did not allocate");
}

/* Every operation below: open, the CPU row's operation, close. */
#define GUARD_VOID(name, params, args) \
    static void guard_##name params { OPEN(); hpt_device_cpu.name args; CLOSE(); }
#define GUARD_NN(name, params, args) \
    static void guard_nn_##name params { OPEN(); hpt_device_cpu.nn->name args; CLOSE(); }

GUARD_VOID(upload, (float *dst, const float *host, size_t n), (dst, host, n))
GUARD_VOID(download, (float *host, const float *src, size_t n), (host, src, n))
GUARD_VOID(copy, (float *dst, const float *src, size_t n), (dst, src, n))
GUARD_VOID(fill, (float *x, float v, size_t n), (x, v, n))
GUARD_VOID(swap, (float *a, float *b, size_t n), (a, b, n))
GUARD_VOID(scale, (float *x, float s, size_t n), (x, s, n))
GUARD_VOID(axpy, (float *y, float a, const float *x, size_t n), (y, a, x, n))
GUARD_VOID(lerp, (float *e, float a, float b, const float *x, size_t n), (e, a, b, x, n))
GUARD_VOID(adamw, (float *p, const float *g, float *m, float *v, size_t n, const hpt_dev_adamw *a),
           (p, g, m, v, n, a))
GUARD_VOID(sf_adamw, (float *y, const float *g, float *z, float *x, float *v, size_t n, const hpt_dev_sf *a),
           (y, g, z, x, v, n, a))
GUARD_VOID(outer_step, (float *theta, float *anchor, float *u, const float *d, size_t n, float mu, float a, float b),
           (theta, anchor, u, d, n, mu, a, b))
GUARD_VOID(sf_outer_step, (float *x, float *z, float *y, float *anchor, float *u, size_t n, float mu, float a, float b),
           (x, z, y, anchor, u, n, mu, a, b))

static double guard_sumsq(const float *x, size_t n) {
    OPEN();
    double s = hpt_device_cpu.sumsq(x, n);
    CLOSE();
    return s;
}

static double guard_dot(const float *a, const float *b, size_t n) {
    OPEN();
    double s = hpt_device_cpu.dot(a, b, n);
    CLOSE();
    return s;
}

static size_t guard_scratch_floats(int B, int T, int C, int NH, int V, int Vp) {
    return hpt_device_cpu.nn->scratch_floats(B, T, C, NH, V, Vp);
}

GUARD_NN(upload_ints, (int *dst, const int *host, size_t n), (dst, host, n))
GUARD_NN(encoder_forward, (float *out, const int *tok, const float *wte, const float *wpe, int B, int T, int C),
         (out, tok, wte, wpe, B, T, C))
GUARD_NN(encoder_backward, (float *dwte, float *dwpe, const float *dout, const int *tok, int B, int T, int C, int V,
                            float *scratch),
         (dwte, dwpe, dout, tok, B, T, C, V, scratch))
GUARD_NN(layernorm_forward, (float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                             int N, int C),
         (out, mean, rstd, inp, w, b, N, C))
GUARD_NN(layernorm_backward, (float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C, int first, float *scratch),
         (dinp, dw, db, dout, inp, w, mean, rstd, N, C, first, scratch))
GUARD_NN(matmul_forward, (float *out, const float *inp, const float *w, const float *b, int N, int C, int OC),
         (out, inp, w, b, N, C, OC))
GUARD_NN(matmul_backward_dinp, (float *dinp, const float *dout, const float *w, int N, int C, int OC, float *wide),
         (dinp, dout, w, N, C, OC, wide))
GUARD_NN(matmul_backward_dweight, (float *dw, float *db, const float *dout, const float *inp, int N, int C, int OC,
                                   int first, float *scratch),
         (dw, db, dout, inp, N, C, OC, first, scratch))
GUARD_NN(attention_forward, (float *out, float *att, const float *qkv, int B, int T, int C, int NH),
         (out, att, qkv, B, T, C, NH))
GUARD_NN(attention_backward, (float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                              int NH, float *scratch),
         (dqkv, dout, qkv, att, B, T, C, NH, scratch))
GUARD_NN(gelu_forward, (float *out, const float *inp, size_t n), (out, inp, n))
GUARD_NN(gelu_backward, (float *dinp, const float *inp, const float *dout, size_t n), (dinp, inp, dout, n))
GUARD_NN(residual_forward, (float *out, const float *a, const float *b, size_t n), (out, a, b, n))
GUARD_NN(xent_forward, (float *losses, float *logits, const int *targets, int N, int V, int Vp),
         (losses, logits, targets, N, V, Vp))
GUARD_NN(xent_backward, (float *probs, const int *targets, float dloss, int N, int V, int Vp),
         (probs, targets, dloss, N, V, Vp))

static const hpt_dev_nn guard_nn = {
    .scratch_floats = guard_scratch_floats,
    .upload_ints = guard_nn_upload_ints,
    .encoder_forward = guard_nn_encoder_forward,
    .encoder_backward = guard_nn_encoder_backward,
    .layernorm_forward = guard_nn_layernorm_forward,
    .layernorm_backward = guard_nn_layernorm_backward,
    .matmul_forward = guard_nn_matmul_forward,
    .matmul_backward_dinp = guard_nn_matmul_backward_dinp,
    .matmul_backward_dweight = guard_nn_matmul_backward_dweight,
    .attention_forward = guard_nn_attention_forward,
    .attention_backward = guard_nn_attention_backward,
    .gelu_forward = guard_nn_gelu_forward,
    .gelu_backward = guard_nn_gelu_backward,
    .residual_forward = guard_nn_residual_forward,
    .xent_forward = guard_nn_xent_forward,
    .xent_backward = guard_nn_xent_backward,
};

static hpt_status guard_sync(void) { return HPT_OK; }

static hpt_status guard_set_precision(const char *name) { return hpt_device_cpu.set_precision(name); }

static void guard_mem_info(size_t *free_bytes, size_t *total_bytes) {
    const char *e = getenv("HPT_GUARD_MIB");
    size_t total = (size_t)(e && atol(e) > 0 ? atol(e) : 4096) << 20;
    *total_bytes = total;
    *free_bytes = mapped < total ? total - mapped : 0;
}

const hpt_device hpt_device_guard = {
    .name = "guard",
    .summary = "a test device: the CPU's kernels on memory the host cannot touch outside the device's own calls "
               "(catches host access to device memory; slow)",
    .unavailable = guard_unavailable,
    .alloc = guard_alloc,
    .free = guard_free,
    .upload = guard_upload,
    .download = guard_download,
    .copy = guard_copy,
    .fill = guard_fill,
    .swap = guard_swap,
    .scale = guard_scale,
    .axpy = guard_axpy,
    .lerp = guard_lerp,
    .sumsq = guard_sumsq,
    .dot = guard_dot,
    .adamw = guard_adamw,
    .sf_adamw = guard_sf_adamw,
    .outer_step = guard_outer_step,
    .sf_outer_step = guard_sf_outer_step,
    .nn = &guard_nn,
    .mem_info = guard_mem_info,
    .set_precision = guard_set_precision,
    .sync = guard_sync,
};
