// The aux trunk forward (contract aux_trunk_forward, contracts/kernels/aux_trunk.toml; issue 18) on Hopper
// tensor cores at fp32 accuracy (3xTF32), built from CUTLASS 2.x device templates (mma.sync m16n8k8 tf32, runs
// on sm_90). It replaced the SIMT kernel aux_trunk_forward of kernels/aux_trunk_kernel.cu (kept there as the
// baseline of benchmarks/gpu_fwd_cutlass.py). Headers: the nvidia-cutlass wheel, through include_packages.
//
//   h_out[b, j] = ELU( sum_i x[b, i] * W[j, i] + b[j] ),   ELU(z) = z > 0 ? z : expm1(z)
//   x [B, E], W [SH2, E], b [SH2], h_out [B, SH2]   (row-major); rows >= B and features >= SH2 never written.
//
// Same parameters and semantics as the SIMT aux_trunk_forward; its own launch geometry (the contract's):
//   tiles_m = ceil_div(B, TBM), tiles_n = ceil_div(SH2, TBN)
//   grid  = (tiles_m * tiles_n, 1, 1)        block x -> row tile x / tiles_n, column tile x % tiles_n
//   block = ((TBM / WM) * (TBN / WN) * 32, 1, 1)
// With the defaults (TBM x TBN x TBK = 128 x 64 x 16, warp tile WM x WN = 64 x 32, 3 stages): block 128,
// grid (ceil_div(B, 128) * ceil_div(SH2, 64), 1, 1), a contract expression. All column tiles of one row tile
// are consecutive blocks, so a row tile of x is read from DRAM about once (at SH2 = 256 this is the mapping of
// CUTLASS's GemmIdentityThreadblockSwizzle<8>, log_tile 2; RowTileColumnsSwizzle below has no log_tile, so
// every tiles_n maps without idle blocks). The tile can be overridden at build time with
// -DAUX_TRUNK_CUTLASS_TBM=... (TBN, TBK, WM, WN, STAGES likewise; the benchmark's geometry must match).
//
// GEMM: A = x row-major (ld E), B = W^T, i.e. W viewed column-major (ld E), D = h_out row-major (ld SH2);
// C = b broadcast along rows (a row-major TensorRef with leading dimension 0), epilogue
// LinearCombinationGeneric<Elu, NoBetaScaling>: D = ELU(1 * acc + C) with fma(1, acc, b) = acc + b rounded
// once, then the same ELU as kernels/aux_common.cuh (expm1f for z <= 0).
// Math: arch::OpMultiplyAddFastF32 (CUTLASS's 3xTF32: a = big + small with big = tf32 round-toward-zero of a,
// small = tf32 half-ulp-truncate of a - big; small*big, big*small, big*big per k8 step in the tensor cores,
// small*small dropped). MmaMultistage uses staged accumulation for this operator: the k8 steps of one
// main-loop iteration (TBK = 16 of K; offset by one step) accumulate into a freshly cleared fragment, which
// is then added to the running sum with ordinary round-to-nearest fp32 adds, so the tensor cores'
// truncating accumulation spans 16 products, not the whole K (static_asserts below: >= 3 stages, since 2
// would select MmaPipelined, which has no staged accumulation).
// -DAUX_TRUNK_CUTLASS_SPLIT_RN=1: the same kernel with both parts rounded to nearest (cvt.rn.tf32.f32),
// cutlass_fast_f32_rn.cuh's WarpMmaFastF32RN: half the residual a - big, so less error from the dropped small*small term.
//
// Alignment: two instantiations, dispatched per launch (block-uniform): 4-float accesses (cp.async 16 B,
// float4 epilogue) when E % 4 == 0, SH2 % 4 == 0 and x, W, b, h_out are 16-byte aligned; 1-float accesses
// otherwise (the contract's verify dims include E = 253 and SH2 = 253). The Params are built on the device
// (their constructors are CUTLASS_HOST_DEVICE), so the kernel keeps a plain C ABI. Shared memory: static, one
// buffer of max(sizeof SharedStorage) over both instantiations (main loop and epilogue share it, a union).
//
// Build (wireup build: -I kernels -isystem of include_packages; benchmarks/gpu_fwd_cutlass.py): nvcc -arch=sm_90 -cubin -O3 -std=c++17 -lineinfo -Xptxas -v
//   -I kernels -isystem <site-packages>/cutlass_library/source/include   (pip install --no-deps nvidia-cutlass==4.2.0.0)
// ptxas (nvcc 13.0.88 on the CPU machine, sm_90; both alignments in one entry), 4 December 2026:
//   default (128x64x16, warps 64x32, 3 stages):  239 registers, 0 bytes spill, 36864 bytes static smem
//   the same with -DAUX_TRUNK_CUTLASS_SPLIT_RN=1: 236 registers, 0 bytes spill, 36864 bytes static smem
//   64x64x16, warps 32x32, 4 stages:               163 registers, 0 bytes spill, 32768 bytes static smem
//   32x64x16, warps 32x32, 4 stages (64 threads):  156 registers, 0 bytes spill, 24576 bytes static smem
//   128x64x16, warps 32x32, 3 stages (256 threads): 157 registers, 0 bytes spill, 36864 bytes static smem
// (the SIMT aux_trunk_forward: 79 registers, 25600 bytes smem, 256 threads). On the H200 (branch ship18, 5 December
// 2026, docs/benchmarks.md 4i): 195 us at B = 65536 against the SIMT kernel's 249; wireup verify passed there.
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/kernel/default_gemm.h"
#include "cutlass/gemm/threadblock/mma_multistage.h"
#include "cutlass/gemm/warp/mma_tensor_op_fast_f32.h"
#include "cutlass/layout/matrix.h"
#include "cutlass_elu.cuh"
#include "cutlass_fast_f32_rn.cuh"  // -DAUX_TRUNK_CUTLASS_SPLIT_RN=1: the round-to-nearest split

