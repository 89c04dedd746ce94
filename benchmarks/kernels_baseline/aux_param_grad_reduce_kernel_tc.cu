// Parameter-gradient reductions over the batch.
//
// aux_param_grad_reduce (contract-faithful path, shape-generic)
//   grad[n] += sum_b partial[b, n]                 partial [B, N] (a [B, ...] partial viewed flat), grad [N]
//   Role accumulate: the caller zeroes grad first.
//   Launch: grid = (ceil_div(N, 256), min(ceil_div(B, 64), 256), 1), block = (256, 1, 1).
//   Block x owns columns n in [256x, 256x + 256); when fewer than 256 columns remain (small N, e.g. a
//   bias of K = 3), the spare threads become extra batch lanes over the same columns. Block row y and
//   lane l sum rows b = y*lanes + l, stepping by gridDim.y*lanes (coalesced over n, 8 rows in flight);
//   the lanes are summed in order in shared memory and each column gets one atomicAdd per block.
//   The order in which the blocks' atomics land is arbitrary: nondeterministic in the last bits
//   (contract: rtol 1e-5).
//
// aux_weight_grad_reduce (fused path: no [B, M, N] partials)
//   dW[m, n] = sum_b dz[b, m] * x[b, n]            dz [B, M], x [B, N], dW [M, N]   (overwritten)
//   Launch: grid = (ceil_div(N, 32), ceil_div(M, 64), 8), block = (256, 1, 1), compiled with
//   __cluster_dims__(1, 1, 8): the 8 blocks along z form one thread-block cluster owning the 64 x 32
//   tile dW[64y .. 64y+63, 32x .. 32x+31]. Block z reduces the z-th eighth of the batch, split again
//   over its 2 groups of 128 threads (contiguous runs of 16-row slices); each group streams dz and x
//   slices through its own 3-stage cp.async pipeline, synchronised by its own named barrier.
//   The products run on the tensor cores at float32 accuracy (3xTF32): every operand v is split into
//   v_hi = tf32(v) and v_lo = tf32(v - v_hi), and each mma.m16n8k8 of the float32 product becomes three
//   TF32 MMAs with float32 accumulation, acc += a_lo b_hi; acc += a_hi b_lo; acc += a_hi b_hi (the
//   dropped a_lo b_lo is below 2^-22 |a b|). Within a group, warp (wm, kh) owns tile rows
//   32wm .. 32wm+31, all 32 columns, and rows kh*8 .. kh*8+7 of every 16-row slice (a 32 x 32 x 8 warp
//   MMA per slice: 2 x 4 mma.m16n8k8). The fragments are read from shared memory with float4 loads by
//   permuting the MMA's rows and columns (see "3xTF32 on mma.sync" below); the slices are padded by 8 floats
//   per row so those loads are free of bank conflicts.
//   The four warp tiles per row block (2 groups x 2 k halves) are summed in a fixed order in shared
//   memory; after a cluster barrier, block z sums rows 8z .. 8z+7 of the tile over the 8 blocks in
//   rank order through distributed shared memory and writes them. No atomics and a fixed order:
//   deterministic. (The two-level split keeps 8 warps per block busy although the 8-block cluster
//   bounds the grid.)
//   For M <= 8 (a head's second Linear: dz = the db2 partials, M = K) a skinny path streams x with
//   float4 loads over 32 batch lanes per block instead of wasting a 64-row tile on M rows (SIMT FMAs).
#include <cooperative_groups.h>

#include "aux_common.cuh"
#include "sgemm_tile.cuh"
#include "tf32_mma.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kReduceThreads = 256;
constexpr int kReduceRowsInFlight = 8;

