/*
 * emu.cc — the CUDA runtime and cuBLAS calls hpt makes, on the CPU, and the
 * scheduler that runs a kernel's threads (make CUDA=emu; README.md here).
 *
 * A launch runs its blocks one after another. A block's threads are fibers
 * (their own stacks, switched by hpt_emu_switch below) that run until they
 * reach __syncthreads, a warp shuffle, or the kernel's end; a barrier opens
 * when every thread of the block waits at it, a shuffle when all 32 lanes
 * of its warp wait at one. A block runs a warp at a time, each warp to the
 * next barrier before the next one starts, in ascending order or descending
 * (the lanes and the blocks too), the order alternating between a kernel's
 * launches, so a kernel whose result depends on the order of unsynchronised
 * threads (a race) reads another warp's unwritten (NaN) shared memory in one
 * of the orders, or gives different bits on two runs: the CUDA tests run
 * every kernel twice and require the same bits.
 *
 * Checked at every launch, as a GPU would refuse or fault: the grid and block
 * limits (1024 threads; 65535 in y and z), the dynamic shared memory against
 * 48 KiB or the kernel's opted-in limit (227 KiB at most) (a refused launch:
 * the call's error, cudaGetLastError's); every pointer argument inside a
 * cudaMalloc'd block, a barrier that some threads of the block have left
 * (exited), lanes that part at a shuffle (a fault: said on stderr, and
 * sticky as a GPU's, so cudaDeviceSynchronize and every later call return it).
 */
#include "cuda_runtime.h"
#include "cublas_v2.h"

#include <cblas.h>

#include <execinfo.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <map>
#include <vector>

/* ------------------------------------------------------------ errors */

static cudaError_t g_last = cudaSuccess;    /* cudaGetLastError's */
static cudaError_t g_sticky = cudaSuccess;  /* a fault: every call returns it from then on */

static cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess && g_last == cudaSuccess) g_last = e;
    return e;
}

/* A kernel fault: said on stderr at once (the GPU would only say "illegal
 * address"), and sticky as the GPU's. */
static void fault(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda emulator: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (g_sticky == cudaSuccess) g_sticky = e;
    set_error(e);
}

/* a bad launch or argument: the call's error, not sticky */
static cudaError_t refuse(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (getenv("HPT_CUDA_EMU_VERBOSE")) {
        fprintf(stderr, "cuda emulator: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
    }
    va_end(ap);
    return set_error(e);
}

extern "C" const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    }
    return "unknown error";
}

extern "C" cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last;
    g_last = g_sticky;
    return e;
}

/* ------------------------------------------------------------ the device */

/* HPT_CUDA_EMU_DEVICES=0 is a machine without a GPU; HPT_CUDA_EMU_MIB the
 * device memory (default 4096); HPT_CUDA_EMU_CC the compute capability as
 * major*10+minor (default 90, an H100's) */
static long env_long(const char *name, long dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return *end ? dflt : v;
}
static int cc(void) { return (int)env_long("HPT_CUDA_EMU_CC", 90); }
static size_t capacity(void) { return (size_t)env_long("HPT_CUDA_EMU_MIB", 4096) << 20; }
static const size_t SHM_DEFAULT = 48 << 10, SHM_OPTIN = 227 << 10;

extern "C" cudaError_t cudaGetDeviceCount(int *count) {
    *count = (int)env_long("HPT_CUDA_EMU_DEVICES", 1);
    return *count > 0 ? cudaSuccess : set_error(cudaErrorNoDevice);
}

