// Views, partial writes and aliasing (issue 17 item 4): a training step over one flat weight buffer.
//
// linear:        h[r, j] = b[j] + sum_k x[r, k] W[j, k]; x [B, D], W [H, D] and b [H] are views of "params".
//                Launch: grid = ceil_div(B * H, 128), block = 128 (one thread per output).
// relu_inplace:  y = max(x, 0) with x == y (declared aliased). grid = ceil_div(n, 256), block = 256.
// pad_copy:      logits[r, j] = 2 h[r, j] for j < H; columns H..P-1 of each row are not ours and stay as they
//                were. grid = ceil_div(B * P, 256), block = 256.
// sgd_step:      param[i] -= lr * grad[i] over one view of "params" / "grads". grid = ceil_div(n, 256).
//
// The broken twins, on purpose (the tests swap them in by entry):
// relu_inplace_zero_first   clears y before reading x: right on two buffers, all zeros in place. No
//                           __restrict__: the compiler must reload x after the store, as the bug needs.
// pad_copy_zero_padding     also zeroes the padding columns it must leave alone.
// sgd_step_overrun          runs i <= n: one element past its view (into the next weight, or the guard).

extern "C" __global__ void linear(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ b,
                                  float* __restrict__ h, int B, int D, int H) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * H) return;
    const int r = i / H, j = i % H;
    float acc = b[j];
    for (int k = 0; k < D; ++k) acc += x[r * D + k] * W[j * D + k];
    h[i] = acc;
}

extern "C" __global__ void relu_inplace(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
}

extern "C" __global__ void relu_inplace_zero_first(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = 0.f;
    if (x[i] > 0.f) y[i] = x[i];
}

extern "C" __global__ void pad_copy(const float* __restrict__ h, float* __restrict__ logits, int B, int H, int P) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * P) return;
    const int r = i / P, j = i % P;
    if (j < H) logits[i] = 2.f * h[r * H + j];
}

extern "C" __global__ void pad_copy_zero_padding(const float* __restrict__ h, float* __restrict__ logits, int B, int H, int P) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * P) return;
    const int r = i / P, j = i % P;
    logits[i] = j < H ? 2.f * h[r * H + j] : 0.f;
}

extern "C" __global__ void sgd_step(float* __restrict__ param, const float* __restrict__ grad, float lr, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    param[i] -= lr * grad[i];
}

extern "C" __global__ void sgd_step_overrun(float* __restrict__ param, const float* __restrict__ grad, float lr, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n) return;
    param[i] -= lr * grad[i];
}