constexpr int kWgThreads = 256;
constexpr int kWgGroups = 2;                          // batch sub-slices per block
constexpr int kWgGroupThreads = kWgThreads / kWgGroups;
constexpr int kWgSplit = 8;  // cluster size along z = number of batch slices
constexpr int kWgBM = 64;    // rows m of the dW tile
constexpr int kWgBN = 32;    // columns n of the dW tile
constexpr int kWgBK = 16;    // batch rows per pipeline stage
constexpr int kWgStages = 3;
constexpr int kWgPad = 8;                  // floats of padding per shared row: conflict-free float4 fragment loads
constexpr int kWgLdA = kWgBM + kWgPad;     // 72: row stride of a dz slice (== 8 mod 32 banks)
constexpr int kWgLdB = kWgBN + kWgPad;     // 40: row stride of an x slice (== 8 mod 32 banks)
constexpr int kMmaK = 8;                   // k of mma.m16n8k8
constexpr int kWgWarpM = 32;               // tile rows per warp (2 x m16)
constexpr int kWgKHalves = kWgBK / kMmaK;  // warps of a group that split each slice along k
constexpr int kWgWarpTiles = kWgGroups * kWgKHalves;  // partial tiles summed per block
constexpr int kWgWarps = kWgThreads / 32;
constexpr int kSkinnyM = 8;                         // M <= this takes the skinny path
constexpr int kSkinnyQuads = kWgBN / 4;             // float4 column groups of the tile
constexpr int kSkinnyLanes = kWgThreads / kSkinnyQuads;  // batch rows processed side by side
constexpr int kSkinnyUnroll = 8;
static_assert((kWgBM / kWgWarpM) * kWgKHalves * 32 == kWgGroupThreads, "a group's warps cover the tile x the slice");
static_assert(kWgBN == 32 && kWgWarpM == 32, "the fragment permutation reads 4 rows and 4 columns per thread");
static_assert(kWgLdA % 32 == 8 && kWgLdB % 32 == 8, "padding keeps the quarter-warp float4 fragment loads conflict-free");
static_assert(kWgBM % kWgSplit == 0, "each cluster rank finishes kWgBM / kWgSplit rows of the tile");
static_assert(32 / kSkinnyQuads == 4, "the skinny warp reduction shuffles over 4 lanes (xor 8, 16)");

// ---- 3xTF32 on mma.sync.m16n8k8 ----
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32), g = lane / 4, t = lane % 4:
//   A (16 x 8, row): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B (8 x 8, col):  b0 (t, g), b1 (t + 4, g)
//   C (16 x 8):      c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// A sum over k does not care which physical rows / columns an MMA's rows / columns are, as long as A,
// B and C agree. For m16 tile i (of 2) of a warp's 32 rows, MMA row r is tile row mma_row(i, r) =
// 4 (r % 8) + 2i + r / 8; for n8 tile j (of 4) of the 32 columns, MMA column c is tile column
// mma_col(j, c) = 4c + j. So a thread's A values at one k are tile rows 4g .. 4g+3 and its B values are
// columns 4g .. 4g+3: one float4 each; its C values are rows 4g .. 4g+3 x columns 8t .. 8t+7.

// acc[i][j] += the warp's 32 x 32 x 8 product at rows k0 .. k0+7 of one slice, in 3xTF32.
// As / Bs: the slice, k-major; wr: the warp's first tile row; lane: the lane id.
__device__ __forceinline__ void mma_slice_3xtf32(float (&acc)[2][4][4], const float (*As)[kWgLdA],
                                                 const float (*Bs)[kWgLdB], int k0, int wr, int lane) {
    const int g = lane >> 2;
    const int t = lane & 3;
    const float4 a0 = *reinterpret_cast<const float4*>(&As[k0 + t][wr + 4 * g]);      // k = t
    const float4 a4 = *reinterpret_cast<const float4*>(&As[k0 + t + 4][wr + 4 * g]);  // k = t + 4
    const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k0 + t][4 * g]);
    const float4 b4 = *reinterpret_cast<const float4*>(&Bs[k0 + t + 4][4 * g]);
    const float av[2][4] = {{a0.x, a0.y, a4.x, a4.y}, {a0.z, a0.w, a4.z, a4.w}};  // [i][a0..a3]
    const float bv[4][2] = {{b0.x, b4.x}, {b0.y, b4.y}, {b0.z, b4.z}, {b0.w, b4.w}};  // [j][b0, b1]
    unsigned ah[2][4], al[2][4], bh[4][2], bl[4][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) tf32::split(av[i][e], ah[i][e], al[i][e]);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) tf32::split(bv[j][e], bh[j][e], bl[j][e]);
    // Small terms first. The three products of one k8 step go into a zero fragment, which is then added
    // to the running sum with round-to-nearest float adds: the tensor core's own accumulation (whose
    // rounding of a running sum is not round-to-nearest: section 4a's error grew with B) then only ever
    // sums 24 terms of one step, never the long running total. The 4 tiles of one row half issue back to back.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float s[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(s[j], al[i], bh[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(s[j], ah[i], bl[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) tf32::mma(s[j], ah[i], bh[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += s[j][e];
    }
}

