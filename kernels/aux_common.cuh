// Shared device helpers of the aux-heads kernels: activations, guards, deterministic block reductions.
//
// Everything here is header-only, inline and free of global state, so every kernel file stays
// self-contained after `#include`.
#pragma once

#include <stdint.h>

#include "isv_layout.cuh"

// Labels of the trade-outcome head at or above this many classes are not supported: per-row class
// vectors live in registers / static shared memory. Kernels receiving K outside [1, AUX_K_MAX]
// write quiet NaN to their float outputs so the misuse is loud, never silent.
#define AUX_K_MAX 8

// Lower bound of the next-bar label scale: labels are divided by max(isv[slot], AUX_LABEL_SCALE_FLOOR).
#define AUX_LABEL_SCALE_FLOOR 1e-6f

// Value written where a kernel cannot produce a meaningful result (bad slot index, unsupported K).
__device__ __forceinline__ float aux_nan() { return __int_as_float(0x7fc00000); }

// ELU(z) = z for z > 0, exp(z) - 1 otherwise.
__device__ __forceinline__ float elu(float z) { return z > 0.0f ? z : expm1f(z); }

// ELU'(z) recovered from the post-activation value h = ELU(z): 1 where h > 0, else exp(z) = 1 + h.
__device__ __forceinline__ float elu_grad_from_output(float h) { return h > 0.0f ? 1.0f : 1.0f + h; }

// A slot index received at run time (graph-capture-stable ISV pointer + index) is only trusted in range.
__device__ __forceinline__ bool isv_slot_ok(int slot) { return slot >= 0 && slot < ISV_TOTAL_DIM; }

// Next-bar label scale max(isv[slot], floor); NaN in isv[slot] propagates (as numpy.maximum does),
// and an out-of-range slot yields NaN so every dependent output is visibly poisoned.
__device__ __forceinline__ float aux_label_scale(const float* isv, int slot) {
    if (!isv_slot_ok(slot)) return aux_nan();
    const float v = isv[slot];
    return v < AUX_LABEL_SCALE_FLOOR ? AUX_LABEL_SCALE_FLOOR : v;
}

// True when `p` may be accessed as float4 (16-byte aligned).
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Deterministic block-wide sum: every thread passes its value; the fixed-shape tree over `scratch`
// (at least blockDim.x doubles) gives the same bits for the same inputs and launch shape.
// Works for any blockDim.x <= 1024. All threads of the block must call it; all receive the sum.
__device__ __forceinline__ double block_sum_f64(double v, double* scratch) {
    const int tid = threadIdx.x;
    const int n = blockDim.x;
    scratch[tid] = v;
    __syncthreads();
    int half = 1;
    while (half < n) half <<= 1;
    for (half >>= 1; half > 0; half >>= 1) {
        if (tid < half && tid + half < n) scratch[tid] += scratch[tid + half];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();  // scratch may be reused right after
    return total;
}

// Same tree for integer counts.
__device__ __forceinline__ int block_sum_i32(int v, int* scratch) {
    const int tid = threadIdx.x;
    const int n = blockDim.x;
    scratch[tid] = v;
    __syncthreads();
    int half = 1;
    while (half < n) half <<= 1;
    for (half >>= 1; half > 0; half >>= 1) {
        if (tid < half && tid + half < n) scratch[tid] += scratch[tid + half];
        __syncthreads();
    }
    const int total = scratch[0];
    __syncthreads();
    return total;
}

// Block-cooperative fill of p[0 .. n) with v: float4 stores when p is 16-byte aligned, scalar tail.
__device__ __forceinline__ void block_fill(float* __restrict__ p, long long n, float v) {
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    long long done = 0;
    if (n <= 0) return;
    if (aligned16(p)) {
        const long long n4 = n / 4;
        const float4 v4 = make_float4(v, v, v, v);
        float4* p4 = reinterpret_cast<float4*>(p);
        for (long long e = tid; e < n4; e += nt) p4[e] = v4;
        done = n4 * 4;
    }
    for (long long e = done + tid; e < n; e += nt) p[e] = v;
}

// Block-cooperative outer product dst[jj, i] = a[jj] * x[i] for jj < rows, i < cols (dst row stride
// = cols): the per-sample weight partial of one batch row. `a` lives in shared memory, `x` in global.
__device__ __forceinline__ void block_outer_product(float* __restrict__ dst, const float* a, const float* __restrict__ x,
                                                    int rows, int cols) {
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    if (cols % 4 == 0 && aligned16(dst) && aligned16(x)) {
        const int c4 = cols / 4;
        for (int e = tid; e < rows * c4; e += nt) {
            const int jj = e / c4;
            const int i = (e - jj * c4) * 4;
            const float d = a[jj];
            const float4 xv = __ldg(reinterpret_cast<const float4*>(x + i));
            *reinterpret_cast<float4*>(dst + (size_t)jj * cols + i) = make_float4(d * xv.x, d * xv.y, d * xv.z, d * xv.w);
        }
    } else {
        for (int e = tid; e < rows * cols; e += nt) {
            const int jj = e / cols;
            const int i = e - jj * cols;
            dst[(size_t)jj * cols + i] = a[jj] * __ldg(x + i);
        }
    }
}
