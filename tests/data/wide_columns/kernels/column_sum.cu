// colsum[v] = sum over rows b in [0, rows) of x[b, v]
// x: [rows, cols] f32, colsum: [cols] f32
// Launch: grid = ceil_div(cols, 256), block = 256 (one thread a column, rows four at a time).

extern "C" __global__ void column_sum(const float* __restrict__ x, float* __restrict__ colsum, int rows, int cols) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= cols) return;
    const float* col = x + v;
    float acc = 0.0f;
    int b = 0;
    for (; b + 4 <= rows; b += 4) {
        acc += col[(long long)b * cols] + col[(long long)(b + 1) * cols] + col[(long long)(b + 2) * cols] + col[(long long)(b + 3) * cols];
    }
    for (; b < rows; ++b) acc += col[(long long)b * cols];  // the rows % 4 rows left
    colsum[v] = acc;
}