// Barrier of one group's 128 threads (named barrier 1 + g; barrier 0 is __syncthreads).
// Immediate barrier ids keep ptxas from reserving all 16.
__device__ __forceinline__ void group_barrier(int g) {
    static_assert(kWgGroups == 2, "one named barrier per group");
    if (g == 0)
        asm volatile("bar.sync 1, %0;\n" ::"n"(kWgGroupThreads) : "memory");
    else
        asm volatile("bar.sync 2, %0;\n" ::"n"(kWgGroupThreads) : "memory");
}

union WgSmem {
    struct {
        float As[kWgGroups][kWgStages][kWgBK][kWgLdA];  // dz slices, s[b][m] (padded rows)
        float Bs[kWgGroups][kWgStages][kWgBK][kWgLdB];  // x slices,  s[b][n] (padded rows)
    } pipe;
    float tiles[kWgWarpTiles][kWgBM][kWgBN];  // partial tiles (group, k half); tiles[0] ends as the block's
    float skinny[kWgWarps][kSkinnyM][kWgBN];
};

}  // namespace

extern "C" __global__ void __launch_bounds__(kReduceThreads)
aux_param_grad_reduce(const float* __restrict__ partial, float* __restrict__ grad, int B, int N) {
    __shared__ float lane_sums[kReduceThreads];
    const int tid = threadIdx.x;
    const int col0 = blockIdx.x * blockDim.x;
    const int cols = N - col0 < (int)blockDim.x ? N - col0 : (int)blockDim.x;
    if (cols <= 0) return;  // block-uniform
    const int lanes = blockDim.x / cols;
    const int c = tid % cols;
    const int lane = tid / cols;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (lane < lanes) {
        const int step = gridDim.y * lanes;
        const float* col = partial + col0 + c;
        int b = blockIdx.y * lanes + lane;
        for (; b + (kReduceRowsInFlight - 1) * step < B; b += kReduceRowsInFlight * step) {
            float v[kReduceRowsInFlight];
#pragma unroll
            for (int u = 0; u < kReduceRowsInFlight; ++u) v[u] = __ldg(col + (size_t)(b + u * step) * N);
#pragma unroll
            for (int u = 0; u < kReduceRowsInFlight; ++u) acc[u % 4] += v[u];
        }
        for (; b < B; b += step) acc[0] += __ldg(col + (size_t)b * N);
    }
    lane_sums[tid] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    __syncthreads();
    if (lane == 0) {
        float s = lane_sums[c];
        for (int l = 1; l < lanes; ++l) s += lane_sums[l * cols + c];
        atomicAdd(grad + col0 + c, s);
    }
}