static cudaError_t check_device(int dev) {
    int n = 0;
    cudaGetDeviceCount(&n);
    if (n == 0) return set_error(cudaErrorNoDevice);
    return dev == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaSetDevice(int dev) { return g_sticky ? g_sticky : check_device(dev); }
extern "C" cudaError_t cudaGetDevice(int *dev) { *dev = 0; return g_sticky ? g_sticky : check_device(0); }

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
    cudaError_t e = check_device(dev);
    if (e) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "hpt CUDA emulator (the CPU; not a GPU)");
    p->totalGlobalMem = capacity();
    p->sharedMemPerBlock = SHM_DEFAULT;
    p->sharedMemPerBlockOptin = SHM_OPTIN;
    p->major = cc() / 10;
    p->minor = cc() % 10;
    p->multiProcessorCount = 132;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int dev) {
    cudaError_t e = check_device(dev);
    if (e) return e;
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *v = cc() / 10; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = cc() % 10; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = 132; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)SHM_OPTIN; return cudaSuccess;
    }
    return refuse(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d", (int)attr);
}

extern "C" cudaError_t cudaDeviceSynchronize(void) { return g_sticky; }

/* ------------------------------------------------------------ traffic */

/* What crossed "PCIe": copies each way (count, bytes, the largest), kernel
 * launches and GEMMs, written as one JSON object to the file
 * $HPT_CUDA_EMU_STATS names when the process exits, so that a test can
 * check that a training step moves no parameter-sized buffer between host
 * and device (tests/cuda/cli_device_cuda.sh). */
struct Traffic { unsigned long long n, bytes, max; };
static Traffic g_h2d, g_d2h;
static unsigned long long g_nlaunch, g_ngemm;

static void stats_write(void) {
    const char *path = getenv("HPT_CUDA_EMU_STATS");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (!f) return;
    fprintf(f, "{\"h2d\": {\"copies\": %llu, \"bytes\": %llu, \"max\": %llu}, "
               "\"d2h\": {\"copies\": %llu, \"bytes\": %llu, \"max\": %llu}, "
               "\"launches\": %llu, \"gemms\": %llu}\n",
            g_h2d.n, g_h2d.bytes, g_h2d.max, g_d2h.n, g_d2h.bytes, g_d2h.max, g_nlaunch, g_ngemm);
    fclose(f);
}

static void count(Traffic *t, size_t n) {
    static int registered;
    if (!registered) registered = 1, atexit(stats_write);
    /* HPT_CUDA_EMU_TRACE=BYTES: where each copy of BYTES or more comes from */
    static long trace = -2;
    if (trace == -2) trace = env_long("HPT_CUDA_EMU_TRACE", -1);
    if (trace >= 0 && (long)n >= trace) {
        void *frames[16];
        int k = backtrace(frames, 16);
        fprintf(stderr, "cuda emulator: a copy of %zu bytes %s, from:\n", n, t == &g_d2h ? "down" : "up");
        backtrace_symbols_fd(frames, k, 2);
    }
    t->n++;
    t->bytes += n;
    if (n > t->max) t->max = n;
}

/* ------------------------------------------------------------ memory */

/* the device's blocks by address: start -> size */
static std::map<uintptr_t, size_t> g_blocks;
static size_t g_used;

/* is p inside (or one past the end of) a device block? */
extern "C" int hpt_emu_is_device_range(const void *p) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_blocks.upper_bound(a);
    if (it == g_blocks.begin()) return 0;
    --it;
    return a >= it->first && a <= it->first + it->second;
}

