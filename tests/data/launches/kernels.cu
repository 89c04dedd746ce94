// Fixture for the host launch reader and `wireup init`: three kernels, launched by host code in four
// styles (the host functions below, cudarc.rs, cupy_host.py and driver.cpp).
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

extern "C" __global__ void scale_rows(const float* __restrict__ x, float* __restrict__ y, int n, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}

extern "C" __global__ void row_softmax(const float* __restrict__ logits, float* __restrict__ p, int rows, int cols) {
    extern __shared__ float row[];
    int r = blockIdx.x;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] = logits[r * cols + c];
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x) p[r * cols + c] = row[c];
}

extern "C" __global__ void tile_sum(const float* __restrict__ a, float* __restrict__ out, int m, int k) {
    int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
    if (i < m && j < k) atomicAdd(out + j, a[i * k + j]);
}

__global__ void unlisted(float* x) { x[threadIdx.x] = 0.0f; }

void launch_all(const float* x, float* y, const float* logits, float* p, int B, int T, int C, cudaStream_t stream) {
    const int N = B * T;
    const int block_size = 128;
    scale_rows<<<CEIL_DIV(N, block_size), block_size, 0, stream>>>(x, y, N, 0.5f);
    size_t smem = C * sizeof(float);
    row_softmax<<<N, 256, smem, stream>>>(logits, p, N, C);
    dim3 grid((C + 15) / 16, (N + 15) / 16);
    dim3 block(16, 16);
    tile_sum<<<grid, block>>>(logits, y, N, C);
    unlisted<<<1, 32>>>(y);
}