#ifndef AUX_TRUNK_CUTLASS_TBM
#define AUX_TRUNK_CUTLASS_TBM 128
#endif
#ifndef AUX_TRUNK_CUTLASS_TBN
#define AUX_TRUNK_CUTLASS_TBN 64
#endif
#ifndef AUX_TRUNK_CUTLASS_TBK
#define AUX_TRUNK_CUTLASS_TBK 16
#endif
#ifndef AUX_TRUNK_CUTLASS_WM
#define AUX_TRUNK_CUTLASS_WM 64
#endif
#ifndef AUX_TRUNK_CUTLASS_WN
#define AUX_TRUNK_CUTLASS_WN 32
#endif
#ifndef AUX_TRUNK_CUTLASS_STAGES
#define AUX_TRUNK_CUTLASS_STAGES 3
#endif
#ifndef AUX_TRUNK_CUTLASS_SPLIT_RN
#define AUX_TRUNK_CUTLASS_SPLIT_RN 1  // the shipped split: 1 round-to-nearest (H200, 5 Dec: the chain's error at B = 65536 6.7e-7 -> 4.0e-7), 0 CUTLASS's truncating one
#endif

namespace aux_trunk_cutlass {

using aux_cutlass::Elu;  // cutlass_elu.cuh

using ThreadblockShape =
    cutlass::gemm::GemmShape<AUX_TRUNK_CUTLASS_TBM, AUX_TRUNK_CUTLASS_TBN, AUX_TRUNK_CUTLASS_TBK>;
using WarpShape = cutlass::gemm::GemmShape<AUX_TRUNK_CUTLASS_WM, AUX_TRUNK_CUTLASS_WN, AUX_TRUNK_CUTLASS_TBK>;
using InstructionShape = cutlass::gemm::GemmShape<16, 8, 8>;
// Block x -> (row tile x / tiles_n, column tile x % tiles_n). CUTLASS's Gemm kernel hands the swizzle back the
// int its Params stored from get_log_tile(); here that int is tiles_n (not a log), so the grid is one row of
// tiles_m * tiles_n blocks with no idle ones, and the contract states it as ceil_div(B, TBM) * ceil_div(SH2, TBN).
struct RowTileColumnsSwizzle {
    CUTLASS_HOST_DEVICE static cutlass::gemm::GemmCoord get_tiled_shape(cutlass::gemm::GemmCoord problem,
                                                                          cutlass::gemm::GemmCoord tile, int) {
        return {(problem.m() + tile.m() - 1) / tile.m(), (problem.n() + tile.n() - 1) / tile.n(), 1};
    }
    CUTLASS_HOST_DEVICE static int get_log_tile(cutlass::gemm::GemmCoord tiled) { return tiled.n(); }
    CUTLASS_DEVICE static cutlass::gemm::GemmCoord get_tile_offset(int tiles_n) {
        return {int(blockIdx.x) / tiles_n, int(blockIdx.x) % tiles_n, 0};
    }
};
using Swizzle = RowTileColumnsSwizzle;
constexpr int kStages = AUX_TRUNK_CUTLASS_STAGES;

template <int Align>
using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<
    Elu, float, Align, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling,
    cutlass::FloatRoundStyle::round_to_nearest, /*IsHeavy=*/true>;

template <int Align>
using DefaultKernel = typename cutlass::gemm::kernel::DefaultGemm<
    float, cutlass::layout::RowMajor, Align,     // A = x [B, E]
    float, cutlass::layout::ColumnMajor, Align,  // B = W^T: element (k, n) at W[n * E + k]
    float, cutlass::layout::RowMajor,            // C (= b broadcast) and D = h_out [B, SH2]
    float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,
    EpilogueOp<Align>, Swizzle, kStages, /*SplitKSerial=*/false, cutlass::arch::OpMultiplyAddFastF32>::GemmKernel;

template <int Align>
using GemmKernel = typename cutlass::platform::conditional<AUX_TRUNK_CUTLASS_SPLIT_RN != 0,
                                                           typename cutlass_fast_f32_rn::WithRoundToNearestSplit<DefaultKernel<Align>, Swizzle>::Kernel,
                                                           DefaultKernel<Align>>::type;

using Pair = cutlass_fast_f32_rn::AlignedPair<GemmKernel<4>, GemmKernel<1>>;  // block size, smem, staged accumulation
using KernelVec = Pair::Vec;
using KernelScalar = Pair::Scalar;

constexpr int kThreads = Pair::kThreads;
static_assert(kThreads == (AUX_TRUNK_CUTLASS_TBM / AUX_TRUNK_CUTLASS_WM) * (AUX_TRUNK_CUTLASS_TBN / AUX_TRUNK_CUTLASS_WN) * 32,
              "block = one warp per warp tile (the benchmark's geometry assumes it)");
constexpr size_t kSmemBytes = Pair::kSmemBytes;
static_assert(kSmemBytes <= 48 * 1024, "static shared memory must stay within 48 KB (no dynamic shared memory)");

template <typename Kernel>
__device__ __forceinline__ void run(const float* x, const float* W, const float* b, float* h_out, int B, int E, int SH2,
                                    unsigned char* smem) {
    const cutlass::gemm::GemmCoord problem(B, SH2, E);
    const cutlass::gemm::GemmCoord tiled = Swizzle::get_tiled_shape(problem, {ThreadblockShape::kM, ThreadblockShape::kN, ThreadblockShape::kK}, 1);
    typename Kernel::Params params(
        problem, tiled,
        {const_cast<float*>(x), cutlass::layout::RowMajor(E)},
        {const_cast<float*>(W), cutlass::layout::ColumnMajor(E)},
        {const_cast<float*>(b), cutlass::layout::RowMajor(0)},  // leading dimension 0: every row reads b
        {h_out, cutlass::layout::RowMajor(SH2)},
        typename Kernel::OutputOp::Params(1.0f, 0.0f));
    Kernel op;
    op(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace aux_trunk_cutlass

extern "C" __global__ void __launch_bounds__(aux_trunk_cutlass::kThreads)
aux_trunk_forward_cutlass(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ b,
                          float* __restrict__ h_out, int B, int E, int SH2) {
    using namespace aux_trunk_cutlass;
    __shared__ __align__(128) unsigned char smem[kSmemBytes];
    if (B <= 0 || SH2 <= 0) return;
    const bool vec = (E % 4 == 0) && (SH2 % 4 == 0) && aligned16(x) && aligned16(W) && aligned16(b) && aligned16(h_out);
    if (vec)
        run<KernelVec>(x, W, b, h_out, B, E, SH2, smem);
    else
        run<KernelScalar>(x, W, b, h_out, B, E, SH2, smem);
}
