// Fixture: kernels/strided_gather_kernel.cu with "row_stride" dropped from the signature (its contract
// still declares it): ABI_MISMATCH must name parameter 4 "row_stride".
extern "C" __global__ void __launch_bounds__(256)
strided_gather(const float* __restrict__ src, float* __restrict__ dst, int B, int col) {
    const int row_stride = 32;
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)
        dst[b] = __ldg(src + (size_t)b * row_stride + col);
}
