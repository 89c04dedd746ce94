// Trade-outcome sparse softmax cross-entropy (phase A4).
//
//   valid(b)       = 0 <= labels[b] < K            (labels[b] == -1: no trade closed, row skipped)
//   CE_b           = logsumexp_k logits[b, k] - logits[b, labels[b]]
//   valid_count[0] = #{b : valid(b)}                                   (B_valid)
//   loss[0]        = sum_{valid b} CE_b / B_valid,   exactly 0 when B_valid == 0 (never NaN)
//   logits [B, K], labels [B] (i32, mask skip_value = -1), loss [1], valid_count [1] (i32)
//
// Launch: grid = (1, 1, 1), block = (256, 1, 1). Thread t takes rows t, t + nt, t + 2nt, ... in that
// order (labels read kUnroll rows at a time to keep loads in flight), accumulating CE in double; the
// block then sums with a fixed-shape shared-memory tree. Same inputs -> same bits (deterministic).
// Skipped rows cost one label load: their logits are never read.
// K outside [1, AUX_K_MAX] writes loss = NaN and valid_count = 0. Labels outside [0, K) other than
// -1 are treated as skipped (never read out of the row).
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kUnroll = 8;
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
aux_trade_outcome_loss_reduce(const float* __restrict__ logits, const int* __restrict__ labels,
                              float* __restrict__ loss, int* __restrict__ valid_count, int B, int K) {
    __shared__ double scratch_f64[kThreads];
    __shared__ int scratch_i32[kThreads];

    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const bool k_ok = K >= 1 && K <= AUX_K_MAX;

    double ce_sum = 0.0;
    int count = 0;
    if (k_ok) {
        for (int base = tid; base < B; base += kUnroll * nt) {
            int lab[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int b = base + u * nt;
                lab[u] = b < B ? __ldg(labels + b) : -1;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if (lab[u] < 0 || lab[u] >= K) continue;
                const float* row = logits + (size_t)(base + u * nt) * K;
                float l[AUX_K_MAX];
                float m = -INFINITY;
#pragma unroll
                for (int k = 0; k < AUX_K_MAX; ++k)
                    if (k < K) {
                        l[k] = __ldg(row + k);
                        m = fmaxf(m, l[k]);
                    }
                float s = 0.0f;
                float picked = 0.0f;
#pragma unroll
                for (int k = 0; k < AUX_K_MAX; ++k)
                    if (k < K) {
                        s += expf(l[k] - m);
                        if (k == lab[u]) picked = l[k];
                    }
                ce_sum += (double)((m - picked) + logf(s));
                ++count;
            }
        }
    }

    const int total = block_sum_i32(count, scratch_i32);
    const double ce_total = block_sum_f64(ce_sum, scratch_f64);
    if (tid == 0) {
        valid_count[0] = total;
        if (!k_ok)
            loss[0] = aux_nan();
        else
            loss[0] = total > 0 ? (float)(ce_total / (double)total) : 0.0f;
    }
}
