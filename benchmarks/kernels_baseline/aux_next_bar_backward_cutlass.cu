// CANDIDATE, for benchmarks/gpu_nb_bwd_cutlass.py only (not a shipped kernel, no contract; issue 18): the next-bar
// head backward (kernels/aux_next_bar_backward_kernel.cu, contract contracts/kernels/aux_next_bar.toml) with its
// GEMM dh = dz1 @ W1 on Hopper tensor cores at fp32 accuracy (CUTLASS 3xTF32, mma.sync m16n8k8 tf32, runs on
// sm_90); everything else is the shipped kernel's fp32 arithmetic, operation for operation.
//
//   s                      = max(isv[label_scale_slot], 1e-6)            (NaN for a slot outside [0, ISV_TOTAL_DIM))
//   d_pred[b]              = 2 * (pred[b] - label[b] / s) / B
//   db2_partial[b, 0]      = d_pred[b]
//   dW2_partial[b, 0, j]   = d_pred[b] * h1[b, j]                                  (NULL-able)
//   dz1[b, j]              = d_pred[b] * W2[0, j] * ELU'(h1[b, j]),  ELU' = h1 > 0 ? 1 : 1 + h1
//   db1_partial[b, j]      = dz1[b, j]
//   dW1_partial[b, j, i]   = dz1[b, j] * h_s2[b, i]                                (NULL-able: the per-sample path)
//   dh[b, i]               = sum_j dz1[b, j] * W1[j, i]                            (the GEMM, on tensor cores here)
//   dh_s2_aux_out[b, i]    = dh[b, i]
//   dh_s2_aux_accum[b, i] += saxpy_alpha * dh[b, i]                              (fmaf(saxpy_alpha, dh, accum))
//
// Entry aux_next_bar_backward_cutlass: the shipped entry's parameters (same order and types) and semantics: a bad
// ISV slot makes s = NaN, which poisons every output of every row < B (the accumulator included); dW1_partial and
// dW2_partial may be NULL (the fused schedule) or not (the per-sample schedule); rows >= B are never written.
//
// Launch geometry (its own; not the shipped grid = (ceil_div(SH2, 64), ceil_div(B, 128), 1), block = (256, 1, 1)):
//   grid  = (ceil_div(B, TBM), 1, 1),   block = ((TBM / WM) * (TBN / WN) * 32, 1, 1)
// With the defaults (TBM x TBN x TBK = 32 x 128 x 16, warp tile WM x WN = 32 x 32, 4 stages):
//   grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1)      (2048 blocks at B = 65536, 128 at 4096, 8 at 256)
// The tile can be overridden at build time with -DAUX_NB_BWD_CUTLASS_TBM=... (TBN, TBK, WM, WN, STAGES likewise;
// the benchmark's geometry must match).
// Why this tile. A block runs its chunks one after another, so the rows per block set the parallelism at small
// and medium B: the shipped kernel has 8 blocks at B = 256 and 128 at 4096 (where it takes 17.8 and 18.5 us,
// latency-bound); 32-row blocks give the same counts, 64-row blocks half of them, 128-row blocks a quarter. At
// B = 65536 the kernel moves ~269 MB (h1 in, db1_partial and dh_s2_aux_out out, the accumulator in and out) for
// 4.3 GFLOP, so its memory-bound phases (1 and 3 below) should overlap another block's GEMM: two blocks per SM
// need <= 255 registers at 128 threads and no spill. The 64 x 32 warp tile (CUTLASS's 3xTF32 example) spills
// here with both alignment instantiations in one entry (255 registers, 88 bytes at 64 x 128: W1 is a row-major,
// "congruous" B operand), so the warps are 32 x 32: four of them over 32 x 128 (230 registers, 2 x 40 KB of
// shared memory per SM), SH2 = 256 in two chunks, each one GEMM of K = H = 128 with a 4-stage ring (3 of its 8
// k-tiles in flight). The price: each block reads all of W1 (128 KB) from L2, 268 MB of L2 reads at B = 65536,
// twice the 64-row tile's. 64 x 64 (64-row blocks, four chunks), and 8 warps over 64 x 128 and 128 x 64 (one
// block per SM, whose phases then serialise) are offered for the record (benchmarks/gpu_nb_bwd_cutlass.py
// --tiles).
//
// Block x owns rows [TBM x, TBM x + TBM) and ALL SH2 trunk units:
//   0. thread r < TBM: d_pred of row TBM x + r (the shipped formula) into d_pred_s and db2_partial. Barrier.
//   1. the block forms dz1 for its rows and all H (float4 when H % 4 == 0 and h1, W2, db1_partial, dW2_partial
//      are 16-byte aligned; scalar otherwise) and writes db1_partial = dz1 and dW2_partial (if non-NULL).
//      Barrier: the block's db1_partial rows are visible to the whole block.
//   2. for each chunk n0 = 0, TBN, ... of SH2: one CUTLASS threadblock GEMM tile (cutlass::gemm::kernel::Gemm from
//      DefaultGemm, run by the block): M = the block's rows below B, N = min(TBN, SH2 - n0), K = H;
//      A = db1_partial + TBM x * H row-major (ld H: the rows just written, read back from L2 by cp.async),
//      B = W1 + n0 row-major [H, SH2] (ld SH2), D = dh_s2_aux_out + TBM x * SH2 + n0 (ld SH2), epilogue
//      LinearCombination with ScaleType::Nothing (D = the accumulator; C is never read). Barrier (the chunk's
//      D stores are visible to the block; the next chunk's GEMM reuses the shared memory only after it).
//   3. the block updates dh_s2_aux_accum[b, i] = fmaf(saxpy_alpha, dh_s2_aux_out[b, i], dh_s2_aux_accum[b, i]) for
//      the chunk (rows < B), reading its own output back with ld.global.cg (L2-hot; never ld.global.nc:
//      CUTLASS stores through inline asm the compiler cannot see); float4 when SH2 % 4 == 0 and both pointers
//      are 16-byte aligned. The shipped epilogue's float32 op, on the same dh.
//   4. dW1_partial (non-NULL only on the per-sample path, small B): a plain loop over the block's rows, dz1
//      recomputed exactly as the shipped kernel does (d_pred * W2[j] * ELU'(h1)), times h_s2.
//
// Math: arch::OpMultiplyAddFastF32 (CUTLASS's 3xTF32: a = big + small with big = tf32 round-toward-zero of a,
// small = tf32 half-ulp-truncate of a - big; small*big, big*small, big*big per k8 step in the tensor cores,
// small*small dropped). MmaMultistage stages the accumulation for this operator: the k8 steps of one main-loop
// iteration (TBK = 16 of K) accumulate into a cleared fragment, which is then added to the running sum with
// round-to-nearest fp32 adds (AlignedPair's static_asserts: >= 3 stages, since 2 would select MmaPipelined,
// which has no staged accumulation). K = H = 128 in production: 8 such adds per output.
// -DAUX_NB_BWD_CUTLASS_SPLIT_RN=1: both parts rounded to nearest (cutlass_fast_f32_rn.cuh), as the trunk and head
// candidates' _rn builds. Nothing else in the kernel is reassociated: dz1, d_pred, the partials and the SAXPY are
// the shipped expressions, so they differ from the shipped kernel's only through dh.
//
// Alignment: two GEMM instantiations (cutlass_fast_f32_rn::AlignedPair), dispatched per launch (block-uniform):
// 4-float accesses (cp.async 16 B, float4 epilogue) when H % 4 == 0, SH2 % 4 == 0 and db1_partial, W1,
// dh_s2_aux_out are 16-byte aligned; 1-float accesses otherwise (the contract's verify dims include H = 129 and
// SH2 = 253; H = 100 takes the 4-float path with a partial K tile, which CUTLASS's predicated iterators handle).
// The Params are built on the device (their constructors are CUTLASS_HOST_DEVICE), one per chunk, so the entry
// keeps a plain C ABI. Shared memory: static only, one buffer of max(sizeof SharedStorage) over both
// instantiations (main loop and epilogue share it, a union) and d_pred_s [TBM] floats.
//
// Build (benchmarks/gpu_nb_bwd_cutlass.py): nvcc -arch=sm_90 -cubin -O3 -std=c++17 -lineinfo -Xptxas -v
//   -I kernels -I benchmarks/kernels_baseline -isystem <site-packages>/cutlass_library/source/include
//   (pip install --no-deps nvidia-cutlass==4.2.0.0)
// ptxas (nvcc 13.0.88 on the CPU machine, sm_90; both alignments in the entry), 5 December 2026:
//   default 32x128x16, warps 32x32, 4 stages (128 threads):  230 registers, 0 bytes spill, 41088 bytes smem
//   the same with -DAUX_NB_BWD_CUTLASS_SPLIT_RN=1:           234 registers, 0 bytes spill, 41088 bytes smem
//   64x64x16, warps 32x32, 4 stages (128 threads):           235 registers, 0 bytes spill, 33024 bytes smem
//   64x128x16, warps 32x32, 3 stages (256 threads):          226 registers, 0 bytes spill, 37120 bytes smem
//   128x64x16, warps 32x32, 3 stages (256 threads):          235 registers, 0 bytes spill, 37376 bytes smem
//   (64x128x16 with warps 64x32, 3 stages: 255 registers and 88 bytes of spill stores: not offered)
// The shipped aux_next_bar_backward: 93 registers, 0 bytes spill, 26112 bytes smem, 256 threads.
// Not measured on a GPU yet.
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/kernel/default_gemm.h"
#include "cutlass/gemm/threadblock/mma_multistage.h"
#include "cutlass/layout/matrix.h"

