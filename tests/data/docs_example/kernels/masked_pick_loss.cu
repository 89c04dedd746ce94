// loss = mean over rows with labels[b] != -1 of y[b, labels[b]]; isv[ema_slot] blends it at 0.1.
// One block of 256 threads; shared-memory tree reduction.
extern "C" __global__ void masked_pick_loss(const float* __restrict__ y, const int* __restrict__ labels,
                                            float* __restrict__ loss, float* __restrict__ isv,
                                            int ema_slot, int B, int D) {
    __shared__ float s_sum[256];
    __shared__ int s_cnt[256];
    float sum = 0.f;
    int cnt = 0;
    for (int b = threadIdx.x; b < B; b += blockDim.x) {
        int l = labels[b];
        if (l == -1) continue;
        sum += y[(long long)b * D + l];
        cnt += 1;
    }
    s_sum[threadIdx.x] = sum;
    s_cnt[threadIdx.x] = cnt;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + s];
            s_cnt[threadIdx.x] += s_cnt[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float l = s_cnt[0] > 0 ? s_sum[0] / s_cnt[0] : 0.f;
        loss[0] = l;
        isv[ema_slot] = 0.9f * isv[ema_slot] + 0.1f * l;
    }
}
