// Fixture: register-hungry kernels for LAUNCH_RESOURCES and REGISTER_SPILLS.
//   out[j, t] = in[j, t] * acc(t), with all L = 48 values of column t live in registers at once.
// "heavy" has no __launch_bounds__, so ptxas may use far more than 64 registers per thread (a 1024-thread
// block cannot launch); "heavy_capped" promises 2 blocks of 1024 threads per SM, so ptxas squeezes the
// same body into 32 registers and spills. "small_block" allows at most 128 threads per block.
#define LIVE 48
#define HEAVY_BODY                                                                                 \
    float v[LIVE];                                                                                 \
    _Pragma("unroll") for (int j = 0; j < LIVE; ++j) v[j] = in[j * n + threadIdx.x];               \
    float acc = 0.0f;                                                                              \
    _Pragma("unroll") for (int j = 0; j < LIVE; ++j) acc = fmaf(acc, v[j], v[(j * 7) % LIVE]);     \
    _Pragma("unroll") for (int j = 0; j < LIVE; ++j) out[j * n + threadIdx.x] = v[j] * acc;

extern "C" __global__ void heavy(const float* __restrict__ in, float* __restrict__ out, int n) {
    HEAVY_BODY
}

extern "C" __global__ void __launch_bounds__(1024, 2)
heavy_capped(const float* __restrict__ in, float* __restrict__ out, int n) {
    HEAVY_BODY
}

extern "C" __global__ void __launch_bounds__(128) small_block(float* __restrict__ x) {
    x[threadIdx.x] += 1.0f;
}
