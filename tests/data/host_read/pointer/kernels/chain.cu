// Host-read fixture kernels (see ../wireup.toml). Formulas are in ../contracts/chain.toml.
//
//   label_scale_update  isv[LABEL_SCALE] = 0.9 * isv[LABEL_SCALE] + 0.1 * mean|y|; one thread (the fixture is small)
//   normalize           z[b] = y[b] / max(isv[LABEL_SCALE], 1e-6), the scale read through the ISV pointer
#include <math.h>

extern "C" __global__ void label_scale_update(const float* __restrict__ y, float* __restrict__ isv, int slot, int B) {
    if (blockIdx.x != 0 || threadIdx.x != 0 || B <= 0) return;
    double s = 0.0;
    for (int b = 0; b < B; ++b) s += fabs((double)y[b]);
    isv[slot] = (float)(0.9 * (double)isv[slot] + 0.1 * (s / (double)B));
}

extern "C" __global__ void normalize(const float* __restrict__ y, float* __restrict__ z, const float* __restrict__ isv, int slot, int B) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) z[b] = y[b] / fmaxf(isv[slot], 1e-6f);
}
