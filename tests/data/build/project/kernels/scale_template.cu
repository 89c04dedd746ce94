// Fixture: a templated C++ kernel (no extern "C"), instantiated explicitly for float only.
//   x[i] *= a,  i < n.   Launch: grid = (ceil_div(n, 256), 1, 1), block = (256, 1, 1).
namespace fixture {

template <typename T>
__global__ void scale(T* __restrict__ x, T a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

template __global__ void scale<float>(float*, float, int);

}  // namespace fixture
