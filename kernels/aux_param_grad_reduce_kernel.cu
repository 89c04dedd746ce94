// Parameter-gradient reductions over the batch.
//
// aux_param_grad_reduce (contract-faithful path, shape-generic)
//   grad[n] += sum_b partial[b, n]                 partial [B, N] (a [B, ...] partial viewed flat), grad [N]
//   Role accumulate: the caller zeroes grad first.
//   Launch: grid = (ceil_div(N, 256), min(ceil_div(B, 64), 256), 1), block = (256, 1, 1).
//   Thread (x, t) owns n = 256x + t; block row y sums rows b = y, y + gridDim.y, ... (coalesced over n,
//   four rows in flight) and atomicAdds its slice sum into grad[n]. The order in which the gridDim.y
//   slices land is arbitrary: the result is nondeterministic in the last bits (contract: rtol 1e-5).
//
// aux_weight_grad_reduce (fused path: no [B, M, N] partials)
//   dW[m, n] = sum_b dz[b, m] * x[b, n]            dz [B, M], x [B, N], dW [M, N]   (overwritten)
//   Launch: grid = (ceil_div(N, 64), ceil_div(M, 64), 8), block = (256, 1, 1), compiled with
//   __cluster_dims__(1, 1, 8): the 8 blocks along z form one thread-block cluster that owns the 64 x 64
//   tile dW[64y .. , 64x .. ]. Block z of the cluster reduces the z-th eighth of the batch (an SGEMM
//   dz^T x with k = b in slices of 16, 4 x 4 register tile per thread), parks its partial tile in its
//   shared memory, and after a cluster barrier block z sums rows 8z .. 8z+7 of the tile over the 8 blocks
//   in rank order through distributed shared memory. No atomics, fixed order: deterministic.
//   For M <= 8 (the second Linear of a head: dz = db2 partials, M = K) a skinny path streams x with
//   float4 loads instead of wasting a 64-row register tile on M rows.
#include <cooperative_groups.h>

#include "aux_common.cuh"
#include "sgemm_tile.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kReduceThreads = 256;
constexpr int kReduceRowsInFlight = 4;

constexpr int kWgThreads = 256;
constexpr int kWgSplit = 8;  // cluster size along z = number of batch slices
constexpr int kWgBM = 64;
constexpr int kWgBN = 64;
constexpr int kWgBK = 16;
constexpr int kWgTM = 4;
constexpr int kWgTN = 4;
constexpr int kSkinnyM = 8;                           // M <= this takes the skinny path
constexpr int kSkinnyLanes = kWgThreads / (kWgBN / 4);  // batch rows processed side by side
static_assert((kWgBM / kWgTM) * (kWgBN / kWgTN) == kWgThreads, "one register tile per thread");
static_assert(kWgBM % kWgSplit == 0, "each cluster rank finishes kWgBM / kWgSplit rows of the tile");

union WgSmem {
    struct {
        float As[2][kWgBK][kWgBM + 4];
        float Bs[2][kWgBK][kWgBN + 4];
    } tiles;
    float skinny[kSkinnyLanes][kSkinnyM][kWgBN];
    float tile[kWgBM][kWgBN];  // this block's partial dW tile, read by the whole cluster
};

}  // namespace

extern "C" __global__ void __launch_bounds__(kReduceThreads)
aux_param_grad_reduce(const float* __restrict__ partial, float* __restrict__ grad, int B, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int step = gridDim.y;
    float s[kReduceRowsInFlight] = {0.0f, 0.0f, 0.0f, 0.0f};
    int b = blockIdx.y;
    for (; b + (kReduceRowsInFlight - 1) * step < B; b += kReduceRowsInFlight * step) {
#pragma unroll
        for (int u = 0; u < kReduceRowsInFlight; ++u) s[u] += __ldg(partial + (size_t)(b + u * step) * N + n);
    }
    for (; b < B; b += step) s[0] += __ldg(partial + (size_t)b * N + n);
    atomicAdd(grad + n, (s[0] + s[1]) + (s[2] + s[3]));
}

