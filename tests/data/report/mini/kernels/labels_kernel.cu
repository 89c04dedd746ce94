// labels[b] = x[b, 0] > 0 ? 1 : -1; grid [ceil_div(B, 128)], block [128].
extern "C" __global__ void make_labels(const float* __restrict__ x, int* __restrict__ labels, int B, int N) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) labels[b] = x[b * N] > 0.0f ? 1 : -1;
}
