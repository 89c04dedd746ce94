// h[b, i] = sum_j x[b, j] W[i, j]; grid [B], block [32].
extern "C" __global__ void forward(const float* __restrict__ x, const float* __restrict__ W, float* __restrict__ h, int B, int N) {
    const int b = blockIdx.x;
    for (int i = threadIdx.x; i < N && b < B; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < N; ++j) acc += x[b * N + j] * W[i * N + j];
        h[b * N + i] = acc;
    }
}
