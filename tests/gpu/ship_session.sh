#!/usr/bin/env bash
# One device call for branch `ship` (the CUTLASS 3xTF32 trunk forward, head forwards and wide weight-gradient
# partial shipped; the heads' M = 3 and M = 1 partials on the SIMT skinny kernel), most important first:
#
#   A. wireup verify of every kernel and schedule with PyCUDA and CuPy (writes the evidence records the
#      changed kernels and schedules lack; JSON)                                          cap ${CAP_A:-230} s
#   B. the chain against torch.compile + CUDA graph as the contracts ship it (issue 18's verdict)
#                                                                                          cap ${CAP_B:-170} s
#   C. the same chain with the forwards' round-to-nearest split (the *_rn.cu wrappers in place of the shipped
#      forwards; decided the SPLIT_RN flip, 5 Dec: since then B ships RN and C repeats it)  cap ${CAP_C:-150} s
#
# Run from the repository root with .whl/ carried (PyCUDA wheels and nvidia_cutlass-4.2.0.0-py3-none-any.whl:
# the shipped kernels include its headers through include_packages). Results in $OUT: summary.txt, verify.json,
# evidence.tgz, gpu_chain_vs_torch.ship.json, gpu_chain_vs_torch.ship_rn.json and each step's log.
#
#   run: timeout 590 bash tests/gpu/ship_session.sh      (carry [".whl"]; STEPS=ABC picks steps)
set -u
. "$(dirname "$0")/device_prelude.sh"
note "env: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nvcc --version | tail -n 1)"
python3 -c 'import cutlass_library, os; print("cutlass headers:", os.path.dirname(cutlass_library.__file__))' >>"$SUMMARY" 2>&1

STEPS=${STEPS:-ABC}
step() { case $STEPS in *"$1"*) return 0 ;; *) return 1 ;; esac; }
TRUNK_RN=benchmarks/kernels_baseline/aux_trunk_forward_cutlass_rn.cu
HEAD_RN=benchmarks/kernels_baseline/aux_head_forward_cutlass_rn.cu

step A && timeout -k 5 "${CAP_A:-230}" python3 -m audit verify --backend pycuda --backend cupy --format json \
    --output "$OUT/verify.json" >"$OUT/A_verify.log" 2>&1
note "A verify rc=$? at $(elapsed) s"
step A && { tail -n 25 "$OUT/A_verify.log" >>"$SUMMARY"; tar -czf "$OUT/evidence.tgz" reports/evidence; }

step B && timeout -k 5 "${CAP_B:-170}" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --replays 50 --watchdog $(( ${CAP_B:-170} - 10 )) \
    --json "$OUT/gpu_chain_vs_torch.ship.json" >"$OUT/B_chain.log" 2>&1
note "B chain rc=$? at $(elapsed) s"
step B && grep -E "^ours_fused|^torch.compile \+|^target|^  B=[0-9]+: x" "$OUT/B_chain.log" >>"$SUMMARY"

step C && timeout -k 5 "${CAP_C:-150}" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --no-compile --replays 50 --watchdog $(( ${CAP_C:-150} - 10 )) \
    --candidate "aux_trunk_forward=$TRUNK_RN:aux_trunk_forward_cutlass;grid=ceil_div(B, 128) * ceil_div(SH2, 64),1,1;block=128,1,1" \
    --candidate "aux_trade_outcome_forward=$HEAD_RN:aux_trade_outcome_forward_cutlass;grid=ceil_div(B, 64),1,1;block=128,1,1" \
    --candidate "aux_next_bar_forward=$HEAD_RN:aux_next_bar_forward_cutlass;grid=ceil_div(B, 64),1,1;block=128,1,1" \
    --json "$OUT/gpu_chain_vs_torch.ship_rn.json" >"$OUT/C_chain_rn.log" 2>&1
note "C chain (RN split) rc=$? at $(elapsed) s"
step C && grep -E "^ours_fused|^torch|^target|^  B=[0-9]+: x|candidate" "$OUT/C_chain_rn.log" >>"$SUMMARY"
exit 0
