// Fixture: a broken replacement for kernels/scale_template.cu (source_overrides), error on line 6.
namespace fixture {

template <typename T>
__global__ void scale(T* __restrict__ x, T a, int n) {
    x[threadIdx.x] *= a + missing_offset;
}

template __global__ void scale<float>(float*, float, int);

}  // namespace fixture
