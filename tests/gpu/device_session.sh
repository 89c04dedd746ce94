#!/usr/bin/env bash
# Everything the GPU must prove, in one device call that fits its 10-minute limit, most important first:
#
#   A. wireup verify of every shipped kernel and schedule with PyCUDA and CuPy on shared inputs
#      (writes the evidence records; JSON with the timing breakdown)            cap ${CAP_VERIFY:-220} s
#   B. in parallel: the GPU tests (broken fixtures caught, generality fixture, memcheck)
#      and wireup mutate of every shipped kernel                 what is left but ~150 s, at most 260 s
#   C. alone on the GPU: the shipped chain against PyTorch (benchmarks/gpu_chain_vs_torch.py)
#                                                                   what is left of 575 s, at most 170 s
#
# Run from the repository root with .whl/ (PyCUDA wheels) and .wireup-cache/ (cubins built on the CPU
# machine, so evidence names the same cubins CI builds) carried. Results land in $OUT: summary.txt,
# verify.json, gpu_chain_vs_torch.json, logs.tgz, evidence.tgz, mutation.tgz.
set -u
. "$(dirname "$0")/device_prelude.sh"

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -n 2
    command -v compute-sanitizer
    python3 -c 'import platform, numpy, cupy, pycuda; print("python", platform.python_version(), "numpy", numpy.__version__, "cupy", cupy.__version__, "pycuda", pycuda.VERSION_TEXT)'
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$LOGS/env.log" 2>&1
note "env: $(tr '\n' ';' <"$LOGS/env.log")"

tail_into_summary() {  # name
    note "---- $1 (last lines) ----"
    tail -n "${2:-30}" "$LOGS/$1.log" >>"$SUMMARY"
}

# ---- A: verify, both backends, evidence ----
timeout -k 10 "${CAP_VERIFY:-220}" python3 -m audit verify --backend pycuda --backend cupy --format json \
    --output "$OUT/verify.json" >"$LOGS/verify.log" 2>&1
note "A verify rc=$? at $(elapsed) s"
tail_into_summary verify 45

# ---- B: GPU tests and mutation testing, side by side (leave RESERVE_C s for C) ----
capb=$(( 575 - ${RESERVE_C:-150} - $(elapsed) )); [ "$capb" -gt "${MAX_B:-260}" ] && capb=${MAX_B:-260}
timeout -k 10 "$capb" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_verify_gpu.py -k "broken or generality or memcheck or cli_exit" \
    >"$LOGS/pytest_gpu.log" 2>&1 &
pid_tests=$!
(
    # two groups, each writing its reports/mutation/*.json when done, so a cap that ends the second
    # group still leaves the first group's results
    light="strided_gather trade_outcome_label aux_label_scale_ema_update aux_heads_loss_ema_update aux_next_bar_loss_reduce aux_trade_outcome_loss_reduce aux_param_grad_reduce aux_next_bar_forward aux_trade_outcome_forward aux_trunk_forward"
    heavy="aux_next_bar_backward aux_trade_outcome_backward aux_trunk_backward aux_weight_grad_reduce"
    half=$(( capb * 2 / 5 ))
    timeout -k 10 "$half" python3 -m audit mutate $light --max-mutants 30 --jobs 12 --workers 3 --timeout 5 >"$LOGS/mutate.log" 2>&1
    echo "light group rc=$?" >>"$LOGS/mutate.log"
    left_b=$(( capb - half - 5 ))
    timeout -k 10 "$left_b" python3 -m audit mutate $heavy --max-mutants 30 --jobs 12 --workers 3 --timeout 5 >"$LOGS/mutate_heavy.log" 2>&1
    echo "heavy group rc=$?" >>"$LOGS/mutate_heavy.log"
) &
pid_mutate=$!
wait $pid_tests; rc_tests=$?
wait $pid_mutate; rc_mutate=$?
note "B pytest-gpu rc=$rc_tests mutate rc=$rc_mutate at $(elapsed) s"
tail_into_summary pytest_gpu 25
tail_into_summary mutate 25
tail_into_summary mutate_heavy 25

# ---- C: the chain against PyTorch, alone on the GPU ----
left=$(( 575 - $(elapsed) ))
cap=$(( left < ${CAP_BENCH:-170} ? left : ${CAP_BENCH:-170} ))
if [ -n "${SKIP_BENCH:-}" ]; then
    note "C bench skipped (SKIP_BENCH)"
elif [ "$cap" -gt 60 ]; then
    timeout -k 10 "$cap" python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --budget $(( cap - 50 )) \
        --watchdog $(( cap - 5 )) --compile-timeout 90 --json "$OUT/gpu_chain_vs_torch.json" >"$LOGS/bench.log" 2>&1
    note "C bench rc=$? at $(elapsed) s"
    tail_into_summary bench 40
else
    note "C bench not run: only $left s left"
fi

tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
[ -d reports/evidence ] && tar czf "$OUT/evidence.tgz" reports/evidence 2>/dev/null
[ -d reports/mutation ] && tar czf "$OUT/mutation.tgz" reports/mutation 2>/dev/null
note "done at $(elapsed) s"
