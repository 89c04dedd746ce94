// The partial of the split weight-gradient reduction (contract aux_weight_grad_partial,
// contracts/kernels/aux_param_grad_reduce.toml; issue 18) as a CUTLASS 2.x 3xTF32 GEMM on the tensor cores. It
// replaced the SIMT entry aux_weight_grad_partial of kernels/aux_weight_grad_split_kernel.cu for the trunk's and
// the next-bar head's first Linear (M = 256, 128); that entry stays the contract aux_weight_grad_partial_skinny
// for the next-bar head's M = 1, where its skinny path is faster than this kernel's 128 x 128 tile (the contract
// says why). Measured by
// `benchmarks/gpu_wgrad_split.py --cutlass-source THIS_FILE` (docs/benchmarks.md 4a) and in the chain on the
// H200 (branch ship18, 5 December 2026, 4i: 198 us for 256 x 256 and 111 us for 128 x 256 at B = 65536 against
// the SIMT kernel's 223 and 115; wireup verify passed). Headers: the nvidia-cutlass wheel, through include_packages.
//
//   ws[p, m, n] = sum_{b in chunk p} dz[b, m] * x[b, n]      dz [B, M], x [B, N], ws [P, M, N] (overwritten)
//   wsb[p, m]   = sum_{b in chunk p} dz[b, m]  (double, rounded once)   wsb [P, M] (overwritten)
//   Chunk p is the rows [floor(B*p/P), floor(B*(p+1)/P)); grid = (ceil_div(N, 128), ceil_div(M, 128), P),
//   block = (256, 1, 1), no dynamic shared memory: the SIMT partial's launch and ABI, for any M.
//
// Block (x, y, p) is one 128 x 128 output tile of one GEMM: D = ws[p] (M x N, row-major, ld N) =
// A B with A = dz[chunk]^T (M x rows: column-major, ld M), B = x[chunk] (rows x N, row-major, ld N), K =
// the chunk's rows. cutlass::gemm::kernel::DefaultGemm, sm80-style (cp.async multistage + mma.sync, runs on
// sm_90): tensor op, arch::OpMultiplyAddFastF32 (3xTF32), threadblock 128 x 128 x 16, warp 64 x 32 x 16
// (8 warps = 256 threads), instruction 16 x 8 x 8, 3 stages (2 x 3 x 128 x 16 floats = exactly 48 KiB of
// static shared memory; the epilogue's storage shares it). The kernel's Params are built on the device per
// block; a custom swizzle maps blockIdx.x -> N tile, blockIdx.y -> M tile and takes the whole chunk as K.
// Epilogue: LinearCombination with ScaleType::Nothing, D = accumulator, C is never read (ws arrives
// poisoned with NaN in the bench). Two instantiations, chosen per launch like the SIMT kernel's
// float4 paths: 128-bit accesses (alignment 4 floats) when M % 4 == 0, N % 4 == 0 and all four pointers
// are 16-byte aligned, 32-bit accesses (alignment 1) otherwise; CUTLASS's predicated iterators guard the
// M, N and K edges (cp.async zero-fill), so any M, N and rows >= 0 work.
// Bias: blocks with blockIdx.x == 0, threads tid < 128 sum their dz column over the chunk's rows in order
// in double, rounded once: the order and result of the SIMT partial's tiled path, M > 8 (its extra
// terms, zero-filled past the chunk, are +0.0; its M <= 8 path sums per warp and then over warps).
//
// 3xTF32 as CUTLASS does it (4.2.0; cutlass/gemm/warp/mma_tensor_op_fast_f32.h, MmaTensorOpFastF32, and
// cutlass/gemm/threadblock/mma_multistage.h): big = tf32 round_toward_zero(v) (the top 10 mantissa bits,
// exact), small = tf32 round_half_ulp_truncate(v - big); per k8 step three mma.sync into one fragment:
// small_a big_b, then big_a small_b, then big_a big_b (small_a small_b dropped). The multistage mainloop
// stages the accumulation for OpMultiplyAddFastF32 (arch::detail::UseStagedAccumulation): the tensor cores
// accumulate into a temporary fragment for kWarpGemmIterations = 16 / 8 = 2 k8 steps (6 mma.sync, 48
// products), which plus<FragmentC> then adds to the running accumulator with float round-to-nearest adds,
// and clears. So the long sum over a chunk (512 rows at B = 65536, P = 128: 32 such adds) is not the
// tensor cores' running total -- the same cure as aux_weight_grad_partial_tc.cu's zero fragment per 8-row
// slice, here per 16 rows. Truncating `big` leaves small >= 0 relative to v, so the dropped small_a small_b
// has the sign of the product: a mean bias of -5.9e-8 relative per product (numpy, 10^6 standard-normal
// pairs; the hand-written kernel's cvt.rna split: 2e-11). -DAUX_WGRAD_CUTLASS_SPLIT_RN=1 (or the #define below
// set to 1): both parts rounded to nearest instead (cutlass_fast_f32_rn.cuh, as the forwards' _rn builds).
//
// Built here (CUDA 13.0, nvcc V13.0.88; CUTLASS = the nvidia-cutlass 4.2.0.0 wheel's
// cutlass_library/source/include, see benchmarks/gpu_wgrad_split.py's cutlass_include):
//   nvcc -arch=sm_90 -cubin -O3 -std=c++17 -lineinfo -I kernels
//        -isystem $CUTLASS -Xptxas -v -o aux_weight_grad_partial_cutlass.cubin THIS_FILE
//   ptxas: 253 registers (243 for either instantiation alone), 0 bytes stack frame, 0 bytes spill
//   stores / loads, 49152 bytes static smem (the 3-stage operand ring), 1 barrier; 11 bytes gmem (cute's
//   empty customization-point objects, never read). One block per SM (256 x 253 registers).
//   -DAUX_WGRAD_CUTLASS_SPLIT_RN=1 (nvcc 13.0.88, 5 December 2026): 236 registers, 0 spill, 49152 bytes static smem.
//   shipped since 5 December (split RN, staged per k8): 241 registers, 0 spill, 49152 bytes static smem.
// Staged per k8 step (the #define below; cutlass_fast_f32_rn.cuh): shipped since the H200 run of 5 December 2026
// (docs/benchmarks.md 4n), which met issue 18's accuracy clause with it (nb_dW1 at B = 65536: 2.7e-7 staged per
// 16-row iteration, 2.0e-7 per k8 step, against torch fp32's 2.6e-7).
#ifndef AUX_CUTLASS_STAGE_K8
#define AUX_CUTLASS_STAGE_K8 1
#endif
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/gemm.h>
#include <cutlass/gemm/kernel/default_gemm.h>
#include <cutlass/gemm/kernel/gemm.h>

