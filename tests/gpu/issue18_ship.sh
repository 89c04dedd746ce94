#!/usr/bin/env bash
# Issue 18, the shipped chain (CUTLASS RN-split forwards and wide partial, masked and skinny partials, the 32-row
# trade-outcome backward, the next-bar backward's store variant) in one device call:
#   V. wireup verify of every kernel and schedule, PyCUDA and CuPy, evidence written       cap ${CAP_V:-100} s
#   D. gpu_chain_vs_torch.py as shipped (the issue's verdict)                               cap ${CAP_D:-90} s
#   N. the same with the SIMT next-bar forward launched in place of the CUTLASS one
#      (the accuracy / time trade of the head whose gradients carry the largest error)     cap ${CAP_N:-80} s
#   T. the GPU test of the trade-outcome backward (bit-equality with the 8-row kernel)     cap ${CAP_T:-70} s
# Caps sum to 340 s (+5 s kill grace each), sized to the session's last device budget (verify took 36 s and a
# chain run 47 s on 5 Dec); tests/gpu/test_wgrad_masked_gpu.py is a call of its own. STEPS (default VDNT).
#   run: timeout 590 bash tests/gpu/issue18_ship.sh      (carry [".whl"])
set -u
. "$(dirname "$0")/device_prelude.sh"
STEPS=${STEPS:-VDNT}
step() { case $STEPS in *"$1"*) return 0 ;; *) return 1 ;; esac; }
note "env: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nvcc --version | tail -n 1)"

step V && timeout -k 5 "${CAP_V:-100}" python3 -m audit verify --backend pycuda --backend cupy --format json \
    --output "$OUT/verify.json" >"$OUT/V_verify.log" 2>&1
note "V verify rc=$? at $(elapsed) s"
step V && { tail -n 30 "$OUT/V_verify.log" >>"$SUMMARY"; tar czf "$OUT/evidence.tgz" reports/evidence; }

step D && timeout -k 5 "${CAP_D:-90}" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --replays 50 \
    --watchdog $(( ${CAP_D:-90} - 10 )) --json "$OUT/gpu_chain_vs_torch.json" >"$OUT/D_chain.log" 2>&1
note "D chain rc=$? at $(elapsed) s"
grep -E "^ours_fused|^torch.compile \+|^target" "$OUT/D_chain.log" >>"$SUMMARY"

step N && timeout -k 5 "${CAP_N:-80}" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --replays 50 \
    --watchdog $(( ${CAP_N:-80} - 10 )) \
    --candidate "aux_next_bar_forward=benchmarks/kernels_baseline/aux_next_bar_forward_kernel.cu:aux_next_bar_forward;grid=ceil_div(B, 32),1,1;block=128,1,1" \
    --json "$OUT/gpu_chain_vs_torch.simt_nb_fwd.json" >"$OUT/N_chain.log" 2>&1
note "N chain (SIMT next-bar forward) rc=$? at $(elapsed) s"
grep -E "^ours_fused|^target" "$OUT/N_chain.log" >>"$SUMMARY"

step T && timeout -k 5 "${CAP_T:-70}" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_to_bwd_fast_gpu.py \
    >"$OUT/T_tests.log" 2>&1
note "T gpu tests rc=$? at $(elapsed) s"
tail -n 12 "$OUT/T_tests.log" >>"$SUMMARY"
note "done at $(elapsed) s"
