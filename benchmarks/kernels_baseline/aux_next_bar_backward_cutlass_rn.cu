// The round-to-nearest split build of aux_next_bar_backward_cutlass.cu (the next-bar backward): both tf32 parts of each fp32 operand rounded to
// nearest (cutlass_fast_f32_rn.cuh) instead of CUTLASS's truncating big part. A file of its own so that
// gpu_chain_vs_torch.py --candidate, which takes a source and an entry and no macros, can launch it.
#define AUX_NB_BWD_CUTLASS_SPLIT_RN 1
#include "aux_next_bar_backward_cutlass.cu"
