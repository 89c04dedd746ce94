#!/usr/bin/env bash
# Issue 18, one device call: every tensor-core candidate measured and checked, then the whole chain with the
# CUTLASS candidates launched in place of the shipped kernels. Nothing here writes evidence: a candidate
# that wins is shipped afterwards (kernels/, contracts, verify on both backends, a full mutation set).
#
#   D. the chain against torch.compile + CUDA graph with the candidates in           cap ${CAP_D:-210} s
#      (CUTLASS: trunk forward, weight-gradient partial, both head forwards, next-bar backward; SIMT: the
#      trade-outcome backward's 32-row blocks); first, since its verdict is the issue's and a cut-short step
#      after it loses less. The fused path launches aux_next_bar_backward_store (the accumulator's first
#      writer), so the next-bar candidate runs in the partials path only
#   A. the weight-gradient partial: shipped SIMT, hand-written 3xTF32 (tc), CUTLASS 3xTF32 (cutlass)
#      at B = 37, 4103 (accuracy) and 4096, 65536 (accuracy and time)             cap ${CAP_A:-100} s
#   B. the trunk forward: SIMT against CUTLASS 3xTF32 (shipped RN split; CUTLASS's RZ)  cap ${CAP_B:-65} s
#   C. the GPU tests of the three candidates and of the trade-outcome backward's (bit-equal to the shipped
#      kernel over its case matrix)                                                  cap ${CAP_C:-80} s
#   E. the next-bar head backward: shipped SIMT against CUTLASS 3xTF32 (and its RN-split build) and torch
#      at the shipped shape, B = 1 .. 65536, both calls, time at 256 / 4096 / 65536  cap ${CAP_E:-45} s
#   F. its GPU test: every shape and call of gpu_nb_bwd_cutlass.py at B = 37, 4103, 65536  cap ${CAP_F:-45} s
# The caps sum to 545 s; with 5 s of kill grace each, at most 575 s, inside the device's 590 s. No step of
# this script has run on a GPU yet, so every cap is an estimate; CAP_A .. CAP_F override them.
#
# The head forwards' own benchmark (accuracy at every verify shape, the K-range rule, time; docs/benchmarks.md
# 4f) does not fit into this call's 590 s: `python3 benchmarks/gpu_head_fwd_cutlass.py` is a call of its own.
#
# Run from the repository root with .whl/ carried: the PyCUDA wheels (../shared/device/prepare.sh) and the
# nvidia-cutlass wheel (`pip download --no-deps nvidia-cutlass==4.2.0.0 -d .whl`; the GPU host has no
# network). Everything lands in $OUT: summary.txt and each step's log and JSON.
#
#   run: timeout 590 bash tests/gpu/issue18_candidates.sh      (carry [".whl"])
set -u
. "$(dirname "$0")/device_prelude.sh"
note "env: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nvcc --version | tail -n 1)"
python3 -c 'import cutlass_library, os; print("cutlass headers:", os.path.dirname(cutlass_library.__file__))' >>"$SUMMARY" 2>&1

TC=benchmarks/kernels_baseline/aux_weight_grad_partial_tc.cu
CUT=kernels/aux_weight_grad_partial_cutlass.cu
# RN=1: step D launches the next-bar backward candidate's round-to-nearest split build
# (aux_next_bar_backward_cutlass_rn.cu) instead of its truncating default
R=${RN:+_rn}
# The trunk and head forwards and the wide partial are shipped (kernels/, the contracts launch them) with the
# round-to-nearest split (their sources' default since 5 December): their specs below launch what the contracts launch
TRUNK=kernels/aux_trunk_forward_cutlass.cu
HEAD=kernels/aux_head_forward_cutlass.cu
NBBWD=benchmarks/kernels_baseline/aux_next_bar_backward_cutlass$R.cu
TOBWD=benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu

# STEPS (default DABCEF) picks the steps to run, in this order
STEPS=${STEPS:-DABCEF}
step() { case $STEPS in *"$1"*) return 0 ;; *) return 1 ;; esac; }

