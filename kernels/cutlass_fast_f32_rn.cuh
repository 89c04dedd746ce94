// CUTLASS's 3xTF32 main loop with the fp32 operands split into tf32 big + small parts by round-to-nearest
// (cvt.rn.tf32.f32 on sm_90) instead of CUTLASS's round-toward-zero big / half-ulp-truncate small (issue 18;
// on in the shipped builds since 5 December, each source's SPLIT_RN #define). The residual a - big is at most half a tf32 ulp instead of a
// whole one, so the dropped small*small term and the rounding of small are about 2 and 4 times smaller, and
// the dropped term loses the sign bias of the truncating split. Everything else (fragments, the three MMAs in
// the same order, staged accumulation: MathOperator stays OpMultiplyAddFastF32) is CUTLASS's; only the warp
// MMA's transform() is hidden.
//
// AUX_CUTLASS_STAGE_K8 (default 0; a source sets it before including this header): 1 also stages the
// accumulation per k8 step instead of per main-loop iteration. The warp MMA then runs each k8 step's three
// MMAs into a cleared fragment and adds that to the running sum with round-to-nearest fp32 adds, so the tensor
// cores' truncating accumulation spans one 8-term product sum, never a sum carried over k8 steps (CUTLASS's
// MmaMultistage stages per iteration: TBK = 16, two k8 steps; TBK = 8 is refused by its static_asserts). On
// the chain's data at B = 65536, a CPU model (benchmarks/tc_error_model.py: each MMA's exact sum rounded toward
// zero) puts the wide partials' error at or under the SIMT kernel's with it (nb_dW1 5.1e-8, aux_trunk_dW 6.9e-8
// against SIMT 5.2e-8 and 1.1e-7; 1.05e-7 and 1.2e-7 staged per iteration). The price is one fp32 add per
// accumulator element and k8 step. Off in the shipped builds until the H200 has timed it and measured its
// error (benchmarks/kernels_baseline/*_k8.cu, tests/gpu/issue18_ship.sh step K; docs/benchmarks.md 4m).
//
// Used by aux_trunk_forward_cutlass.cu and aux_head_forward_cutlass.cu (-D..._SPLIT_RN=1), which also take
// AlignedPair below for their two alignment instantiations, by aux_weight_grad_partial_cutlass.cu
// (-DAUX_WGRAD_CUTLASS_SPLIT_RN=1) and by the next-bar backward candidate in benchmarks/kernels_baseline.
// Needs the CUTLASS 2.x headers (nvidia-cutlass 4.2.0.0 wheel, cutlass_library/source/include).
#pragma once

#include "cutlass/cutlass.h"
#include "cutlass/gemm/kernel/gemm.h"
#include "cutlass/gemm/threadblock/mma_multistage.h"
#include "cutlass/gemm/warp/mma_tensor_op_fast_f32.h"
#include "cutlass/functional.h"

#ifndef AUX_CUTLASS_STAGE_K8
#define AUX_CUTLASS_STAGE_K8 0
#endif

namespace cutlass_fast_f32_rn {

template <typename WarpMma>
struct WarpMmaFastF32RN : WarpMma {
    using typename WarpMma::FragmentA;
    using typename WarpMma::FragmentB;
    using typename WarpMma::TransformedFragmentA;
    using typename WarpMma::TransformedFragmentB;
    using typename WarpMma::FragmentC;
    using ElementTF32 = typename WarpMma::ArchMmaOperator::ElementA;
    static_assert(cutlass::platform::is_same<typename WarpMma::MathOperator, cutlass::arch::OpMultiplyAddFastF32>::value,
                  "the 3xTF32 warp MMA");

    CUTLASS_DEVICE
    void transform(TransformedFragmentA& dst_A, TransformedFragmentB& dst_B, FragmentA const& A, FragmentB const& B) const {
        // the base class's transform() with both parts rounded to nearest (same fragment permutation)
        cutlass::gemm::warp::detail::ConvertAndPackAccurateF32<FragmentA::kElements / 2, cutlass::FloatRoundStyle::round_to_nearest,
                                                               cutlass::FloatRoundStyle::round_to_nearest> convert_A;
        cutlass::gemm::warp::detail::ConvertAndPackAccurateF32<FragmentB::kElements, cutlass::FloatRoundStyle::round_to_nearest,
                                                               cutlass::FloatRoundStyle::round_to_nearest> convert_B;
        auto* ptr_dst_B = reinterpret_cast<cutlass::Array<ElementTF32, FragmentB::kElements>*>(&dst_B);
        convert_B(B, ptr_dst_B[0], ptr_dst_B[1]);
        auto* ptr_dst_A = reinterpret_cast<cutlass::Array<ElementTF32, FragmentA::kElements / 2>*>(&dst_A);
        auto const* ptr_A = reinterpret_cast<cutlass::Array<float, FragmentA::kElements / 2> const*>(&A);
        convert_A(ptr_A[0], ptr_dst_A[0], ptr_dst_A[2]);
        convert_A(ptr_A[1], ptr_dst_A[1], ptr_dst_A[3]);
    }

#if AUX_CUTLASS_STAGE_K8
    // Not OpMultiplyAddFastF32 towards the main loop, so that MmaMultistage does not stage per iteration on
    // top (it would keep a third accumulator fragment live: 255 registers and spills); this operator stages.
    using MathOperator = cutlass::arch::OpMultiplyAdd;
    static constexpr bool kStagesPerK8 = true;

