// Fixture for LOCAL_ARRAY_BOUNDS (the loading loop runs one quad too far: v[kQuads] is written): sums |x| over float4 quads, kQuads quads in flight per thread.
//   out[t] = sum over the quads t, t + nt, ... of |x|.   Launch: grid = (1, 1, 1), block = (64, 1, 1).
constexpr int kQuads = 4;

extern "C" __global__ void quads_overrun(const float4* __restrict__ x, float* __restrict__ out, int nq) {
    const int t = threadIdx.x, nt = blockDim.x;
    float4 v[kQuads];
#pragma unroll
    for (int u = 0; u <= kQuads; ++u) {
        const int q = t + u * nt;
        v[u] = q < nq ? x[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < kQuads; ++u) s += fabsf(v[u].x) + fabsf(v[u].y) + fabsf(v[u].z) + fabsf(v[u].w);
    out[t] = s;
}
