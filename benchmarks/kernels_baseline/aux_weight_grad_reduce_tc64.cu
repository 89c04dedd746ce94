// EXPERIMENT, for benchmarks/gpu_wgrad_tc.py only (not a shipped kernel, no contract): the 3xTF32
// weight-gradient reduction of kernels/aux_param_grad_reduce_kernel.cu with a 64 x 64 dW tile per
// 8-block cluster instead of 64 x 32: half the L2 -> SM operand traffic per FLOP, half the blocks.
//   dW[m, n] = sum_b dz[b, m] * x[b, n]            dz [B, M], x [B, N], dW [M, N]   (overwritten)
//   Launch: grid = (ceil_div(N, 64), ceil_div(M, 64), 8), block = (256, 1, 1), __cluster_dims__(1, 1, 8).
//   Block z reduces the z-th eighth of the batch, split again over its 2 groups of 128 threads; each
//   group streams 8-row slices through a 4-stage cp.async pipeline (static shared memory stays under
//   48 KB); warp (wm, wn) of a group owns the 32 x 32 block at tile rows 32wm, columns 32wn and does one
//   32 x 32 x 8 3xTF32 MMA step per slice, with the fragment permutation of the shipped kernel. The two
//   groups' tiles are summed in order, then the cluster sums in rank order through DSMEM. No skinny path:
//   M <= 8 runs the same MMA loop (the benchmark measures it only for M > 8).
// Built with -I kernels (aux_common.cuh, sgemm_tile.cuh).
#include <cooperative_groups.h>

#include "aux_common.cuh"
#include "sgemm_tile.cuh"
#include "tf32_mma.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 2;
constexpr int kGroupThreads = kThreads / kGroups;
constexpr int kSplit = 8;
constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 8;
constexpr int kStages = 4;
constexpr int kLdA = kBM + 8;  // 72 == 8 mod 32
constexpr int kLdB = kBN + 8;  // 72 == 8 mod 32
static_assert((kBM / 32) * (kBN / 32) * 32 == kGroupThreads, "a group's 4 warps cover the 64 x 64 tile");
static_assert(kBM % kSplit == 0, "each cluster rank finishes kBM / kSplit rows of the tile");

__device__ __forceinline__ void group_barrier(int g) {
    if (g == 0)
        asm volatile("bar.sync 1, %0;\n" ::"n"(kGroupThreads) : "memory");
    else
        asm volatile("bar.sync 2, %0;\n" ::"n"(kGroupThreads) : "memory");
}

// acc[i][j] += the warp's 32 x 32 x 8 product (tile rows wr.., columns wc..) of one 8-row slice.
__device__ __forceinline__ void mma_slice_3xtf32(float (&acc)[2][4][4], const float (*As)[kLdA], const float (*Bs)[kLdB],
                                                 int wr, int wc, int lane) {
    const int g = lane >> 2;
    const int t = lane & 3;
    const float4 a0 = *reinterpret_cast<const float4*>(&As[t][wr + 4 * g]);
    const float4 a4 = *reinterpret_cast<const float4*>(&As[t + 4][wr + 4 * g]);
    const float4 b0 = *reinterpret_cast<const float4*>(&Bs[t][wc + 4 * g]);
    const float4 b4 = *reinterpret_cast<const float4*>(&Bs[t + 4][wc + 4 * g]);
    const float av[2][4] = {{a0.x, a0.y, a4.x, a4.y}, {a0.z, a0.w, a4.z, a4.w}};
    const float bv[4][2] = {{b0.x, b4.x}, {b0.y, b4.y}, {b0.z, b4.z}, {b0.w, b4.w}};
    unsigned ah[2][4], al[2][4], bh[4][2], bl[4][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) tf32::split(av[i][e], ah[i][e], al[i][e]);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) tf32::split(bv[j][e], bh[j][e], bl[j][e]);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(acc[i][j], al[i], bh[j]);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(acc[i][j], ah[i], bl[j]);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(acc[i][j], ah[i], bh[j]);
}