#include "cutlass_fast_f32_rn.cuh"

#ifndef AUX_WGRAD_CUTLASS_SPLIT_RN
#define AUX_WGRAD_CUTLASS_SPLIT_RN 1  // the shipped split: 1 round-to-nearest (as the forwards since 5 Dec), 0 CUTLASS's truncating one
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 128;
constexpr int kStages = 3;

// blockIdx.x -> N tile, blockIdx.y -> M tile; blockIdx.z is the chunk (not a split of K): k offset 0.
struct ChunkTileSwizzle {
    CUTLASS_HOST_DEVICE static int get_log_tile(cutlass::gemm::GemmCoord) { return 0; }
    CUTLASS_DEVICE static cutlass::gemm::GemmCoord get_tile_offset(int) {
        return cutlass::gemm::GemmCoord(int(blockIdx.y), int(blockIdx.x), 0);
    }
};

template <int kAlign>
using DefaultGemmOf = typename cutlass::gemm::kernel::DefaultGemm<
    float, cutlass::layout::ColumnMajor, kAlign,  // A = dz^T: (m, k) at dz[k * M + m]
    float, cutlass::layout::RowMajor, kAlign,     // B = x:    (k, n) at x[k * N + n]
    float, cutlass::layout::RowMajor,             // C = D = ws[p]
    float,                                        // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<kTile, kTile, 16>,   // threadblock
    cutlass::gemm::GemmShape<64, 32, 16>,         // warp: 2 x 4 warps
    cutlass::gemm::GemmShape<16, 8, 8>,           // mma.sync.m16n8k8 tf32
    cutlass::epilogue::thread::LinearCombination<float, kAlign, float, float,
                                                 cutlass::epilogue::thread::ScaleType::Nothing>,
    ChunkTileSwizzle, kStages, /*SplitKSerial=*/false, cutlass::arch::OpMultiplyAddFastF32>::GemmKernel;

