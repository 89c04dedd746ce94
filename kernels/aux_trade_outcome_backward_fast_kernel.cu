// Trade-outcome head backward (phase A5): sparse softmax-CE back through Linear -> ELU -> Linear, 32 rows per
// block. The same parameters, semantics and valid-row arithmetic as aux_trade_outcome_backward_kernel.cu (8 rows
// per block, each behind its own label load), whose outputs it reproduces bit for bit (benchmarks/gpu_to_bwd.py;
// issue 18, docs/benchmarks.md 4h), and dh_s2_aux_out may be NULL. Shipped: the contract of
// aux_trade_outcome_backward launches it (grid ceil_div(B, 32)); the 8-row kernel is gpu_to_bwd.py's reference in
// benchmarks/kernels_baseline.
//
// For a valid row b (0 <= labels[b] < K and B_valid = valid_count[0] > 0):
//   dl[k]                  = (probs[b, k] - [k == labels[b]]) / B_valid          (d loss / d logits)
//   db2_partial[b, k]      = dl[k]
//   dW2_partial[b, k, j]   = dl[k] * h1[b, j]                                     (optional)
//   dz1[j]                 = (sum_k dl[k] * W2[k, j]) * ELU'(h1[b, j]),  ELU' = h1 > 0 ? 1 : 1 + h1
//   db1_partial[b, j]      = dz1[j]
//   dW1_partial[b, j, i]   = dz1[j] * h_s2[b, i]                                  (optional)
//   dh[i]                  = sum_j dz1[j] * W1[j, i]
//   dh_s2_aux_out[b, i]    = dh[i]                                                 (optional)
//   dh_s2_aux_accum[b, i] += saxpy_alpha * dh[i]
// Mask: a skipped row (labels[b] == -1, any label outside [0, K), or B_valid == 0) writes exact zeros to
// every partial of the row and to dh_s2_aux_out[b, :], and leaves dh_s2_aux_accum[b, :] unchanged.
// So an all-skip batch yields zero gradients and no NaN. K outside [1, AUX_K_MAX] writes NaN to every output
// row (accumulator untouched). Rows >= B are never written.
//   h_s2 [B, SH2], h1 [B, H], probs [B, K], labels [B] (i32), valid_count [1] (i32), W1 [H, SH2], W2 [K, H],
//   dW1_partial [B, H, SH2] (NULL-able), db1_partial [B, H], dW2_partial [B, K, H] (NULL-able),
//   db2_partial [B, K], dh_s2_aux_out [B, SH2] (NULL-able: the fused path needs only the accumulator, and its
//   skipped rows' zeros are most of this kernel's stores), dh_s2_aux_accum [B, SH2]
//
// Launch: grid = (ceil_div(B, 32), 1, 1), block = (256, 1, 1); block x owns rows [32 x, 32 x + 32) (those
// below B; a block past B returns at once, so a larger grid is correct too). Trade-close labels are valid on
// ~1-5% of rows, so the kernel is bound by the stores of the skipped rows, not by their label loads:
//   1. threads r < 32 load the block's 32 labels at once into label_s[r] and put row r's validity bit into
//      flag_s[r]. Barrier. Every thread ORs the 32 flags into the block's mask (the same in every thread).
//   2. for each output X in (db1_partial [H], db2_partial [K], dh_s2_aux_out [SH2], dW2_partial [K H] and
//      dW1_partial [H SH2] where non-NULL): the block's rows are one contiguous span of X's rows, filled with
//      the fill value (0, or NaN for a bad K) by the whole block, float4 where the span starts 16-byte aligned,
//      skipping the elements of the valid rows (a float4 that touches a valid row is written element by
//      element); the weight partials one block_fill per skipped row. A block with no valid row (97 % ^ 32 =
//      38 % of the blocks at 3 % labels) is one block_fill per output. No loads on this path.
//   3. the valid rows (the mask's set bits, lowest first), one after the other: dz1 in chunks of blockDim.x
//      hidden units held in shared memory; dh = dz1 W1 by 64 float4 column quads x 4 groups of hidden units
//      (coalesced float4 reads of W1's rows, groups summed in order in shared memory) when SH2 % 4 == 0,
//      blockDim.x == 256 and W1, dh_s2_aux_out, dh_s2_aux_accum are 16-byte aligned, else by one thread per
//      column. They write only their own rows, which step 2 skipped, so the two steps need no barrier between
//      them.
// Shared memory (static): dl_s [8] f32, dz_s [256] f32, red_s [4][64] float4, flag_s [32] u32, label_s [32] i32:
// 5.4 KB. __launch_bounds__(256, 4): 64 registers, no spill (ptxas, nvcc 13.0, -arch=sm_90 -O3), 4 blocks per
// SM so that the label loads and the valid rows overlap other blocks' stores; the W1 loop is unrolled 2 deep
// for that (8 deep needs 96 registers; unrolling changes the order of no sum, so not the bits).
#include "aux_common.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 32;             // one bit per row in a 32-bit mask; the grid is ceil_div(B, 32)
constexpr int kMinBlocks = 4;                 // resident blocks per SM: 64 registers at 256 threads
constexpr int kQuads = 64;                    // float4 column quads of dh per pass
constexpr int kJGroups = kThreads / kQuads;  // hidden-unit groups summed in shared memory
constexpr int kW1Unroll = 2;                  // the valid rows' float4 W1 loop
}  // namespace