/* are the n bytes at p inside one device block? */
static int device_bytes(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_blocks.upper_bound(a);
    if (it == g_blocks.begin()) return 0;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

extern "C" cudaError_t cudaDeviceReset(void) {
    for (auto &b : g_blocks) free((void *)b.first);
    g_blocks.clear();
    g_used = 0;
    g_sticky = g_last = cudaSuccess;
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    if (g_sticky) return g_sticky;
    size_t rounded = (bytes + 511) & ~(size_t)511;   /* the driver's granularity, roughly */
    if (rounded > capacity() - g_used) return set_error(cudaErrorMemoryAllocation);
    void *m = NULL;
    if (posix_memalign(&m, 256, rounded ? rounded : 256)) return set_error(cudaErrorMemoryAllocation);
    memset(m, 0xff, rounded);   /* uninitialised device memory: NaN, so that reading it shows */
    g_blocks[(uintptr_t)m] = bytes;
    g_used += rounded;
    *p = m;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFree(void *p) {
    if (g_sticky) return g_sticky;
    if (!p) return cudaSuccess;
    auto it = g_blocks.find((uintptr_t)p);
    if (it == g_blocks.end()) return refuse(cudaErrorInvalidDevicePointer, "cudaFree(%p): not a device block", p);
    g_used -= (it->second + 511) & ~(size_t)511;
    g_blocks.erase(it);
    free(p);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (g_sticky) return g_sticky;
    *free_bytes = capacity() - g_used;
    *total_bytes = capacity();
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    if (g_sticky) return g_sticky;
    if (n == 0) return cudaSuccess;
    int dd = device_bytes(dst, n), ds = device_bytes(src, n);
    int want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_ds = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) want_dd = dd, want_ds = ds;
    if (kind > cudaMemcpyDefault) return set_error(cudaErrorInvalidMemcpyDirection);
    /* a host pointer where a device one is due (or the copy past a block's
     * end) is what the GPU refuses; the other way round, a device pointer as
     * the host side, would fault on the host */
    if (dd != want_dd || ds != want_ds)
        return refuse(cudaErrorInvalidValue, "cudaMemcpy(%p, %p, %zu, kind %d): dst %s, src %s", dst, src, n,
                      (int)kind, dd ? "device" : "host", ds ? "device" : "host");
    if (!dd && ds) count(&g_d2h, n);
    if (dd && !ds) count(&g_h2d, n);
    memmove(dst, src, n);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemset(void *p, int value, size_t n) {
    if (g_sticky) return g_sticky;
    if (n == 0) return cudaSuccess;
    if (!device_bytes(p, n)) return refuse(cudaErrorInvalidValue, "cudaMemset(%p, %zu): not device memory", p, n);
    memset(p, value, n);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    (void)s;
    return cudaMemset(p, value, n);
}

/* ------------------------------------------------------------ kernel attributes */

static std::map<const void *, size_t> g_shm_limit;   /* kernel -> opted-in dynamic shared bytes */

extern "C" cudaError_t hpt_emu_func_set_attribute(const void *func, cudaFuncAttribute attr, int value) {
    if (g_sticky) return g_sticky;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d", (int)attr);
    if (value < 0 || (size_t)value > SHM_OPTIN)
        return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute: %d bytes of shared memory", value);
    g_shm_limit[func] = (size_t)value;
    return cudaSuccess;
}

/* ------------------------------------------------------------ fibers */

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

enum { F_READY, F_BARRIER, F_SHUFFLE, F_DONE };

struct Fiber {
    void *sp;                /* its saved stack pointer, while switched out */
    void *fake;              /* ASan's fake stack, while switched out */
    char *stack;
    int state;
    uint3 idx;
    uint64_t shfl_bits;      /* the value given at a shuffle, then the one received */
    int shfl_mask;           /* lane mask */
    unsigned shfl_full;      /* the member mask given */
};

/* The switch: the callee-saved registers pushed on the current stack, the
 * stack pointer saved to *from and taken from `to`, the registers popped
 * there. x86-64 System V only (the emulator is a test tool for CI's
 * machines); MXCSR and the x87 control word are the thread's and no kernel
 * changes them. glibc's _setjmp/_longjmp (their unwinding checks) topped
 * the profile in its place; with this, and lanes handing over to each other
 * (to_scheduler), a 2-layer model's emulated step went from 2.3 s to 0.63 s. */
extern "C" void hpt_emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl hpt_emu_switch\n"
        ".type hpt_emu_switch,@function\n"
        "hpt_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size hpt_emu_switch, .-hpt_emu_switch\n");

/* Under AddressSanitizer every switch is announced, so that it knows which
 * stack is live (else it reports the fibers' frames as overflows). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif
static const void *g_sched_bottom;   /* the scheduler's (the host thread's) stack, as ASan gives it */
static size_t g_sched_size;

static void switch_stack(void **from_sp, void **from_fake, void *to_sp, const void *to_bottom, size_t to_size) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(from_fake, to_bottom, to_size);
#else
    (void)from_fake, (void)to_bottom, (void)to_size;
#endif
    hpt_emu_switch(from_sp, to_sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(*from_fake, NULL, NULL);
#endif
}

static const size_t STACK_BYTES = 256 << 10;
/* the fibers made so far, g_fibers[0 .. g_nfibers), side by side: the
 * scheduler reads every lane's state often */
static Fiber g_fibers[1024];
static unsigned g_nfibers;
static Fiber *g_cur;
static void *g_sched_sp, *g_sched_fake;
static hpt_emu_body_fn g_body;
static void *g_ctx;
static void *g_dyn_shm;
static size_t g_dyn_shm_cap;
static const char *g_kernel_name;

/* The warp being run: lanes g_t0 .. g_t1-1, in reverse order when
 * g_reverse (the launch's order); g_pos is the current lane's place in it. */
static unsigned g_t0, g_t1, g_pos;
static int g_reverse;

static Fiber *lane_at(unsigned pos) { return &g_fibers[g_reverse ? g_t1 - 1 - pos : g_t0 + pos]; }

/* The current fiber waits (its state says at what): control goes straight
 * to the next lane in the order that is ready, or back to the scheduler
 * after the last, one switch where two would go through the scheduler. */
static void to_scheduler(void) {
    Fiber *self = g_cur;
    for (unsigned p = g_pos + 1; p < g_t1 - g_t0; p++) {
        Fiber *f = lane_at(p);
        if (f->state != F_READY) continue;
        g_pos = p;
        g_cur = f;
        threadIdx = f->idx;
        switch_stack(&self->sp, &self->fake, f->sp, f->stack, STACK_BYTES);
        return;
    }
    switch_stack(&self->sp, &self->fake, g_sched_sp, g_sched_bottom, g_sched_size);
}

/* a fiber's life: one run of the kernel per thread it is given, forever */
static void fiber_main(void) {
#if EMU_ASAN
    /* entered by a switch that did not return: its end, and the stack it left */
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(NULL, &bottom, &size);
    if (!g_sched_bottom) g_sched_bottom = bottom, g_sched_size = size;
#endif
    for (;;) {
        g_body(g_ctx);
        g_cur->state = F_DONE;
        to_scheduler();
    }
}

/* A fiber's stack as hpt_emu_switch leaves one, for a fiber that has not
 * run: six registers (zero), then fiber_main as the return address, above
 * it a zero return address of fiber_main's own, 16-byte aligned as a call
 * would leave it. The stacks' tops are staggered by a few cache lines each:
 * tops at the same offset in every 256 KiB map to the same cache sets, and
 * a block's hundreds of fibers switched in turn would evict one another's. */
static void fiber_start(Fiber *f, unsigned i) {
    size_t stagger = (i % 97) * 320;
    uintptr_t *top = (uintptr_t *)(f->stack + STACK_BYTES - stagger);
    top[-1] = 0;
    top[-2] = (uintptr_t)fiber_main;
    for (int r = 3; r <= 8; r++) top[-r] = 0;
    f->sp = top - 8;
    f->fake = NULL;
}

static void fiber_new(void) {
    Fiber *f = &g_fibers[g_nfibers];
    f->stack = (char *)mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->stack == MAP_FAILED) { perror("cuda emulator: a fiber's stack"); abort(); }
    mprotect(f->stack, 4096, PROT_NONE);   /* a guard page: a kernel overflowing its stack crashes */
    fiber_start(f, g_nfibers);
    g_nfibers++;
}

