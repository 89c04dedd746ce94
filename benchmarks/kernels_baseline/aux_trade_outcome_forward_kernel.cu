// Trade-outcome head forward (phase A3): K-class classifier (loss / flat / win) on the aux trunk output.
//
//   h1[b, j]     = ELU( sum_i h_s2[b, i] * W1[j, i] + b1[j] )     -> h1_out (saved for backward)
//   logits[b, k] = sum_j h1[b, j] * W2[k, j] + b2[k]
//   probs[b, k]  = exp(logits[b, k] - m_b) / sum_k' exp(logits[b, k'] - m_b),  m_b = max_k logits[b, k]
//   h_s2 [B, SH2], W1 [H, SH2], b1 [H], W2 [K, H], b2 [K], h1_out [B, H], logits [B, K], probs [B, K]
//
// Launch: grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1). Block x owns rows 32x .. 32x+31 and all
// H hidden units (aux_head_forward.cuh); thread r < 32 then finishes row 32x + r.
// No mask here: every row is computed (labels only matter to the loss and backward).
// K is a run-time value in [1, AUX_K_MAX]; outside that range logits and probs are written as NaN.
#include "aux_common.cuh"
#include "aux_head_forward.cuh"

extern "C" __global__ void __launch_bounds__(aux_head::kThreads)
aux_trade_outcome_forward(const float* __restrict__ h_s2, const float* __restrict__ W1, const float* __restrict__ b1,
                          const float* __restrict__ W2, const float* __restrict__ b2, float* __restrict__ h1_out,
                          float* __restrict__ logits, float* __restrict__ probs, int B, int SH2, int H, int K) {
    __shared__ __align__(16) aux_head::Smem s;
    aux_head::hidden_and_logits(h_s2, W1, b1, W2, h1_out, B, SH2, H, K, s);

    const int r = threadIdx.x;
    const int row = blockIdx.x * aux_head::kBM + r;
    if (r >= aux_head::kBM || row >= B) return;
    float* lrow = logits + (size_t)row * K;
    float* prow = probs + (size_t)row * K;
    if (K < 1 || K > AUX_K_MAX) {
        for (int k = 0; k < K; ++k) {
            lrow[k] = aux_nan();
            prow[k] = aux_nan();
        }
        return;
    }

    float l[AUX_K_MAX];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < AUX_K_MAX; ++k) {
        if (k < K) {
            l[k] = s.logits[r][k] + __ldg(b2 + k);
            lrow[k] = l[k];
            m = fmaxf(m, l[k]);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < AUX_K_MAX; ++k) {
        if (k < K) {
            l[k] = expf(l[k] - m);
            sum += l[k];
        }
    }
#pragma unroll
    for (int k = 0; k < AUX_K_MAX; ++k)
        if (k < K) prow[k] = l[k] / sum;
}
