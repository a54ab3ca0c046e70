/*
 * device_nocuda.c — the CUDA row of a build without CUDA: it exists so that
 * `--device cuda` gets the reason instead of "unknown device", and nothing
 * else of it can be called (hpt_device_open refuses an unavailable row).
 */
#include "device.h"

static const char *nocuda_unavailable(void) {
    return "this hpt was built without CUDA (nvcc was not found when it was built); "
           "the CUDA backend is not in this version yet";
}

const hpt_device hpt_device_cuda = {
    .name = "cuda",
    .summary = "an NVIDIA GPU (cuBLAS): not in this build",
    .unavailable = nocuda_unavailable,
};
