// partial[g] = sum over rows r in [8g, 8g + 8) and columns c of x[r, c]
// x: [rows, 32] f32 (rows = B * T), partial: [ceil_div(rows, 8)] f32
// Launch: grid = ceil_div(rows, 8), block = 256 (eight warps, one row each, one lane per column).
//
// The bug, on purpose (the fixture of issue 15): a warp without a row returns before the block's
// shared-memory flush, and the flush is the last warp's job. A block whose rows do not fill all eight
// warps (the last one, when rows % 8 != 0) never writes its partial. Every case with rows % 8 == 0 passes.

extern "C" __global__ void tail_rows_partial(const float* __restrict__ x, float* __restrict__ partial, int rows) {
    __shared__ float warp_sums[8];
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * 8 + warp;
    if (row >= rows) return;  // the early return: this warp will not reach the flush below
    float v = x[(long long)row * 32 + lane];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (threadIdx.x == 7 * 32) {  // lane 0 of the last warp
        float s = 0.0f;
        for (int w = 0; w < 8; ++w) s += warp_sums[w];
        partial[blockIdx.x] = s;
    }
}
