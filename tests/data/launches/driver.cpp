// Host code on the driver API: the same three launches as the host functions of kernels.cu.
#include <cuda.h>

void launch_all(CUmodule mod, CUstream stream, CUdeviceptr x, CUdeviceptr y, CUdeviceptr logits, CUdeviceptr p, int n, int c) {
    CUfunction scale, softmax, tile;
    cuModuleGetFunction(&scale, mod, "scale_rows");
    cuModuleGetFunction(&softmax, mod, "row_softmax");
    cuModuleGetFunction(&tile, mod, "tile_sum");
    float alpha = 0.5f;
    void* scale_args[] = {&x, &y, &n, &alpha};
    void* softmax_args[] = {&logits, &p, &n, &c};
    void* tile_args[] = {&logits, &y, &n, &c};
    cuLaunchKernel(scale, (n + 127) / 128, 1, 1, 128, 1, 1, 0, stream, scale_args, nullptr);
    cuLaunchKernel(softmax, n, 1, 1, 256, 1, 1, c * sizeof(float), stream, softmax_args, nullptr);
    cuLaunchKernel(tile, (c + 15) / 16, (n + 15) / 16, 1, 16, 16, 1, 0, stream, tile_args, nullptr);
}
