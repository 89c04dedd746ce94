#!/usr/bin/env bash
# Everything the GPU must prove, in one device call that fits its 10-minute limit, most important first:
#
#   A. wireup verify of every shipped kernel and schedule with PyCUDA and CuPy on shared inputs
#      (writes the evidence records; JSON with the timing breakdown)            cap ${CAP_VERIFY:-200} s
#   B. in parallel: the GPU tests (both backends agree, broken fixtures caught, generality fixture)
#      and wireup mutate of every shipped kernel                                 cap ${CAP_TESTS:-170} s
#   C. alone on the GPU: the shipped chain against PyTorch (benchmarks/gpu_chain_vs_torch.py)
#                                                                                cap ${CAP_BENCH:-170} s
#
# Run from the repository root with .whl/ (PyCUDA wheels) and .wireup-cache/ (cubins built on the CPU
# machine, so evidence names the same cubins CI builds) carried. Results land in $OUT: summary.txt,
# verify.json, gpu_chain_vs_torch.json, logs.tgz, evidence.tgz, mutation.tgz.
set -u
OUT=${OUT:-$PWD/device-out}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$LOGS/pip.log" 2>&1 \
    || note "pip install of .whl/ failed: $(tail -n 3 "$LOGS/pip.log")"
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

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
timeout -k 10 "${CAP_VERIFY:-200}" python3 -m audit verify --backend pycuda --backend cupy --format json \
    --output "$OUT/verify.json" >"$LOGS/verify.log" 2>&1
note "A verify rc=$? at $(elapsed) s"
tail_into_summary verify 45

# ---- B: GPU tests and mutation testing, side by side ----
timeout -k 10 "${CAP_TESTS:-170}" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_verify_gpu.py -k "broken or generality or memcheck or cli_exit" \
    >"$LOGS/pytest_gpu.log" 2>&1 &
pid_tests=$!
timeout -k 10 "${CAP_TESTS:-170}" python3 -m audit mutate --all --jobs 12 >"$LOGS/mutate.log" 2>&1 &
pid_mutate=$!
wait $pid_tests; rc_tests=$?
wait $pid_mutate; rc_mutate=$?
note "B pytest-gpu rc=$rc_tests mutate rc=$rc_mutate at $(elapsed) s"
tail_into_summary pytest_gpu 25
tail_into_summary mutate 30

# ---- C: the chain against PyTorch, alone on the GPU ----
left=$(( 575 - $(elapsed) ))
cap=$(( left < ${CAP_BENCH:-170} ? left : ${CAP_BENCH:-170} ))
if [ "$cap" -gt 60 ]; then
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
