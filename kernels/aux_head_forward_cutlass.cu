// The two aux head forwards (contracts aux_trade_outcome_forward and aux_next_bar_forward; issue 18) with the
// first Linear on Hopper tensor cores at fp32 accuracy (CUTLASS 3xTF32, mma.sync m16n8k8 tf32, runs on sm_90);
// the second Linear, the softmax and pred stay SIMT fp32 as in the SIMT kernels they replaced, now the
// baselines of benchmarks/gpu_head_fwd_cutlass.py (benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu
// and aux_next_bar_forward_kernel.cu, shared body aux_head_forward.cuh there). Headers: the nvidia-cutlass
// wheel, through include_packages.
//
//   h1[b, j]     = ELU( sum_i h_s2[b, i] * W1[j, i] + b1[j] )      -> h1_out (saved for backward)
//   logits[b, k] = sum_j h1[b, j] * W2[k, j] + b2[k]               (trade-outcome: then probs = softmax(logits))
//   pred[b]      = sum_j h1[b, j] * W2[0, j] + b2[0]               (next-bar: one output)
//   h_s2 [B, SH2], W1 [H, SH2], b1 [H], W2 [K, H], b2 [K], h1_out [B, H], logits / probs [B, K], pred [B]
//
// Entries aux_trade_outcome_forward_cutlass and aux_next_bar_forward_cutlass: the SIMT entries' parameters
// (same order and types) and semantics: every row < B gets h1 (also when K is out of range), K outside
// [1, AUX_K_MAX] writes NaN to logits and probs (k < K), rows >= B and hidden units >= H are never written.
//
// Launch geometry (the contracts'; not the SIMT kernels' grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1)):
//   grid  = (ceil_div(B, TBM), 1, 1),   block = ((TBM / WM) * (TBN / WN) * 32, 1, 1)
// With the defaults (TBM x TBN x TBK = 64 x 128 x 16, warp tile WM x WN = 32 x 32, 3 stages, staged per k8):
//   grid = (ceil_div(B, 64), 1, 1), block = (256, 1, 1)   (1024 blocks at B = 65536; 4 at B = 256)
// The tile can be overridden at build time with -DAUX_HEAD_CUTLASS_TBM=... (TBK, WM, WN, STAGES likewise; TBN
// is the hidden chunk and must stay 128; the benchmark's geometry must match).
//
// Block x owns rows [TBM x, TBM x + TBM) and ALL H hidden units, in chunks n0 = 0, 128, ... of TBN = 128
// (one chunk at the production H = 128):
//   1. one CUTLASS threadblock GEMM tile (cutlass::gemm::kernel::Gemm from DefaultGemm, run by the block):
//      M = B (the block's row tile: a swizzle returning (blockIdx.x, 0, 0)), N = min(128, H - n0), K = SH2;
//      A = h_s2 row-major (ld SH2), B = W1^T from W1 + n0 * SH2 (W1 viewed column-major, ld SH2),
//      C = b1 + n0 broadcast along rows (row-major, leading dimension 0), D = h1_out + n0 (row-major, ld H);
//      epilogue LinearCombinationGeneric<Elu, NoBetaScaling>: D = ELU(1 * acc + C), fma(1, acc, b) = acc + b
//      rounded once, then aux_common.cuh's ELU (z > 0 ? z : expm1f(z)): the SIMT kernels' h1 formula.
//   2. __syncthreads() (the block's global writes are visible to the block after it); the chunk's W2 columns
//      (k < K, zero past H) into w_s in shared memory; __syncthreads(); then the block reads its rows' h1
//      chunk back (L1/L2-hot; through asm volatile ld.global: CUTLASS stores through inline asm the compiler
//      cannot see, so it must not take h1_out for read-only and load it with ld.global.nc) and adds the
//      chunk's share of the second Linear to logits_s[r][k] in shared memory: warp w owns the rows
//      r = w, w + kWarps, ... in every chunk, lane l the 4 units n0 + 4l .. n0 + 4l + 3 (one multiply and three
//      fmaf in order), a fixed xor-shuffle tree sums the 32 lanes, lane 0 adds the sum: a fixed order, no
//      atomics, so the result is bit-deterministic.
//   3. after the last chunk, thread r < TBM (looping by the block size) finishes row TBM x + r exactly as the
//      SIMT entries do: logits = logits_s + b2, max-subtracted softmax (expf, then / sum) into probs, or
//      pred = logits_s[r][0] + b2[0].
//
// Math: arch::OpMultiplyAddFastF32 (CUTLASS's 3xTF32: a = big + small with big = tf32 round-toward-zero of a,
// small = tf32 half-ulp-truncate of a - big; small*big, big*small, big*big per k8 step in the tensor cores,
// small*small dropped). MmaMultistage stages the accumulation for this operator: the k8 steps of one main-loop
// iteration (TBK = 16 of K) accumulate into a cleared fragment, which is then added to the running sum with
// round-to-nearest fp32 adds (static_asserts: >= 3 stages, since 2 would select MmaPipelined, which has no
// staged accumulation). K = SH2 = 256 in production: 16 such adds per output. -DAUX_HEAD_CUTLASS_SPLIT_RN=1:
// both parts rounded to nearest (cutlass_fast_f32_rn.cuh), as the trunk candidate's _rn build.
//
// Alignment: two GEMM instantiations, dispatched per launch (block-uniform): 4-float accesses (cp.async 16 B,
// float4 epilogue) when SH2 % 4 == 0, H % 4 == 0 and h_s2, W1, b1, h1_out are 16-byte aligned; 1-float
// accesses otherwise (the contracts' verify dims include SH2 = 253, H = 129 and H = 100). The read-back uses
// float4 when H % 4 == 0 and h1_out is 16-byte aligned. The Params are built on the device (their constructors
// are CUTLASS_HOST_DEVICE), one per chunk, so the entries keep a plain C ABI. Shared memory: static only, one
// buffer of max(sizeof SharedStorage) over both instantiations (main loop and epilogue share it, a union),
// logits_s [TBM][AUX_K_MAX] and w_s [K_max][128] floats (K_max = AUX_K_MAX for the trade-outcome entry, 1 for
// the next-bar entry).
//
// Build (wireup build: -I kernels -isystem of include_packages; benchmarks/gpu_head_fwd_cutlass.py): nvcc -arch=sm_90 -cubin -O3 -std=c++17 -lineinfo -Xptxas -v
//   -I kernels -isystem <site-packages>/cutlass_library/source/include   (pip install --no-deps nvidia-cutlass==4.2.0.0)
// ptxas (nvcc 13.0.88 on the CPU machine, sm_90; both alignments in each entry; trade-outcome / next-bar), 4 December 2026:
//   default 64x128x16, warps 64x32, 3 stages (128 threads):  250 / 250 registers, 0 bytes spill, 43008 / 39424 bytes smem
//   the same with -DAUX_HEAD_CUTLASS_SPLIT_RN=1:              246 / 246 registers, 0 bytes spill, 43008 / 39424 bytes smem
//   32x128x16, warps 32x32, 3 stages (128 threads):          162 / 160 registers, 0 bytes spill, 35840 / 32256 bytes smem
//   32x128x16, warps 32x32, 4 stages (128 threads):          158 / 158 registers, 0 bytes spill, 46080 / 42496 bytes smem
//   64x128x16, warps 32x32, 3 stages (256 threads):          216 / 228 registers, 0 bytes spill, 43008 / 39424 bytes smem
//   (64x128x16 with warps 32x64: 255 registers and 16-24 bytes of spill stores: not offered)
//   shipped since 5 December: 64x128x16, warps 32x32, 3 stages, staged per k8 (256 threads):
//                                                             255 / 255 registers, 0 bytes spill, 43008 / 39424 bytes smem
// The SIMT aux_trade_outcome_forward / aux_next_bar_forward: 95 / 107 registers, 22528 bytes smem, 128 threads.
// On the H200 (branch ship18, 5 December 2026, docs/benchmarks.md 4i): 142 and 123 us at B = 65536 against the
// SIMT kernels' 155 and 158, but 26.5 us at B = 256 against 20.7 for the trade-outcome head; wireup verify passed.
// Staged per k8 step (cutlass_fast_f32_rn.cuh) with 32 x 32 warp tiles (8 warps, block = 256): shipped since the
// H200 run of 5 December 2026 (docs/benchmarks.md 4n). With the 64 x 32 warp tiles the per-k8 fragment spills.
#ifndef AUX_CUTLASS_STAGE_K8
#define AUX_CUTLASS_STAGE_K8 1
#endif
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/kernel/default_gemm.h"
#include "cutlass/gemm/threadblock/mma_multistage.h"
#include "cutlass/layout/matrix.h"

