// Shared forward of the two aux heads (trade-outcome and next-bar): Linear(SH2 -> H) -> ELU -> Linear(H -> K).
//
//   h1[b, j]      = ELU( sum_i h_s2[b, i] * W1[j, i] + b1[j] )       written to h1_out (saved for backward)
//   part[r][k]    = sum_j h1[b, j] * W2[k, j]                        (b2 is added by the caller's epilogue)
//
// A block owns kHeadBM = 32 consecutive batch rows and all H hidden units (in chunks of kHeadBN = 128),
// so the second Linear is reduced inside the block: each warp owns 8 rows of the chunk, every lane 4
// hidden units, and a warp shuffle sums the 32 lanes. Each thread owns an 8 x 4 register tile of the
// first Linear (SGEMM h_s2 W1^T, k = i in slices of 16).
// Launch: grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1).
#pragma once

#include "aux_common.cuh"
#include "sgemm_tile.cuh"

namespace aux_head {

constexpr int kThreads = 128;
constexpr int kBM = 32;   // batch rows per block
constexpr int kBN = 128;  // hidden units per chunk
constexpr int kBK = 16;
constexpr int kTM = 8;
constexpr int kTN = 4;
static_assert((kBM / kTM) * (kBN / kTN) == kThreads, "one register tile per thread");
static_assert(kBN / kTN == 32, "a warp spans one chunk of hidden units, so a shuffle reduces a row");

struct Smem {
    float As[2][kBK][kBM + 4];
    float Bs[2][kBK][kBN + 4];
    float logits[kBM][AUX_K_MAX];  // second-Linear sums per row and class, without b2
};

// Computes h1 for rows [row0, row0 + 32) (writing h1_out) and, when 1 <= K <= AUX_K_MAX, fills
// s.logits[r][k] for r < 32, k < K. Ends with a barrier, so s.logits is readable by every thread.
__device__ __forceinline__ void hidden_and_logits(const float* __restrict__ h_s2, const float* __restrict__ W1,
                                                  const float* __restrict__ b1, const float* __restrict__ W2,
                                                  float* __restrict__ h1_out, int B, int SH2, int H, int K,
                                                  Smem& s) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;  // == tx: the 4 hidden units lane*4 .. lane*4+3 of a chunk
    const int ty = tid / 32;    // == warp: the 8 rows ty*8 .. ty*8+7 of the block
    const int row0 = blockIdx.x * kBM;
    const bool k_ok = K >= 1 && K <= AUX_K_MAX;

    for (int e = tid; e < kBM * AUX_K_MAX; e += kThreads) (&s.logits[0][0])[e] = 0.0f;
    __syncthreads();

    const bool vec_k = (SH2 % 4 == 0) && aligned16(h_s2) && aligned16(W1);
    const bool vec_h = (H % 4 == 0) && aligned16(h1_out) && aligned16(W2) && aligned16(b1);

    for (int n0 = 0; n0 < H; n0 += kBN) {
        sgemm::KContigLoader<kBM, kBK, kThreads> la{h_s2, SH2, B, SH2, row0, vec_k};
        sgemm::KContigLoader<kBN, kBK, kThreads> lb{W1, SH2, H, SH2, n0, vec_k};
        float acc[kTM][kTN];
        const int num_kt = (SH2 + kBK - 1) / kBK;
        sgemm::mainloop<kBK>(acc, la, lb, 0, num_kt, s.As, s.Bs, ty * kTM, lane * kTN);

        const int j0 = n0 + lane * kTN;
        float bias[kTN];
#pragma unroll
        for (int c = 0; c < kTN; ++c) bias[c] = j0 + c < H ? __ldg(b1 + j0 + c) : 0.0f;

        // h1 = ELU(acc + b1); units >= H are zero so they add nothing below.
        float h[kTM][kTN];
#pragma unroll
        for (int r = 0; r < kTM; ++r) {
#pragma unroll
            for (int c = 0; c < kTN; ++c) h[r][c] = j0 + c < H ? elu(acc[r][c] + bias[c]) : 0.0f;
            const int row = row0 + ty * kTM + r;
            if (row < B) {
                float* out = h1_out + (size_t)row * H;
                if (vec_h && j0 < H) {
                    *reinterpret_cast<float4*>(out + j0) = make_float4(h[r][0], h[r][1], h[r][2], h[r][3]);
                } else {
#pragma unroll
                    for (int c = 0; c < kTN; ++c)
                        if (j0 + c < H) out[j0 + c] = h[r][c];
                }
            }
        }

        if (!k_ok) continue;
        // Second Linear: each lane's 4 units against W2[k, :], summed over the warp's 32 lanes.
        for (int k = 0; k < K; ++k) {
            float w[kTN];
            const float* w2row = W2 + (size_t)k * H;
            if (vec_h && j0 < H) {
                const float4 v = sgemm::ldg4(w2row + j0);
                w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
            } else {
#pragma unroll
                for (int c = 0; c < kTN; ++c) w[c] = j0 + c < H ? __ldg(w2row + j0 + c) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < kTM; ++r) {
                float p = h[r][0] * w[0];
#pragma unroll
                for (int c = 1; c < kTN; ++c) p = fmaf(h[r][c], w[c], p);
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) p += __shfl_xor_sync(0xffffffffu, p, off);
                // Only lane 0 of the warp owning these rows touches them: no cross-warp race.
                if (lane == 0) s.logits[ty * kTM + r][k] += p;
            }
        }
    }
    __syncthreads();
}

}  // namespace aux_head
