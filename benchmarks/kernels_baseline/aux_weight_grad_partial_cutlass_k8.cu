// kernels/aux_weight_grad_partial_cutlass.cu built with the accumulation staged per k8 step (AUX_CUTLASS_STAGE_K8, kernels/cutlass_fast_f32_rn.cuh):
// a file of its own so that gpu_chain_vs_torch.py --candidate, which takes a source and an entry and no macros,
// can launch it (tests/gpu/issue18_ship.sh step K). Same entries, parameters and launch geometry as the shipped source.
#define AUX_CUTLASS_STAGE_K8 1
#include "../../kernels/aux_weight_grad_partial_cutlass.cu"