extern "C" __global__ void __cluster_dims__(1, 1, kWgSplit) __launch_bounds__(kWgThreads, 2)
aux_weight_grad_reduce(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ dW, int B,
                       int M, int N) {
    __shared__ __align__(16) WgSmem smem;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();  // batch slice of this block, 0 .. kWgSplit-1
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kWgBM;
    const int n0 = blockIdx.x * kWgBN;
    float* block_tile = &smem.tiles[0][0][0];

    if (M <= kSkinnyM) {
        // Skinny: thread = (batch lane, 4 columns); acc[m][e] = sum over its rows of dz[b, m] x[b, n + e].
        const int q = tid % kSkinnyQuads;
        const int lane = tid / kSkinnyQuads;
        const int n = n0 + q * 4;
        const int b_begin = (int)((long long)B * rank / kWgSplit);
        const int b_end = (int)((long long)B * (rank + 1) / kWgSplit);
        const bool vec = (N % 4 == 0) && aligned16(x);
        float acc[kSkinnyM][4];
#pragma unroll
        for (int m = 0; m < kSkinnyM; ++m)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][e] = 0.0f;
        if (n < N) {
            for (int b0 = b_begin + lane; b0 < b_end; b0 += kSkinnyUnroll * kSkinnyLanes) {
                float xv[kSkinnyUnroll][4];
#pragma unroll
                for (int u = 0; u < kSkinnyUnroll; ++u) {
                    const int b = b0 + u * kSkinnyLanes;
                    const float* xr = x + (size_t)b * N + n;
                    if (b >= b_end) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) xv[u][e] = 0.0f;
                    } else if (vec) {
                        const float4 v = sgemm::ldg4(xr);
                        xv[u][0] = v.x; xv[u][1] = v.y; xv[u][2] = v.z; xv[u][3] = v.w;
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; ++e) xv[u][e] = n + e < N ? __ldg(xr + e) : 0.0f;
                    }
                }
#pragma unroll
                for (int u = 0; u < kSkinnyUnroll; ++u) {
                    const int b = b0 + u * kSkinnyLanes;
                    if (b >= b_end) break;
                    const float* dzr = dz + (size_t)b * M;
#pragma unroll
                    for (int m = 0; m < kSkinnyM; ++m) {
                        if (m < M) {
                            const float d = __ldg(dzr + m);
#pragma unroll
                            for (int e = 0; e < 4; ++e) acc[m][e] = fmaf(d, xv[u][e], acc[m][e]);
                        }
                    }
                }
            }
        }
        // Fixed-order reduction: the 4 lanes of a warp by shuffles, then the warps in order.
#pragma unroll
        for (int m = 0; m < kSkinnyM; ++m)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc[m][e] += __shfl_xor_sync(0xffffffffu, acc[m][e], 8);
                acc[m][e] += __shfl_xor_sync(0xffffffffu, acc[m][e], 16);
            }
        if (tid % 32 < kSkinnyQuads)
#pragma unroll
            for (int m = 0; m < kSkinnyM; ++m)
#pragma unroll
                for (int e = 0; e < 4; ++e) smem.skinny[tid / 32][m][q * 4 + e] = acc[m][e];
        __syncthreads();
        float v = 0.0f;
        if (tid < kSkinnyM * kWgBN)
            for (int w = 0; w < kWgWarps; ++w) v += smem.skinny[w][tid / kWgBN][tid % kWgBN];
        __syncthreads();  // smem.tiles aliases smem.skinny
        for (int e = tid; e < kWgBM * kWgBN; e += kWgThreads) block_tile[e] = e == tid && tid < kSkinnyM * kWgBN ? v : 0.0f;
    } else {
        const int g = tid / kWgGroupThreads;  // batch sub-slice of this thread's group
        const int gt = tid % kWgGroupThreads;
        const int lane = tid % 32;
        const int wm = (gt / 32) % (kWgBM / kWgWarpM);  // the warp's 32 tile rows
        const int kh = (gt / 32) / (kWgBM / kWgWarpM);  // the warp's 8 rows of each slice
        const int wr = wm * kWgWarpM;
        const bool vec_a = (M % 4 == 0) && aligned16(dz);
        const bool vec_b = (N % 4 == 0) && aligned16(x);
        // Warp-uniform: a warp whose 32 tile rows are all >= M skips its MMAs (its tile stays zero).
        const bool active = m0 + wr < M;

        // Slices of kWgBK rows: the cluster rank takes a contiguous run, its groups split the run again.
        const int num_kt = (B + kWgBK - 1) / kWgBK;
        const int kt_begin = (int)((long long)num_kt * rank / kWgSplit);
        const int kt_end = (int)((long long)num_kt * (rank + 1) / kWgSplit);
        const int per_group = (kt_end - kt_begin + kWgGroups - 1) / kWgGroups;
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
            sgemm::copy_ncontig_slice<kWgBM, kWgBK, kWgGroupThreads>(smem.pipe.As[g][stage], dz, M, M, B, m0,
                                                                     kt * kWgBK, vec_a, gt);
            sgemm::copy_ncontig_slice<kWgBN, kWgBK, kWgGroupThreads>(smem.pipe.Bs[g][stage], x, N, N, B, n0,
                                                                     kt * kWgBK, vec_b, gt);
        };
        // Prologue: stages 0 .. kWgStages-2 in flight. A group is committed even when empty so the wait
        // counts stay uniform. Each group only ever waits on its own barrier inside the loop.
