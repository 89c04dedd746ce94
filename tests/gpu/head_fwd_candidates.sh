#!/usr/bin/env bash
# Issue 18, one device call: the CUTLASS 3xTF32 candidates of the two aux head forwards
# (kernels/aux_head_forward_cutlass.cu) measured and checked against the shipped SIMT kernels
# and torch fp32. Nothing here writes evidence (docs/benchmarks.md 4f).
#
#   A. benchmarks/gpu_head_fwd_cutlass.py: every tile of --tiles (the candidate first), both heads, every
#      verify shape and the K-range rule at B = 1 .. 65536, CUDA-graph times at 256 / 4096 / 65536  cap ${CAP_A:-330} s
#   B. tests/gpu/test_head_cutlass_gpu.py (the candidate at B = 37, 4103, 65536)            cap ${CAP_B:-200} s
#
# The whole chain with these candidates in is step D of tests/gpu/issue18_candidates.sh.
# Run from the repository root with .whl/ carried (the nvidia-cutlass wheel: `pip download --no-deps
# nvidia-cutlass==4.2.0.0 -d .whl`; the GPU host has no network). Everything lands in $OUT: summary.txt,
# each step's log and gpu_head_fwd_cutlass.json.
#
#   run: timeout 590 bash tests/gpu/head_fwd_candidates.sh      (carry [".whl"])
set -u
. "$(dirname "$0")/device_prelude.sh"
note "env: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nvcc --version | tail -n 1)"
python3 -c 'import cutlass_library, os; print("cutlass headers:", os.path.dirname(cutlass_library.__file__))' >>"$SUMMARY" 2>&1

timeout -k 10 "${CAP_A:-330}" python3 benchmarks/gpu_head_fwd_cutlass.py --json "$OUT/gpu_head_fwd_cutlass.json" >"$OUT/A_head_fwd.log" 2>&1
note "A head forwards rc=$? at $(elapsed) s"
grep -E "built |FAIL|ERROR|^  (trade_outcome|next_bar) +B=|^candidate" "$OUT/A_head_fwd.log" >>"$SUMMARY"

left=$(( 575 - $(elapsed) )); cap=${CAP_B:-200}; [ "$left" -lt "$cap" ] && cap=$left
timeout -k 10 "$cap" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_head_cutlass_gpu.py >"$OUT/B_test.log" 2>&1
note "B gpu test rc=$? at $(elapsed) s"
tail -n 8 "$OUT/B_test.log" >>"$SUMMARY"
note "done at $(elapsed) s"
