// Fixture kernels for the build, layout and launcher rule tests: real signatures, small bodies.
#include "isv_layout.cuh"

extern "C" __global__ void make_label(const float* __restrict__ y, float* __restrict__ label, float* isv,
                                      int slot, int B, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B) label[i] = y[i] / isv[slot];
    if (blockIdx.x == 0 && threadIdx.x == 0) isv[slot] = (1.0f - alpha) * isv[slot] + alpha;
}

extern "C" __global__ void forward(const float* __restrict__ x, const float* __restrict__ W,
                                   const float* __restrict__ b, float* __restrict__ h_out, int B, int D, int H) {
    // 32 inputs of the row stay live in registers across every output column
    int r = blockIdx.x * 64 + threadIdx.x / 2;
    if (r >= B) return;
    float v[32];
#pragma unroll
    for (int k = 0; k < 32; ++k) v[k] = x[r * D + k % D];
    for (int j = threadIdx.x % 2; j < H; j += 2) {
        float acc = b ? b[j] : 0.0f;  // no bias: NULL
#pragma unroll
        for (int k = 0; k < 32; ++k) acc = fmaf(v[k], W[j * D + k % D], acc);
        h_out[r * H + j] = tanhf(acc);
    }
}

extern "C" __global__ void loss(const float* __restrict__ h, const float* __restrict__ label, float* isv,
                                int scale_slot, int ema_slot, float* __restrict__ loss, float* __restrict__ dh,
                                int B, int H) {
    // the first row's first (up to four) activations weigh the squared errors of each row
    float w[4];
    for (int q = 0; q < 4; ++q)
        if (q < H) w[q] = h[q];
    float wsum = 1.0f;
    for (int q = 0; q < 4; ++q)
        if (q < H) wsum += fabsf(w[q]);
    float s = 0.0f;
    for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
        float d = h[i] - label[i / H] / isv[scale_slot];
        dh[i] = d / wsum;
        s += d * d / wsum;
    }
    atomicAdd(loss, s);
    if (threadIdx.x == 0) isv[ema_slot] = 0.9f * isv[ema_slot] + 0.1f * s;
}

extern "C" __global__ void backward(const float* __restrict__ dh, const float* __restrict__ h,
                                    const float* __restrict__ x, float* __restrict__ dW_partial,
                                    float* __restrict__ db, int B, int numel) {
    int r = blockIdx.x;
    if (r >= B) return;
    for (int i = threadIdx.x; i < numel / B; i += blockDim.x) {
        if (dW_partial) dW_partial[r * (numel / B) + i] = dh[r] * h[r] * x[r];
    }
    if (threadIdx.x == 0) atomicAdd(db, dh[r]);
}

extern "C" __global__ void reduce(const float* __restrict__ partial, float* __restrict__ grad, int B, int N) {
    extern __shared__ float col[];  // one partial sum per thread (shared_bytes = 4 * blockDim.x)
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    col[threadIdx.x] = 0.0f;
    for (int r = blockIdx.y; r < B; r += gridDim.y) col[threadIdx.x] += partial[r * N + j];
    atomicAdd(grad + j, col[threadIdx.x]);
}

extern "C" __global__ void weight_reduce(const float* __restrict__ dz, const float* __restrict__ x,
                                         float* __restrict__ dW, int B, int M, int N) {
    int n = blockIdx.x * 64 + threadIdx.x % 64;
    int m = blockIdx.y * 64 + threadIdx.x / 64;
    for (; m < M && n < N; m += 4) {
        float acc = 0.0f;
        for (int r = 0; r < B; ++r) acc += dz[r * M + m] * x[r * N + n];
        dW[m * N + n] = acc;
    }
}
