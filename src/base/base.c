/*
 * base.c — errors, asserts, arenas, RNG, threads and clocks.
 */
#include "base.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#ifndef HPT_NO_BLAS
#include <cblas.h>
#include <dlfcn.h>
#endif

/* --------------------------------------------------------------- errors */

/* Per-thread, like errno: a library that runs two trainers side by side (or
 * tests that do) must not share one message buffer. */
static _Thread_local char errbuf[1024];

const char *hpt_status_str(hpt_status st) {
    switch (st) {
    case HPT_OK: return "ok";
    case HPT_ERR_ARG: return "invalid argument";
    case HPT_ERR_NOMEM: return "out of memory";
    case HPT_ERR_IO: return "i/o error";
    case HPT_ERR_FORMAT: return "bad file format";
    case HPT_ERR_DATA: return "bad data";
    case HPT_ERR_NUMERIC: return "non-finite number";
    case HPT_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

const char *hpt_errmsg(void) { return errbuf; }

/* Formatted into a local buffer first: an argument may be hpt_errmsg()
 * itself (a message that wraps the previous one), and vsnprintf into the
 * buffer it is reading from is undefined (glibc garbled such messages). */
hpt_status hpt_fail(hpt_status st, const char *fmt, ...) {
    char msg[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(errbuf, msg, sizeof errbuf);
    return st;
}

void hpt_assert_fail_(const char *expr, const char *file, int line) {
    fprintf(stderr, "hpt: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

/* --------------------------------------------------------------- arenas */

#define HPT_ALIGN 64

float *hpt_arena_alloc(size_t nfloats) {
    size_t bytes = nfloats * sizeof(float);
    bytes = (bytes + HPT_ALIGN - 1) / HPT_ALIGN * HPT_ALIGN;
    if (bytes == 0) bytes = HPT_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, HPT_ALIGN, bytes) != 0) {
        hpt_fail(HPT_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

/* Every slice is rounded to 16 floats (64 bytes) so each starts aligned. */
size_t hpt_arena_layout(const size_t *sizes, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (sizes[i] + 15) / 16 * 16;
    return total;
}

void hpt_arena_point(float *base, const size_t *sizes, int n, float **ptrs[]) {
    float *p = base;
    for (int i = 0; i < n; i++) {
        *ptrs[i] = p;
        p += (sizes[i] + 15) / 16 * 16;
    }
}

float *hpt_arena_carve(const size_t *sizes, int n, float **ptrs[], size_t *total_floats) {
    size_t total = hpt_arena_layout(sizes, n);
    float *base = hpt_arena_alloc(total);
    if (!base) return NULL;
    if (ptrs) hpt_arena_point(base, sizes, n, ptrs);
    if (total_floats) *total_floats = total;
    return base;
}

void hpt_arena_free(void *p) { free(p); }

/* --------------------------------------------------------------- RNG */

void hpt_rng_seed(hpt_rng *r, uint64_t seed) {
    /* splitmix64 scrambles the seed so seeds 1, 2, 3 give unrelated streams;
     * xorshift needs a non-zero state. */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

uint64_t hpt_rng_u64(hpt_rng *r) {
    uint64_t x = r->s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint32_t hpt_rng_u32(hpt_rng *r) { return (uint32_t)(hpt_rng_u64(r) >> 32); }

float hpt_rng_uniform(hpt_rng *r) { return (hpt_rng_u32(r) >> 8) / 16777216.0f; }

float hpt_rng_normal(hpt_rng *r) {
    /* Box-Muller on doubles; u1 in (0, 1] keeps log finite. */
    double u1 = ((hpt_rng_u64(r) >> 11) + 1.0) / 9007199254740992.0;
    double u2 = (hpt_rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t hpt_rng_below(hpt_rng *r, uint64_t n) {
    HPT_ASSERT(n > 0);
    /* Rejection sampling: no modulo bias. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = hpt_rng_u64(r); while (x >= lim);
    return x % n;
}

/* --------------------------------------------------------------- threads */

static int g_threads = 0;

/* Denormal floats (below 1.2e-38) cost a microcode assist per operation on
 * x86: ~100x slower arithmetic. Training at a high learning rate produces
 * them (softmax probabilities of saturated logits, gradients through them),
 * and a 6x384 GPT at lr 4e-3 slowed from 0.25 to 3 s per step. Flushing
 * them to zero (FTZ: results, DAZ: operands) is what PyTorch's
 * set_flush_denormal does; it is not fast-math: NaN, Inf and isnan are
 * untouched, and values this small are below anything the training can
 * feel. MXCSR is per thread, so every OpenMP worker sets it too, and
 * threads created later inherit the creating thread's setting. */
static void flush_denormals(void) {
#if defined(__x86_64__) || defined(__i386__)
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

void hpt_set_threads(int n) {
    flush_denormals();
#ifdef _OPENMP
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    #pragma omp parallel
    flush_denormals();
#else
    if (n <= 0) n = 1;
#endif
#ifndef HPT_NO_BLAS
    openblas_set_num_threads(n);
#endif
    g_threads = n;
}

int hpt_get_threads(void) { return g_threads > 0 ? g_threads : hpt_omp_max_threads(); }

const char *hpt_blas_core(void) {
#ifdef HPT_NO_BLAS
    return "none (naive matmul)";
#else
    extern char *openblas_get_corename(void);
    return openblas_get_corename();
#endif
}

/* How the kernel family in use was chosen, for hpt_blas_origin ("none"
 * where the build has no BLAS: hpt_blas_core says naive matmul). */
#ifdef HPT_NO_BLAS
static const char *g_blas_origin = "none";
#else
static const char *g_blas_origin = "openblas";
#endif

const char *hpt_blas_origin(void) { return g_blas_origin; }

#ifndef HPT_NO_BLAS
/* The family this CPU can run when OpenBLAS fell back to its generic SSE3
 * kernels. Checked against naive GEMMs at hpt's shapes (max error 1e-5 at
 * K=3072) and by the PyTorch reference test; 1.4-1.6x faster than Haswell's
 * kernels on an AVX-512 Xeon (bench/bench_vs_torch.sh, bench_124m.sh). */
static const char *blas_core_for_cpu(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

/* OpenBLAS's DYNAMIC_ARCH builds (Debian's) pick their kernel table once, as
 * the library loads, from OPENBLAS_CORETYPE or the CPU. These two exported
 * calls drop the table and pick again; between BLAS calls that is all a
 * switch needs (every call reads its blocking and buffer offsets from the
 * table). Looked up at run time: a build without them keeps its kernels. */
static int blas_switch_core(const char *core) {
    void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (!quit || !init) return 0;
    const char *had = getenv("OPENBLAS_CORETYPE");
    char *saved = had ? strdup(had) : NULL;
    setenv("OPENBLAS_CORETYPE", core, 1);
    quit();
    init();
    if (saved) setenv("OPENBLAS_CORETYPE", saved, 1); else unsetenv("OPENBLAS_CORETYPE");
    free(saved);
    return strcmp(hpt_blas_core(), core) == 0;
}

/* Every process that loads hpt (the CLI, the Python binding after numpy,
 * a C program linking libhpt, a benchmark's PyTorch peer that imports hpt)
 * runs this once, before any of hpt's BLAS calls: OpenBLAS 0.3.21 (Debian
 * 12) does not know CPUs newer than itself and falls back to its slow
 * "Prescott" kernels, and a process that could not re-execute itself kept
 * them, training to other bits than the CLI. Only that fallback is changed:
 * a CPU OpenBLAS knows keeps its choice, and so does a user's
 * OPENBLAS_CORETYPE. HPT_BLAS_UNKNOWN_CPU=1 marks OPENBLAS_CORETYPE=Prescott
 * as OpenBLAS's fallback rather than the user's: how the tests put a CPU
 * OpenBLAS knows into the state an unknown one is in (tests/cli_blas.sh). */
__attribute__((constructor)) static void blas_select(void) {
    const char *env = getenv("OPENBLAS_CORETYPE"), *sim = getenv("HPT_BLAS_UNKNOWN_CPU");
    int simulated = sim && *sim && strcmp(sim, "0") != 0;
    if (env && *env && !simulated) { g_blas_origin = "OPENBLAS_CORETYPE"; return; }
    if (strcmp(hpt_blas_core(), "Prescott") != 0) return;
    const char *core = blas_core_for_cpu();
    if (core && blas_switch_core(core))
        g_blas_origin = "hpt";
}
#endif

int hpt_omp_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* --------------------------------------------------------------- clocks, memory */

double hpt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t hpt_rss_bytes(void) {
    /* statm's second field is resident pages: cheap enough for every step. */
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, rss = 0;
    int ok = fscanf(f, "%lu %lu", &size, &rss) == 2;
    fclose(f);
    return ok ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* The kernel's estimate of what can be allocated without swapping
 * (MemAvailable), lowered to what the cgroup (a container's limit) has left
 * where one is set. 0: unknown. */
size_t hpt_mem_available(void) {
    size_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) { avail = (size_t)kb * 1024; break; }
        fclose(f);
    }
    unsigned long long max = 0, cur = 0, cache = 0;
    f = fopen("/sys/fs/cgroup/memory.max", "r");  /* "max" (no limit) does not scan */
    int have_max = f && fscanf(f, "%llu", &max) == 1;
    if (f) fclose(f);
    f = have_max ? fopen("/sys/fs/cgroup/memory.current", "r") : NULL;
    int have_cur = f && fscanf(f, "%llu", &cur) == 1;
    if (f) fclose(f);
    /* the cgroup's usage counts its page cache, which the kernel reclaims
     * before it refuses an allocation: it is available too */
    f = have_cur ? fopen("/sys/fs/cgroup/memory.stat", "r") : NULL;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "file %llu", &cache) == 1) break;
        fclose(f);
    }
    if (have_cur) {
        unsigned long long used = cur > cache ? cur - cache : 0, left = used < max ? max - used : 0;
        if (!avail || left < avail) avail = (size_t)left;
    }
    return avail;
}

static size_t g_mem_ceiling;
void hpt_set_memory_ceiling(size_t bytes) { g_mem_ceiling = bytes; }

void hpt_fmt_bytes(char *buf, size_t n, size_t bytes) {
    double b = (double)bytes;
    if (b >= 1073741824.0) snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
}

hpt_status hpt_mem_check(const char *what, size_t need, const char *detail) {
    char nb[32], lb[32];
    hpt_fmt_bytes(nb, sizeof nb, need);
    if (g_mem_ceiling && need > g_mem_ceiling) {
        hpt_fmt_bytes(lb, sizeof lb, g_mem_ceiling);
        return hpt_fail(HPT_ERR_NOMEM, "%s needs %s (%s), more than --rss-limit %s allows; nothing was allocated",
                        what, nb, detail, lb);
    }
    size_t avail = hpt_mem_available();
    if (avail && need > avail) {
        hpt_fmt_bytes(lb, sizeof lb, avail);
        return hpt_fail(HPT_ERR_NOMEM, "%s needs %s (%s) but only %s is available on this machine "
                        "(MemAvailable); nothing was allocated: choose a smaller model or batch", what, nb, detail, lb);
    }
    return HPT_OK;
}

size_t hpt_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;   /* Linux reports KiB */
}
