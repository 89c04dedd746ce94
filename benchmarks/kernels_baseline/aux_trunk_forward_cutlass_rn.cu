// The round-to-nearest split build of kernels/aux_trunk_forward_cutlass.cu (the shipped trunk forward): both tf32 parts of each fp32 operand rounded to
// nearest (cutlass_fast_f32_rn.cuh) instead of CUTLASS's truncating big part. A file of its own so that
// gpu_chain_vs_torch.py --candidate, which takes a source and an entry and no macros, can launch it. Since
// 5 December the shipped source's default too (its #define): this builds what kernels/ ships, kept for the old runs.
#define AUX_TRUNK_CUTLASS_SPLIT_RN 1
#include "../../kernels/aux_trunk_forward_cutlass.cu"
