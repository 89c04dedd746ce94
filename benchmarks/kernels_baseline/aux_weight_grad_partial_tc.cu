// EXPERIMENT, not shipped: the tiled path (M > 8) of aux_weight_grad_partial
// (kernels/aux_weight_grad_split_kernel.cu) on the tensor cores at float32 accuracy, measured by
// `benchmarks/gpu_wgrad_split.py --tc-source THIS_FILE` against the shipped SIMT kernel (docs/benchmarks.md 4a).
//
//   ws[p, m, n] = sum_{b in chunk p} dz[b, m] * x[b, n]      dz [B, M], x [B, N], ws [P, M, N] (overwritten)
//   wsb[p, m]   = sum_{b in chunk p} dz[b, m]  (double, rounded once)   wsb [P, M] (overwritten)
//   Chunk p is the rows [floor(B*p/P), floor(B*(p+1)/P)); grid = (ceil_div(N, 128), ceil_div(M, 128), P),
//   block = (256, 1, 1): the shipped kernel's contract, for any M (small M only wastes MMAs).
//
// The same 128 x 128 tile and 3-stage cp.async pipeline of 8-row slices as the shipped kernel; the eight
// warps are 2 (rows of 64) x 4 (columns of 32), each 4 x 4 mma.m16n8k8 tiles. 3xTF32: v = v_hi + v_lo with
// v_hi = tf32(v), v_lo = tf32(v - v_hi) (cvt.rna), products a_lo b_hi + a_hi b_lo + a_hi b_hi. Each slice's
// three products go into a zero fragment, added to the running sum with round-to-nearest float adds: the
// tensor core never accumulates the long sum itself (its own rounding of a running total biased the
// first 3xTF32 experiment's result, docs/benchmarks.md 4a). Slice rows are padded to 136 floats (8 mod
// 32 banks), so every fragment load of a warp hits 32 distinct banks.
#include "aux_common.cuh"
#include "sgemm_tile.cuh"
#include "tf32_mma.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kStages = 3;
constexpr int kLd = kBM + 8;
constexpr int kWarpRows = 64;
constexpr int kWarpCols = 32;
static_assert(kBM == kBN, "one padded row length serves both operands");
static_assert((kBM / kWarpRows) * (kBN / kWarpCols) * 32 == kThreads, "eight warps tile the block");

struct Smem {
    float As[kStages][kBK][kLd];  // dz slices, s[b][m]
    float Bs[kStages][kBK][kLd];  // x slices,  s[b][n]
};

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
aux_weight_grad_partial_tc(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ ws,
                           float* __restrict__ wsb, int B, int M, int N, int P) {
    __shared__ __align__(16) Smem smem;
    const int p = blockIdx.z;
    const int b0 = (int)((long long)B * p / P);
    const int rows = (int)((long long)B * (p + 1) / P) - b0;
    const int m0 = blockIdx.y * kBM;
    const int n0 = blockIdx.x * kBN;
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane >> 2;  // fragment row group
    const int t = lane & 3;   // fragment thread in group
    const int wm = (warp / (kBN / kWarpCols)) * kWarpRows;
    const int wn = (warp % (kBN / kWarpCols)) * kWarpCols;
    const bool bias_block = blockIdx.x == 0;
    float* out = ws + (size_t)p * M * N;
    const float* dzp = dz + (size_t)b0 * M;
    const float* xp = x + (size_t)b0 * N;
    const bool vec_a = (M % 4 == 0) && aligned16(dz);
    const bool vec_b = (N % 4 == 0) && aligned16(x);
    const int num_kt = (rows + kBK - 1) / kBK;

    float acc[4][4][4];  // [m16 tile][n8 tile][c0..c3]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    double bsum = 0.0;

    auto load_slice = [&](int stage, int kt) {
        sgemm::copy_ncontig_slice<kBM, kBK, kThreads>(smem.As[stage], dzp, M, M, rows, m0, kt * kBK, vec_a, tid);
        sgemm::copy_ncontig_slice<kBN, kBK, kThreads>(smem.Bs[stage], xp, N, N, rows, n0, kt * kBK, vec_b, tid);
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < num_kt) load_slice(s, s);
        sgemm::cp_async_commit();
    }
    for (int kt = 0; kt < num_kt; ++kt) {
        sgemm::cp_async_wait<kStages - 2>();
        __syncthreads();
        const int next = kt + kStages - 1;
        if (next < num_kt) load_slice(next % kStages, next);
        sgemm::cp_async_commit();
        const float(*As)[kLd] = smem.As[kt % kStages];
        const float(*Bs)[kLd] = smem.Bs[kt % kStages];
        unsigned bh[4][2], bl[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = wn + 8 * j + g;
            tf32::split(Bs[t][n], bh[j][0], bl[j][0]);
            tf32::split(Bs[t + 4][n], bh[j][1], bl[j][1]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = wm + 16 * i + g;
            unsigned ah[4], al[4];
            tf32::split(As[t][m], ah[0], al[0]);
            tf32::split(As[t][m + 8], ah[1], al[1]);
            tf32::split(As[t + 4][m], ah[2], al[2]);
            tf32::split(As[t + 4][m + 8], ah[3], al[3]);
            float s[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; ++j) tf32::mma(s[j], al, bh[j]);
#pragma unroll
            for (int j = 0; j < 4; ++j) tf32::mma(s[j], ah, bl[j]);
#pragma unroll
            for (int j = 0; j < 4; ++j) tf32::mma(s[j], ah, bh[j]);
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += s[j][e];
        }
        if (bias_block && tid < kBM) {
#pragma unroll
            for (int k = 0; k < kBK; ++k) bsum += As[k][tid];  // zero-filled past the chunk and past M
        }
    }
    sgemm::cp_async_wait<0>();
    // Fragment element e of tile (i, j): row 16 i + g (+ 8 for e >= 2), column 8 j + 2 t (+ 1 for odd e).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm + 16 * i + g + 8 * h;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + wn + 8 * j + 2 * t;
                if (n < N) out[(size_t)m * N + n] = acc[i][j][2 * h];
                if (n + 1 < N) out[(size_t)m * N + n + 1] = acc[i][j][2 * h + 1];
            }
        }
    }
    if (bias_block && tid < kBM && m0 + tid < M) wsb[(size_t)p * M + m0 + tid] = (float)bsum;
}
