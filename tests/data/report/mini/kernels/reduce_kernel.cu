// grad[m] += sum_b partial[b, m]; grid [ceil_div(M, 256)], block [256].
extern "C" __global__ void reduce(const float* __restrict__ partial, float* __restrict__ grad, int B, int M) {
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float acc = 0.0f;
    for (int b = 0; b < B; ++b) acc += partial[(size_t)b * M + m];
    grad[m] += acc;
}