/* After a fault stopped a block: the threads left waiting inside the kernel
 * start afresh at the next launch (resumed, they would go on running the
 * faulted kernel's code with its stale arguments). */
static void fibers_abandon(void) {
    for (unsigned i = 0; i < g_nfibers; i++) {
        if (g_fibers[i].state == F_DONE) continue;
#if EMU_ASAN
        /* the abandoned frames' redzones would poison the fresh ones */
        __asan_unpoison_memory_region(g_fibers[i].stack + 4096, STACK_BYTES - 4096);
#endif
        fiber_start(&g_fibers[i], i);
    }
}

/* runs the warp's ready lanes in order, each until it waits or ends */
static void run_lanes(void) {
    for (unsigned p = 0; p < g_t1 - g_t0; p++) {
        Fiber *f = lane_at(p);
        if (f->state != F_READY) continue;
        g_pos = p;
        g_cur = f;
        threadIdx = f->idx;
        switch_stack(&g_sched_sp, &g_sched_fake, f->sp, f->stack, STACK_BYTES);
        return;
    }
}

extern "C" void hpt_emu_syncthreads(void) {
    g_cur->state = F_BARRIER;
    to_scheduler();
}

extern "C" uint64_t hpt_emu_shfl_xor(unsigned mask, uint64_t bits, int lane_mask, int width) {
    if (width != 32 || lane_mask < 0 || lane_mask > 31)
        fault(cudaErrorLaunchFailure, "%s: __shfl_xor_sync with width %d, lane mask %d (the kernels use 32, 0..31)",
              g_kernel_name, width, lane_mask);
    g_cur->state = F_SHUFFLE;
    g_cur->shfl_bits = bits;
    g_cur->shfl_mask = lane_mask & 31;
    g_cur->shfl_full = mask;
    to_scheduler();
    return g_cur->shfl_bits;
}

