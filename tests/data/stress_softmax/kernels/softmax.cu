// probs[b, k] = exp(logits[b, k] - max_j logits[b, j]) / sum_j exp(logits[b, j] - max_j logits[b, j])
// logits, probs: [B, K] f32. Launch: grid = ceil_div(B, 128), block = 128 (one thread a row).
// The stress fixture of issue 16: buggy/softmax_nomax.cu is this kernel without the max subtraction.

extern "C" __global__ void stress_softmax(const float* __restrict__ logits, float* __restrict__ probs, int B, int K) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float* row = logits + (size_t)b * K;
    float m = -INFINITY;
    for (int k = 0; k < K; ++k) m = fmaxf(m, row[k]);
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += expf(row[k] - m);
    for (int k = 0; k < K; ++k) probs[(size_t)b * K + k] = expf(row[k] - m) / s;
}
