// One SGD step with weight decay: param[i] <- param[i] - lr * (grad[i] + wd * param[i])
// param: [n] f32 (inout), grad: [n] f32; lr, wd: f32 scalars; n = N.
// Launch: grid = ceil_div(n, 256), block = 256 (one thread per parameter).
//
// sgd_step_no_decay is the fixture's bug, on purpose (issue 16 item 4): it drops the wd * param term.
// With lr = 1e-4 and wd = 1e-2 that term moves each parameter by about 1e-6 relative, inside the
// whole-buffer tolerance; the change out - in is off by 1 % and VERIFY_INOUT_DELTA catches it.

extern "C" __global__ void sgd_step(float* __restrict__ param, const float* __restrict__ grad, float lr, float wd, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float p = param[i];
    param[i] = p - lr * (grad[i] + wd * p);
}

extern "C" __global__ void sgd_step_no_decay(float* __restrict__ param, const float* __restrict__ grad, float lr, float wd, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    (void)wd;
    param[i] = param[i] - lr * grad[i];
}
