// Fixture for STORE_RACE: two kernels that blend one slot of a small state vector (an ISV stand-in).
//   state[slot] = (1 - alpha) * state[slot] + alpha * value[0]
//   Launch: grid = (1, 1, 1), block = (32, 1, 1).
// ema_one_thread lets thread 0 do it; ema_every_lane lets all 32 lanes read, blend and store the same
// slot: a write race that no run shows (the lanes store the same value).
extern "C" __global__ void ema_one_thread(float* __restrict__ state, const float* __restrict__ value, int slot, float alpha) {
    if (threadIdx.x != 0) return;
    state[slot] = (1.0f - alpha) * state[slot] + alpha * value[0];
}

extern "C" __global__ void ema_every_lane(float* __restrict__ state, const float* __restrict__ value, int slot, float alpha) {
    state[slot] = (1.0f - alpha) * state[slot] + alpha * value[0];
}