/* the values the warp's lanes gave at its last resolved shuffle, by lane:
 * read by a gather's lane before it can switch again (mma.h's collectives) */
static uint64_t g_given[32];

extern "C" const uint64_t *hpt_emu_warp_gather(uint64_t v) {
    hpt_emu_shfl_xor(0xffffffffu, v, 0, 32);
    return g_given;
}

/* the current thread's lane: its linear index in the block, mod 32 */
extern "C" unsigned hpt_emu_lane(void) {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}

extern "C" void hpt_emu_kernel_fault(const char *what) {
    if (g_sticky) return;   /* the first fault is the one to read; its consequences would repeat it per lane */
    fault(cudaErrorLaunchFailure, "%s: block (%u,%u,%u), thread (%u,%u,%u): %s", g_kernel_name, blockIdx.x,
          blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z, what);
}

extern "C" void *hpt_emu_dynamic_shared(void) { return g_dyn_shm; }

/* the kernels' static __shared__ arrays, as translate.sed registers them the
 * first time a thread passes their declaration */
struct SharedArray { void *p; size_t bytes; };
static std::vector<SharedArray> g_shared;

extern "C" int hpt_emu_shared_register(void *p, size_t bytes) {
    g_shared.push_back(SharedArray{p, bytes});
    return 0;
}

/* Each kernel's launches so far: launch c of a kernel runs its warps (and
 * lanes) descending when c has an odd number of 1 bits (the Thue-Morse
 * sequence: asc, desc, desc, asc, ...), so its first launch is ascending,
 * and a kernel launched once or twice per test run meets both orders
 * between the tests' two runs. A count over all kernels would not: a
 * function that launches four kernels gives each the same order every call. */
static std::map<const void *, unsigned> g_launches;

/* Runs warp w's lanes (t0 .. t1-1) until each waits at a barrier or has
 * exited, resolving its shuffles on the way; 0, or -1 after a fault (said). */
static int run_warp(unsigned t0, unsigned t1) {
    g_t0 = t0, g_t1 = t1;
    for (;;) {
        run_lanes();
        unsigned shuffle = 0, full = 0;
        for (unsigned t = t0; t < t1; t++) {
            shuffle += g_fibers[t].state == F_SHUFFLE;
            full += g_fibers[t].shfl_full == 0xffffffffu;
        }
        if (!shuffle) return 0;
        if (shuffle != 32 || t1 - t0 != 32 || full != 32) {
            fault(cudaErrorLaunchFailure,
                  "%s: block (%u,%u,%u), warp %u: %u of its %u lanes reached a shuffle, the others a barrier or "
                  "the end (a shuffle needs all 32 lanes of a full warp, all in its mask)",
                  g_kernel_name, blockIdx.x, blockIdx.y, blockIdx.z, t0 / 32, shuffle, t1 - t0);
            return -1;
        }
        uint64_t *given = g_given;   /* kept for hpt_emu_warp_gather's lanes */
        for (unsigned l = 0; l < 32; l++) given[l] = g_fibers[t0 + l].shfl_bits;
        for (unsigned l = 0; l < 32; l++) {
            Fiber *f = &g_fibers[t0 + l];
            f->shfl_bits = given[l ^ (unsigned)f->shfl_mask];
            f->shfl_full = 0;
            f->state = F_READY;
        }
    }
}