union Smem {
    struct {
        float As[kGroups][kStages][kBK][kLdA];
        float Bs[kGroups][kStages][kBK][kLdB];
    } pipe;
    float tiles[kGroups][kBM][kBN];
};

}  // namespace

extern "C" __global__ void __cluster_dims__(1, 1, kSplit) __launch_bounds__(kThreads, 2)
aux_weight_grad_reduce_tc64(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ dW, int B,
                            int M, int N) {
    __shared__ __align__(16) Smem smem;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kBM;
    const int n0 = blockIdx.x * kBN;
    float* block_tile = &smem.tiles[0][0][0];

    const int g = tid / kGroupThreads;
    const int gt = tid % kGroupThreads;
    const int lane = tid % 32;
    const int wm = (gt / 32) % 2;
    const int wn = (gt / 32) / 2;
    const int wr = wm * 32;
    const int wc = wn * 32;
    const bool vec_a = (M % 4 == 0) && aligned16(dz);
    const bool vec_b = (N % 4 == 0) && aligned16(x);
    const bool active = m0 + wr < M && n0 + wc < N;

    const int num_kt = (B + kBK - 1) / kBK;
    const int kt_begin = (int)((long long)num_kt * rank / kSplit);
    const int kt_end = (int)((long long)num_kt * (rank + 1) / kSplit);
    const int per_group = (kt_end - kt_begin + kGroups - 1) / kGroups;
    const int g_begin = kt_begin + g * per_group;
    const int g_end = min(kt_end, g_begin + per_group);

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    auto load_slice = [&](int stage, int kt) {
        sgemm::copy_ncontig_slice<kBM, kBK, kGroupThreads>(smem.pipe.As[g][stage], dz, M, M, B, m0, kt * kBK, vec_a, gt);
        sgemm::copy_ncontig_slice<kBN, kBK, kGroupThreads>(smem.pipe.Bs[g][stage], x, N, N, B, n0, kt * kBK, vec_b, gt);
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (g_begin + s < g_end) load_slice(s, g_begin + s);
        sgemm::cp_async_commit();
    }
    for (int i = 0; i < per_group; ++i) {
        sgemm::cp_async_wait<kStages - 2>();
        group_barrier(g);
        const int next = g_begin + i + kStages - 1;
        if (next < g_end) load_slice((i + kStages - 1) % kStages, next);
        sgemm::cp_async_commit();
        if (active && g_begin + i < g_end)
            mma_slice_3xtf32(acc, smem.pipe.As[g][i % kStages], smem.pipe.Bs[g][i % kStages], wr, wc, lane);
    }
    sgemm::cp_async_wait<0>();
    __syncthreads();
    {
        float(*tile)[kBN] = smem.tiles[g];
        const int r0 = wr + 4 * (lane >> 2);
        const int c0 = wc + 8 * (lane & 3);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int p = 0; p < 2; ++p)
                    *reinterpret_cast<float4*>(&tile[r0 + 2 * i + h][c0 + 4 * p]) =
                        make_float4(acc[i][0][2 * h + p], acc[i][1][2 * h + p], acc[i][2][2 * h + p], acc[i][3][2 * h + p]);
    }
    __syncthreads();
    for (int e = tid; e < kBM * kBN; e += kThreads) block_tile[e] = block_tile[e] + (&smem.tiles[1][0][0])[e];

    cluster.sync();

    constexpr int kRowsPerRank = kBM / kSplit;
    for (int e = tid; e < kRowsPerRank * kBN; e += blockDim.x) {
        const int r = rank * kRowsPerRank + e / kBN;
        const int c = e % kBN;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kSplit; ++q) v += cluster.map_shared_rank(block_tile, q)[r * kBN + c];
        const int m = m0 + r;
        const int n = n0 + c;
        if (m < M && n < N) dW[(size_t)m * N + n] = v;
    }

    cluster.sync();
}
