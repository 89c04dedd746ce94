// Fixture: does not compile (COMPILE_ERROR points at line 7).
//   x[i] = 2 x[i],  i < n.
extern "C" __global__ void broken(float* __restrict__ x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    x[i] = scale_factor * x[i];
}
