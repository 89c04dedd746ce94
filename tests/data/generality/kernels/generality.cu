// Generality fixture kernels for `wireup verify` (see ../wireup.toml): shapes the shipped chain does not
// use. Each kernel's formula is in its contract (../contracts/gen.toml).
//
//   gen::scale_rows<float, 4>  C++ template in a namespace, explicitly instantiated (a mangled symbol);
//                              int64 count, uint32 width and double factor by value; reads an ISV scale slot
//   clamp_inplace              an in-place (inout) buffer, grid-stride loop
//   row_softmax                dynamic shared memory (the row plus the reduction scratch)
//   masked_scale               optional pointers: mask (NULL = every row valid) and row_norm (NULL = skip)
//   col_sum_atomic             atomicAdd into a `+=` buffer the caller zeroes; nondeterministic order
#include <math.h>
#include <stdint.h>

namespace gen {

template <typename T, int UNROLL>
__global__ void scale_rows(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ isv, int slot,
                           long long n, unsigned int cols, double alpha) {
    const float s = fmaxf(isv[slot], 1e-6f);
    const long long base = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = base + u;
        if (i < n) {
            const float ramp = 1.0f + (float)(unsigned int)(i % cols) / (float)cols;
            y[i] = (T)((float)((double)x[i] * alpha) * ramp / s);
        }
    }
}

template __global__ void scale_rows<float, 4>(const float*, float*, const float*, int, long long, unsigned int, double);

}  // namespace gen

extern "C" __global__ void clamp_inplace(float* __restrict__ v, int n, float lo, float hi) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = fminf(fmaxf(v[i], lo), hi);
}

// blockDim.x must be a power of two; shared = D floats (the row) + blockDim.x floats (scratch).
extern "C" __global__ void row_softmax(const float* __restrict__ x, float* __restrict__ y, int D) {
    extern __shared__ float sh[];
    float* row = sh;
    float* red = sh + D;
    const int t = threadIdx.x;
    const float* xr = x + (size_t)blockIdx.x * D;
    float* yr = y + (size_t)blockIdx.x * D;
    float m = -INFINITY;
    for (int j = t; j < D; j += blockDim.x) {
        row[j] = xr[j];
        m = fmaxf(m, row[j]);
    }
    red[t] = m;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) red[t] = fmaxf(red[t], red[t + h]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float s = 0.0f;
    for (int j = t; j < D; j += blockDim.x) {
        const float e = expf(row[j] - m);
        row[j] = e;
        s += e;
    }
    red[t] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) red[t] += red[t + h];
        __syncthreads();
    }
    s = red[0];
    for (int j = t; j < D; j += blockDim.x) yr[j] = row[j] / s;
}

// One warp per row (blockDim.x == 32).
extern "C" __global__ void masked_scale(const float* __restrict__ x, const int* __restrict__ mask, float* __restrict__ y,
                                        float* __restrict__ row_norm, int B, int D) {
    const int b = blockIdx.x;
    if (b >= B) return;
    const bool valid = mask == nullptr || mask[b] != 0;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        const float v = valid ? 2.0f * x[(size_t)b * D + j] : 0.0f;
        y[(size_t)b * D + j] = v;
        ss += v * v;
    }
    if (row_norm == nullptr) return;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0) row_norm[b] = ss;
}

extern "C" __global__ void col_sum_atomic(const float* __restrict__ x, float* __restrict__ acc, int B, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float s = 0.0f;
    for (int b = blockIdx.y; b < B; b += gridDim.y) s += x[(size_t)b * N + n];
    atomicAdd(acc + n, s);
}
