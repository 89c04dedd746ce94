// The trade-outcome head's weight- and bias-gradient partials over its labelled rows only (fused backward
// path). Same outputs as aux_weight_grad_partial (kernels/aux_weight_grad_split_kernel.cu), but a row whose
// label is not a class is never read: its dz row is zero by the backward's contract (the trade-outcome
// backward writes exact zeros there), so it adds nothing. Trade-close labels are valid on ~1-5 % of rows.
//
// aux_weight_grad_partial_masked
//   valid(b)    = 0 <= labels[b] < K     (-1: no trade closed; any other negative label or one >= K is skipped
//                                          too, as the loss and the backward skip it)
//   ws[p, m, n] = sum_{b in chunk p, valid(b)} dz[b, m] * x[b, n]   dz [B, M], x [B, N], ws [P, M, N] (overwritten)
//   wsb[p, m]   = sum_{b in chunk p, valid(b)} dz[b, m]             wsb [P, M] (overwritten)
//   Chunk p is the rows [floor(B*p/P), floor(B*(p+1)/P)), as in aux_weight_grad_partial (a chunk without a
//   valid row, or an empty chunk, writes zeros). dz and x rows of skipped rows are not read at all.
//   Launch: grid = (ceil_div(N, 128), ceil_div(M, 128), P), block = (256, 1, 1).
//
// Each block walks its chunk in segments of 256 rows: every thread reads one label, the warps ballot the
// valid ones, and the segment's valid rows are compacted into shared memory in ascending order (warp
// counts, then each lane's slot = rows of the warps before it + valid lanes below it in its warp). The
// block then accumulates over the compacted rows only:
//   M > 8: the 128 x 128 tile ws[p, 128y .., 128x ..]: 8 compacted rows at a time are gathered into shared
//   memory (dz columns m0 .., x columns n0 .., zero-filled past the list and past M / N) and each thread adds
//   the 8 rank-1 updates to its 8 x 8 register tile (two 4 x 4 quads 64 rows and 64 columns apart, as in
//   aux_weight_grad_partial); blocks with x = 0 sum the staged dz columns in double for wsb.
//   M <= 8 (the head's second Linear, M = K): 128 columns per block, one float4 column group per lane;
//   warp w takes compacted rows w, w + 8, ... of each segment; the 8 warps are summed in warp order.
// Every thread adds its rows in ascending row order and the warps are combined in a fixed order, so the
// same inputs and launch give the same bits (deterministic; no atomics). Bias sums in double, rounded once.
#include "aux_common.cuh"

namespace {

constexpr int kMkThreads = 256;
constexpr int kMkWarps = kMkThreads / 32;
constexpr int kMkSeg = kMkThreads;            // labels read per segment: one per thread
constexpr int kMkBM = 128;
constexpr int kMkBN = 128;
constexpr int kMkBK = 8;                      // compacted rows staged per step (tile path)
constexpr int kMkQuad = 4;                    // a register quad is 4 x 4
constexpr int kMkHalf = kMkBM / 2;            // the second quad sits this many rows / columns further
constexpr int kMkThreadsN = kMkHalf / kMkQuad;  // 16 threads along n
constexpr int kMkSkinnyM = 8;                 // M <= this takes the skinny path
static_assert(kMkBM == kMkBN, "square tile: the thread grid is 16 x 16");
static_assert((kMkHalf / kMkQuad) * (kMkHalf / kMkQuad) == kMkThreads, "one 8 x 8 register tile per thread");
static_assert(kMkBK * kMkBM == kMkThreads * 4, "one float4 of each staged operand per thread");
static_assert(kMkBN == 32 * 4, "skinny path: a warp's 32 lanes cover the block's columns with float4");
static_assert(kMkBM <= kMkThreads, "one thread per dz column of the tile sums the bias");

struct MkSmem {
    int rows[kMkSeg];         // the segment's valid rows (chunk-relative), ascending
    int warp_count[kMkWarps];  // valid rows per warp of the segment
    union alignas(16) {        // the staged operands are read and written as float4
        struct {
            float a[kMkBK][kMkBM];  // dz of the staged rows, s[k][m]
            float x[kMkBK][kMkBN];  // x of the staged rows,  s[k][n]
        } tile;
        struct {
            float w[kMkWarps][kMkSkinnyM][kMkBN];
            double b[kMkWarps][kMkSkinnyM];
        } skinny;
    } u;
};

}  // namespace

// A class label of the trade-outcome head: rows with any other label carry no gradient.
__device__ __forceinline__ bool masked_label_valid(int label, int K) { return label >= 0 && label < K; }

