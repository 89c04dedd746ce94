// y = x / max(isv[slot], 1e-6), elementwise over [B, D]. Grid ceil_div(B*D, 256) x 256 threads.
extern "C" __global__ void scale_rows(const float* __restrict__ x, float* __restrict__ y,
                                      const float* __restrict__ isv, int slot, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / fmaxf(isv[slot], 1e-6f);
}
