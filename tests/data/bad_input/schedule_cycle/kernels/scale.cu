// Fixture kernel for the bad-input corpus.
extern "C" __global__ void scale() {}