// p[0 .. nrows * X) = v, except the elements of the rows whose bit is set in `keep` (rows of X elements each,
// row r at p + r * X; nrows <= 32). Whole block; float4 stores where p is 16-byte aligned. For the outputs of
// one row per unit (H, K, SH2 elements: nrows * X fits an int).
__device__ __forceinline__ void fill_skipped_rows(float* __restrict__ p, int X, int nrows, unsigned keep, float v) {
    const int n = nrows * X;
    if (n <= 0) return;  // X <= 0 (K outside the range, H or SH2 of 0): nothing to write, and no division by X
    if (keep == 0u) {
        block_fill(p, n, v);
        return;
    }
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    int done = 0;
    if (aligned16(p)) {
        const int n4 = n / 4;
        const float4 v4 = make_float4(v, v, v, v);
        for (int e4 = tid; e4 < n4; e4 += nt) {
            const int e = e4 * 4;
            const int ra = e / X;
            const int rb = (e + 3) / X;
            const unsigned rows = (2u << rb) - (1u << ra);  // bits ra .. rb (rb <= 31: 2u << 31 wraps to 0)
            if ((keep & rows) == 0u) {
                reinterpret_cast<float4*>(p)[e4] = v4;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (((keep >> ((e + c) / X)) & 1u) == 0u) p[e + c] = v;
            }
        }
        done = n4 * 4;
    }
    for (int e = done + tid; e < n; e += nt)
        if (((keep >> (e / X)) & 1u) == 0u) p[e] = v;
}

// The same for the per-sample weight partials (X = K H or H SH2 elements per row: only the per-sample schedule,
// at small B, passes them): one block_fill per skipped row, or one over the span when no row is kept.
__device__ __forceinline__ void fill_skipped_rows_wide(float* __restrict__ p, long long X, int nrows, unsigned keep, float v) {
    if (keep == 0u) {
        block_fill(p, (long long)nrows * X, v);
        return;
    }
    for (int r = 0; r < nrows; ++r)
        if (((keep >> r) & 1u) == 0u) block_fill(p + (size_t)r * (size_t)X, X, v);
}

extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks)
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
    __shared__ unsigned flag_s[kRowsPerBlock];
    __shared__ int label_s[kRowsPerBlock];

    const int tid = threadIdx.x;
    const int nt = blockDim.x;  // <= kThreads by __launch_bounds__
    const int row0 = blockIdx.x * kRowsPerBlock;
    if (row0 >= B) return;  // block-uniform
    const int nrows = B - row0 < kRowsPerBlock ? B - row0 : kRowsPerBlock;
    const bool k_ok = K >= 1 && K <= AUX_K_MAX;
    const int b_valid = __ldg(valid_count);

    // 1. the block's labels, all loads in flight at once; the validity of row r in bit r
    for (int r = tid; r < kRowsPerBlock; r += nt) {
        unsigned bit = 0u;
        int label = -1;
        if (r < nrows) {
            label = __ldg(labels + row0 + r);
            if (k_ok && b_valid > 0 && label >= 0 && label < K) bit = 1u << r;
        }
        flag_s[r] = bit;
        label_s[r] = label;
    }
    __syncthreads();
    unsigned keep = 0u;
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r) keep |= flag_s[r];

    // 2. the skipped rows of the block's span of every output
    const float fill = k_ok ? 0.0f : aux_nan();
    fill_skipped_rows(db1_partial + (size_t)row0 * H, H, nrows, keep, fill);
    fill_skipped_rows(db2_partial + (size_t)row0 * K, K, nrows, keep, fill);
    if (dh_s2_aux_out != nullptr) fill_skipped_rows(dh_s2_aux_out + (size_t)row0 * SH2, SH2, nrows, keep, fill);
    if (dW2_partial != nullptr)
        fill_skipped_rows_wide(dW2_partial + (size_t)row0 * K * H, (long long)K * H, nrows, keep, fill);
    if (dW1_partial != nullptr)
        fill_skipped_rows_wide(dW1_partial + (size_t)row0 * H * SH2, (long long)H * SH2, nrows, keep, fill);

    // 3. the valid rows, one after the other: the per-row code of aux_trade_outcome_backward_kernel.cu
    const bool vec = (SH2 % 4 == 0) && nt == kThreads && aligned16(W1) && aligned16(dh_s2_aux_out) &&
                     aligned16(dh_s2_aux_accum);
    unsigned todo = keep;
#pragma unroll 1
    while (todo != 0u) {
        const int r = __ffs(todo) - 1;  // block-uniform: keep is the same in every thread
        todo &= todo - 1u;
        const int row = row0 + r;
        const int label = label_s[r];

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
#pragma unroll kW1Unroll
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
                    if (dh_s2_aux_out != nullptr) *reinterpret_cast<float4*>(dh_s2_aux_out + o) = total;
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
                if (dh_s2_aux_out != nullptr) dh_s2_aux_out[o] = dh;
                dh_s2_aux_accum[o] = fmaf(saxpy_alpha, dh, dh_s2_aux_accum[o]);
            }
        }
    }
}
