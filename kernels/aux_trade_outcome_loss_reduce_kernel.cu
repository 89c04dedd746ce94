// Trade-outcome sparse softmax cross-entropy (phase A4).
//
//   valid(b)       = 0 <= labels[b] < K            (labels[b] == -1: no trade closed, row skipped)
//   CE_b           = logsumexp_k logits[b, k] - logits[b, labels[b]]
//   valid_count[0] = #{b : valid(b)}                                   (B_valid)
//   loss[0]        = sum_{valid b} CE_b / B_valid,   exactly 0 when B_valid == 0 (never NaN)
//   logits [B, K], labels [B] (i32, mask skip_value = -1), loss [1], valid_count [1] (i32)
//
// Launch: grid = (1, 1, 1), block = (1024, 1, 1). Thread t takes the label quads 4t .. 4t+3,
// 4(t + nt) .., ... (int4 loads, kQuads quads = 4*kQuads rows in flight per thread), reads the logits of
// its valid rows only, and accumulates CE in double; the block then sums with a fixed-shape
// shared-memory tree. Same inputs and launch -> same bits (deterministic). Skipped rows cost a quarter of
// an int4 load: their logits are never read.
// K outside [1, AUX_K_MAX] writes loss = NaN and valid_count = 0. Labels outside [0, K) other than
// -1 are treated as skipped (never read out of the row).
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 1024;
constexpr int kQuads = 4;

// Adds CE_b of row b to (ce_sum, count) when its label is valid.
__device__ __forceinline__ void add_row(const float* __restrict__ logits, int b, int label, int K, double& ce_sum,
                                        int& count) {
    if (label < 0 || label >= K) return;
    const float* row = logits + (size_t)b * K;
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
            if (k == label) picked = l[k];
        }
    ce_sum += (double)((m - picked) + logf(s));  // logsumexp - logit[label]
    ++count;
}
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
        // Rows [0, vec_rows) by int4 quads when aligned; the rest one by one.
        const int vec_rows = aligned16(labels) ? (B / 4) * 4 : 0;
        const int4* quads = reinterpret_cast<const int4*>(labels);
        for (int q0 = tid; q0 < vec_rows / 4; q0 += kQuads * nt) {
            int4 lab[kQuads];
#pragma unroll
            for (int u = 0; u < kQuads; ++u) {
                const int q = q0 + u * nt;
                lab[u] = q < vec_rows / 4 ? __ldg(quads + q) : make_int4(-1, -1, -1, -1);
            }
#pragma unroll
            for (int u = 0; u < kQuads; ++u) {
                const int b = 4 * (q0 + u * nt);
                add_row(logits, b + 0, lab[u].x, K, ce_sum, count);
                add_row(logits, b + 1, lab[u].y, K, ce_sum, count);
                add_row(logits, b + 2, lab[u].z, K, ce_sum, count);
                add_row(logits, b + 3, lab[u].w, K, ce_sum, count);
            }
        }
        for (int b = vec_rows + tid; b < B; b += nt) add_row(logits, b, __ldg(labels + b), K, ce_sum, count);
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
