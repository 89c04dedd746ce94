// The stress fixture's bug, on purpose (issue 16 item 2): softmax without subtracting the row max.
// Right for every logit below ~88.7; past it expf overflows to inf and inf / inf is NaN.
// tests/gpu/test_stress_gpu.py copies this over kernels/softmax.cu.

extern "C" __global__ void stress_softmax(const float* __restrict__ logits, float* __restrict__ probs, int B, int K) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float* row = logits + (size_t)b * K;
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += expf(row[k]);
    for (int k = 0; k < K; ++k) probs[(size_t)b * K + k] = expf(row[k]) / s;
}