    // one k8 step: the base class's three MMAs into a cleared fragment, then D = C + that, rounded to nearest
    CUTLASS_DEVICE
    void operator()(FragmentC& D, TransformedFragmentA const& A, TransformedFragmentB const& B, FragmentC const& C) const {
        FragmentC step;
        step.clear();
        WarpMma::operator()(step, A, B, step);
        cutlass::plus<FragmentC> add;
        D = add(C, step);
    }
#else
    static constexpr bool kStagesPerK8 = false;
#endif
};

// A DefaultGemm<...>::GemmKernel's main loop with WarpMmaFastF32RN as its warp MMA (same iterators, stages,
// epilogue and shared memory), under the threadblock swizzle Swizzle.
template <typename Default, typename Swizzle>
struct WithRoundToNearestSplit {
    using M = typename Default::Mma;
    using P = typename M::Policy;
    using Policy = cutlass::gemm::threadblock::MmaPolicy<WarpMmaFastF32RN<typename P::Operator>, typename P::SmemPaddingA,
                                                         typename P::SmemPaddingB, P::kPartitionsK>;
    using Mma = cutlass::gemm::threadblock::MmaMultistage<typename M::Shape, typename M::IteratorA, typename M::SmemIteratorA, M::kCacheOpA,
                                                          typename M::IteratorB, typename M::SmemIteratorB, M::kCacheOpB,
                                                          typename M::ElementC, typename M::LayoutC, Policy, M::kStages>;
    using Kernel = cutlass::gemm::kernel::Gemm<Mma, typename Default::Epilogue, Swizzle, /*SplitKSerial=*/false>;
    static_assert(sizeof(typename Kernel::SharedStorage) == sizeof(typename Default::SharedStorage), "same shared memory");
};

// Whether a warp MMA is WarpMmaFastF32RN staging per k8 step (AUX_CUTLASS_STAGE_K8).
template <typename Op, typename = void>
struct StagesPerK8 : cutlass::platform::false_type {};
template <typename Op>
struct StagesPerK8<Op, decltype(void(Op::kStagesPerK8))> : cutlass::platform::integral_constant<bool, Op::kStagesPerK8> {};

// The two alignment instantiations of one 3xTF32 kernel (16-byte and scalar accesses, dispatched per
// launch) and what both must hold: one block size, static shared memory for the larger, and the staged
// accumulation their accuracy rests on. Two stages would select MmaPipelined, which has no staged
// accumulation (the whole K would accumulate in the tensor cores' truncating adds); MmaMultistage
// (>= 3 stages) is the one with it.
template <typename Vec_, typename Scalar_>
struct AlignedPair {
    using Vec = Vec_;
    using Scalar = Scalar_;
    static constexpr int kThreads = Vec::kThreadCount;
    static constexpr size_t kSmemBytes = sizeof(typename Vec::SharedStorage) > sizeof(typename Scalar::SharedStorage)
                                             ? sizeof(typename Vec::SharedStorage)
                                             : sizeof(typename Scalar::SharedStorage);
    static_assert(Scalar::kThreadCount == kThreads, "one block size for both alignments");
    static_assert(Vec::Mma::kStages >= 3 && Scalar::Mma::kStages >= 3, "3xTF32 needs MmaMultistage: >= 3 stages");
    template <typename Mma>
    static constexpr bool kStaged = cutlass::arch::detail::UseStagedAccumulation<typename Mma::Operator>::value ||
                                    StagesPerK8<typename Mma::Operator>::value;
    static_assert(kStaged<typename Vec::Mma> && kStaged<typename Scalar::Mma>,
                  "staged accumulation (each main-loop iteration, or each k8 step, summed apart, then added with round-to-nearest)");
};

}  // namespace cutlass_fast_f32_rn
