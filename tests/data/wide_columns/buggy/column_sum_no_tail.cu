// The fixture's column sum without its remainder loop: the last rows % 4 rows are dropped (a bug, on
// purpose). At B = 1027 the float64 reference runs on sampled columns only, and that sample catches it.

extern "C" __global__ void column_sum(const float* __restrict__ x, float* __restrict__ colsum, int rows, int cols) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= cols) return;
    const float* col = x + v;
    float acc = 0.0f;
    for (int b = 0; b + 4 <= rows; b += 4) {
        acc += col[(long long)b * cols] + col[(long long)(b + 1) * cols] + col[(long long)(b + 2) * cols] + col[(long long)(b + 3) * cols];
    }
    colsum[v] = acc;
}
