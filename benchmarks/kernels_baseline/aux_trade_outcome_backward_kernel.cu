// Trade-outcome head backward (phase A5): sparse softmax-CE back through Linear -> ELU -> Linear.
//
// For a valid row b (0 <= labels[b] < K and B_valid = valid_count[0] > 0):
//   dl[k]                  = (probs[b, k] - [k == labels[b]]) / B_valid          (d loss / d logits)
//   db2_partial[b, k]      = dl[k]
//   dW2_partial[b, k, j]   = dl[k] * h1[b, j]                                     (optional)
//   dz1[j]                 = (sum_k dl[k] * W2[k, j]) * ELU'(h1[b, j]),  ELU' = h1 > 0 ? 1 : 1 + h1
//   db1_partial[b, j]      = dz1[j]
//   dW1_partial[b, j, i]   = dz1[j] * h_s2[b, i]                                  (optional)
//   dh[i]                  = sum_j dz1[j] * W1[j, i]
//   dh_s2_aux_out[b, i]    = dh[i]
//   dh_s2_aux_accum[b, i] += saxpy_alpha * dh[i]
// Mask: a skipped row (labels[b] == -1, any label outside [0, K), or B_valid == 0) writes exact zeros to
// every partial of the row and to dh_s2_aux_out[b, :], and leaves dh_s2_aux_accum[b, :] unchanged.
// So an all-skip batch yields zero gradients and no NaN.
//   h_s2 [B, SH2], h1 [B, H], probs [B, K], labels [B] (i32), valid_count [1] (i32), W1 [H, SH2], W2 [K, H],
//   dW1_partial [B, H, SH2] (NULL-able), db1_partial [B, H], dW2_partial [B, K, H] (NULL-able),
//   db2_partial [B, K], dh_s2_aux_out [B, SH2], dh_s2_aux_accum [B, SH2]
//
// Launch: grid = (ceil_div(B, 8), 1, 1), block = (256, 1, 1); block x owns rows 8x .. 8x+7, one after
// the other. Trade-close labels are valid on ~1-5% of rows, so a skipped row is one label load plus
// ~H + K + SH2 zero stores (plus the optional partial rows); a valid row computes dz1 in chunks of
// blockDim.x hidden units held in shared memory; dh = dz1 W1 is then formed by 64 float4 column quads x
// 4 groups of hidden units (coalesced float4 reads of W1's rows, groups summed in order in shared
// memory), or by one thread per column when SH2 is not a multiple of 4. Batching 8 rows per block keeps the mostly-skipped grid from
// being bound by block scheduling.
// K outside [1, AUX_K_MAX] writes NaN to every output row (accumulator untouched).
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 8;
constexpr int kQuads = 64;                    // float4 column quads of dh per pass
constexpr int kJGroups = kThreads / kQuads;  // hidden-unit groups summed in shared memory
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
aux_trade_outcome_backward(const float* __restrict__ h_s2, const float* __restrict__ h1,
                           const float* __restrict__ probs, const int* __restrict__ labels,
                           const int* __restrict__ valid_count, const float* __restrict__ W1,
                           const float* __restrict__ W2, float* __restrict__ dW1_partial,
                           float* __restrict__ db1_partial, float* __restrict__ dW2_partial,
                           float* __restrict__ db2_partial, float* __restrict__ dh_s2_aux_out,
                           float* __restrict__ dh_s2_aux_accum, float saxpy_alpha, int B, int SH2, int H, int K) {
    __shared__ float dl_s[AUX_K_MAX];
    __shared__ float dz_s[kThreads];
    __shared__ float4 red_s[kJGroups][kQuads];

    const int tid = threadIdx.x;
    const int nt = blockDim.x;  // <= kThreads by __launch_bounds__
    const bool k_ok = K >= 1 && K <= AUX_K_MAX;
    const int b_valid = __ldg(valid_count);
    const bool vec = (SH2 % 4 == 0) && nt == kThreads && aligned16(W1) && aligned16(dh_s2_aux_out) &&
                     aligned16(dh_s2_aux_accum);

#pragma unroll 1
    for (int r = 0; r < kRowsPerBlock; ++r) {
        const int row = blockIdx.x * kRowsPerBlock + r;
        if (row >= B) break;  // block-uniform
        const int label = __ldg(labels + row);
        const bool valid = k_ok && b_valid > 0 && label >= 0 && label < K;

        if (!valid) {  // no barrier on this path
            const float fill = k_ok ? 0.0f : aux_nan();
            block_fill(db1_partial + (size_t)row * H, H, fill);
            block_fill(db2_partial + (size_t)row * K, K, fill);
            block_fill(dh_s2_aux_out + (size_t)row * SH2, SH2, fill);
            if (dW2_partial != nullptr) block_fill(dW2_partial + (size_t)row * K * H, (long long)K * H, fill);
            if (dW1_partial != nullptr) block_fill(dW1_partial + (size_t)row * H * SH2, (long long)H * SH2, fill);
            continue;
        }

        // dl_s / dz_s of the previous valid row were last read before that row's final barrier.
        if (tid < K) {
            const float onehot = tid == label ? 1.0f : 0.0f;
            const float dl = (__ldg(probs + (size_t)row * K + tid) - onehot) / (float)b_valid;
            dl_s[tid] = dl;
            db2_partial[(size_t)row * K + tid] = dl;
        }
        __syncthreads();

        const float* h1row = h1 + (size_t)row * H;
        const float* xrow = h_s2 + (size_t)row * SH2;
        // dz1 for hidden units j0 .. j0+jn-1 into dz_s; the first column pass also writes db1 / dW2 / dW1.
        auto stage_dz1 = [&](int j0, bool first_pass) {
            const int j = j0 + tid;
            if (j < H) {
                float dh1 = 0.0f;
                for (int k = 0; k < K; ++k) dh1 = fmaf(dl_s[k], __ldg(W2 + (size_t)k * H + j), dh1);
                const float hv = __ldg(h1row + j);
                const float dz = dh1 * elu_grad_from_output(hv);
                dz_s[tid] = dz;
                if (first_pass) {
                    db1_partial[(size_t)row * H + j] = dz;
                    if (dW2_partial != nullptr)
                        for (int k = 0; k < K; ++k) dW2_partial[((size_t)row * K + k) * H + j] = dl_s[k] * hv;
                }
            }
        };

        if (vec) {
            const int q = tid % kQuads;
            const int jg = tid / kQuads;
            for (int i0 = 0; i0 < SH2; i0 += 4 * kQuads) {
                const int i = i0 + 4 * q;
                float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // meaningful for jg == 0
                for (int j0 = 0; j0 < H; j0 += nt) {
                    const int jn = H - j0 < nt ? H - j0 : nt;
                    stage_dz1(j0, i0 == 0);
                    __syncthreads();
                    const int per = (jn + kJGroups - 1) / kJGroups;
                    const int ja = jg * per;
                    const int jb = ja + per < jn ? ja + per : jn;
                    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    if (i < SH2) {
                        const float* w = W1 + (size_t)j0 * SH2 + i;
#pragma unroll 8
                        for (int jj = ja; jj < jb; ++jj) {
                            const float4 wv = __ldg(reinterpret_cast<const float4*>(w + (size_t)jj * SH2));
                            const float d = dz_s[jj];
                            a.x = fmaf(d, wv.x, a.x);
                            a.y = fmaf(d, wv.y, a.y);
                            a.z = fmaf(d, wv.z, a.z);
                            a.w = fmaf(d, wv.w, a.w);
                        }
                    }
                    red_s[jg][q] = a;
                    if (i0 == 0 && dW1_partial != nullptr)
                        block_outer_product(dW1_partial + ((size_t)row * H + j0) * SH2, dz_s, xrow, jn, SH2);
                    __syncthreads();
                    if (jg == 0) {
#pragma unroll
                        for (int g = 0; g < kJGroups; ++g) {
                            total.x += red_s[g][q].x;
                            total.y += red_s[g][q].y;
                            total.z += red_s[g][q].z;
                            total.w += red_s[g][q].w;
                        }
                    }
                    __syncthreads();  // dz_s, red_s (and dl_s) are rewritten by the next chunk or row
                }
                if (jg == 0 && i < SH2) {
                    const size_t o = (size_t)row * SH2 + i;
                    *reinterpret_cast<float4*>(dh_s2_aux_out + o) = total;
                    float4 acc = *reinterpret_cast<const float4*>(dh_s2_aux_accum + o);
                    acc.x = fmaf(saxpy_alpha, total.x, acc.x);
                    acc.y = fmaf(saxpy_alpha, total.y, acc.y);
                    acc.z = fmaf(saxpy_alpha, total.z, acc.z);
                    acc.w = fmaf(saxpy_alpha, total.w, acc.w);
                    *reinterpret_cast<float4*>(dh_s2_aux_accum + o) = acc;
                }
            }
            continue;
        }

        for (int i0 = 0; i0 < SH2; i0 += nt) {
            const int i = i0 + tid;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int j0 = 0; j0 < H; j0 += nt) {
                const int jn = H - j0 < nt ? H - j0 : nt;
                stage_dz1(j0, i0 == 0);
                __syncthreads();
                if (i < SH2) {
                    const float* w = W1 + (size_t)j0 * SH2 + i;
                    int jj = 0;
#pragma unroll 2
                    for (; jj + 3 < jn; jj += 4) {
                        acc[0] = fmaf(dz_s[jj + 0], __ldg(w + (size_t)(jj + 0) * SH2), acc[0]);
                        acc[1] = fmaf(dz_s[jj + 1], __ldg(w + (size_t)(jj + 1) * SH2), acc[1]);
                        acc[2] = fmaf(dz_s[jj + 2], __ldg(w + (size_t)(jj + 2) * SH2), acc[2]);
                        acc[3] = fmaf(dz_s[jj + 3], __ldg(w + (size_t)(jj + 3) * SH2), acc[3]);
                    }
                    for (; jj < jn; ++jj) acc[0] = fmaf(dz_s[jj], __ldg(w + (size_t)jj * SH2), acc[0]);
                }
                if (i0 == 0 && dW1_partial != nullptr)
                    block_outer_product(dW1_partial + ((size_t)row * H + j0) * SH2, dz_s, xrow, jn, SH2);
                __syncthreads();  // dz_s (and dl_s) are rewritten by the next chunk or row
            }
            if (i < SH2) {
                const float dh = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                const size_t o = (size_t)row * SH2 + i;
                dh_s2_aux_out[o] = dh;
                dh_s2_aux_accum[o] = fmaf(saxpy_alpha, dh, dh_s2_aux_accum[o]);
            }
        }
    }
}
