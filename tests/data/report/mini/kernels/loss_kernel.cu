// loss = mean over labelled rows of sum(h[b]) * label[b] / isv[scale_slot]; one block of 256.
extern "C" __global__ void loss(const float* __restrict__ h, const int* __restrict__ labels, float* __restrict__ loss,
                                float* __restrict__ isv, int scale_slot, int ema_slot, int B, int N) {
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    int n = 0;
    for (int b = 0; b < B; ++b) {
        if (labels[b] == -1) continue;
        float row = 0.0f;
        for (int j = 0; j < N; ++j) row += h[b * N + j];
        sum += row * labels[b];
        ++n;
    }
    const float value = n ? sum / (n * fmaxf(isv[scale_slot], 1e-6f)) : 0.0f;
    loss[0] = value;
    isv[ema_slot] = 0.95f * isv[ema_slot] + 0.05f * value;
}
