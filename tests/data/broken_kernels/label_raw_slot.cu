// BROKEN FIXTURE for `wireup verify` (tests/gpu/test_verify_gpu.py): a copy of kernels/aux_next_bar_loss_reduce_kernel.cu with ONE change,
// the label divided by the raw slot instead of max(slot, 1e-6); verify must report VERIFY_DIVISOR_ZERO for kernel "aux_next_bar_loss_reduce".
// The change:
// -    const float s = aux_label_scale(isv, label_scale_slot);
// +    const float s = isv[label_scale_slot];
// Regenerate with: python3 tests/data/broken_kernels/make_fixtures.py
// Next-bar head loss: mean squared error against the scale-normalised next-bar label.
//
//   s       = max(isv[label_scale_slot], 1e-6)          (ISV slot AUX_LABEL_SCALE_EMA)
//   r_b     = pred[b] - label[b] / s
//   loss[0] = sum_b r_b^2 / B
//   pred [B], label [B], isv [ISV_TOTAL_DIM], loss [1]
//
// Dividing by the label-scale EMA keeps loss and gradient O(1) whether next_states[:, 0] holds log
// returns (~1e-3) or raw prices (~5e3). The slot index arrives at run time (graph-capture-stable
// ISV pointer + index); an index outside [0, ISV_TOTAL_DIM) yields loss = NaN rather than a stray read.
// No mask: every row has a label. B <= 0 writes loss = 0.
//
// Launch: grid = (1, 1, 1), block = (1024, 1, 1). Thread t takes the row quads 4t .. 4t+3,
// 4(t + nt) .., ... (float4 loads, kQuads quads in flight) and sums r^2 in double; a fixed-shape
// shared-memory tree finishes the sum. Deterministic.
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 1024;
constexpr int kQuads = 4;
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
aux_next_bar_loss_reduce(const float* __restrict__ pred, const float* __restrict__ label,
                         const float* __restrict__ isv, int label_scale_slot, float* __restrict__ loss, int B) {
    __shared__ double scratch[kThreads];
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const float s = isv[label_scale_slot];

    double sum = 0.0;
    const int vec_rows = (aligned16(pred) && aligned16(label)) ? (B / 4) * 4 : 0;
    const float4* p4 = reinterpret_cast<const float4*>(pred);
    const float4* y4 = reinterpret_cast<const float4*>(label);
    for (int q0 = tid; q0 < vec_rows / 4; q0 += kQuads * nt) {
        float4 p[kQuads];
        float4 y[kQuads];
#pragma unroll
        for (int u = 0; u < kQuads; ++u) {
            const int q = q0 + u * nt;
            const bool in = q < vec_rows / 4;
            p[u] = in ? __ldg(p4 + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            y[u] = in ? __ldg(y4 + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < kQuads; ++u) {
            if (q0 + u * nt >= vec_rows / 4) break;
            const float r0 = p[u].x - y[u].x / s;
            const float r1 = p[u].y - y[u].y / s;
            const float r2 = p[u].z - y[u].z / s;
            const float r3 = p[u].w - y[u].w / s;
            sum += (double)r0 * r0 + (double)r1 * r1 + (double)r2 * r2 + (double)r3 * r3;
        }
    }
    for (int b = vec_rows + tid; b < B; b += nt) {
        const float r = __ldg(pred + b) - __ldg(label + b) / s;
        sum += (double)r * r;
    }
    const double total = block_sum_f64(sum, scratch);
    if (tid == 0) loss[0] = B > 0 ? (float)(total / (double)B) : (isv_slot_ok(label_scale_slot) ? 0.0f : aux_nan());
}
