// BROKEN FIXTURE for `wireup verify` (tests/gpu/test_verify_gpu.py): a copy of kernels/strided_gather_kernel.cu with ONE change,
// an off-by-one loop bound (b <= B) writes dst[B]; verify must report VERIFY_OUT_OF_BOUNDS for kernel "strided_gather".
// The change:
// -    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)
// +    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= B; b += gridDim.x * blockDim.x)
// Regenerate with: python3 tests/data/broken_kernels/make_fixtures.py
// Label producer (phase A1): one column of a row-major matrix becomes a contiguous vector.
//
//   dst[b] = src[b * row_stride + col],   b < B
//   src [B, S] (row_stride = S), dst [B]
//   In the aux chain: column 0 of next_states (next-bar log return or price) -> aux_nb_label_buf.
//
// Launch: grid = (ceil_div(B, 256), 1, 1), block = (256, 1, 1); one thread per row, grid-stride so any
// grid size covers every b < B. No mask. The caller guarantees 0 <= col < row_stride.
extern "C" __global__ void __launch_bounds__(256)
strided_gather(const float* __restrict__ src, float* __restrict__ dst, int B, int row_stride, int col) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= B; b += gridDim.x * blockDim.x)
        dst[b] = __ldg(src + (size_t)b * row_stride + col);
}