/* Runs one block to its end, a warp at a time: each warp runs to the next
 * barrier before the next warp starts (the warps ascending or descending as
 * g_reverse says, and so the lanes inside each warp), so that a value one
 * warp reads before a barrier and another writes, or the other way round,
 * is NaN or stale in one of the orders. 0, or -1 after a fault (said). */
static int run_block(unsigned nthreads) {
    unsigned nwarps = (nthreads + 31) / 32;
    for (unsigned t = 0; t < nthreads; t++) {
        Fiber *f = &g_fibers[t];
        f->state = F_READY;
        f->shfl_full = 0;
        f->idx.x = t % blockDim.x;
        f->idx.y = t / blockDim.x % blockDim.y;
        f->idx.z = t / (blockDim.x * blockDim.y);
    }
    for (;;) {
        for (unsigned i = 0; i < nwarps; i++) {
            unsigned w = g_reverse ? nwarps - 1 - i : i;
            unsigned t1 = (w + 1) * 32 < nthreads ? (w + 1) * 32 : nthreads;
            if (run_warp(w * 32, t1)) return -1;
        }
        unsigned done = 0;
        for (unsigned t = 0; t < nthreads; t++) done += g_fibers[t].state == F_DONE;
        if (done == nthreads) return 0;
        if (done) {
            fault(cudaErrorLaunchFailure,
                  "%s: block (%u,%u,%u): __syncthreads reached by %u threads after %u others had exited",
                  g_kernel_name, blockIdx.x, blockIdx.y, blockIdx.z, nthreads - done, done);
            return -1;
        }
        for (unsigned t = 0; t < nthreads; t++) g_fibers[t].state = F_READY;
    }
}

extern "C" void hpt_emu_run(const void *kernel, const char *name, hpt_emu_cfg_t cfg, hpt_emu_body_fn body,
                            void *ctx, int bad_pointer_arg) {
    if (g_sticky) { set_error(g_sticky); return; }
    dim3 g = cfg.grid, b = cfg.block;
    size_t nthreads = (size_t)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || !nthreads || nthreads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
        g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        refuse(cudaErrorInvalidConfiguration, "%s<<<(%u,%u,%u), (%u,%u,%u)>>>: invalid configuration", name, g.x,
               g.y, g.z, b.x, b.y, b.z);
        return;
    }
    auto lim = g_shm_limit.find(kernel);
    size_t shm_max = lim == g_shm_limit.end() ? SHM_DEFAULT : lim->second;
    if (cfg.shm > shm_max) {
        refuse(cudaErrorInvalidValue, "%s: %zu bytes of dynamic shared memory, limit %zu", name, cfg.shm, shm_max);
        return;
    }
    if (bad_pointer_arg) {
        fault(cudaErrorIllegalAddress, "%s: argument %d is a pointer outside every cudaMalloc'd block", name,
              bad_pointer_arg);
        return;
    }
    while (g_nfibers < nthreads) fiber_new();
    if (g_dyn_shm_cap < cfg.shm) {
        free(g_dyn_shm);
        /* 1024-byte aligned, as a GPU's shared memory window is: the wmma
         * loads' 32-byte rule is then about the kernel's own offsets */
        if (posix_memalign(&g_dyn_shm, 1024, cfg.shm)) { perror("cuda emulator: shared memory"); abort(); }
        g_dyn_shm_cap = cfg.shm;
    }
    g_nlaunch++;
    g_reverse = __builtin_parity(g_launches[kernel]++);
    g_body = body;
    g_ctx = ctx;
    g_kernel_name = name;
    gridDim = g;
    blockDim = b;
    /* the blocks too in the launch's order: a block that reads what another
     * block of the same launch writes (no order exists between them on a
     * GPU) sees it written in one order and not in the other */
    const size_t nblocks = (size_t)g.x * g.y * g.z;
    for (size_t i = 0; i < nblocks; i++) {
        const size_t k = g_reverse ? nblocks - 1 - i : i;
        blockIdx.x = (unsigned)(k % g.x);
        blockIdx.y = (unsigned)(k / g.x % g.y);
        blockIdx.z = (unsigned)(k / ((size_t)g.x * g.y));
        /* shared memory starts as garbage: NaN */
        if (cfg.shm) memset(g_dyn_shm, 0xff, cfg.shm);
        for (const SharedArray &a : g_shared) memset(a.p, 0xff, a.bytes);
        if (run_block((unsigned)nthreads)) { fibers_abandon(); return; }
    }
}

