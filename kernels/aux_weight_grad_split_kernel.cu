// Weight- and bias-gradient reductions over the batch, split into P batch chunks through a workspace
// (fused backward path; no [B, M, N] partials). Two launches, no atomics, a fixed summation order:
// deterministic. Bias sums and the finish's sums over chunks accumulate in double (rounded once to float).
//
// aux_weight_grad_partial
//   ws[p, m, n] = sum_{b in chunk p} dz[b, m] * x[b, n]      dz [B, M], x [B, N], ws [P, M, N] (overwritten)
//   wsb[p, m]   = sum_{b in chunk p} dz[b, m]                 wsb [P, M] (overwritten)
//   Chunk p is the rows [floor(B*p/P), floor(B*(p+1)/P)) (empty chunks write zeros).
//   Launch: grid = (ceil_div(N, 128), ceil_div(M, 128), P), block = (256, 1, 1).
//   M > 8: block (x, y, p) computes the 128 x 128 tile ws[p, 128y .., 128x ..] as an SGEMM dz^T x over
//   its chunk (k = b): 8-row slices through a 3-stage cp.async pipeline, an 8 x 8 register tile per
//   thread made of two 4 x 4 quads 64 rows and 64 columns apart (conflict-free float4 shared reads).
//   Blocks with x = 0 also sum the chunk's dz columns from the staged slices for wsb.
//   M <= 8 (a head's second Linear, M = K or 1): 128 columns per block, one float4 column group per lane;
//   the 8 warps take every 8th row of the chunk and are summed in warp order.
//
// aux_weight_grad_finish
//   dW[m, n] = sum_p ws[p, m, n]    db[m] = sum_p wsb[p, m]      in order p = 0 .. P-1 (both overwritten)
//   Launch: grid = (ceil_div(M * N + M, 256), 1, 1), block = (256, 1, 1); one output element per thread.
//
// P grows with B (the contract's WGP): enough blocks to fill the GPU at large B, few partial tiles to sum
// at small B. Measured on an H200 against the former one-launch cluster kernel: docs/benchmarks.md.
#include "aux_common.cuh"
#include "sgemm_tile.cuh"

namespace {

constexpr int kWsThreads = 256;
constexpr int kWsBM = 128;
constexpr int kWsBN = 128;
constexpr int kWsBK = 8;
constexpr int kWsStages = 3;
constexpr int kWsQuad = 4;                      // a register quad is 4 x 4
constexpr int kWsHalf = kWsBM / 2;              // the second quad sits this many rows / columns further
constexpr int kWsThreadsN = kWsHalf / kWsQuad;  // 16 threads along n
constexpr int kWsSkinnyM = 8;                   // M <= this takes the skinny path
constexpr int kWsWarps = kWsThreads / 32;
static_assert(kWsBM == kWsBN, "square tile: the thread grid is 16 x 16");
static_assert((kWsHalf / kWsQuad) * (kWsHalf / kWsQuad) == kWsThreads, "one 8 x 8 register tile per thread");
static_assert(kWsBN == 32 * 4, "skinny path: a warp's 32 lanes cover the block's columns with float4");
static_assert(kWsBM <= kWsThreads, "one thread per dz column of the tile sums the bias");

union WsSmem {
    struct {
        float As[kWsStages][kWsBK][kWsBM];  // dz slices, s[b][m]
        float Bs[kWsStages][kWsBK][kWsBN];  // x slices,  s[b][n]
    } pipe;
    struct {
        float w[kWsWarps][kWsSkinnyM][kWsBN];
        double b[kWsWarps][kWsSkinnyM];
    } skinny;
};

}  // namespace