extern "C" __global__ void __cluster_dims__(1, 1, kWgSplit) __launch_bounds__(kWgThreads)
aux_weight_grad_reduce(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ dW, int B,
                       int M, int N) {
    __shared__ __align__(16) WgSmem smem;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();  // batch slice of this block, 0 .. kWgSplit-1
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kWgBM;
    const int n0 = blockIdx.x * kWgBN;

    if (M <= kSkinnyM) {
        // Skinny: thread = (batch lane, 4 columns); acc[m][c] = sum over its rows of dz[b, m] * x[b, n0 + 4q + c].
        const int q = tid % (kWgBN / 4);
        const int lane = tid / (kWgBN / 4);
        const int n = n0 + q * 4;
        const int b_begin = (int)((long long)B * rank / kWgSplit);
        const int b_end = (int)((long long)B * (rank + 1) / kWgSplit);
        const bool vec = (N % 4 == 0) && aligned16(x);
        float acc[kSkinnyM][4];
#pragma unroll
        for (int m = 0; m < kSkinnyM; ++m)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[m][c] = 0.0f;
        if (n < N) {
#pragma unroll 4
            for (int b = b_begin + lane; b < b_end; b += kSkinnyLanes) {
                const float* xr = x + (size_t)b * N + n;
                float xv[4];
                if (vec) {
                    const float4 v = sgemm::ldg4(xr);
                    xv[0] = v.x; xv[1] = v.y; xv[2] = v.z; xv[3] = v.w;
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c) xv[c] = n + c < N ? __ldg(xr + c) : 0.0f;
                }
                const float* dzr = dz + (size_t)b * M;
#pragma unroll
                for (int m = 0; m < kSkinnyM; ++m) {
                    if (m < M) {
                        const float d = __ldg(dzr + m);
#pragma unroll
                        for (int c = 0; c < 4; ++c) acc[m][c] = fmaf(d, xv[c], acc[m][c]);
                    }
                }
            }
        }
#pragma unroll
        for (int m = 0; m < kSkinnyM; ++m)
#pragma unroll
            for (int c = 0; c < 4; ++c) smem.skinny[lane][m][q * 4 + c] = acc[m][c];
        __syncthreads();
        // Sum the batch lanes in lane order into registers, then park them as this block's tile.
        float lane_sum[kWgBM * kWgBN / kWgThreads];
#pragma unroll
        for (int p = 0; p < kWgBM * kWgBN / kWgThreads; ++p) {
            const int e = tid + p * kWgThreads;
            const int m = e / kWgBN;
            const int c = e % kWgBN;
            float v = 0.0f;
            if (m < kSkinnyM)
                for (int l = 0; l < kSkinnyLanes; ++l) v += smem.skinny[l][m][c];
            lane_sum[p] = v;
        }
        __syncthreads();  // smem.tile aliases smem.skinny
#pragma unroll
        for (int p = 0; p < kWgBM * kWgBN / kWgThreads; ++p) {
            const int e = tid + p * kWgThreads;
            smem.tile[e / kWgBN][e % kWgBN] = lane_sum[p];
        }
    } else {
        const int num_kt = (B + kWgBK - 1) / kWgBK;
        const int kt_begin = (int)((long long)num_kt * rank / kWgSplit);
        const int kt_end = (int)((long long)num_kt * (rank + 1) / kWgSplit);
        const int tx = tid % (kWgBN / kWgTN);
        const int ty = tid / (kWgBN / kWgTN);
        sgemm::NContigLoader<kWgBM, kWgBK, kWgThreads> la{dz, M, M, B, m0, (M % 4 == 0) && aligned16(dz)};
        sgemm::NContigLoader<kWgBN, kWgBK, kWgThreads> lb{x, N, N, B, n0, (N % 4 == 0) && aligned16(x)};
        // A warp's register tiles cover rows m0 + 8w .. m0 + 8w + 7: skip its FMAs when all are >= M.
        const bool active = m0 + (tid / 32) * (32 / (kWgBN / kWgTN)) * kWgTM < M;
        float acc[kWgTM][kWgTN];
        sgemm::mainloop<kWgBK>(acc, la, lb, kt_begin, kt_end, smem.tiles.As, smem.tiles.Bs, ty * kWgTM,
                               tx * kWgTN, active);
        // mainloop ends with a barrier (or did no shared-memory work), so the tile may overwrite As/Bs.
#pragma unroll
        for (int i = 0; i < kWgTM; ++i)
            *reinterpret_cast<float4*>(&smem.tile[ty * kWgTM + i][tx * kWgTN]) =
                make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }

    cluster.sync();  // every block's partial tile is complete and visible cluster-wide

    constexpr int kRowsPerRank = kWgBM / kWgSplit;
    for (int e = tid; e < kRowsPerRank * kWgBN; e += blockDim.x) {
        const int r = rank * kRowsPerRank + e / kWgBN;
        const int c = e % kWgBN;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kWgSplit; ++q) v += cluster.map_shared_rank(&smem.tile[0][0], q)[r * kWgBN + c];
        const int m = m0 + r;
        const int n = n0 + c;
        if (m < M && n < N) dW[(size_t)m * N + n] = v;
    }

    cluster.sync();  // keep this block's shared memory alive until every rank has read it
}
