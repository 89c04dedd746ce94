// kernels/aux_head_forward_cutlass.cu (both head forwards) built with the accumulation staged per k8 step
// (AUX_CUTLASS_STAGE_K8, kernels/cutlass_fast_f32_rn.cuh) and 32 x 32 warp tiles: a file of its own so that
// gpu_chain_vs_torch.py --candidate, which takes a source and an entry and no macros, can launch it
// (tests/gpu/issue18_ship.sh step K). With the shipped 64 x 32 warp tiles the per-k8 fragment spills (255
// registers, 40 bytes; nvcc 13.0.88); with 32 x 32 (8 warps, block = 256 threads; grid unchanged,
// ceil_div(B, 64)) it does not (255 registers, 0 spill). Same entries and parameters as the shipped source.
#define AUX_CUTLASS_STAGE_K8 1
#define AUX_HEAD_CUTLASS_WM 32
#include "../../kernels/aux_head_forward_cutlass.cu"