extern "C" __global__ void __launch_bounds__(kWsThreads, 2)
aux_weight_grad_partial(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ ws,
                        float* __restrict__ wsb, int B, int M, int N, int P) {
    __shared__ __align__(16) WsSmem smem;
    const int p = blockIdx.z;
    const int b0 = (int)((long long)B * p / P);
    const int rows = (int)((long long)B * (p + 1) / P) - b0;
    const int m0 = blockIdx.y * kWsBM;
    const int n0 = blockIdx.x * kWsBN;
    const int tid = threadIdx.x;
    const bool bias_block = blockIdx.x == 0;
    float* out = ws + (size_t)p * M * N;
    const float* dzp = dz + (size_t)b0 * M;
    const float* xp = x + (size_t)b0 * N;

    if (M <= kWsSkinnyM) {
        const int q = tid % 32;     // float4 column group
        const int lane = tid / 32;  // warp = batch lane
        const int n = n0 + q * 4;
        const bool vec = (N % 4 == 0) && aligned16(x);
        float acc[kWsSkinnyM][4];
        double bsum[kWsSkinnyM];
#pragma unroll
        for (int m = 0; m < kWsSkinnyM; ++m) {
            bsum[m] = 0.0;
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][e] = 0.0f;
        }
        for (int b = lane; b < rows; b += kWsWarps) {
            float xv[4];
            const float* xr = xp + (size_t)b * N + n;
            if (n >= N) {
#pragma unroll
                for (int e = 0; e < 4; ++e) xv[e] = 0.0f;
            } else if (vec) {
                const float4 v = sgemm::ldg4(xr);
                xv[0] = v.x; xv[1] = v.y; xv[2] = v.z; xv[3] = v.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) xv[e] = n + e < N ? __ldg(xr + e) : 0.0f;
            }
            const float* dzr = dzp + (size_t)b * M;
#pragma unroll
            for (int m = 0; m < kWsSkinnyM; ++m) {
                if (m < M) {
                    const float d = __ldg(dzr + m);
                    bsum[m] += d;
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[m][e] = fmaf(d, xv[e], acc[m][e]);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < kWsSkinnyM; ++m) {
#pragma unroll
            for (int e = 0; e < 4; ++e) smem.skinny.w[lane][m][q * 4 + e] = acc[m][e];
            if (q == 0) smem.skinny.b[lane][m] = bsum[m];
        }
        __syncthreads();
        for (int e = tid; e < M * kWsBN; e += kWsThreads) {
            const int m = e / kWsBN;
            const int c = e % kWsBN;
            if (n0 + c < N) {
                float v = 0.0f;
#pragma unroll
                for (int w = 0; w < kWsWarps; ++w) v += smem.skinny.w[w][m][c];
                out[(size_t)m * N + n0 + c] = v;
            }
        }
        if (bias_block && tid < M) {
            double v = 0.0;
#pragma unroll
            for (int w = 0; w < kWsWarps; ++w) v += smem.skinny.b[w][tid];
            wsb[(size_t)p * M + tid] = (float)v;
        }
        return;
    }

    const int tx = tid % kWsThreadsN;
    const int ty = tid / kWsThreadsN;
    const bool vec_a = (M % 4 == 0) && aligned16(dz);
    const bool vec_b = (N % 4 == 0) && aligned16(x);
    const int num_kt = (rows + kWsBK - 1) / kWsBK;
    float acc[2 * kWsQuad][2 * kWsQuad];
#pragma unroll
    for (int i = 0; i < 2 * kWsQuad; ++i)
#pragma unroll
        for (int j = 0; j < 2 * kWsQuad; ++j) acc[i][j] = 0.0f;
    double bsum = 0.0;  // column m0 + tid of dz over the chunk (bias blocks, tid < kWsBM)

    auto load_slice = [&](int stage, int kt) {
        sgemm::copy_ncontig_slice<kWsBM, kWsBK, kWsThreads>(smem.pipe.As[stage], dzp, M, M, rows, m0, kt * kWsBK,
                                                           vec_a, tid);
        sgemm::copy_ncontig_slice<kWsBN, kWsBK, kWsThreads>(smem.pipe.Bs[stage], xp, N, N, rows, n0, kt * kWsBK,
                                                           vec_b, tid);
    };
    // Prologue: slices 0 .. kWsStages-2 in flight; a group is committed even when empty so that the wait
    // counts stay uniform.
#pragma unroll
    for (int s = 0; s < kWsStages - 1; ++s) {
        if (s < num_kt) load_slice(s, s);
        sgemm::cp_async_commit();
    }
    for (int kt = 0; kt < num_kt; ++kt) {
        sgemm::cp_async_wait<kWsStages - 2>();  // slice kt has landed (for this thread) ...
        __syncthreads();                        // ... and for the block; slice kt-1 is retired
        const int next = kt + kWsStages - 1;
        if (next < num_kt) load_slice(next % kWsStages, next);
        sgemm::cp_async_commit();
        const float(*As)[kWsBM] = smem.pipe.As[kt % kWsStages];
        const float(*Bs)[kWsBN] = smem.pipe.Bs[kt % kWsStages];
#pragma unroll
        for (int k = 0; k < kWsBK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * kWsQuad]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[k][kWsHalf + ty * kWsQuad]);
            const float4 c0 = *reinterpret_cast<const float4*>(&Bs[k][tx * kWsQuad]);
            const float4 c1 = *reinterpret_cast<const float4*>(&Bs[k][kWsHalf + tx * kWsQuad]);
            const float a[2 * kWsQuad] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float c[2 * kWsQuad] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
            for (int i = 0; i < 2 * kWsQuad; ++i)
#pragma unroll
                for (int j = 0; j < 2 * kWsQuad; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
        }
        if (bias_block && tid < kWsBM) {
#pragma unroll
            for (int k = 0; k < kWsBK; ++k) bsum += As[k][tid];  // zero-filled past the chunk and past M
        }
    }
    sgemm::cp_async_wait<0>();  // nothing is left in flight at exit (the last groups are empty)
#pragma unroll
    for (int i = 0; i < 2 * kWsQuad; ++i) {
        const int m = m0 + (i < kWsQuad ? ty * kWsQuad + i : kWsHalf + ty * kWsQuad + i - kWsQuad);
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 2 * kWsQuad; ++j) {
            const int n = n0 + (j < kWsQuad ? tx * kWsQuad + j : kWsHalf + tx * kWsQuad + j - kWsQuad);
            if (n < N) out[(size_t)m * N + n] = acc[i][j];
        }
    }
    if (bias_block && tid < kWsBM && m0 + tid < M) wsb[(size_t)p * M + m0 + tid] = (float)bsum;
}

extern "C" __global__ void __launch_bounds__(kWsThreads)
aux_weight_grad_finish(const float* __restrict__ ws, const float* __restrict__ wsb, float* __restrict__ dW,
                       float* __restrict__ db, int M, int N, int P) {
    const size_t mn = (size_t)M * N;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < mn) {
        double v = 0.0;
        for (int p = 0; p < P; ++p) v += __ldg(ws + (size_t)p * mn + i);
        dW[i] = (float)v;
    } else if (i < mn + M) {
        const size_t m = i - mn;
        double v = 0.0;
        for (int p = 0; p < P; ++p) v += __ldg(wsb + (size_t)p * M + m);
        db[m] = (float)v;
    }
}