#pragma unroll
        for (int s = 0; s < kWgStages - 1; ++s) {
            if (g_begin + s < g_end) load_slice(s, g_begin + s);
            sgemm::cp_async_commit();
        }
        for (int i = 0; i < per_group; ++i) {
            sgemm::cp_async_wait<kWgStages - 2>();  // slice i has landed (for this thread) ...
            group_barrier(g);                       // ... and for the group; its slice i-1 is retired
            const int next = g_begin + i + kWgStages - 1;
            if (next < g_end) load_slice((i + kWgStages - 1) % kWgStages, next);
            sgemm::cp_async_commit();
            if (active && g_begin + i < g_end)
                mma_slice_3xtf32(acc, smem.pipe.As[g][i % kWgStages], smem.pipe.Bs[g][i % kWgStages], kh * kMmaK,
                                 wr, lane);
        }
        sgemm::cp_async_wait<0>();
        __syncthreads();  // all reads of the pipeline buffers are done: smem.tiles may overwrite them
        // The thread's C values: tile row wr + 4 (lane / 4) + 2i + h, column 8 (lane % 4) + 4p + j, held in
        // acc[i][j][2h + p] (the fragment permutation above).
        {
            float(*tile)[kWgBN] = smem.tiles[g * kWgKHalves + kh];
            const int r0 = wr + 4 * (lane >> 2);
            const int c0 = 8 * (lane & 3);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int p = 0; p < 2; ++p)
                        *reinterpret_cast<float4*>(&tile[r0 + 2 * i + h][c0 + 4 * p]) =
                            make_float4(acc[i][0][2 * h + p], acc[i][1][2 * h + p], acc[i][2][2 * h + p],
                                        acc[i][3][2 * h + p]);
        }
        __syncthreads();
        // Sum the partial tiles in order into tiles[0] (each element read and written by one thread only).
        for (int e = tid; e < kWgBM * kWgBN; e += kWgThreads) {
            float v = block_tile[e];
#pragma unroll
            for (int q = 1; q < kWgWarpTiles; ++q) v += (&smem.tiles[q][0][0])[e];
            block_tile[e] = v;
        }
    }

    cluster.sync();  // every block's partial tile is complete and visible cluster-wide

    constexpr int kRowsPerRank = kWgBM / kWgSplit;
    for (int e = tid; e < kRowsPerRank * kWgBN; e += blockDim.x) {
        const int r = rank * kRowsPerRank + e / kWgBN;
        const int c = e % kWgBN;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kWgSplit; ++q) v += cluster.map_shared_rank(block_tile, q)[r * kWgBN + c];
        const int m = m0 + r;
        const int n = n0 + c;
        if (m < M && n < N) dW[(size_t)m * N + n] = v;
    }

    cluster.sync();  // keep this block's shared memory alive until every rank has read it
}