// The compacted slot of a valid lane: the valid rows of the warps before it, then the valid lanes below it.
__device__ __forceinline__ int masked_slot(const int* warp_count, int warp, unsigned ballot, int lane) {
    int base = 0;
    for (int w = 0; w < warp; ++w) base += warp_count[w];
    return base + __popc(ballot & ((1u << lane) - 1u));
}

// The number of valid rows of the segment.
__device__ __forceinline__ int masked_total(const int* warp_count) {
    int n = 0;
    for (int w = 0; w < kMkWarps; ++w) n += warp_count[w];
    return n;
}

// Compacts the valid rows among the chunk's rows [s0, s0 + 256) into s.rows (ascending) and returns how
// many there are. Every thread of the block calls it; the barrier on entry retires the previous segment's
// list, the one on exit publishes this one.
__device__ __forceinline__ int masked_compact(MkSmem& s, const int* __restrict__ labels, int s0, int rows, int K) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int r = s0 + tid;
    const bool valid = r < rows && masked_label_valid(__ldg(labels + r), K);
    const unsigned ballot = __ballot_sync(0xffffffffu, valid);
    __syncthreads();
    if (lane == 0) s.warp_count[warp] = __popc(ballot);
    __syncthreads();
    if (valid) s.rows[masked_slot(s.warp_count, warp, ballot, lane)] = r;
    const int n = masked_total(s.warp_count);
    __syncthreads();
    return n;
}

extern "C" __global__ void __launch_bounds__(kMkThreads, 2)
aux_weight_grad_partial_masked(const float* __restrict__ dz, const float* __restrict__ x,
                               const int* __restrict__ labels, float* __restrict__ ws, float* __restrict__ wsb,
                               int B, int M, int N, int P, int K) {
    __shared__ __align__(16) MkSmem smem;
    const int p = blockIdx.z;
    const int b0 = (int)((long long)B * p / P);
    const int rows = (int)((long long)B * (p + 1) / P) - b0;
    const int m0 = blockIdx.y * kMkBM;
    const int n0 = blockIdx.x * kMkBN;
    const int tid = threadIdx.x;
    const bool bias_block = blockIdx.x == 0;
    float* out = ws + (size_t)p * M * N;
    const float* dzp = dz + (size_t)b0 * M;
    const float* xp = x + (size_t)b0 * N;
    const int* lp = labels + b0;
    const bool vec_x = (N % 4 == 0) && aligned16(x);

    if (M <= kMkSkinnyM) {
        const int q = tid % 32;     // float4 column group
        const int lane = tid / 32;  // warp = batch lane
        const int n = n0 + q * 4;
        float acc[kMkSkinnyM][4];
        double bsum[kMkSkinnyM];
#pragma unroll
        for (int m = 0; m < kMkSkinnyM; ++m) {
            bsum[m] = 0.0;
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][e] = 0.0f;
        }
        for (int s0 = 0; s0 < rows; s0 += kMkSeg) {
            const int nv = masked_compact(smem, lp, s0, rows, K);
            for (int i = lane; i < nv; i += kMkWarps) {
                const int b = smem.rows[i];
                float xv[4];
                const float* xr = xp + (size_t)b * N + n;
                if (n >= N) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) xv[e] = 0.0f;
                } else if (vec_x) {
                    const float4 v = __ldg(reinterpret_cast<const float4*>(xr));
                    xv[0] = v.x; xv[1] = v.y; xv[2] = v.z; xv[3] = v.w;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) xv[e] = n + e < N ? __ldg(xr + e) : 0.0f;
                }
                const float* dzr = dzp + (size_t)b * M;
#pragma unroll
                for (int m = 0; m < kMkSkinnyM; ++m) {
                    if (m < M) {
                        const float d = __ldg(dzr + m);
                        bsum[m] += d;
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[m][e] = fmaf(d, xv[e], acc[m][e]);
                    }
                }
            }
        }
