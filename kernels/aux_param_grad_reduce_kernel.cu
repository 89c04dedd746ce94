// Parameter-gradient reduction over the batch (the per-sample-partials path; the fused path's reductions are
// in aux_weight_grad_split_kernel.cu).
//
// aux_param_grad_reduce (contract-faithful path, shape-generic)
//   grad[n] += sum_b partial[b, n]                 partial [B, N] (a [B, ...] partial viewed flat), grad [N]
//   Role accumulate: the caller zeroes grad first.
//   Launch: grid = (ceil_div(N, 256), min(ceil_div(B, 64), 256), 1), block = (256, 1, 1).
//   Block x owns columns n in [256x, 256x + 256); when fewer than 256 columns remain (small N, e.g. a
//   bias of K = 3), the spare threads become extra batch lanes over the same columns. Block row y and
//   lane l sum rows b = y*lanes + l, stepping by gridDim.y*lanes (coalesced over n, 8 rows in flight);
//   the lanes are summed in order in shared memory and each column gets one atomicAdd per block.
//   The order in which the blocks' atomics land is arbitrary: nondeterministic in the last bits
//   (contract: rtol 1e-5).
#include "aux_common.cuh"

namespace {

constexpr int kReduceThreads = 256;
constexpr int kReduceRowsInFlight = 8;

}  // namespace

extern "C" __global__ void __launch_bounds__(kReduceThreads)
aux_param_grad_reduce(const float* __restrict__ partial, float* __restrict__ grad, int B, int N) {
    __shared__ float lane_sums[kReduceThreads];
    const int tid = threadIdx.x;
    const int col0 = blockIdx.x * blockDim.x;
    const int cols = N - col0 < (int)blockDim.x ? N - col0 : (int)blockDim.x;
    if (cols <= 0) return;  // block-uniform
    const int lanes = blockDim.x / cols;
    const int c = tid % cols;
    const int lane = tid / cols;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (lane < lanes) {
        const int step = gridDim.y * lanes;
        const float* col = partial + col0 + c;
        int b = blockIdx.y * lanes + lane;
        for (; b + (kReduceRowsInFlight - 1) * step < B; b += kReduceRowsInFlight * step) {
            float v[kReduceRowsInFlight];
#pragma unroll
            for (int u = 0; u < kReduceRowsInFlight; ++u) v[u] = __ldg(col + (size_t)(b + u * step) * N);
#pragma unroll
            for (int u = 0; u < kReduceRowsInFlight; ++u) acc[u % 4] += v[u];
        }
        for (; b < B; b += step) acc[0] += __ldg(col + (size_t)b * N);
    }
    lane_sums[tid] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    __syncthreads();
    if (lane == 0) {
        float s = lane_sums[c];
        for (int l = 1; l < lanes; ++l) s += lane_sums[l * cols + c];
        atomicAdd(grad + col0 + c, s);
    }
}