/* ------------------------------------------------------------ cuBLAS */

struct cublasContext { cublasMath_t math; };

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { cudaGetLastError(); return CUBLAS_STATUS_NOT_INITIALIZED; }
    *h = new cublasContext{CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }

extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    return mode == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

extern "C" const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

/* x rounded to `keep` mantissa bits, to nearest with ties to even (NaN and
 * infinities as they are) */
static float round_mantissa(float x, int keep) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    int drop = 23 - keep;
    uint32_t half = (1u << (drop - 1)) - 1 + ((u >> drop) & 1);
    u = (u + half) & ~((1u << drop) - 1);
    memcpy(&x, &u, 4);
    return x;
}

/* op(X)'s stored matrix (rows x cols, column-major with leading dimension
 * ld) rounded into a packed copy */
static float *rounded_copy(const float *X, int rows, int cols, int ld, int keep) {
    float *c = (float *)malloc((size_t)rows * cols * sizeof(float) + 4);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) c[(size_t)j * rows + i] = round_mantissa(X[(size_t)j * ld + i], keep);
    return c;
}

/* op(A) is arows x acols as stored, op(B) brows x bcols */
struct gemm_dims { int arows, acols, brows, bcols; };

/* cuBLAS's checks of a GEMM call, in its order: the handle, a sticky
 * error, the sizes and operations, the leading dimensions */
