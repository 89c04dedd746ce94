// Next-bar head forward: one regression output on the aux trunk output.
//
//   h1[b, j] = ELU( sum_i h_s2[b, i] * W1[j, i] + b1[j] )     -> h1_out (saved for backward)
//   pred[b]  = sum_j h1[b, j] * W2[0, j] + b2[0]             -> pred (saved for backward)
//   h_s2 [B, SH2], W1 [H, SH2], b1 [H], W2 [KNB = 1, H], b2 [KNB = 1], h1_out [B, H], pred [B]
//
// Launch: grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1). Block x owns rows 32x .. 32x+31 and all
// H hidden units (aux_head_forward.cuh); thread r < 32 then writes pred for row 32x + r.
// No mask: every row has a next-bar label. Labels are normalised in the loss, not here.
#include "aux_common.cuh"
#include "aux_head_forward.cuh"

extern "C" __global__ void __launch_bounds__(aux_head::kThreads)
aux_next_bar_forward(const float* __restrict__ h_s2, const float* __restrict__ W1, const float* __restrict__ b1,
                     const float* __restrict__ W2, const float* __restrict__ b2, float* __restrict__ h1_out,
                     float* __restrict__ pred, int B, int SH2, int H) {
    constexpr int kOutputs = 1;  // KNB
    __shared__ __align__(16) aux_head::Smem s;
    aux_head::hidden_and_logits(h_s2, W1, b1, W2, h1_out, B, SH2, H, kOutputs, s);

    const int r = threadIdx.x;
    const int row = blockIdx.x * aux_head::kBM + r;
    if (r >= aux_head::kBM || row >= B) return;
    pred[row] = s.logits[r][0] + __ldg(b2);
}
