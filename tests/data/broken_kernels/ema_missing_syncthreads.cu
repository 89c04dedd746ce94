// BROKEN FIXTURE for `wireup verify` (tests/gpu/test_verify_gpu.py): a copy of kernels/aux_heads_loss_ema_kernel.cu with ONE change,
// a missing __syncthreads before the shared-memory tree of the EMA reduction; verify must report SANITIZER_RACECHECK for kernel "aux_label_scale_ema_update".
// The change:
// -    partial[tid] = sum;
// -    __syncthreads();
// +    partial[tid] = sum;
// Regenerate with: python3 tests/data/broken_kernels/make_fixtures.py
// ISV producers of the aux heads: the next-bar label scale and the HEALTH_DIAG loss EMAs.
//
// aux_label_scale_ema_update (phase A1, right after strided_gather fills the label buffer)
//   m         = (1 / B) * sum_b |labels[b]|
//   isv[slot] = (1 - alpha) * isv[slot] + alpha * m          (slot = AUX_LABEL_SCALE_EMA)
//   labels [B], isv [ISV_TOTAL_DIM]
//   Launch: grid = (1, 1, 1), block = (256, 1, 1). Thread t sums |labels| over the row quads 4t .. 4t+3,
//   4(t + nt) .., ... in double (float4 loads, kQuads quads in flight); a shared-memory tree (one
//   __syncthreads per level) finishes the sum in a fixed order, and thread 0 blends it in. B <= 0 or a slot outside [0, ISV_TOTAL_DIM):
//   the ISV is left unchanged.
//
// aux_heads_loss_ema_update (HEALTH_DIAG, after both losses)
//   isv[ce_slot]         = (1 - alpha) * isv[ce_slot]         + alpha * to_loss[0]
//   isv[mse_slot]        = (1 - alpha) * isv[mse_slot]        + alpha * nb_loss[0]
//   isv[valid_frac_slot] = (1 - alpha) * isv[valid_frac_slot] + alpha * valid_count[0] / B
//   to_loss [1], nb_loss [1], valid_count [1] (i32), isv [ISV_TOTAL_DIM]
//   Launch: grid = (1, 1, 1), block = (32, 1, 1); thread 0 applies the three updates in that order.
//   Each update is skipped when its slot is outside [0, ISV_TOTAL_DIM); the valid-fraction update is
//   also skipped when B <= 0.
//
// Slot indices arrive at run time (graph-capture-stable ISV device pointer + index); the schedule binds
// them from the generated layout, so no slot number is written here.
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kQuads = 8;
}  // namespace

__device__ __forceinline__ float ema_blend(float old, float value, float alpha) {
    return (1.0f - alpha) * old + alpha * value;
}

extern "C" __global__ void __launch_bounds__(kThreads)
aux_label_scale_ema_update(const float* __restrict__ labels, float* __restrict__ isv, int slot, int B, float alpha) {
    __shared__ double partial[kThreads];
    if (B <= 0 || !isv_slot_ok(slot)) return;  // uniform over the block
    const int tid = threadIdx.x;
    const int nt = blockDim.x;

    double sum = 0.0;
    const int vec_rows = aligned16(labels) ? (B / 4) * 4 : 0;
    const float4* l4 = reinterpret_cast<const float4*>(labels);
    for (int q0 = tid; q0 < vec_rows / 4; q0 += kQuads * nt) {
        float4 v[kQuads];
#pragma unroll
        for (int u = 0; u < kQuads; ++u) {
            const int q = q0 + u * nt;
            v[u] = q < vec_rows / 4 ? __ldg(l4 + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < kQuads; ++u)
            sum += ((double)fabsf(v[u].x) + (double)fabsf(v[u].y)) + ((double)fabsf(v[u].z) + (double)fabsf(v[u].w));
    }
    for (int b = vec_rows + tid; b < B; b += nt) sum += (double)fabsf(__ldg(labels + b));

    // Shared-memory tree, fixed shape for a given blockDim.x: deterministic.
    partial[tid] = sum;
    int half = 1;
    while (half < nt) half <<= 1;
    for (half >>= 1; half > 0; half >>= 1) {
        if (tid < half && tid + half < nt) partial[tid] += partial[tid + half];
        __syncthreads();
    }
    if (tid == 0) {
        const float mean_abs = (float)(partial[0] / (double)B);
        isv[slot] = ema_blend(isv[slot], mean_abs, alpha);
    }
}

extern "C" __global__ void __launch_bounds__(32)
aux_heads_loss_ema_update(const float* __restrict__ to_loss, const float* __restrict__ nb_loss,
                          const int* __restrict__ valid_count, float* __restrict__ isv, int ce_slot, int mse_slot,
                          int valid_frac_slot, int B, float alpha) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    if (isv_slot_ok(ce_slot)) isv[ce_slot] = ema_blend(isv[ce_slot], to_loss[0], alpha);
    if (isv_slot_ok(mse_slot)) isv[mse_slot] = ema_blend(isv[mse_slot], nb_loss[0], alpha);
    if (isv_slot_ok(valid_frac_slot) && B > 0)
        isv[valid_frac_slot] = ema_blend(isv[valid_frac_slot], (float)valid_count[0] / (float)B, alpha);
}