#pragma unroll
        for (int m = 0; m < kMkSkinnyM; ++m) {
#pragma unroll
            for (int e = 0; e < 4; ++e) smem.u.skinny.w[lane][m][q * 4 + e] = acc[m][e];
            if (q == 0) smem.u.skinny.b[lane][m] = bsum[m];
        }
        __syncthreads();
        for (int e = tid; e < M * kMkBN; e += kMkThreads) {
            const int m = e / kMkBN;
            const int c = e % kMkBN;
            if (n0 + c < N) {
                float v = 0.0f;
#pragma unroll
                for (int w = 0; w < kMkWarps; ++w) v += smem.u.skinny.w[w][m][c];
                out[(size_t)m * N + n0 + c] = v;
            }
        }
        if (bias_block && tid < M) {
            double v = 0.0;
#pragma unroll
            for (int w = 0; w < kMkWarps; ++w) v += smem.u.skinny.b[w][tid];
            wsb[(size_t)p * M + tid] = (float)v;
        }
        return;
    }

    const int tx = tid % kMkThreadsN;
    const int ty = tid / kMkThreadsN;
    const bool vec_dz = (M % 4 == 0) && aligned16(dz);
    const int sk = tid / 32;        // the staged row this thread gathers
    const int sc = (tid % 32) * 4;  // and its four columns
    float acc[2 * kMkQuad][2 * kMkQuad];
#pragma unroll
    for (int i = 0; i < 2 * kMkQuad; ++i)
#pragma unroll
        for (int j = 0; j < 2 * kMkQuad; ++j) acc[i][j] = 0.0f;
    double bsum = 0.0;  // column m0 + tid of dz over the chunk's valid rows (bias blocks, tid < kMkBM)

    for (int s0 = 0; s0 < rows; s0 += kMkSeg) {
        const int nv = masked_compact(smem, lp, s0, rows, K);
        for (int k0 = 0; k0 < nv; k0 += kMkBK) {
            float av[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            float xv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (k0 + sk < nv) {
                const int b = smem.rows[k0 + sk];
                const int m = m0 + sc;
                const float* ar = dzp + (size_t)b * M + m;
                if (vec_dz && m < M) {
                    const float4 v = __ldg(reinterpret_cast<const float4*>(ar));
                    av[0] = v.x; av[1] = v.y; av[2] = v.z; av[3] = v.w;
                } else if (!vec_dz) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) av[e] = m + e < M ? __ldg(ar + e) : 0.0f;
                }
                const int n = n0 + sc;
                const float* xr = xp + (size_t)b * N + n;
                if (vec_x && n < N) {
                    const float4 v = __ldg(reinterpret_cast<const float4*>(xr));
                    xv[0] = v.x; xv[1] = v.y; xv[2] = v.z; xv[3] = v.w;
                } else if (!vec_x) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) xv[e] = n + e < N ? __ldg(xr + e) : 0.0f;
                }
            }
            *reinterpret_cast<float4*>(&smem.u.tile.a[sk][sc]) = make_float4(av[0], av[1], av[2], av[3]);
            *reinterpret_cast<float4*>(&smem.u.tile.x[sk][sc]) = make_float4(xv[0], xv[1], xv[2], xv[3]);
            __syncthreads();
#pragma unroll
            for (int k = 0; k < kMkBK; ++k) {
                const float4 a0 = *reinterpret_cast<const float4*>(&smem.u.tile.a[k][ty * kMkQuad]);
                const float4 a1 = *reinterpret_cast<const float4*>(&smem.u.tile.a[k][kMkHalf + ty * kMkQuad]);
                const float4 c0 = *reinterpret_cast<const float4*>(&smem.u.tile.x[k][tx * kMkQuad]);
                const float4 c1 = *reinterpret_cast<const float4*>(&smem.u.tile.x[k][kMkHalf + tx * kMkQuad]);
                const float a[2 * kMkQuad] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float c[2 * kMkQuad] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
                for (int i = 0; i < 2 * kMkQuad; ++i)
#pragma unroll
                    for (int j = 0; j < 2 * kMkQuad; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
            }
            if (bias_block && tid < kMkBM) {
#pragma unroll
                for (int k = 0; k < kMkBK; ++k) bsum += smem.u.tile.a[k][tid];  // zero-filled past the list and M
            }
            __syncthreads();  // the staged rows are retired before the next gather
        }
    }
#pragma unroll
    for (int i = 0; i < 2 * kMkQuad; ++i) {
        const int m = m0 + (i < kMkQuad ? ty * kMkQuad + i : kMkHalf + ty * kMkQuad + i - kMkQuad);
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 2 * kMkQuad; ++j) {
            const int n = n0 + (j < kMkQuad ? tx * kMkQuad + j : kMkHalf + tx * kMkQuad + j - kMkQuad);
            if (n < N) out[(size_t)m * N + n] = acc[i][j];
        }
    }
    if (bias_block && tid < kMkBM && m0 + tid < M) wsb[(size_t)p * M + m0 + tid] = (float)bsum;
}
