/*
 * cuda_runtime.h — the runtime API and, for C++ (the translated .cu files),
 * the kernel language hpt's kernels use, on the CPU (make CUDA=emu).
 *
 * A kernel is an ordinary function; `k<<<grid, block, shm>>>(args)` has been
 * rewritten to hpt_emu_launch(k, hpt_emu_cfg(grid, block, shm), args) by
 * translate.sed, and `extern __shared__ T name[];` to a pointer at the
 * block's dynamic shared memory, and `__shared__ T name[n];` to a static
 * array registered with the scheduler (filled with NaN at each block's
 * start): a launch runs its blocks one after the other on one host thread.
 * threadIdx and friends are globals that the scheduler sets before it
 * resumes a thread.
 */
#ifndef HPT_CUDAEMU_RUNTIME_H
#define HPT_CUDAEMU_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus

#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* the current thread's coordinates; the scheduler's to write */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

extern "C" void hpt_emu_syncthreads(void);
extern "C" uint64_t hpt_emu_shfl_xor(unsigned mask, uint64_t bits, int lane_mask, int width);
extern "C" void *hpt_emu_dynamic_shared(void);
extern "C" int hpt_emu_shared_register(void *p, size_t bytes);
extern "C" int hpt_emu_is_device_range(const void *p);

static inline void __syncthreads(void) { hpt_emu_syncthreads(); }

template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a small value");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = hpt_emu_shfl_xor(mask, bits, lane_mask, width);
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Threads switch only at barriers and shuffles, so a read-modify-write is
 * never interleaved with another thread's. */
static inline int atomicMin(int *p, int v) { int old = *p; if (v < old) *p = v; return old; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

struct hpt_emu_cfg_t { dim3 grid, block; size_t shm; };
static inline hpt_emu_cfg_t hpt_emu_cfg(dim3 grid, dim3 block, size_t shm = 0, cudaStream_t s = 0) {
    (void)s;
    return hpt_emu_cfg_t{grid, block, shm};
}

/* one launch: checks the configuration and the pointer arguments (each must
 * be NULL or inside a cudaMalloc'd block), then runs body for every thread
 * of every block */
typedef void (*hpt_emu_body_fn)(void *ctx);
extern "C" void hpt_emu_run(const void *kernel, const char *name, hpt_emu_cfg_t cfg, hpt_emu_body_fn body,
                            void *ctx, int bad_pointer_arg);

template <typename T>
static inline int hpt_emu_bad_pointer(const T &v) {
    if constexpr (std::is_pointer<T>::value) return v != nullptr && !hpt_emu_is_device_range((const void *)v);
    else return 0;
}

template <typename... P, size_t... I>
static inline int hpt_emu_first_bad(const std::tuple<P...> &a, std::index_sequence<I...>) {
    int bad = 0;
    ((bad == 0 && hpt_emu_bad_pointer(std::get<I>(a)) ? (bad = (int)I + 1) : 0), ...);
    return bad;
}

template <typename... P>
struct hpt_emu_call {
    void (*kernel)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    static void run(void *self) {
        hpt_emu_call *c = (hpt_emu_call *)self;
        std::apply(c->kernel, c->args);
    }
};

template <typename... P, typename... A>
static inline void hpt_emu_launch_named(const char *name, void (*kernel)(P...), hpt_emu_cfg_t cfg, A &&...a) {
    hpt_emu_call<P...> call{kernel, std::tuple<typename std::decay<P>::type...>(std::forward<A>(a)...)};
    int bad = hpt_emu_first_bad(call.args, std::index_sequence_for<P...>{});
    hpt_emu_run((const void *)kernel, name, cfg, &hpt_emu_call<P...>::run, &call, bad);
}
#define hpt_emu_launch(kernel, ...) hpt_emu_launch_named(#kernel, kernel, __VA_ARGS__)

/* cuda_runtime.h's typed overload */
template <typename T>
static inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }

template <typename F>
static inline cudaError_t cudaFuncSetAttribute(F *func, cudaFuncAttribute attr, int value) {
    return hpt_emu_func_set_attribute((const void *)func, attr, value);
}

#endif /* __cplusplus */

#endif /* HPT_CUDAEMU_RUNTIME_H */