template <int kAlign>
using GemmOf = typename cutlass::platform::conditional<
    AUX_WGRAD_CUTLASS_SPLIT_RN != 0,
    typename cutlass_fast_f32_rn::WithRoundToNearestSplit<DefaultGemmOf<kAlign>, ChunkTileSwizzle>::Kernel,
    DefaultGemmOf<kAlign>>::type;

using GemmVec = GemmOf<4>;
using GemmScalar = GemmOf<1>;

static_assert(GemmVec::kThreadCount == kThreads && GemmScalar::kThreadCount == kThreads, "8 warps per block");
static_assert(GemmVec::Mma::Shape::kM == kTile && GemmVec::Mma::Shape::kN == kTile, "the launch's 128 x 128 tiles");
static_assert(GemmVec::Epilogue::OutputOp::kScale == cutlass::epilogue::thread::ScaleType::Nothing,
              "D = accumulator; C is never read");

union Smem {
    typename GemmVec::SharedStorage vec;
    typename GemmScalar::SharedStorage scalar;
};
static_assert(sizeof(Smem) <= 48 * 1024, "static shared memory: at most 48 KiB");

template <typename Gemm>
__device__ __forceinline__ void run_tile(typename Gemm::SharedStorage& smem, const float* dzp, const float* xp, float* out,
                                         int rows, int M, int N) {
    using Layout = typename Gemm::Epilogue::OutputTileIterator::Layout;
    const cutlass::gemm::GemmCoord problem(M, N, rows);
    const cutlass::gemm::GemmCoord tiles((M + kTile - 1) / kTile, (N + kTile - 1) / kTile, 1);
    typename Gemm::Params params(problem, tiles,
                                 {const_cast<float*>(dzp), cutlass::layout::ColumnMajor(M)},
                                 {const_cast<float*>(xp), cutlass::layout::RowMajor(N)},
                                 {out, Layout(N)}, {out, Layout(N)});
    Gemm op;
    op(params, smem);
}

__device__ __forceinline__ bool al16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
aux_weight_grad_partial_cutlass(const float* __restrict__ dz, const float* __restrict__ x, float* __restrict__ ws,
                                float* __restrict__ wsb, int B, int M, int N, int P) {
    __shared__ Smem smem;
    const int p = blockIdx.z;
    const int b0 = (int)((long long)B * p / P);
    const int rows = (int)((long long)B * (p + 1) / P) - b0;
    const float* dzp = dz + (size_t)b0 * M;
    const float* xp = x + (size_t)b0 * N;
    float* out = ws + (size_t)p * M * N;
    if (rows == 0) {  // an empty chunk (B < P): its tile is zero, and no copy is issued
        const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
        for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
            const int m = m0 + i / kTile, n = n0 + i % kTile;
            if (m < M && n < N) out[(size_t)m * N + n] = 0.0f;
        }
    } else if (M % 4 == 0 && N % 4 == 0 && al16(dz) && al16(x) && al16(ws)) {
        run_tile<GemmVec>(smem.vec, dzp, xp, out, rows, M, N);
    } else {
        run_tile<GemmScalar>(smem.scalar, dzp, xp, out, rows, M, N);
    }
    const int m = blockIdx.y * kTile + threadIdx.x;
    if (blockIdx.x == 0 && threadIdx.x < kTile && m < M) {
        double bsum = 0.0;
        for (int b = 0; b < rows; ++b) bsum += __ldg(dzp + (size_t)b * M + m);
        wsb[(size_t)p * M + m] = (float)bsum;
    }
}