#include "aux_common.cuh"
#include "cutlass_fast_f32_rn.cuh"

#ifndef AUX_NB_BWD_CUTLASS_TBM
#define AUX_NB_BWD_CUTLASS_TBM 32
#endif
#ifndef AUX_NB_BWD_CUTLASS_TBN
#define AUX_NB_BWD_CUTLASS_TBN 128
#endif
#ifndef AUX_NB_BWD_CUTLASS_TBK
#define AUX_NB_BWD_CUTLASS_TBK 16
#endif
#ifndef AUX_NB_BWD_CUTLASS_WM
#define AUX_NB_BWD_CUTLASS_WM 32
#endif
#ifndef AUX_NB_BWD_CUTLASS_WN
#define AUX_NB_BWD_CUTLASS_WN 32
#endif
#ifndef AUX_NB_BWD_CUTLASS_STAGES
#define AUX_NB_BWD_CUTLASS_STAGES 4
#endif
#ifndef AUX_NB_BWD_CUTLASS_SPLIT_RN
#define AUX_NB_BWD_CUTLASS_SPLIT_RN 0
#endif

namespace aux_nb_bwd_cutlass {

constexpr int kTBM = AUX_NB_BWD_CUTLASS_TBM;
constexpr int kTBN = AUX_NB_BWD_CUTLASS_TBN;  // trunk units per chunk = the GEMM tile's N

using ThreadblockShape = cutlass::gemm::GemmShape<kTBM, kTBN, AUX_NB_BWD_CUTLASS_TBK>;
using WarpShape = cutlass::gemm::GemmShape<AUX_NB_BWD_CUTLASS_WM, AUX_NB_BWD_CUTLASS_WN, AUX_NB_BWD_CUTLASS_TBK>;
using InstructionShape = cutlass::gemm::GemmShape<16, 8, 8>;
constexpr int kStages = AUX_NB_BWD_CUTLASS_STAGES;

// Every GEMM is one tile: its A and D pointers start at the block's first row, its B and D pointers at the chunk's
// first column (the block loops over the chunks), and K is not split: tile offset (0, 0, 0).
struct RowTileSwizzle {
    CUTLASS_HOST_DEVICE int get_log_tile(cutlass::gemm::GemmCoord) const { return 0; }
    CUTLASS_DEVICE cutlass::gemm::GemmCoord get_tile_offset(int) const { return cutlass::gemm::GemmCoord(0, 0, 0); }
};

template <int Align>
using EpilogueOp = cutlass::epilogue::thread::LinearCombination<float, Align, float, float,
                                                                cutlass::epilogue::thread::ScaleType::Nothing>;

template <int Align>
using DefaultKernel = typename cutlass::gemm::kernel::DefaultGemm<
    float, cutlass::layout::RowMajor, Align,  // A = dz1 = db1_partial [B, H]
    float, cutlass::layout::RowMajor, Align,  // B = W1 [H, SH2] from column n0
    float, cutlass::layout::RowMajor,         // C (never read) and D = dh_s2_aux_out [B, SH2] from column n0
    float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,
    EpilogueOp<Align>, RowTileSwizzle, kStages, /*SplitKSerial=*/false, cutlass::arch::OpMultiplyAddFastF32>::GemmKernel;

// -DAUX_NB_BWD_CUTLASS_SPLIT_RN=1: the same kernel with both tf32 parts rounded to nearest (cutlass_fast_f32_rn.cuh)
template <int Align>
using GemmKernel = typename cutlass::platform::conditional<
    AUX_NB_BWD_CUTLASS_SPLIT_RN != 0, typename cutlass_fast_f32_rn::WithRoundToNearestSplit<DefaultKernel<Align>, RowTileSwizzle>::Kernel,
    DefaultKernel<Align>>::type;

using Pair = cutlass_fast_f32_rn::AlignedPair<GemmKernel<4>, GemmKernel<1>>;  // block size, smem, staged accumulation
using KernelVec = Pair::Vec;
using KernelScalar = Pair::Scalar;

constexpr int kThreads = Pair::kThreads;
static_assert(kThreads == (AUX_NB_BWD_CUTLASS_TBM / AUX_NB_BWD_CUTLASS_WM) * (AUX_NB_BWD_CUTLASS_TBN / AUX_NB_BWD_CUTLASS_WN) * 32,
              "block = one warp per warp tile (the benchmark's geometry assumes it)");
static_assert(KernelVec::Epilogue::OutputOp::kScale == cutlass::epilogue::thread::ScaleType::Nothing,
              "D = the accumulator; C is never read");
constexpr size_t kSmemBytes = Pair::kSmemBytes;
static_assert(kSmemBytes + sizeof(float) * kTBM <= 48 * 1024, "static shared memory must stay within 48 KB (no dynamic shared memory)");

// dh chunk [rows of the tile, n0 .. n0 + N) = db1_partial[rows, :] @ W1[:, n0 .. n0 + N) into dh_s2_aux_out (ld SH2).
template <typename Kernel>
__device__ __forceinline__ void dh_chunk(const float* A, const float* W1, float* D, int rows, int SH2, int H, int n0, unsigned char* smem) {
    const cutlass::gemm::GemmCoord problem(rows, min(kTBN, SH2 - n0), H);
    typename Kernel::Params params(problem, cutlass::gemm::GemmCoord(1, 1, 1),
                                   {const_cast<float*>(A), cutlass::layout::RowMajor(H)},
                                   {const_cast<float*>(W1) + n0, cutlass::layout::RowMajor(SH2)},
                                   {D + n0, cutlass::layout::RowMajor(SH2)},  // C: never read (ScaleType::Nothing)
                                   {D + n0, cutlass::layout::RowMajor(SH2)});
    Kernel op;
    op(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

// The float4 loops of phases 1 and 3 issue kBatch iterations' loads before the first store (written in that order:
// the compiler does not move a load past a store it cannot prove disjoint), so a thread keeps kBatch (phase 1) or
// 2 kBatch (phase 3: dh and the accumulator) 16-byte requests in flight instead of one or two. kBatch = 8 costs
// ~20 registers more (255 at the 64 x 64 tile) for no more than 2 blocks per SM.
constexpr int kBatch = 4;

// Phase 1: dz1 (and d_pred * h1) for rows [row0, row0 + rows) and all H into db1_partial (and dW2_partial).
__device__ __forceinline__ void dz1_rows(const float* __restrict__ h1, const float* __restrict__ W2, float* __restrict__ db1_partial,
                                         float* __restrict__ dW2_partial, const float* d_pred_s, int row0, int rows, int H) {
    const int tid = threadIdx.x;
    if ((H % 4 == 0) && aligned16(h1) && aligned16(W2) && aligned16(db1_partial) && (dW2_partial == nullptr || aligned16(dW2_partial))) {
        const int n4 = H / 4;
        const int total = rows * n4;
        for (int e0 = tid; e0 < total; e0 += kBatch * kThreads) {
            float4 h[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const int e = e0 + u * kThreads;
                if (e < total) {
                    const int r = e / n4;
                    h[u] = __ldg(reinterpret_cast<const float4*>(h1 + (size_t)(row0 + r) * H + (e - r * n4) * 4));
                }
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const int e = e0 + u * kThreads;
                if (e < total) {
                    const int r = e / n4;
                    const int j = (e - r * n4) * 4;
                    const size_t o = (size_t)(row0 + r) * H + j;
                    const float dp = d_pred_s[r];
                    const float4 w = __ldg(reinterpret_cast<const float4*>(W2 + j));
                    *reinterpret_cast<float4*>(db1_partial + o) =
                        make_float4(dp * w.x * elu_grad_from_output(h[u].x), dp * w.y * elu_grad_from_output(h[u].y),
                                    dp * w.z * elu_grad_from_output(h[u].z), dp * w.w * elu_grad_from_output(h[u].w));
                    if (dW2_partial != nullptr)
                        *reinterpret_cast<float4*>(dW2_partial + o) = make_float4(dp * h[u].x, dp * h[u].y, dp * h[u].z, dp * h[u].w);
                }
            }
        }
    } else {
        for (int e = tid; e < rows * H; e += kThreads) {
            const int r = e / H;
            const int j = e - r * H;
            const size_t o = (size_t)(row0 + r) * H + j;
            const float dp = d_pred_s[r];
            const float h = __ldg(h1 + o);
            db1_partial[o] = dp * __ldg(W2 + j) * elu_grad_from_output(h);
            if (dW2_partial != nullptr) dW2_partial[o] = dp * h;
        }
    }
}

// Phase 3: dh_s2_aux_accum += saxpy_alpha * dh for rows [row0, row0 + rows), units [n0, n0 + n), dh read back from
// dh_s2_aux_out (written by this block's GEMM before the last barrier) through L2 (ld.global.cg).
__device__ __forceinline__ void saxpy_chunk(const float* dh_out, float* __restrict__ accum, float saxpy_alpha, int row0, int rows,
                                            int SH2, int n0, int n, bool vec) {
    const int tid = threadIdx.x;
    if (vec) {  // SH2 % 4 == 0 (so n0 and n are multiples of 4), both pointers 16-byte aligned
        const int n4 = n / 4;
        const int total = rows * n4;
        for (int e0 = tid; e0 < total; e0 += kBatch * kThreads) {
            float4 d[kBatch], a[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const int e = e0 + u * kThreads;
                if (e < total) {
                    const int r = e / n4;
                    const size_t o = (size_t)(row0 + r) * SH2 + n0 + (e - r * n4) * 4;
                    d[u] = __ldcg(reinterpret_cast<const float4*>(dh_out + o));
                    a[u] = *reinterpret_cast<const float4*>(accum + o);
                }
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const int e = e0 + u * kThreads;
                if (e < total) {
                    const int r = e / n4;
                    const size_t o = (size_t)(row0 + r) * SH2 + n0 + (e - r * n4) * 4;
                    a[u].x = fmaf(saxpy_alpha, d[u].x, a[u].x);
                    a[u].y = fmaf(saxpy_alpha, d[u].y, a[u].y);
                    a[u].z = fmaf(saxpy_alpha, d[u].z, a[u].z);
                    a[u].w = fmaf(saxpy_alpha, d[u].w, a[u].w);
                    *reinterpret_cast<float4*>(accum + o) = a[u];
                }
            }
        }
    } else {
        for (int e = tid; e < rows * n; e += kThreads) {
            const int r = e / n;
            const size_t o = (size_t)(row0 + r) * SH2 + n0 + (e - r * n);
            accum[o] = fmaf(saxpy_alpha, __ldcg(dh_out + o), accum[o]);
        }
    }
}

// Phase 4 (per-sample path only): dW1_partial[b, j, i] = dz1[b, j] * h_s2[b, i], dz1 recomputed as the shipped kernel does.
__device__ __forceinline__ void dw1_rows(const float* __restrict__ h_s2, const float* __restrict__ h1, const float* __restrict__ W2,
                                         float* __restrict__ dW1_partial, const float* d_pred_s, int row0, int rows, int SH2, int H) {
    const int tid = threadIdx.x;
    if ((SH2 % 4 == 0) && aligned16(dW1_partial) && aligned16(h_s2)) {
        const int c4 = SH2 / 4;
        const int per_row = H * c4;
        for (int e = tid; e < rows * per_row; e += kThreads) {
            const int r = e / per_row;
            const int rem = e - r * per_row;
            const int j = rem / c4;
            const int i = (rem - j * c4) * 4;
            const int row = row0 + r;
            const float dz = d_pred_s[r] * __ldg(W2 + j) * elu_grad_from_output(__ldg(h1 + (size_t)row * H + j));
            const float4 xv = __ldg(reinterpret_cast<const float4*>(h_s2 + (size_t)row * SH2 + i));
            *reinterpret_cast<float4*>(dW1_partial + ((size_t)row * H + j) * SH2 + i) = make_float4(dz * xv.x, dz * xv.y, dz * xv.z, dz * xv.w);
        }
    } else {
        const int per_row = H * SH2;
        for (int e = tid; e < rows * per_row; e += kThreads) {
            const int r = e / per_row;
            const int rem = e - r * per_row;
            const int j = rem / SH2;
            const int i = rem - j * SH2;
            const int row = row0 + r;
            const float dz = d_pred_s[r] * __ldg(W2 + j) * elu_grad_from_output(__ldg(h1 + (size_t)row * H + j));
            dW1_partial[((size_t)row * H + j) * SH2 + i] = dz * __ldg(h_s2 + (size_t)row * SH2 + i);
        }
    }
}

}  // namespace aux_nb_bwd_cutlass

extern "C" __global__ void __launch_bounds__(aux_nb_bwd_cutlass::kThreads)
aux_next_bar_backward_cutlass(const float* __restrict__ h_s2, const float* __restrict__ h1, const float* __restrict__ pred,
                              const float* __restrict__ label, const float* __restrict__ isv, int label_scale_slot,
                              const float* __restrict__ W1, const float* __restrict__ W2, float* __restrict__ dW1_partial,
                              float* __restrict__ db1_partial, float* __restrict__ dW2_partial,
                              float* __restrict__ db2_partial, float* __restrict__ dh_s2_aux_out,
                              float* __restrict__ dh_s2_aux_accum, float saxpy_alpha, int B, int SH2, int H) {
    using namespace aux_nb_bwd_cutlass;
    __shared__ __align__(128) unsigned char smem[kSmemBytes];
    __shared__ float d_pred_s[kTBM];

    const int row0 = blockIdx.x * kTBM;
    const int rows = min(kTBM, B - row0);  // rows of this block below B
    if (rows <= 0 || SH2 <= 0 || H <= 0) return;  // block-uniform, before any barrier

    // 0. d_pred of the block's rows (the shipped formula; a bad slot gives s = NaN)
    for (int r = threadIdx.x; r < kTBM; r += kThreads) {
        const int row = row0 + r;
        float dp = 0.0f;
        if (row < B) {
            const float s = aux_label_scale(isv, label_scale_slot);
            const float res = __ldg(pred + row) - __ldg(label + row) / s;
            dp = 2.0f * res / (float)B;
            db2_partial[row] = dp;
        }
        d_pred_s[r] = dp;
    }
    __syncthreads();

    // 1. dz1 -> db1_partial (the GEMM's A), d_pred * h1 -> dW2_partial
    dz1_rows(h1, W2, db1_partial, dW2_partial, d_pred_s, row0, rows, H);
    __syncthreads();  // the block's db1_partial rows are visible to its cp.async reads below

    // 2.-3. per chunk of SH2: dh = dz1 @ W1 on tensor cores into dh_s2_aux_out, then the SAXPY into the accumulator
    const bool vec_gemm = (H % 4 == 0) && (SH2 % 4 == 0) && aligned16(db1_partial) && aligned16(W1) && aligned16(dh_s2_aux_out);
    const bool vec_saxpy = (SH2 % 4 == 0) && aligned16(dh_s2_aux_out) && aligned16(dh_s2_aux_accum);
    for (int n0 = 0; n0 < SH2; n0 += kTBN) {
        if (vec_gemm)
            dh_chunk<KernelVec>(db1_partial + (size_t)row0 * H, W1, dh_s2_aux_out + (size_t)row0 * SH2, rows, SH2, H, n0, smem);
        else
            dh_chunk<KernelScalar>(db1_partial + (size_t)row0 * H, W1, dh_s2_aux_out + (size_t)row0 * SH2, rows, SH2, H, n0, smem);
        // The chunk's dh stores are visible to the whole block after this barrier; the next chunk's GEMM reuses
        // smem only after every thread has passed it (the SAXPY below touches no shared memory).
        __syncthreads();
        saxpy_chunk(dh_s2_aux_out, dh_s2_aux_accum, saxpy_alpha, row0, rows, SH2, n0, min(kTBN, SH2 - n0), vec_saxpy);
    }

    // 4. the per-sample path's weight partial of the first Linear
    if (dW1_partial != nullptr) dw1_rows(h_s2, h1, W2, dW1_partial, d_pred_s, row0, rows, SH2, H);
}
