// ELU as a CUTLASS epilogue activation (LinearCombinationGeneric), for the trunk and head forwards on tensor
// cores (aux_trunk_forward_cutlass.cu, aux_head_forward_cutlass.cu; issue 18): kernels/aux_common.cuh's elu(), z > 0 ? z : expm1f(z) (NaN -> expm1f(NaN) = NaN),
// written with expm1f directly because CUTLASS's functors are host-device and aux_common.cuh's elu() is
// device-only. Needs the CUTLASS 2.x headers (nvidia-cutlass 4.2.0.0 wheel, cutlass_library/source/include).
#pragma once

#include "cutlass/array.h"
#include "cutlass/cutlass.h"

namespace aux_cutlass {

template <typename T>
struct Elu {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE T operator()(T const& z) const { return z > T(0) ? z : T(expm1f(z)); }
};

template <typename T, int N>
struct Elu<cutlass::Array<T, N>> {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& frag) const {
        cutlass::Array<T, N> out;
        Elu<T> elu;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i) out[i] = elu(frag[i]);
        return out;
    }
};

}  // namespace aux_cutlass
