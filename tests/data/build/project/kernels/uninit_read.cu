// Fixture for LOCAL_UNINIT_READ: a softmax over K <= kMax classes per row, the logits held in a local array.
//   p[r, k] = exp(z[r, k] - max_k z[r, k]) / sum_k exp(...), k < K.   Launch: grid = (1, 1, 1), block = (64, 1, 1).
constexpr int kMax = 8;

extern "C" __global__ void uninit_read(const float* __restrict__ z, float* __restrict__ p, int rows, int K) {
    const int r = threadIdx.x;
    if (r >= rows) return;
    float l[kMax];
    float m = -3.402823466e38f;
#pragma unroll
    for (int k = 0; k < kMax; ++k)
        if (k < K) { l[k] = z[r * K + k]; m = fmaxf(m, l[k]); }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kMax; ++k)
        if (k < K) { l[k] = expf(l[k] - m); s += l[k]; }
#pragma unroll
    for (int k = 0; k < kMax; ++k)
        if (k <= K) p[r * K + k] = l[k] / s;
}