#include "aux_common.cuh"
#include "cutlass_elu.cuh"
#include "cutlass_fast_f32_rn.cuh"

#ifndef AUX_HEAD_CUTLASS_TBM
#define AUX_HEAD_CUTLASS_TBM 64
#endif
#ifndef AUX_HEAD_CUTLASS_TBN
#define AUX_HEAD_CUTLASS_TBN 128
#endif
#ifndef AUX_HEAD_CUTLASS_TBK
#define AUX_HEAD_CUTLASS_TBK 16
#endif
#ifndef AUX_HEAD_CUTLASS_WM
#define AUX_HEAD_CUTLASS_WM 32
#endif
#ifndef AUX_HEAD_CUTLASS_WN
#define AUX_HEAD_CUTLASS_WN 32
#endif
#ifndef AUX_HEAD_CUTLASS_STAGES
#define AUX_HEAD_CUTLASS_STAGES 3
#endif
#ifndef AUX_HEAD_CUTLASS_SPLIT_RN
#define AUX_HEAD_CUTLASS_SPLIT_RN 1  // the shipped split: 1 round-to-nearest (H200, 5 Dec: the chain's error at B = 65536 6.7e-7 -> 4.0e-7), 0 CUTLASS's truncating one
#endif

namespace aux_head_cutlass {

using aux_cutlass::Elu;  // cutlass_elu.cuh

constexpr int kTBM = AUX_HEAD_CUTLASS_TBM;
constexpr int kChunk = AUX_HEAD_CUTLASS_TBN;  // hidden units per chunk = the GEMM tile's N
constexpr int kUnits = kChunk / 32;           // hidden units per lane in the read-back
static_assert(kChunk == 128, "the read-back gives each lane one float4 of a 128-unit chunk: TBN must be 128");

using ThreadblockShape = cutlass::gemm::GemmShape<kTBM, kChunk, AUX_HEAD_CUTLASS_TBK>;
using WarpShape = cutlass::gemm::GemmShape<AUX_HEAD_CUTLASS_WM, AUX_HEAD_CUTLASS_WN, AUX_HEAD_CUTLASS_TBK>;
using InstructionShape = cutlass::gemm::GemmShape<16, 8, 8>;
constexpr int kStages = AUX_HEAD_CUTLASS_STAGES;

// Block x is the row tile x; the hidden chunk is not a tile of the grid (the block loops over it, each chunk
// a separate GEMM whose B and D pointers are offset by n0), and K is not split: tile offset (blockIdx.x, 0, 0).
struct RowTileSwizzle {
    CUTLASS_HOST_DEVICE int get_log_tile(cutlass::gemm::GemmCoord) const { return 0; }
    CUTLASS_DEVICE cutlass::gemm::GemmCoord get_tile_offset(int) const { return cutlass::gemm::GemmCoord(int(blockIdx.x), 0, 0); }
};

template <int Align>
using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<
    Elu, float, Align, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling,
    cutlass::FloatRoundStyle::round_to_nearest, /*IsHeavy=*/true>;

template <int Align>
using DefaultKernel = typename cutlass::gemm::kernel::DefaultGemm<
    float, cutlass::layout::RowMajor, Align,     // A = h_s2 [B, SH2]
    float, cutlass::layout::ColumnMajor, Align,  // B = W1^T: element (k, n) at W1[(n0 + n) * SH2 + k]
    float, cutlass::layout::RowMajor,            // C (= b1 broadcast) and D = h1_out [B, H] from column n0
    float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,
    EpilogueOp<Align>, RowTileSwizzle, kStages, /*SplitKSerial=*/false, cutlass::arch::OpMultiplyAddFastF32>::GemmKernel;

// -DAUX_HEAD_CUTLASS_SPLIT_RN=1: the same kernel with both tf32 parts rounded to nearest (cutlass_fast_f32_rn.cuh)
template <int Align>
using GemmKernel = typename cutlass::platform::conditional<
    AUX_HEAD_CUTLASS_SPLIT_RN != 0, typename cutlass_fast_f32_rn::WithRoundToNearestSplit<DefaultKernel<Align>, RowTileSwizzle>::Kernel,
    DefaultKernel<Align>>::type;

using Pair = cutlass_fast_f32_rn::AlignedPair<GemmKernel<4>, GemmKernel<1>>;  // block size, smem, staged accumulation
using KernelVec = Pair::Vec;
using KernelScalar = Pair::Scalar;

constexpr int kThreads = Pair::kThreads;
constexpr int kWarps = kThreads / 32;
static_assert(kThreads == (AUX_HEAD_CUTLASS_TBM / AUX_HEAD_CUTLASS_WM) * (AUX_HEAD_CUTLASS_TBN / AUX_HEAD_CUTLASS_WN) * 32,
              "block = one warp per warp tile (the benchmark's geometry assumes it)");
constexpr size_t kSmemBytes = Pair::kSmemBytes;
static_assert(kSmemBytes + sizeof(float) * (kTBM + kChunk) * AUX_K_MAX <= 48 * 1024,
              "static shared memory must stay within 48 KB (no dynamic shared memory)");

// h1 chunk [rows of the tile, n0 .. n0 + N) = ELU(h_s2 W1[n0 .. n0 + N)^T + b1[n0 ..]) into h1_out (ld H).
template <typename Kernel>
__device__ __forceinline__ void hidden_chunk(const float* h_s2, const float* W1, const float* b1, float* h1_out, int B, int SH2,
                                             int H, int n0, unsigned char* smem) {
    const int n = min(kChunk, H - n0);
    const cutlass::gemm::GemmCoord problem(B, n, SH2);
    const cutlass::gemm::GemmCoord tiled((B + kTBM - 1) / kTBM, 1, 1);
    typename Kernel::Params params(
        problem, tiled,
        {const_cast<float*>(h_s2), cutlass::layout::RowMajor(SH2)},
        {const_cast<float*>(W1) + (size_t)n0 * SH2, cutlass::layout::ColumnMajor(SH2)},
        {const_cast<float*>(b1) + n0, cutlass::layout::RowMajor(0)},  // leading dimension 0: every row reads b1
        {h1_out + n0, cutlass::layout::RowMajor(H)},
        typename Kernel::OutputOp::Params(1.0f, 0.0f));
    Kernel op;
    op(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

// Weak global loads the compiler must keep as written (after the barrier, never ld.global.nc).
__device__ __forceinline__ float ld_h1(const float* p) {
    float v;
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ float4 ld_h1_4(const float* p) {
    float4 v;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
    return v;
}

// h1 of rows [row0, row0 + kTBM) (written to h1_out) and, when 1 <= K <= AUX_K_MAX, logits_s[r][k] =
// sum_j h1[row0 + r, j] * W2[k, j] for rows < B, k < K. Ends with a barrier: logits_s is readable by all.
__device__ __forceinline__ void hidden_and_logits(const float* __restrict__ h_s2, const float* __restrict__ W1,
                                                  const float* __restrict__ b1, const float* __restrict__ W2,
                                                  float* __restrict__ h1_out, int B, int SH2, int H, int K,
                                                  unsigned char* smem, float (*logits_s)[AUX_K_MAX],
                                                  float (*w_s)[kChunk]) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int row0 = blockIdx.x * kTBM;
    const int rows = min(kTBM, B - row0);  // rows of this block below B
    const bool k_ok = K >= 1 && K <= AUX_K_MAX;

    for (int e = tid; e < kTBM * AUX_K_MAX; e += kThreads) (&logits_s[0][0])[e] = 0.0f;

    const bool vec_gemm = (SH2 % 4 == 0) && (H % 4 == 0) && aligned16(h_s2) && aligned16(W1) && aligned16(b1) && aligned16(h1_out);
    const bool vec_h = (H % 4 == 0) && aligned16(h1_out);

    for (int n0 = 0; n0 < H; n0 += kChunk) {
        if (vec_gemm)
            hidden_chunk<KernelVec>(h_s2, W1, b1, h1_out, B, SH2, H, n0, smem);
        else
            hidden_chunk<KernelScalar>(h_s2, W1, b1, h1_out, B, SH2, H, n0, smem);
        // The chunk's h1 stores (and the zeroed logits_s) are visible to the whole block after this barrier;
        // the next chunk's GEMM reuses smem only after every thread has passed it.
        __syncthreads();
        if (!k_ok) continue;

        // The chunk's W2 columns into shared memory (zero past H), after the barrier above: every thread has
        // finished the previous chunk's read-back, so w_s is free; the barrier below publishes it.
        for (int e = tid; e < K * kChunk; e += kThreads) {
            const int k = e / kChunk, j = n0 + e % kChunk;
            w_s[k][e % kChunk] = j < H ? __ldg(W2 + (size_t)k * H + j) : 0.0f;
        }
        __syncthreads();

        // Second Linear, this chunk's share: lane's units j0 .. j0 + 3 against W2[k, :], summed over the warp.
        const int j0 = n0 + lane * kUnits;
        for (int r = warp; r < rows; r += kWarps) {  // warp `warp` owns row r in every chunk: a fixed order
            const float* hrow = h1_out + (size_t)(row0 + r) * H;
            float h[kUnits];
            if (vec_h && j0 < H) {
                const float4 v = ld_h1_4(hrow + j0);
                h[0] = v.x; h[1] = v.y; h[2] = v.z; h[3] = v.w;
            } else {
#pragma unroll
                for (int c = 0; c < kUnits; ++c) h[c] = j0 + c < H ? ld_h1(hrow + j0 + c) : 0.0f;  // units >= H add nothing
            }
#pragma unroll
            for (int k = 0; k < AUX_K_MAX; ++k) {
                if (k < K) {
                    const float4 w = *reinterpret_cast<const float4*>(&w_s[k][lane * kUnits]);
                    float p = h[0] * w.x;
                    p = fmaf(h[1], w.y, p);
                    p = fmaf(h[2], w.z, p);
                    p = fmaf(h[3], w.w, p);
#pragma unroll
                    for (int off = 16; off > 0; off >>= 1) p += __shfl_xor_sync(0xffffffffu, p, off);
                    if (lane == 0) logits_s[r][k] += p;  // only this warp touches row r
                }
            }
        }
    }
    __syncthreads();
}

}  // namespace aux_head_cutlass

extern "C" __global__ void __launch_bounds__(aux_head_cutlass::kThreads)
aux_trade_outcome_forward_cutlass(const float* __restrict__ h_s2, const float* __restrict__ W1, const float* __restrict__ b1,
                                  const float* __restrict__ W2, const float* __restrict__ b2, float* __restrict__ h1_out,
                                  float* __restrict__ logits, float* __restrict__ probs, int B, int SH2, int H, int K) {
    using namespace aux_head_cutlass;
    __shared__ __align__(128) unsigned char smem[kSmemBytes];
    __shared__ __align__(16) float logits_s[kTBM][AUX_K_MAX];
    __shared__ __align__(16) float w_s[AUX_K_MAX][kChunk];
    if (B <= 0) return;
    hidden_and_logits(h_s2, W1, b1, W2, h1_out, B, SH2, H, K, smem, logits_s, w_s);

    for (int r = threadIdx.x; r < kTBM; r += kThreads) {
        const int row = blockIdx.x * kTBM + r;
        if (row >= B) return;
        float* lrow = logits + (size_t)row * K;
        float* prow = probs + (size_t)row * K;
        if (K < 1 || K > AUX_K_MAX) {
            for (int k = 0; k < K; ++k) {
                lrow[k] = aux_nan();
                prow[k] = aux_nan();
            }
            continue;
        }
        // the SIMT kernel's epilogue (benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu), operation for operation
        float l[AUX_K_MAX];
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < AUX_K_MAX; ++k) {
            if (k < K) {
                l[k] = logits_s[r][k] + __ldg(b2 + k);
                lrow[k] = l[k];
                m = fmaxf(m, l[k]);
            }
        }
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < AUX_K_MAX; ++k) {
            if (k < K) {
                l[k] = expf(l[k] - m);
                sum += l[k];
            }
        }
#pragma unroll
        for (int k = 0; k < AUX_K_MAX; ++k)
            if (k < K) prow[k] = l[k] / sum;
    }
}

extern "C" __global__ void __launch_bounds__(aux_head_cutlass::kThreads)
aux_next_bar_forward_cutlass(const float* __restrict__ h_s2, const float* __restrict__ W1, const float* __restrict__ b1,
                             const float* __restrict__ W2, const float* __restrict__ b2, float* __restrict__ h1_out,
                             float* __restrict__ pred, int B, int SH2, int H) {
    using namespace aux_head_cutlass;
    constexpr int kOutputs = 1;  // KNB
    __shared__ __align__(128) unsigned char smem[kSmemBytes];
    __shared__ __align__(16) float logits_s[kTBM][AUX_K_MAX];
    __shared__ __align__(16) float w_s[kOutputs][kChunk];
    if (B <= 0) return;
    hidden_and_logits(h_s2, W1, b1, W2, h1_out, B, SH2, H, kOutputs, smem, logits_s, w_s);

    for (int r = threadIdx.x; r < kTBM; r += kThreads) {
        const int row = blockIdx.x * kTBM + r;
        if (row >= B) return;
        pred[row] = logits_s[r][0] + __ldg(b2);
    }
}
