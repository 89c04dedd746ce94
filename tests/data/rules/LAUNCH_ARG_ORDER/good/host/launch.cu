// Host side of the fixture chain's gradient reduction, launched from C++.
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

void reduce_partials(const float* partial, float* grad, int rows, int n, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(n, 256), std::min(CEIL_DIV(rows, 64), 256));
    reduce<<<grid, 256, 256 * sizeof(float), stream>>>(partial, grad, rows, n);
}
