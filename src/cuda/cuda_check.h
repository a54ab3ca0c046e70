/*
 * cuda_check.h — for .cu files only (it includes the CUDA runtime): the
 * always-on checks every CUDA source in src/cuda uses, as HPT_ASSERT is for
 * C. A failed CUDA call or kernel launch is a programmer error (a bad launch
 * configuration, a pointer that is not device memory, a kernel that faulted):
 * it aborts with the runtime's own words and where. What user input can
 * cause (no device, out of memory) is not checked here: those calls return
 * a status or NULL to their caller instead (device_cuda.cu's unavailable and
 * alloc).
 */
#ifndef HPT_CUDA_CHECK_H
#define HPT_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static inline void hpt_cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "hpt: CUDA error: %s: %s (%s:%d)\n", what, cudaGetErrorString(e), file, line);
    abort();
}

/* HPT_CUDA_CHECK(cudaMemcpy(...)); */
#define HPT_CUDA_CHECK(call) hpt_cuda_check_((call), #call, __FILE__, __LINE__)

/* After a kernel launch: a bad configuration shows at once (cudaGetLastError);
 * a fault inside the kernel shows at the next synchronizing call's check. */
#define HPT_CUDA_LAUNCHED(kernel) hpt_cuda_check_(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__)

#endif /* HPT_CUDA_CHECK_H */
