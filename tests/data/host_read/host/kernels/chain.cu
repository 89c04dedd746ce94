// Host-read fixture kernels (see ../wireup.toml). Formulas are in ../contracts/chain.toml.
//
//   label_scale_update  isv[LABEL_SCALE] = 0.9 * isv[LABEL_SCALE] + 0.1 * mean|y|; one thread (the fixture is small)
//   normalize           z[b] = y[b] / max(scale, 1e-6), the scale read on the host and passed by value: a
//                       CUDA graph captures the value of the step it was captured at (the bug this fixture shows)
#include <math.h>

extern "C" __global__ void label_scale_update(const float* __restrict__ y, float* __restrict__ isv, int slot, int B) {
    if (blockIdx.x != 0 || threadIdx.x != 0 || B <= 0) return;
    double s = 0.0;
    for (int b = 0; b < B; ++b) s += fabs((double)y[b]);
    isv[slot] = (float)(0.9 * (double)isv[slot] + 0.1 * (s / (double)B));
}

extern "C" __global__ void normalize(const float* __restrict__ y, float* __restrict__ z, float scale, int B) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) z[b] = y[b] / fmaxf(scale, 1e-6f);
}