static cublasStatus_t gemm_args(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                int lda, int ldb, int ldc, gemm_dims *g) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g_sticky) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (m < 0 || n < 0 || k < 0 || ta > CUBLAS_OP_T || tb > CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
    g->arows = ta == CUBLAS_OP_N ? m : k;
    g->acols = ta == CUBLAS_OP_N ? k : m;
    g->brows = tb == CUBLAS_OP_N ? k : n;
    g->bcols = tb == CUBLAS_OP_N ? n : k;
    if (lda < (g->arows > 1 ? g->arows : 1) || ldb < (g->brows > 1 ? g->brows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc, int keep) {
    gemm_dims g;
    const cublasStatus_t st = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc, &g);
    if (st != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return st;
    const int arows = g.arows, acols = g.acols, brows = g.brows, bcols = g.bcols;
    /* every matrix inside a device block, as the GPU would read and write it */
    size_t aspan = ((size_t)(acols - 1) * lda + arows) * sizeof(float);
    size_t bspan = ((size_t)(bcols - 1) * ldb + brows) * sizeof(float);
    size_t cspan = ((size_t)(n - 1) * ldc + m) * sizeof(float);
    if ((k && (!device_bytes(A, aspan) || !device_bytes(B, bspan))) || !device_bytes(C, cspan)) {
        fault(cudaErrorIllegalAddress, "cuBLAS gemm (m %d n %d k %d): a matrix outside device memory", m, n, k);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    g_ngemm++;
    float *ra = NULL, *rb = NULL;
    if (keep < 23 && k) {
        ra = rounded_copy(A, arows, acols, lda, keep);
        rb = rounded_copy(B, brows, bcols, ldb, keep);
        A = ra, lda = arows, B = rb, ldb = brows;
    }
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    free(ra);
    free(rb);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                      int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                                      const float *beta, float *C, int ldc) {
    int keep = h && h->math == CUBLAS_TF32_TENSOR_OP_MATH ? 10 : 23;
    return gemm(h, ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc, keep);
}

/* a bf16 matrix (rows x cols, leading dimension ld) widened into a packed
 * float copy, exactly */
static float *widened_copy(const uint16_t *X, int rows, int cols, int ld) {
    float *c = (float *)malloc((size_t)rows * cols * sizeof(float) + 4);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) {
            const uint32_t u = (uint32_t)X[(size_t)j * ld + i] << 16;
            memcpy(&c[(size_t)j * rows + i], &u, 4);
        }
    return c;
}

/* x to bf16, to nearest with ties to even (NaN: 0x7fff), as the GPU rounds */
static uint16_t bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* bf16 A and B (C bf16 or fp32), fp32 sums: the operands widened exactly,
 * the fp32 GEMM on them, and a bf16 C widened before and rounded after (one
 * rounding of each output, as cuBLAS's epilogue does). The spans are
 * checked in the matrices' own element sizes. */
static cublasStatus_t gemm_bf16(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                float alpha, const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                                void *C, cudaDataType Ctype, int ldc) {
    gemm_dims g;
    const cublasStatus_t st = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc, &g);
    if (st != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return st;
    const int arows = g.arows, acols = g.acols, brows = g.brows, bcols = g.bcols;
    const size_t csize = Ctype == CUDA_R_16BF ? 2 : 4;
    size_t aspan = ((size_t)(acols - 1) * lda + arows) * 2, bspan = ((size_t)(bcols - 1) * ldb + brows) * 2;
    size_t cspan = ((size_t)(n - 1) * ldc + m) * csize;
    if ((k && (!device_bytes(A, aspan) || !device_bytes(B, bspan))) || !device_bytes(C, cspan)) {
        fault(cudaErrorIllegalAddress, "cuBLAS bf16 gemm (m %d n %d k %d): a matrix outside device memory", m, n, k);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    g_ngemm++;
    float *wa = widened_copy(A, k ? arows : 0, k ? acols : 0, lda);
    float *wb = widened_copy(B, k ? brows : 0, k ? bcols : 0, ldb);
    float *wc = (float *)C;
    int ldw = ldc;
    if (Ctype == CUDA_R_16BF) {
        wc = widened_copy((const uint16_t *)C, m, n, ldc);
        ldw = m;
    }
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, alpha, wa, arows > 1 ? arows : 1, wb,
                brows > 1 ? brows : 1, beta, wc, ldw);
    if (Ctype == CUDA_R_16BF) {
        uint16_t *c = (uint16_t *)C;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) c[(size_t)j * ldc + i] = bf16_bits(wc[(size_t)j * m + i]);
        free(wc);
    }
    free(wa);
    free(wb);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                       int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                       const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                       cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                                       cublasGemmAlgo_t algo) {
    (void)algo;
    if (Atype == CUDA_R_16BF && Btype == CUDA_R_16BF && (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F)) {
        /* the types cuBLAS's table lists for bf16 inputs: fp32 compute only */
        if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        return gemm_bf16(h, ta, tb, m, n, k, *(const float *)alpha, (const uint16_t *)A, lda, (const uint16_t *)B,
                         ldb, *(const float *)beta, C, Ctype, ldc);
    }
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    int keep;
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: keep = 23; break;
    case CUBLAS_COMPUTE_32F_FAST_TF32: keep = 10; break;
    case CUBLAS_COMPUTE_32F_FAST_16BF: keep = 7; break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return gemm(h, ta, tb, m, n, k, *(const float *)alpha, (const float *)A, lda, (const float *)B, ldb,
                *(const float *)beta, (float *)C, ldc, keep);
}