# D first: the chain with every candidate in is the issue's verdict; the per-kernel steps after it
step D && timeout -k 5 "${CAP_D:-210}" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --replays 50 --watchdog $(( ${CAP_D:-210} - 10 )) \
    --candidate "aux_trunk_forward=$TRUNK:aux_trunk_forward_cutlass;grid=ceil_div(B, 128) * ceil_div(SH2, 64),1,1;block=128,1,1" \
    --candidate "aux_weight_grad_partial=$CUT:aux_weight_grad_partial_cutlass" \
    --candidate "aux_trade_outcome_forward=$HEAD:aux_trade_outcome_forward_cutlass;grid=ceil_div(B, 64),1,1;block=256,1,1" \
    --candidate "aux_next_bar_forward=$HEAD:aux_next_bar_forward_cutlass;grid=ceil_div(B, 64),1,1;block=256,1,1" \
    --candidate "aux_next_bar_backward=$NBBWD:aux_next_bar_backward_cutlass;grid=ceil_div(B, 32),1,1;block=128,1,1" \
    --candidate "aux_trade_outcome_backward=$TOBWD:aux_trade_outcome_backward_fast;grid=ceil_div(B, 32),1,1;block=256,1,1" \
    --json "$OUT/gpu_chain_vs_torch.candidates$R.json" >"$OUT/D_chain$R.log" 2>&1
note "D chain with candidates${RN:+ (next-bar backward RN split)} rc=$? at $(elapsed) s"
grep -E "^ours_fused|^torch.compile \+|^target|^  B=[0-9]+: x|candidate" "$OUT/D_chain$R.log" >>"$SUMMARY"
step A && timeout -k 5 "${CAP_A:-100}" python3 benchmarks/gpu_wgrad_split.py --tc-source $TC --cutlass-source $CUT \
    --sizes 37,4103,4096,65536 --time-sizes 4096,65536 --replays 20 --json "$OUT/gpu_wgrad_split.json" >"$OUT/A_wgrad.log" 2>&1
note "A wgrad partial rc=$? at $(elapsed) s"
grep -E "B=(4096|65536):|FAIL|failing" "$OUT/A_wgrad.log" >>"$SUMMARY"

step B && timeout -k 5 "${CAP_B:-65}" python3 benchmarks/gpu_fwd_cutlass.py --tiles 128x64x16_64x32_3_rn,128x64x16_64x32_3_rz \
    >"$OUT/B_fwd.log" 2>&1
note "B trunk forward rc=$? at $(elapsed) s"
tail -n 25 "$OUT/B_fwd.log" >>"$SUMMARY"

step C && timeout -k 5 "${CAP_C:-80}" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_wgrad_tc_gpu.py \
    tests/gpu/test_wgrad_cutlass_gpu.py tests/gpu/test_trunk_cutlass_gpu.py tests/gpu/test_to_bwd_fast_gpu.py >"$OUT/C_tests.log" 2>&1
note "C gpu tests rc=$? at $(elapsed) s"
tail -n 8 "$OUT/C_tests.log" >>"$SUMMARY"

step E && timeout -k 5 "${CAP_E:-45}" python3 benchmarks/gpu_nb_bwd_cutlass.py --tiles 32x128x16_32x32_4,32x128x16_32x32_4_rn \
    --cases shipped --json "$OUT/gpu_nb_bwd_cutlass.json" >"$OUT/E_nb_bwd.log" 2>&1
note "E next-bar backward rc=$? at $(elapsed) s"
grep -E "built |FAIL|ERROR|^  B= *[0-9]+:|^candidate" "$OUT/E_nb_bwd.log" >>"$SUMMARY"

step F && timeout -k 5 "${CAP_F:-45}" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_nb_bwd_cutlass_gpu.py >"$OUT/F_test.log" 2>&1
note "F next-bar backward gpu test rc=$? at $(elapsed) s"
tail -n 8 "$OUT/F_test.log" >>"$SUMMARY"

note "done at $(elapsed) s"
